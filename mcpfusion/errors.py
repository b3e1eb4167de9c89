"""Self-healing errors: exceptions handlers raise, and the exact `<tool_error>` / `<validation_error>` text."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import markup
from .serializer import jsonable
from .visible import visible_name

# Codes the framework itself emits; handlers may use any other code of the same shape (`CODE_SHAPE`).
VALIDATION_ERROR = "VALIDATION_ERROR"
UNKNOWN_ACTION = "UNKNOWN_ACTION"
MISSING_DISCRIMINATOR = "MISSING_DISCRIMINATOR"
UNKNOWN_TOOL = "UNKNOWN_TOOL"
MISSING_CREDENTIAL = "MISSING_CREDENTIAL"
INTERNAL_ERROR = "INTERNAL_ERROR"
NOT_FOUND = "NOT_FOUND"
UNAUTHORIZED = "UNAUTHORIZED"
FORBIDDEN = "FORBIDDEN"
CONFLICT = "CONFLICT"
RATE_LIMITED = "RATE_LIMITED"
INVALID_CURSOR = "INVALID_CURSOR"
CURSOR_EXPIRED = "CURSOR_EXPIRED"
INVALID_OUTPUT = "INVALID_OUTPUT"  # the action's own result broke its output contract (a server bug)
TIMEOUT = "TIMEOUT"
BUSY = "BUSY"
RESPONSE_TOO_LARGE = "RESPONSE_TOO_LARGE"
CONFIRMATION_REQUIRED = "CONFIRMATION_REQUIRED"
NOT_CONFIRMED = "NOT_CONFIRMED"
CONTENT_REFUSED = "CONTENT_REFUSED"  # an image or document too large, or not what its MIME type says
NO_BACK_CHANNEL = "NO_BACK_CHANNEL"  # the call asks the client (elicitation...) and no client can be asked

HTTP_STATUS: dict[str, int] = {
    VALIDATION_ERROR: 422,
    MISSING_DISCRIMINATOR: 422,
    UNKNOWN_ACTION: 404,
    UNKNOWN_TOOL: 404,
    NOT_FOUND: 404,
    # A stale, forged or foreign cursor is a fault of the request, not a missing resource: a 404 would tell a
    # generic HTTP client or cache that the list route itself is gone.
    INVALID_CURSOR: 400,
    CURSOR_EXPIRED: 400,
    UNAUTHORIZED: 401,
    FORBIDDEN: 403,
    CONFLICT: 409,
    RATE_LIMITED: 429,
    TIMEOUT: 504,
    BUSY: 503,
    CONFIRMATION_REQUIRED: 428,
    NOT_CONFIRMED: 409,
    MISSING_CREDENTIAL: 503,
    INTERNAL_ERROR: 500,
    INVALID_OUTPUT: 500,
    CONTENT_REFUSED: 422,
    # Asking the user (elicitation, sampling, roots) over REST: no retry can succeed, the caller must go through
    # an MCP client. The caller's to fix, so a 4xx: the 400 of an action refusing the call (not a 5xx a client
    # retries or reads as the server's fault, nor 409/422, documented for an object's state and invalid fields).
    NO_BACK_CHANNEL: 400,
}


# A code is a name: it is written as is into the `<tool_error>` tag and REST's problem `type` URN, and
# clients, logs and metrics match on it. `HTTP_418` (REST's code for a status without a name) is one too.
CODE_SHAPE = re.compile(r"[A-Z][A-Z0-9_]{0,63}")
SEVERITIES = ("error", "warning", "critical")


def http_status(code: str) -> int:
    """The HTTP status REST answers for a tool error code (400 for codes it does not know)."""
    return HTTP_STATUS.get(code, 400)


class ToolError(Exception):
    """Raise from a handler or dependency to answer a self-healing `<tool_error>` result."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        recovery: str | None = None,
        available_actions: Sequence[str] = (),
        severity: str = "error",
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        _check_code(code, severity)
        super().__init__(message)
        self.code = code
        self.message = message
        self.recovery = recovery
        self.available_actions = list(available_actions)
        self.severity = severity
        # The developer's own words about the error: JSON values as they are, anything else as its text,
        # so a detail never stops the error itself from being written (REST, MCP and the tester alike).
        self.details = {str(k): _detail_value(v) for k, v in (details or {}).items()}
        self.retry_after = retry_after

    def render(self) -> str:
        """The exact `<tool_error>` text (the one place that writes it)."""
        lines = [f'<tool_error code="{markup.attr(self.code)}" severity="{markup.attr(self.severity)}">']
        lines.append(f"<message>{markup.message(self.message)}</message>")
        if self.recovery:
            lines.append(f"<recovery>{markup.message(self.recovery)}</recovery>")
        if self.retry_after is not None:
            lines.append(f"<retry_after>{_number(self.retry_after)}</retry_after>")
        if self.details:
            lines.append("<details>")
            for key, value in self.details.items():
                lines.append(f'  <detail key="{markup.attr(key)}">{markup.message(value)}</detail>')
            lines.append("</details>")
        if self.available_actions:
            lines.append("<available_actions>")
            lines.extend(f"  <action>{markup.message(a)}</action>" for a in self.available_actions)
            lines.append("</available_actions>")
        lines.append("</tool_error>")
        return "\n".join(lines)


