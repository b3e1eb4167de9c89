"""Tool responses and the perception wire format: the ordered text blocks a tool call answers with."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from . import markup, toon
from .content import Content
from .errors import ToolError, ValidationFailed
from .redaction import write_key
from .serializer import Prewritten, dumps, fragment, json_bytes, jsonable
from .slots import writable
from .ui import UIBlock


@dataclass(frozen=True, slots=True, init=False)
class Suggestion:
    """A next action the agent may consider."""

    action: str
    reason: str

    def __init__(self, action: str, reason: str) -> None:
        # Frozen, yet set through the slots' own setters, as `UIBlock` is (a suggestion per presented item).
        _action(self, action)
        _reason(self, reason)

    def render(self) -> str:
        return f"{self.action}: {self.reason}"


_action, _reason = (Suggestion.__dict__[name].__set__ for name in ("action", "reason"))


def suggest(action: str, reason: str) -> Suggestion:
    """`suggest("billing.remind", "Send a payment reminder")`."""
    made = _Writable()
    made.action, made.reason = action, reason
    made.__class__ = Suggestion
    return made  # type: ignore[no-any-return]


_Writable = writable(Suggestion)


@dataclass(slots=True)
class ResponseView:
    """The structured view of a response, for tests: never serialized."""

    data: Any = None
    system_rules: list[str] = field(default_factory=list)
    ui_blocks: list[UIBlock] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    error_code: str | None = None
    error: ToolError | ValidationFailed | None = None  # what REST turns into problem details
    next_cursor: str | None = None  # a paginated list's next page (REST sends it as headers)
    truncated: tuple[int, int, str] | None = None  # rows (or lines) shown, of how many, which: an egress cut
    resume: Callable[[int], str] | None = None  # a page's next cursor when only its first n rows are sent
    sources: list[int] | None = None  # the handler's index of each row of data, when the presenter left some out
    rewritten: bool = False  # the egress guard changed the data: it is checked against the schema again
    encoding: str = "json"  # how the data block is written: json, pretty, toon or text (to rewrite it)
    scrub: Callable[[str], str] | None = None  # censors redacted values out of documents attached later
    # The data before `_select` (None: no `_select`, or `data` is it): what a handler's `attach` callable sees.
    presented: Any = None
    # The embedded lists a child's `limit` cut, {key path: (limit, parent items cut, entries hidden)}: REST's
    # `Truncated-Embedded` header (None: nothing cut). A path is its keys (("lines", "notes")), written by
    # `key_path` only when sent: a key may hold a dot.
    embedded_truncated: dict[tuple[str, ...], tuple[int, int, int]] | None = None
    # `attach(..., data_block=False)` left the data block out (a page's notice may still be a text block): the
    # data goes only in structuredContent, when kept; REST answers the content alone.
    data_left_out: bool = False


SUGGESTIONS_TAG = "action_suggestions"
_SUGGESTIONS_OPEN = f"<{SUGGESTIONS_TAG}>"

# Below this many characters of data, serializing structuredContent again costs less than splicing it in.
PREWRITE_MIN = 512


class ToolResponse:
    """A tool result made by the framework; it passes through implicit wrapping untouched."""

    __slots__ = ("texts", "is_error", "structured_content", "view", "content", "written")

    def __init__(
        self,
        texts: list[str],
        *,
        is_error: bool = False,
        structured_content: dict[str, Any] | None = None,
        view: ResponseView | None = None,
        content: Sequence[Content] = (),
    ) -> None:
        self.texts = texts
        self.is_error = is_error
        self.structured_content = structured_content
        self.view = view if view is not None else ResponseView()
        self.content = content  # images, audio, documents, links: after the text blocks
        # (data, text, bytes): the first text block is the compact JSON written from this data object, and
        # its bytes when kept (None: encoded on demand). While data and text are still the response's own,
        # structuredContent of that data is written from those bytes.
        self.written: tuple[Any, str, bytes | None] | None = None

    @property
    def text(self) -> str:
        """All text blocks joined by blank lines (what a human reads)."""
        return "\n\n".join(self.texts)

    @property
    def error_code(self) -> str | None:
        return self.view.error_code

    @property
    def data_left_out(self) -> bool:
        """Whether `attach(..., data_block=False)` left the data block out: flagged on the view (a page's
        notice then is a text block), or no text block beside the content."""
        return self.view.data_left_out or (not self.texts and bool(self.content))

    def reshape(self, data: Any) -> None:
        """Replace the data (after `_select`): the data block is written again with its own encoding."""
        view = self.view
        if not self.texts or view.data_left_out:  # (`attach(..., data_block=False)`: no data block to write)
            pass
        elif view.encoding == "toon":
            self.texts[0] = toon.encode(data)
        elif view.encoding == "json" and not isinstance(data, str):
            raw = json_bytes(data)
            self.texts[0] = raw.decode()
            self.written = (data, self.texts[0], raw)
        elif view.encoding == "pretty" and not isinstance(data, str):
            self.texts[0] = dumps(data, pretty=True)
        structured = self.structured_content
        if structured is not None and isinstance(data, dict):
            self.structured_content = data
        elif isinstance(structured, dict) and isinstance(data, list) and "items" in structured:
            self.structured_content = {**structured, "items": data}  # a list's wrapper (and its next cursor)
        view.data = data

    def drop_suggestions(self, hidden: Callable[[str], bool]) -> None:
        """Leave out the suggestions whose action `hidden` says the caller may not call: from the view and
        from their block, written again from what is left (censored again, as the whole response was)."""
        view = self.view
        kept = [s for s in view.suggestions if not hidden(s.action)]
        if len(kept) == len(view.suggestions):
            return
        view.suggestions = kept
        texts = self.texts
        at = next((i for i in range(len(texts) - 1, 0, -1) if texts[i].startswith(_SUGGESTIONS_OPEN)), None)
        if at is None:
            return
        if not kept:
            del texts[at]
            return
        block = _suggestions_block(kept)
        # (a block the framework wrote: its own markup kept, as the guard scrubs blocks; a document is scrubbed whole)
        texts[at] = block if view.scrub is None else getattr(view.scrub, "block", view.scrub)(block)

    def to_mcp(self) -> dict[str, Any]:
        """The MCP `CallToolResult` as a plain dict."""
        blocks = []
        for text in self.texts:  # (a loop: a comprehension is one more function call per answer)
            blocks.append({"type": "text", "text": text})
        if self.content:
            blocks += [item.to_mcp() for item in self.content]
        result: dict[str, Any] = {"content": blocks, "isError": self.is_error}
        if self.structured_content is not None:
            result["structuredContent"] = self._structured()
        return result

    def _structured(self) -> dict[str, Any]:
        """structuredContent, as `Prewritten` when it is the data (or the data in a list's wrapper) that
        the first text block was written from, both still the response's own."""
        structured = self.structured_content
        assert structured is not None
        written = self.written
        if (written is None or len(written[1]) < PREWRITE_MIN or self.view.data is not written[0] or not self.texts
                or self.texts[0] is not written[1]):
            return structured
        data, text, raw = written
        if raw is None:
            raw = text.encode()
        if structured is data:
            return Prewritten(structured, fragment(raw))
        if structured.__class__ is dict and structured.get("items") is data:
            return Prewritten(structured, {**structured, "items": fragment(raw)})
        return structured

    def __repr__(self) -> str:
        return f"ToolResponse(is_error={self.is_error}, texts={self.texts!r})"


def key_path(path: tuple[str, ...]) -> str:
    """A path of keys as redaction paths write it: `lines.notes`, a key that is no name quoted in brackets
    (`["a.b"]`, `order["líneas"]`), so that a key holding a dot is never read as two."""
    written = write_key(path[0]) if path else ""
    for key in path[1:]:
        segment = write_key(key)
        written += segment if segment[0] == "[" else "." + segment
    return written


def to_jsonable(data: Any) -> Any:
    """Pydantic models (and lists of them) as plain JSON-ready data."""
    if data.__class__ is dict:  # what presenters hand over: no model to dump (and no metaclass check)
        return data
    if isinstance(data, BaseModel):
        return data.model_dump(mode="json")
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], BaseModel):
        return _as_page(data, [d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in data])
    return data


