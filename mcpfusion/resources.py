"""MCP resources: static resources, URI templates (RFC 6570 level 1 `{var}`) and subscriptions.

    @fusion.resource("file:///readme.txt", name="readme", mime_type="text/plain")
    def readme() -> str: ...                # str -> text, bytes -> blob, dict/list -> JSON text
                                            # (mcp.types ReadResourceResult, Text/BlobResourceContents as they are)

    @fusion.resource_template("users://{id}/profile")
    async def profile(id: str) -> dict: ...

A template's variables reach its dependencies as FastAPI's path parameters do (`def load(id: str)` under
`Depends(load)` gets the `{id}` of the URI read, converted to its type); a dependency parameter that nothing
could set (one FastAPI would read from the query string or the body, required) is refused at declaration.
"""

from __future__ import annotations

import base64
import builtins
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from starlette.requests import Request

from mcpfusion.dependencies import is_empty
from mcpfusion.injection import Injected, call_injected
from mcpfusion.mcp import jsonrpc
from mcpfusion.mcp.jsonrpc import McpError
from mcpfusion.scopes import Granted, declared_scopes, visible
from mcpfusion.serializer import dumps
from mcpfusion.slots import fields_repr
from mcpfusion.visible import visible_name, visible_path

_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What a variable's value never holds (it is one piece of a path: RFC 6570's simple expansion escapes them).
_SEPARATORS = "/?#"


class Resource:
    """One static resource (a plain class: a dataclass would compile its methods at every process's start)."""

    _FIELDS = ("uri", "fn", "name", "title", "description", "mime_type", "size", "annotations", "meta", "scopes")

    def __init__(self, uri: str, fn: Callable[..., Any], name: str, title: str | None = None,
                 description: str | None = None, mime_type: str | None = None, size: int | None = None,
                 annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                 scopes: Iterable[str] = ()) -> None:
        self.uri = uri
        self.fn = fn
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.size = size
        self.annotations = annotations
        self.meta = meta
        self.scopes = declared_scopes(scopes, f"resource {uri!r}")
        self.injected = Injected(fn)
        _check_reachable(self.injected.dependant, f"resource {uri!r}")

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type, size=self.size,
             annotations=self.annotations, _meta=self.meta)
        return out