def _check_code(code: object, severity: object) -> None:
    """Refuse a code or severity a client could not match on (a developer's error, raised where the error is
    made: a handler raising it answers INTERNAL_ERROR, the cause in the log)."""
    if not isinstance(code, str) or CODE_SHAPE.fullmatch(code) is None:
        shown = shortened(repr(code), 80) if isinstance(code, str) else f"a {type(code).__name__}"
        raise ValueError(f"a ToolError code is an upper-case letter followed by at most 63 upper-case letters, "
                         f"digits or underscores (NOT_FOUND, HTTP_418), not {shown}")
    if not isinstance(severity, str) or severity not in SEVERITIES:
        shown = shortened(repr(severity), 80) if isinstance(severity, str) else f"a {type(severity).__name__}"
        raise ValueError(f"a ToolError severity is 'error', 'warning' or 'critical', not {shown}")


class UnknownToolError(ToolError):
    """`tools/call` named a tool that is not registered (a protocol error on MCP)."""

    def __init__(self, name: str, available: Iterable[str]) -> None:
        self.name = name = visible_name(shortened(str(name)))
        self.available = sorted(available)
        super().__init__(
            UNKNOWN_TOOL,
            f'Tool "{name}" does not exist.',
            recovery="Call tools/list and use one of the available tools.",
            available_actions=self.available,
        )

    def __str__(self) -> str:
        return f"Unknown tool: {self.name}. Available tools: {', '.join(self.available) or 'none'}."


VALIDATION_RECOVERY = "Fix the fields above and call the tool again."


class ValidationFailed(Exception):
    """Arguments did not validate; carries the rendered `<validation_error>` text.

    It answers the same attributes as `ToolError` (code, message, recovery...), so that REST's problem
    details are built from either without knowing which."""

    code = VALIDATION_ERROR
    severity = "error"
    available_actions: list[str] = []
    details: dict[str, Any] = {}
    retry_after: float | None = None
    recovery = VALIDATION_RECOVERY

    def __init__(self, action_label: str, fields: list[tuple[str, str]]) -> None:
        super().__init__(f"invalid arguments for {action_label}")
        self.action_label = action_label
        # An answer never grows with what was sent: names are cut short and a flood of bad fields (100,000
        # unknown keys) is listed up to a point, the rest counted. A name the caller sent shows its U+202E or
        # NUL escaped (`field_path` escaped those it wrote; these are the others).
        shown = [(visible_name(shortened(name)), message) for name, message in fields[:MAX_FIELDS_SHOWN]]
        if len(fields) > MAX_FIELDS_SHOWN:
            shown.append(("(arguments)", f"{len(fields) - MAX_FIELDS_SHOWN} more fields are not valid either: "
                                         "fix the ones above, then call again to see the rest."))
        self.fields = shown
        self.message = f"The arguments of {action_label} are not valid."

    def render(self) -> str:
        return render_validation_error(self.action_label, self.fields)


