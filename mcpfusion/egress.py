"""Egress limit: a cap on what one response sends the agent, in bytes (UTF-8) and/or tokens (o200k).

    @billing.action(middleware=[EgressLimit(bytes=20_000, tokens=4_000)])

An answer over the limit is cut, never in the middle of a JSON value: UI blocks go first (from the last),
then the rows of a list (or the lines of a text) are cut to the ones that fit, re-encoded in the data
block's own format (compact or pretty JSON, TOON). A notice block after the data says how much was left
out; REST, which sends no UI block, says it in a `Truncated: shown=24, total=100, unit=rows` header (the
view's `truncated`). Domain rules and suggestions stay. When even that cannot fit, or not even the first
row (or line) fits, the caller gets a self-healing `RESPONSE_TOO_LARGE` error instead. The limit counts the
text blocks (what the agent reads); structuredContent is cut to the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from . import toon
from .errors import RESPONSE_TOO_LARGE, ToolError
from .middleware import ActionCall, CallNext
from .response import ToolResponse
from .serializer import dumps
from .ui import summary

_UI_PREFIX = "<ui_passthrough"


@lru_cache(maxsize=64)
def _tokens(text: str) -> int:
    from .tokens import count  # the vocabulary loads on first use only

    return count(text)


def _encoder(data: Any, text: str) -> Callable[[Any], str] | None:
    """The function that wrote the data block, found by re-encoding (only for answers over the limit)."""
    if isinstance(data, str):
        return (lambda lines: "\n".join(lines)) if data == text else None
    if not isinstance(data, list):
        return None
    candidates: list[Callable[[Any], str]] = [dumps, lambda d: dumps(d, pretty=True), toon.encode]
    return next((encode for encode in candidates if encode(data) == text), None)


class EgressLimit:
    """Cut answers larger than `bytes` (UTF-8) or `tokens` (o200k) at row or block boundaries."""

    def __init__(self, *, bytes: int | None = None, tokens: int | None = None) -> None:  # noqa: A002
        if bytes is None and tokens is None:
            raise ValueError("EgressLimit needs bytes=, tokens= or both")
        if (bytes is not None and bytes < 1) or (tokens is not None and tokens < 1):
            raise ValueError("EgressLimit limits must be positive")
        self.bytes = bytes
        self.tokens = tokens

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        response = await call_next(call)
        if response.is_error or self.fits(response.texts):
            return response
        return self.cut(response, call)

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

    def _notice(self, shown: int, total: int, unit: str, dropped: int, cursor: str | None = None) -> str:
        parts = [f"{shown} of {total} {unit} shown"] if total else []
        if dropped:
            parts.append(f"{dropped} UI block(s) left out")
        rest = (f'The next page starts after the last row shown: send the same arguments with cursor="{cursor}".'
                if cursor else "Use filters, pagination or _select to get the rest.")
        return summary(f"⚠️ Response cut to fit the egress limit ({self._label()}): {', '.join(parts)}. {rest}").render()

    # -- cutting ------------------------------------------------------------------------------------

    def cut(self, response: ToolResponse, call: ActionCall) -> ToolResponse:
        data = response.view.data
        head, rest = response.texts[0], list(response.texts[1:])
        encode = _encoder(data, head)
        rows: list[Any] = data.split("\n") if isinstance(data, str) else list(data) if encode else []
        unit = "lines" if isinstance(data, str) else "rows"
        dropped = 0
        # A page cut short goes on after its last row sent, not after rows the agent never saw: its notice
        # then carries that cursor (reserved at the length of one such cursor).
        resume = response.view.resume if rows and not isinstance(data, str) else None
        sample = resume(len(rows)) if resume is not None else None
        reserve = self._notice(len(rows), len(rows), unit, len(rest), sample)  # the longest notice we may add
        while not self.fits([head, reserve, *rest]):
            last_ui = next((i for i in range(len(rest) - 1, -1, -1) if rest[i].startswith(_UI_PREFIX)), None)
            if last_ui is None:
                break
            del rest[last_ui]
            dropped += 1
        shown = len(rows)
        if not self.fits([head, reserve, *rest]):
            if encode is None:
                raise self._too_large(call)
            fit = self._rows_that_fit(rows, encode, [reserve, *rest])
            if not fit:  # not even the first row (or line): an empty answer would pass for "nothing found"
                raise self._too_large(call)
            shown = fit
            head = encode(rows[:shown])
        cursor = response.view.next_cursor
        resumed = resume is not None and shown < len(rows)
        notice = self._notice(shown, len(rows), unit, dropped)
        if resumed:
            assert resume is not None and encode is not None
            previous = cursor
            while True:  # (a row's key may make its cursor longer than the one reserved for)
                cursor = resume(shown)
                notice = self._notice(shown, len(rows), unit, dropped, cursor)
                if shown == 1 or self.fits([head, notice, *rest]):
                    break
                shown -= 1
                head = encode(rows[:shown])
            rest = [text.replace(previous, cursor) for text in rest] if previous else rest
        kept: Any = data
        if encode is not None and shown < len(rows):
            kept = "\n".join(rows[:shown]) if isinstance(data, str) else rows[:shown]
        structured = response.structured_content
        if structured is not None and kept is not data:
            structured = {k: kept if v == data else v for k, v in structured.items()}
            if resumed and "next_cursor" in structured:
                structured["next_cursor"] = cursor
        view = replace(response.view, data=kept, next_cursor=cursor,
                       ui_blocks=[b for b in response.view.ui_blocks if b.render() in rest],
                       truncated=(shown, len(rows), unit) if shown < len(rows) else response.view.truncated)
        return ToolResponse([head, notice, *rest], structured_content=structured, view=view)

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
            recovery="Ask for less: narrower filters, fewer fields (_select) or one item at a time.",
        )