class ResourceTemplate:
    """One URI template (a plain class: a dataclass would compile its methods at every process's start)."""

    _FIELDS = ("uri_template", "fn", "name", "title", "description", "mime_type", "annotations", "variables",
               "scopes")

    def __init__(self, uri_template: str, fn: Callable[..., Any], name: str, title: str | None = None,
                 description: str | None = None, mime_type: str | None = None,
                 annotations: dict[str, Any] | None = None, scopes: Iterable[str] = ()) -> None:
        self.uri_template = uri_template
        self.fn = fn
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.scopes = declared_scopes(scopes, f"resource template {uri_template!r}")
        _check_template(uri_template)
        self.injected = Injected(fn)
        self.variables = _VAR.findall(self.uri_template)
        if len(set(self.variables)) != len(self.variables):
            raise ValueError(f"resource template {uri_template!r} names a variable twice: a URI gives each variable "
                             "one value, name them apart")
        collect = self.injected.dependant.call
        if collect is not None and not is_empty(self.injected.dependant):
            # Analysed again with the variables as its path's: FastAPI then reads them from `path_params`.
            path = "".join(f"/{{{name}}}" for name in self.variables)
            self.injected.dependant = get_dependant(path=path, call=collect)
        self.reads_variables = _reads_path(self.injected.dependant)
        _check_reachable(self.injected.dependant, f"resource template {uri_template!r}")
        # The text around the variables (`_VAR.split` alternates text and names): literals[i] follows the
        # i-th variable, literals[0] opens the template.
        self.literals: tuple[str, ...] = tuple(_VAR.split(uri_template)[::2])
        self.min_length = sum(map(len, self.literals)) + len(self.variables)

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of `uri` if it is of this template (each one a non-empty run without `/?#`), None if
        not. Where a URI splits more than one way, each variable takes the longest value it can, first to
        last (as a regex of greedy groups would), but in time linear in the URI (`_match`)."""
        if len(uri) < self.min_length or not uri.startswith(self.literals[0]) or not uri.endswith(self.literals[-1]):
            return None
        if not self.variables:
            return {} if uri == self.uri_template else None
        if len(self.variables) == 1:  # (nothing to split: the variable is all between the literals)
            value = uri[len(self.literals[0]) : len(uri) - len(self.literals[-1])]
            return None if any(c in value for c in _SEPARATORS) else {self.variables[0]: value}
        values = _match(self.literals, uri)
        return None if values is None else dict(zip(self.variables, values, strict=True))

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type,
             annotations=self.annotations)
        return out


def _match(literals: tuple[str, ...], uri: str) -> list[str] | None:
    """The values of the variables between `literals` (a template with at least one variable) in `uri`, which
    starts with the first literal and ends with the last; None if they do not fit.

    A regex of greedy groups backtracks through every split of a run of non-separators (`{a}-{b}-{c}`
    against 2,000 dashes takes seconds). This takes the same values without backtracking: a variable ends
    within the run it starts in, so the last place it may end (the rest of the template fitting after it)
    depends on that run only; it is found once per run and variable, last variable first. Only the runs a
    variable can start in are visited (a literal crosses no more separators than it holds), so the Python
    work depends on the template, and the scans of the URI (`str.find`, `str.rfind`) are linear.
    """
    count = len(literals) - 1
    start, end = len(literals[0]), len(uri) - len(literals[-1])

    def run_of(at: int) -> tuple[int, int] | None:
        """The run of non-separators holding `at`, as (first, stop); None if `at` is a separator or the end."""
        if at >= end or uri[at] in _SEPARATORS:
            return None
        first = max(start - 1, *(uri.rfind(c, start, at) for c in _SEPARATORS)) + 1
        return first, min([found for c in _SEPARATORS if (found := uri.find(c, at, end)) >= 0], default=end)

    first_run = run_of(start)
    if first_run is None:
        return None
    # reach[i]: the runs variable i may start in: its predecessor's, or one the literal between them reaches.
    reach: list[set[tuple[int, int]]] = [set(), {first_run}]
    for i in range(1, count):
        runs = set(reach[i])
        for _, stop in reach[i]:
            runs.update(run for at in range(stop, stop + len(literals[i]) + 1) if (run := run_of(at)))
        reach.append(runs)
    # ends[i][first]: the last place variable i may end in the run starting at `first` (-1: nowhere).
    ends: list[dict[int, int]] = [{} for _ in range(count + 1)]
    ends[count] = {first: end if stop == end else -1 for first, stop in reach[count]}
    for i in range(count - 1, 0, -1):
        ends[i] = {first: _last_end(uri, literals[i], first, stop, ends[i + 1], run_of) for first, stop in reach[i]}
    values, at = [], start
    for i in range(1, count + 1):
        run = run_of(at)
        stop = ends[i][run[0]] if run else -1
        if stop <= at:
            return None  # (the first variable only: every later one starts where it fits)
        values.append(uri[at:stop])
        at = stop + len(literals[i])
    return values


def _last_end(uri: str, text: str, first: int, stop: int, after: dict[int, int],
              run_of: Callable[[int], tuple[int, int] | None]) -> int:
    """The last place in the run [first, stop) where a variable may end: followed by `text`, then by the next
    variable, which ends at `after[its run's first]` at the latest. -1: nowhere."""
    # A `text` reaching past the run: the next variable starts in another run (a few places to try).
    for at in range(stop, max(first, stop - len(text)), -1):
        run = uri.startswith(text, at) and run_of(at + len(text))
        if run and after[run[0]] > at + len(text):
            return at
    # A `text` inside the run: the next variable starts there too, and must start before its last end.
    limit = min(stop, after[first]) - 1  # (where that `text` ends at the latest)
    return uri.rfind(text, first + 1, limit) if limit > first + len(text) else -1


class _TemplateRequest(Request):
    """The request a template's dependencies see: the URI's variables are its path parameters, as a route's
    are; everything else is the MCP request's (the same scope)."""

    def __init__(self, request: Request, variables: dict[str, str]) -> None:
        super().__init__(request.scope, request.receive)
        self._variables = variables

    @property
    def path_params(self) -> dict[str, Any]:
        return self._variables