def render_validation_error(action_label: str, fields: list[tuple[str, str]]) -> str:
    lines = [f'<validation_error action="{markup.attr(action_label)}">']
    lines.extend(f'<field name="{markup.attr(name)}">{markup.message(msg)}</field>' for name, msg in fields)
    lines.append(f"<recovery>{VALIDATION_RECOVERY}</recovery>")
    lines.append("</validation_error>")
    return "\n".join(lines)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def field_path(loc: Sequence[str | int]) -> str:
    """('lines', 0, 'amount') -> 'lines[0].amount', as errors quote it: each key cut short, its control, bidi
    and format characters escaped (`visible_name`: a key is the caller's, U+202E would reverse the
    rest of the line it is quoted in)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = visible_name(shortened(str(part)))
            out += f".{name}" if out else name
    return out


def sent_value(value: Any) -> str:
    """How an offending input value is quoted back to the agent (short, JSON-like)."""
    try:
        shown = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        shown = repr(value)
    return visible_name(shortened(shown))  # (`\u202e` in a JSON string is the same character)


def _is_secret(node: dict[str, Any]) -> bool:
    return node.get("writeOnly") is True or node.get("format") == "password"


def _holds_secret(node: Any, defs: dict[str, Any], refs: set[str]) -> bool:
    """Whether a schema `node` is a secret or may hold one anywhere below it (items, values, properties, union
    members, `$ref`s: each definition followed once, so a recursive model ends)."""
    if not isinstance(node, dict):
        return False
    if _is_secret(node):
        return True
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and ref not in refs:
        refs.add(ref)
        if _holds_secret(defs.get(ref.rsplit("/", 1)[-1]), defs, refs):
            return True
    below: list[Any] = []
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        members = node.get(key)
        below.extend(members if isinstance(members, list) else ())
    for key in ("items", "additionalProperties", "if", "then", "else", "contains"):
        below.extend(node[key] if key == "items" and isinstance(node.get(key), list) else [node.get(key)])
    for key in ("properties", "patternProperties"):
        members = node.get(key)
        below.extend(members.values() if isinstance(members, dict) else ())
    return any(_holds_secret(member, defs, refs) for member in below)


def secret_at(schema: dict[str, Any], loc: Any) -> bool:
    """Whether the value at `loc` (a validation error's path) of data of `schema` is a secret: a schema there
    (or around it: a union's member, an object it is inside) is `writeOnly` or `format: password`, as a
    pydantic `SecretStr`/`SecretBytes` is, or holds one anywhere below it (`list[SecretStr]` sent one bare
    password, a model with a secret field sent as text: the value sent is then likely the secret itself). An
    error never quotes such a value back (`You sent: ...`): it would go out in the answer, the client's
    transcript and every proxy's log."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    nodes: list[Any] = [schema]
    for step in (*loc, None):
        seen: list[dict[str, Any]] = []
        while nodes:  # each node with its `$ref`, `anyOf`, `oneOf` and `allOf` members, flattened
            node = nodes.pop()
            if not isinstance(node, dict) or len(seen) > 200:
                continue
            if _is_secret(node):
                return True
            seen.append(node)
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                nodes.append(defs.get(ref.rsplit("/", 1)[-1]))
            for key in ("anyOf", "oneOf", "allOf"):
                nodes.extend(node.get(key) or ())
        if step is None:  # the value itself: secret if what it may hold is
            refs: set[str] = set()
            return any(_holds_secret(node, defs, refs) for node in seen)
        for node in seen:
            if isinstance(step, int):
                items = node.get("items")
                nodes.extend(items if isinstance(items, list) else [items] if items is not None else [])
                prefix = node.get("prefixItems")
                if isinstance(prefix, list) and step < len(prefix):
                    nodes.append(prefix[step])
            else:
                found = (node.get("properties") or {}).get(step)
                extra = node.get("additionalProperties")
                nodes.append(found if found is not None else extra if isinstance(extra, dict) else None)
    return False


def shortened(text: str, limit: int = 120) -> str:
    """`text` as an error may echo it: at most `limit` characters (an id or a name sent can be megabytes)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


MAX_FIELDS_SHOWN = 20  # the bad fields one validation error lists


def _detail_value(value: Any) -> Any:
    """A detail of a `ToolError` as JSON can hold it (see `ToolError.details`)."""
    try:
        return jsonable(value)
    except ValueError:  # pydantic-core's serialization error: a type JSON has no form for
        return str(value)