def _as_page(given: Any, rows: Any) -> Any:
    """`rows` (what `given` converts to) as a list of `given`'s own class when that is a subclass of list
    (`Page.keyset`'s `Paged`), with what it carries: where the next page starts, so that a paginated action
    answering `toon_success(page.keyset(...))` is paged from it (`PageCall.take`)."""
    if rows.__class__ is not list or given.__class__ is list or not isinstance(given, list):
        return rows
    kept = copy.copy(given)  # (its attributes, not its rows: they are the converted ones)
    kept[:] = rows
    return kept


def _written(response: ToolResponse) -> ToolResponse:
    """`response` with its first text block recorded as written from its data, when it is compact JSON."""
    if response.view.encoding == "json":
        response.written = (response.view.data, response.texts[0], None)
    return response


def _json(pretty: bool) -> str:
    return "pretty" if pretty else "json"


def success(data: Any = None, *, pretty: bool = False) -> ToolResponse:
    """Plain success: a string as written, `None` as `OK`, anything else as JSON text."""
    data = to_jsonable(data)
    if data is None:
        return ToolResponse(["OK"], view=ResponseView(data=None, encoding="text"))
    if isinstance(data, str):
        return ToolResponse([data], view=ResponseView(data=data, encoding="text"))
    return _written(ToolResponse([dumps(data, pretty=pretty)], view=ResponseView(data=data, encoding=_json(pretty))))