def _reads_path(dependant: Dependant) -> bool:
    """Whether a dependency of `dependant`, at any depth, takes a path parameter (a template variable)."""
    return any(sub.path_params or _reads_path(sub) for sub in dependant.dependencies)


def _check_reachable(dependant: Dependant, where: str) -> None:
    """Refuse a required dependency parameter FastAPI would read from the query string or the body: a read
    has neither, so every read would fail (actions refuse them too: `check_dependency_parameters`)."""
    for sub in dependant.dependencies:
        for field in (*sub.query_params, *sub.body_params):
            if field.field_info.is_required():
                owner = getattr(sub.call, "__qualname__", repr(sub.call))
                raise TypeError(f"{where}: the dependency {owner} takes {field.name!r}, which nothing could set (a "
                                "resource read has no query string or body; a template's variables are given to "
                                "the parameters named like them). Rename it after a variable of the URI template, "
                                "give it a default, a Header() or a Depends()")
        _check_reachable(sub, where)


# Each `{`, `}` of a template: an expression whole (`{...}` holding no brace), or a brace left alone.
_BRACES = re.compile(r"\{([^{}]*)\}|[{}]")
_OPERATORS = "+#./;?&=,!@|"  # (RFC 6570's level 2-4 operators: `{+path}`, `{?q}`, ...)


def _check_template(uri_template: Any) -> None:
    """Refuse a URI template whose braces do not each make one level-1 `{name}` expression: one left open
    (`bad://{id`), one closing nothing, an empty `{}`, an operator (`{+path}`, `{?q}`) or a name that is no
    parameter's. Each would be read as literal text, matched by nothing a client sends."""
    if not isinstance(uri_template, str):
        return  # (refused by `_check_uri`, saying so)
    for found in _BRACES.finditer(uri_template):
        name, at = found.group(1), found.start()
        where = f"resource template {uri_template!r}"
        if name is None:
            problem = ("opens '{' without closing it" if found.group() == "{" else "closes '}' without opening it")
            raise ValueError(f"{where} {problem} (at offset {at}): write each variable as {{name}}")
        if not name:
            raise ValueError(f"{where} holds an empty expression '{{}}' (at offset {at}): name the variable, "
                             "as in {id}")
        if _VAR.fullmatch(found.group()) is None:
            kind = ("uses an RFC 6570 operator" if name[0] in _OPERATORS else
                    "names several variables" if "," in name else "is no simple name")
            raise ValueError(f"{where}: {{{visible_name(name)}}} (at offset {at}) {kind}; only {{name}} "
                             "expressions are read, a name of ASCII letters, digits and '_' not starting with a "
                             "digit (the parameter it is given to)")


def _shape(uri_template: str) -> tuple[str, ...]:
    """What a template matches, its variables' names aside: the text around them, the scheme in lower case
    (RFC 3986: `INV://` is `inv://`)."""
    literals = _VAR.split(uri_template)[::2]
    scheme = _SCHEME.match(literals[0])
    if scheme is not None:
        literals[0] = scheme.group().lower() + literals[0][scheme.end() :]
    return tuple(literals)


# RFC 3986: a URI starts with its scheme (a letter, then letters, digits, `+`, `-` or `.`) and a colon.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def _check_uri(uri: Any, what: str) -> None:
    """Refuse a resource URI (or template) that is no URI: no scheme (`"not a uri"`), or spaces and control
    characters, which no client sends in one."""
    if not isinstance(uri, str):
        raise TypeError(f"{what} URI {uri!r} is not a string")
    if _SCHEME.match(uri) is None or any(c.isspace() or not c.isprintable() for c in uri):
        raise ValueError(f"{what} URI {uri!r} is not a URI: write it as scheme:rest, with no spaces or control "
                         "characters (e.g. 'docs://readme' or 'file:///readme.txt')")


