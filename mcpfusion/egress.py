"""Egress limit: a cap on what one response sends the agent, in bytes (UTF-8) and/or tokens (o200k).

    @billing.action(middleware=[EgressLimit(bytes=20_000, tokens=4_000)])

An answer over the limit is cut, never in the middle of a JSON value: UI blocks go first (from the last),
then the rows of a list (or the lines of a text) are cut to the ones that fit, re-encoded in the data
block's own format (compact or pretty JSON, TOON). A notice block after the data says how much was left
out; REST, which sends no UI block, says it in a `Truncated: shown=24, total=100, unit=rows` header (the
view's `truncated`). A list a presenter's `limit` already cut counts against all the rows the handler gave
(`total`), and the egress notice takes the place of the presenter's. A page of a paginated list goes on
after its last row sent: the notice names that cursor (in place of the page's own notice), also when only UI
blocks were left out; a page whose handler gives no row positions (`Paged` without `position`) is never cut.
Domain rules and suggestions stay. When even that cannot fit, or not even the first row (or line) fits, the
caller gets a self-healing `RESPONSE_TOO_LARGE` error instead. The limit counts the text blocks (what the
agent reads); structuredContent is cut to the same rows. With the data block left out (`attach(...,
data_block=False)`), structuredContent, when sent, is the data: it is counted with the text blocks, and cut.

The limit is checked once the action ran: the error of a write (an action not `readonly`) says that it was done
and only its answer cannot be shown, and not to call it again (`details.completed`: true); a read's says to ask
for less.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from . import toon
from .dispatch import completed_error
from .errors import RESPONSE_TOO_LARGE, ToolError
from .middleware import ActionCall, CallNext
from .response import ToolResponse
from .serializer import dumps
from .ui import summary

_UI_PREFIX = "<ui_passthrough"
logger = logging.getLogger("mcpfusion.egress")


@lru_cache(maxsize=64)
def _tokens(text: str) -> int:
    from .tokens import count  # the vocabulary loads on first use only

    return count(text)


def _limit_notice(text: str, sent: int) -> bool:
    """Whether `text` is the notice of a presenter's `limit` cut that sent `sent` rows (what `Presenter`
    renders: `Dataset truncated. {sent} shown, {n} hidden.`)."""
    if not text.startswith(_UI_PREFIX):
        return False
    before, _, after = summary(f"⚠️ Dataset truncated. {sent} shown, # hidden. Use filters to narrow "
                               "results.").render().partition("#")
    return text.startswith(before) and text.endswith(after) and text[len(before):len(text) - len(after)].isdigit()


def _encoder(data: Any, text: str) -> Callable[[Any], str] | None:
    """The function that wrote the data block, found by re-encoding (only for answers over the limit)."""
    if isinstance(data, str):
        return (lambda lines: "\n".join(lines)) if data == text else None
    if not isinstance(data, list):
        return None
    candidates: list[Callable[[Any], str]] = [dumps, lambda d: dumps(d, pretty=True), toon.encode]
    return next((encode for encode in candidates if encode(data) == text), None)


def _sent(response: ToolResponse) -> list[str]:
    """What the limit measures: the text blocks, and structuredContent when it is the only data sent
    (`attach(..., data_block=False)`: otherwise the data block says the same)."""
    structured = response.structured_content
    if structured is None or not response.data_left_out:
        return response.texts
    return [dumps(structured), *response.texts]


def _wrapper(structured: dict[str, Any] | None, data: Any, after: str | None,
             resume: Callable[[int], str] | None) -> Callable[[Any], str] | None:
    """How structuredContent is written with only some of the rows of `data` (a list in it, `{"items": rows,
    "next_cursor": ...}`): the data sent when the data block is left out. A page's cursor is the one after the
    last row kept. None: no list to cut."""
    if structured is None or not isinstance(data, list):
        return None
    key = next((k for k, v in structured.items() if v is data), None)
    if key is None:
        key = next((k for k, v in structured.items() if v == data), None)
    if key is None:
        return None
    total = len(data)

    def encode(rows: list[Any]) -> str:
        shown = {**structured, key: rows}
        if resume is not None and "next_cursor" in shown and 0 < len(rows) < total:
            shown["next_cursor"] = resume(len(rows))
        return dumps(shown)

    return encode


def _selectable(call: ActionCall) -> bool:
    """Whether the action takes `_select` (what an answer cut short may advise): the tool offers it and the
    action declares fields to select (one without refuses it). Asked only of an answer over the limit."""
    return bool(call.action.tool.select) and bool(call.action.output_keys())


class EgressLimit:
    """Cut answers larger than `bytes` (UTF-8) or `tokens` (o200k) at row or block boundaries."""

    def __init__(self, *, bytes: int | None = None, tokens: int | None = None) -> None:  # noqa: A002
        if bytes is None and tokens is None:
            raise ValueError("EgressLimit needs bytes=, tokens= or both")
        for name, value in (("bytes", bytes), ("tokens", tokens)):
            # A whole number (NaN would never limit, True would be one byte), at least 1.
            if value is not None and (value.__class__ is not int or value < 1):
                raise ValueError(f"EgressLimit {name}= must be a whole number of {name} above 0 (or None), "
                                 f"not {value!r}")
        self.bytes = bytes
        self.tokens = tokens

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        response = await call_next(call)
        if response.is_error or self.fits(_sent(response)):
            return response
        try:
            return self.cut(response, call)
        except ToolError as exc:
            if call.action.readonly:
                raise
            # A write's answer: it was done. "Ask for less" would have the agent do it again.
            raise completed_error(call.action, exc) from None

    def describe(self) -> str:
        limits = [f"{self.bytes} bytes" if self.bytes else "", f"{self.tokens} tokens" if self.tokens else ""]
        return f"egress limit: {' and '.join(x for x in limits if x)} per answer, cut at row boundaries"

    # -- measuring ----------------------------------------------------------------------------------

    def fits(self, texts: list[str], ratio: float | None = None) -> bool:
        """Within both limits? With `ratio` (tokens per byte), tokens are estimated instead of counted."""
        size = sum(len(t.encode()) for t in texts)
        if self.bytes is not None and size > self.bytes:
            return False
        # A text never has more tokens than bytes: count only when that bound does not settle it.
        if self.tokens is None or size <= self.tokens:
            return True
        if ratio is not None:
            return size * ratio <= self.tokens
        return sum(_tokens(t) for t in texts) <= self.tokens

    def _label(self) -> str:
        return " / ".join(x for x in (f"{self.bytes} bytes" if self.bytes else "",
                                       f"{self.tokens} tokens" if self.tokens else "") if x)

    def _notice(self, shown: int, total: int, unit: str, dropped: int, cursor: str | None, select: bool) -> str:
        parts = [f"{shown} of {total} {unit} shown"] if total else []
        if dropped:
            parts.append(f"{dropped} UI block(s) left out")
        if cursor:  # a page: no longer than the page notice it replaces (a page cut to fit has room for little)
            return summary(f"⚠️ {', '.join(parts)} (cut to fit the egress limit). Next page: send the same "
                           f'arguments with cursor="{cursor}".').render()
        rest = f"Narrow the query with filters{' or fewer fields (_select)' if select else ''} to get the rest."
        return summary(f"⚠️ Response cut to fit the egress limit ({self._label()}): {', '.join(parts)}. {rest}").render()

    # -- cutting ------------------------------------------------------------------------------------

    def cut(self, response: ToolResponse, call: ActionCall) -> ToolResponse:
        view = response.view
        data = view.data
        structured = response.structured_content
        paged = bool(call.action.paginate) and isinstance(data, list)
        # A page's notice goes: the egress notice names the next cursor instead (with the rows really shown),
        # so the agent reads where to go on whatever else is left out.
        after = view.next_cursor
        left_out = response.data_left_out
        if left_out:  # `attach(..., data_block=False)`: the data sent is structuredContent (or nothing)
            head, rest = ("" if structured is None else dumps(structured)), list(response.texts)
            encode = _wrapper(structured, data, after, view.resume if paged else None)
        else:
            head, rest = response.texts[0], list(response.texts[1:])
            encode = _encoder(data, head)
        rows: list[Any] = data.split("\n") if isinstance(data, str) else list(data) if encode else []
        unit = "lines" if isinstance(data, str) else "rows"
        select = _selectable(call)
        if after is not None:
            rest = [text for text in rest if after not in text]
        # A list the presenter's `limit` already cut (or an inner egress limit) counts against the rows the
        # handler gave, as REST's header does; its own notice goes, this one says it with the rows shown.
        total = len(rows)
        earlier = view.truncated
        if earlier is not None and earlier[2] == unit and earlier[0] == len(rows):
            total = earlier[1]
            rest = [text for text in rest if not _limit_notice(text, len(rows))]
        dropped = 0
        notice = self._notice(len(rows), total, unit, dropped, after, select)
        while not self.fits([head, notice, *rest]):
            last_ui = next((i for i in range(len(rest) - 1, -1, -1) if rest[i].startswith(_UI_PREFIX)), None)
            if last_ui is None:
                break
            del rest[last_ui]
            dropped += 1
            notice = self._notice(len(rows), total, unit, dropped, after, select)
        shown, cursor = len(rows), after
        if not self.fits([head, notice, *rest]):
            if encode is None:
                raise self._too_large(call)
            if paged and view.resume is None:  # rows left out could never be resumed: not cut, said so
                raise self._uncuttable(call)
            shown, cursor, notice = self._cut_rows(rows, encode, rest, view.resume if paged else None,
                                                   lambda n, c: self._notice(n, total, unit, dropped, c, select),
                                                   call)
            head = encode(rows[:shown])
        kept: Any = data
        embedded = view.embedded_truncated
        if shown < len(rows):
            kept = "\n".join(rows[:shown]) if isinstance(data, str) else rows[:shown]
            # The embedded cuts were counted over every row, those cut off too, and which of them the rows kept
            # hid is not known: REST says no `Truncated-Embedded` (its `Truncated` stays). (The agent's notices
            # of them are UI blocks: left out before any row is.)
            embedded = None
        if structured is not None and kept is not data:
            structured = {k: kept if v == data else v for k, v in structured.items()}
            if paged and "next_cursor" in structured:
                structured["next_cursor"] = cursor
        view = replace(view, data=kept, next_cursor=cursor, data_left_out=left_out, embedded_truncated=embedded,
                       ui_blocks=[b for b in view.ui_blocks if b.render() in rest],
                       truncated=(shown, total, unit) if shown < len(rows) else view.truncated)
        # Images, audio and documents are not what the limit counts (max_content_bytes caps them): kept.
        texts = [notice, *rest] if left_out else [head, notice, *rest]
        return ToolResponse(texts, structured_content=structured, view=view, content=response.content)

    def _cut_rows(self, rows: list[Any], encode: Callable[[Any], str], rest: list[str],
                  resume: Callable[[int], str] | None, notice: Callable[[int, str | None], str],
                  call: ActionCall) -> tuple[int, str | None, str]:
        """(rows shown, the cursor after them, the notice) of the most rows that fit with their notice; a page
        (`resume`) goes on after its last row sent."""
        # Searched with the notice of all rows but one (its count and cursor as long as most), then checked.
        sample = resume(len(rows) - 1) if resume is not None and len(rows) > 1 else None
        fit = self._rows_that_fit(rows, encode, [notice(len(rows) - 1, sample), *rest])
        shown = min(fit or 0, len(rows) - 1)  # (all of them did not fit with their own notice)
        while shown:
            cursor = resume(shown) if resume is not None else None
            text = notice(shown, cursor)
            if self.fits([encode(rows[:shown]), text, *rest]):  # (a row's key may make its cursor longer)
                return shown, cursor, text
            shown -= 1
        raise self._too_large(call)  # not even the first row (or line): an empty answer would pass for "none"

    def _rows_that_fit(self, rows: list[Any], encode: Callable[[Any], str], others: list[str]) -> int | None:
        """The largest n such that the first n rows (with the other blocks) fit; None if not even zero."""
        if not self.fits([encode(rows[:0]), *others]):
            return None
        # Counting tokens is slow on big texts: search on an estimate (the full block's tokens per byte),
        # then step down until the exact count fits.
        ratio = None
        if self.tokens is not None:
            full = encode(rows)
            ratio = _tokens(full) / max(1, len(full.encode()))
        low, high = 0, len(rows)  # rows[:low] fits, rows[:high + 1] does not
        while low < high:
            middle = (low + high + 1) // 2
            if self.fits([encode(rows[:middle]), *others], ratio):
                low = middle
            else:
                high = middle - 1
        while low > 0 and not self.fits([encode(rows[:low]), *others]):
            low = low - 1 if low < 20 else low * 19 // 20
        return low

    def _too_large(self, call: ActionCall) -> ToolError:
        return ToolError(
            RESPONSE_TOO_LARGE,
            f"The answer of {call.action.qualified_name} is larger than the egress limit ({self._label()}) "
            "and cannot be cut into smaller parts.",
            recovery=f"Ask for less: narrower filters, {'fewer fields (_select), ' if _selectable(call) else ''}"
                     "or one item at a time.",
        )

    def _uncuttable(self, call: ActionCall) -> ToolError:
        """A page over the limit whose handler gave no row positions (`Paged` without `position`): a page cut
        short would have no cursor to go on after its last row sent, so the rows left out would be lost."""
        name = call.action.qualified_name
        logger.warning("%s: a page over its egress limit cannot be cut: its handler returns Paged(rows, next_key) "
                       "without position= (or use page.keyset)", name)
        return ToolError(
            RESPONSE_TOO_LARGE,
            f"A page of {name} is larger than the egress limit ({self._label()}) and cannot be cut: the next "
            "page could not start after the last row sent.",
            recovery="Narrow the query with filters so that a page is smaller, or report it (the action cannot "
                     "resume a page cut short).",
        )