def error(message: str) -> ToolResponse:
    """A plain-text error result (`isError: true`)."""
    return ToolResponse([message], is_error=True, view=ResponseView(data=None, error_code="ERROR"))


def tool_error(
    code: str,
    message: str,
    *,
    recovery: str | None = None,
    available_actions: Sequence[str] = (),
    severity: str = "error",
    details: Mapping[str, Any] | None = None,
    retry_after: float | None = None,
) -> ToolResponse:
    """A self-healing `<tool_error>` result the agent can fix its call from."""
    return error_response(ToolError(
        code, message, recovery=recovery, available_actions=available_actions, severity=severity,
        details=details, retry_after=retry_after,
    ))


def error_response(exc: ToolError | ValidationFailed) -> ToolResponse:
    """The self-healing result of a raised error; the error itself rides along for REST's problem details."""
    return ToolResponse([exc.render()], is_error=True, view=ResponseView(error_code=exc.code, error=exc))


def toon_success(data: Any) -> ToolResponse:
    """The payload as pipe-delimited TOON: uniform collections cost about half the tokens of JSON. Values
    are converted as the JSON path converts them (a UUID or Decimal as its exact text, a set as a list)."""
    rows = jsonable(to_jsonable(data))
    return ToolResponse([toon.encode(rows)], view=ResponseView(data=_as_page(data, rows), encoding="toon"))


def success_structured(data: Any, *, pretty: bool = False) -> ToolResponse:
    """JSON text for older clients plus `structuredContent` for clients that read the output schema. A list
    (of dicts or models) is sent as MCP wants structured content, an object: `{"items": [...]}`."""
    given, data = data, jsonable(to_jsonable(data))  # structuredContent is JSON: datetimes, sets... as the text
    if isinstance(data, list):
        structured = {"items": data}
    elif isinstance(data, dict):
        structured = data
    else:
        raise TypeError("success_structured needs an object or a list (dicts or pydantic models), "
                        f"not {type(data).__name__}")
    view = ResponseView(data=_as_page(given, data), encoding=_json(pretty))
    return _written(ToolResponse([dumps(data, pretty=pretty)], structured_content=structured, view=view))