def _check_arguments(injected: Injected, variables: Iterable[str], where: str) -> None:
    """Refuse a parameter of a resource function that no read could set (required, and neither a variable of
    its template nor `uri`), and a template variable that nothing takes (neither a parameter, nor one of a
    dependency's, nor `uri`, whose text holds it, nor `**kwargs`): every read would fail, or the variable would
    be left unread."""
    given = {*variables, "uri"}
    for param in injected.arguments:
        if param.name not in given and param.default is inspect.Parameter.empty:
            kind = "the variables of its URI template" if variables else "the URI of a static resource (no variable)"
            raise TypeError(f"{where}: the function takes {param.name!r}, which no read could set (a read gives "
                            f"{kind} and 'uri'): name it after a variable of the template, or give it a default")
    if injected.takes_any or "uri" in injected.names:
        return
    taken = injected.names | _path_names(injected.dependant)
    unread = [name for name in variables if name not in taken]
    if unread:
        raise TypeError(f"{where}: the variable(s) {', '.join(map(repr, unread))} are not taken by the function "
                        "nor its dependencies: name a parameter after each (or take 'uri'), or remove them from "
                        "the template")


def _path_names(dependant: Dependant) -> set[str]:
    """The template variables the dependencies of `dependant` take, at any depth (their path parameters)."""
    found: set[str] = set()
    for sub in dependant.dependencies:
        found.update(field.name for field in sub.path_params)
        found |= _path_names(sub)
    return found


def _put(out: dict[str, Any], **values: Any) -> None:
    for key, value in values.items():
        if value is not None:
            out[key] = value