class ResponseBuilder:
    """Assembles the six perception blocks in their fixed order; empty sections are omitted."""

    __slots__ = ("_data", "_pretty", "_ui", "_embeds", "_directives", "_rules", "_suggestions")

    def __init__(self, data: Any = None, *, pretty: bool = False) -> None:
        self._data = data
        self._pretty = pretty
        self._ui: list[UIBlock] = []
        self._embeds: list[str] = []
        self._directives: list[str] = []
        self._rules: list[str] = []
        self._suggestions: list[Suggestion] = []

    def ui(self, *blocks: UIBlock) -> ResponseBuilder:
        self._ui.extend(blocks)
        return self

    def embed(self, *texts: str) -> ResponseBuilder:
        self._embeds.extend(texts)
        return self

    def directive(self, *lines: str) -> ResponseBuilder:
        self._directives.extend(lines)
        return self

    def rules(self, lines: Iterable[str | None]) -> ResponseBuilder:
        self._rules.extend(r for r in lines if r)
        return self

    def suggest(self, items: Iterable[Suggestion | None]) -> ResponseBuilder:
        self._suggestions.extend(s for s in items if s is not None)
        return self

    def build(self) -> ToolResponse:
        return assemble(self._data, self._pretty, self._ui, self._embeds, self._directives, self._rules,
                        self._suggestions)


def assemble(
    data: Any, pretty: bool, ui: list[UIBlock], embeds: list[str], directives: list[str], rules: list[str],
    suggestions: list[Suggestion], rules_block: str | None = None,
) -> ToolResponse:
    """The six blocks in their fixed order, from lists the response then owns (rules and suggestions
    without None). `ResponseBuilder.build` and presenters (whose render made the lists) both end here;
    `rules_block` is the rules' block when the caller rendered it beforehand (a presenter's static rules)."""
    if data.__class__ is not dict:  # a presenter's item is one: nothing to convert
        data = to_jsonable(data)
    if data.__class__ is not dict and (data is None or isinstance(data, str)):
        texts = ["OK" if data is None else data]
        encoding = "text"
    else:
        raw = json_bytes(data, pretty=pretty)
        texts = [raw.decode()]
        encoding = "pretty" if pretty else "json"
    for block in ui:
        texts.append(block.render())
    if embeds:
        texts += embeds
    if directives:
        texts.append(markup.bullet_block("llm_directives", directives))
    if rules:
        texts.append(rules_block or markup.bullet_block("domain_rules", rules))
    if suggestions:
        texts.append(_suggestions_block(suggestions))
    # The view and the response filled with plain stores, as their `__init__`s would (every slot set):
    # a presented call makes one of each, and the two calls with their defaults cost more than the stores
    # (one statement each: a tuple to unpack costs more).
    view = _new(ResponseView)
    view.data = data
    view.system_rules = rules
    view.ui_blocks = ui
    view.suggestions = suggestions
    view.error_code = None
    view.error = None
    view.next_cursor = None
    view.truncated = None
    view.resume = None
    view.sources = None
    view.rewritten = False
    view.encoding = encoding
    view.scrub = None
    view.presented = None
    view.embedded_truncated = None
    view.data_left_out = False
    made = _new(ToolResponse)
    made.texts = texts
    made.is_error = False
    made.structured_content = None
    made.view = view
    made.content = ()
    made.written = (data, texts[0], raw) if encoding == "json" else None  # `_written`
    return made


_new = object.__new__

# The block of a response's one suggestion by its action and reason (plain strings): mostly the same few,
# call after call (bounded: emptied when full).
_one_suggestion: dict[tuple[str, str], str] = {}


def _suggestions_block(suggestions: list[Suggestion]) -> str:
    only = suggestions[0]
    # The common case, one suggestion of plain strings: its block read back.
    action, reason = (only.action, only.reason) if only.__class__ is Suggestion else (None, None)
    if len(suggestions) == 1 and action.__class__ is str and reason.__class__ is str:
        written = _one_suggestion.get((action, reason))
        return _suggestion_block(action, reason) if written is None else written
    return markup.bullet_block(SUGGESTIONS_TAG, [s.render() for s in suggestions])


def _suggestion_block(action: str, reason: str) -> str:
    if len(_one_suggestion) >= 4096:
        _one_suggestion.clear()
    block = _one_suggestion[action, reason] = markup.bullet_block(SUGGESTIONS_TAG, [f"{action}: {reason}"])
    return block


def response(data: Any = None, *, pretty: bool = False) -> ResponseBuilder:
    """Start a hand-built perception response (presenters use the same builder)."""
    return ResponseBuilder(data, pretty=pretty)