def result_of(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    """The `resources/read` result of what a resource function returned: an `mcp.types.ReadResourceResult`
    as it is (its contents and `_meta`), anything else as `contents_of` makes it."""
    types = sys.modules.get("mcp_types")  # (not loaded: the function cannot have returned one of its objects)
    if types is not None and isinstance(value, types.ReadResourceResult):
        result: dict[str, Any] = value.model_dump(mode="json", by_alias=True, exclude_none=True,
                                                  include={"contents", "meta"})
        return result
    return {"contents": contents_of(uri, value, mime_type)}


def contents_of(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """Turn what a resource function returned into `ResourceContents` entries: `mcp.types` Text/Blob
    ResourceContents (one, or a non-empty list of them) as they are; str -> text, bytes -> blob, any other
    value -> JSON text, dicts and lists whatever their keys (plain data is never taken for contents)."""
    types = sys.modules.get("mcp_types")
    if types is not None:
        kinds = (types.TextResourceContents, types.BlobResourceContents)
        items = [value] if isinstance(value, kinds) else value if isinstance(value, list) else []
        if items and all(isinstance(item, kinds) for item in items):
            return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
    if isinstance(value, bytes | bytearray):
        entry = {"uri": uri, "blob": base64.b64encode(bytes(value)).decode("ascii")}
        entry["mimeType"] = mime_type or "application/octet-stream"
        return [entry]
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    # Written as every answer is (ISO dates, Decimals as text, NaN and infinities null: JSON has no number for
    # them); a value JSON cannot hold is refused, never written as its str() or repr (which may hold what must
    # not leave).
    text = dumps(value)
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": text}]


class ResourceRegistry:
    """The resources and templates of one server, and which URIs have a reader. Those declared with scopes
    exist only for callers holding them (`granted`: the server's view of a request's scopes): unlisted, and
    read or subscribed to as an unknown URI, as an action the caller may not call is an unknown tool."""

    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {}
        self.templates: list[ResourceTemplate] = []
        self.granted: Granted | None = None
        # The app (`MCPFusion`, set by it) whose rate limits count the reads as its action calls.
        self.limits: Any = None

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates)

    def add(self, resource: Resource) -> None:
        _check_uri(resource.uri, "resource")
        if resource.uri in self.resources:  # as prompts and tools: a second declaration is a mistake, never a swap
            raise ValueError(f"duplicate resource URI {resource.uri!r}: it is already read by "
                             f"{self.resources[resource.uri].name!r} (remove that one first to replace it)")
        _check_arguments(resource.injected, (), f"resource {resource.uri!r}")
        self.resources[resource.uri] = resource

    def add_template(self, template: ResourceTemplate) -> None:
        _check_uri(template.uri_template, "resource template")
        shape = _shape(template.uri_template)
        same = next((t for t in self.templates if _shape(t.uri_template) == shape), None)
        if same is not None:  # (the second would never be read: the first matches each URI first)
            also = "" if same.uri_template == template.uri_template else (
                f" as {same.uri_template!r} (read by {same.name!r}), which matches the same URIs (variable names "
                "and the scheme's case aside)")
            raise ValueError(f"duplicate resource template {template.uri_template!r}: one is declared already"
                             f"{also} (remove that one first to replace it)")
        _check_arguments(template.injected, template.variables, f"resource template {template.uri_template!r}")
        self.templates.append(template)

    def list(self, request: Request | None = None) -> list[dict[str, Any]]:
        return [r.descriptor() for r in self.resources.values() if visible(r.scopes, self.granted, request)]

    def list_templates(self, request: Request | None = None) -> builtins.list[dict[str, Any]]:
        return [t.descriptor() for t in self.templates if visible(t.scopes, self.granted, request)]

    def template(self, uri_template: str, request: Request | None = None) -> ResourceTemplate | None:
        return next((t for t in self.templates if t.uri_template == uri_template
                     and visible(t.scopes, self.granted, request)), None)

    def exists(self, uri: str, request: Request | None = None) -> bool:
        return self._find(uri, request) is not None

    def _find(self, uri: str, request: Request | None) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource (or template, with its variables) serving `uri` to the caller of `request`."""
        resource = self.resources.get(uri)
        if resource is not None:
            return (resource, {}) if visible(resource.scopes, self.granted, request) else None
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None and visible(template.scopes, self.granted, request):
                return template, variables
        return None

    async def charge(self, request: Request | None, method: str) -> None:
        """Count one request (`resources/read`, a completion) against the app's rate limits (`charge_request`)."""
        await charge_request(self.limits, request, method)

    async def read(self, uri: Any, context: Any = None, request: Request | None = None) -> dict[str, Any]:
        """The contents at `uri`; the function's dependencies are solved against `request` like an action's."""
        if not isinstance(uri, str) or not uri:
            raise McpError(jsonrpc.INVALID_PARAMS, "resources/read needs a non-empty string 'uri'")
        found = self._find(uri, request)
        if found is None:
            # -32602 with data.uri: what 2026-07-28 requires (SEP-2164); harmless on older wires.
            # The URI quoted with its control, bidi and format characters escaped (`data.uri` percent-encoded).
            raise McpError(jsonrpc.INVALID_PARAMS, f"Resource not found: {visible_name(uri)}",
                           {"uri": visible_path(uri)})
        served, variables = found
        if isinstance(served, ResourceTemplate) and served.reads_variables:
            if request is None:  # (as `call_injected` would make it)
                from .testing import make_request

                request = make_request(None, context=context)
            request = _TemplateRequest(request, variables)
        return await self._read(served.injected, {**variables, "uri": uri}, uri, served.mime_type, context, request)

    @staticmethod
    async def _read(injected: Injected, values: dict[str, Any], uri: str, mime_type: str | None, context: Any,
                    request: Request | None) -> dict[str, Any]:
        # Contents are built before yield dependencies close (a lazy value may still need its session).
        result: dict[str, Any] = await call_injected(
            injected, values, context, request, lambda value: result_of(uri, value, mime_type))
        return result


async def charge_request(app: Any, request: Request | None, method: str) -> None:
    """Count one MCP request of `app` that is no action call against the app's `RateLimit`s, in the buckets of
    the caller's action calls (`mcpfusion.ratelimit.charge_request`): -32010 over the limit."""
    limits = sys.modules.get("mcpfusion.ratelimit")  # (not loaded: no RateLimit anywhere, nothing to count)
    if limits is not None and app is not None and request is not None:
        registry = app.registry  # (the app's middleware and guards, as its action calls meet them)
        await limits.charge_request(request, method, registry.middleware, registry.guards)
