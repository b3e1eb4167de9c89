"""The egress guard: the real value of a redacted field never leaves the server, in any block.

Redaction is late (UI, rule, directive and suggestion callbacks compute on real values), so a callback may
copy a value that the data block censors: `ui.summary(customer["email"])`. Before a presenter's response
leaves, the guard takes the real values its redaction removed and censors them everywhere else:

- text blocks (UI, embeds, directives, rules, suggestions): every occurrence of a removed value at least
  `MIN_LENGTH` characters long, as written, as escaped for the XML-ish blocks, as escaped inside JSON text
  and as written in a markdown table cell, is replaced by the censor;
- the structured data (the data block, `structuredContent`, the REST body): a string equal to a removed
  string, or containing a removed value at least `MIN_LENGTH` characters long, is censored.

Values shorter than `MIN_LENGTH` ("1", "EU", "") are matched only as whole strings of the structured data:
scanning free text for them would censor ordinary words and numbers. Booleans and `None` are never guarded,
numbers only in text blocks. The guard matches exact values (not a lower-cased or partial copy). A presenter that
deliberately shows redacted values to a human operator opts out with `redact_pii(..., guard_blocks=False)`:
its data block and structured data are still redacted, its other blocks are not guarded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from pydantic_core import to_json

from . import markup, ui
from .redaction import DEFAULT_CENSOR, RedactionError
from .response import ResponseView, Suggestion, ToolResponse
from .serializer import dumps

MIN_LENGTH = 4


def _values(removed: list[Any]) -> tuple[set[str], list[str], list[str]]:
    """(every removed string, the long removed strings, the long removed values as text), longest first."""
    if all(v.__class__ is str or v is None for v in removed):  # the common case: censored string fields
        strings = {v for v in removed if v}
        longest = sorted([v for v in strings if len(v) >= MIN_LENGTH], key=len, reverse=True)
        return strings, longest, longest
    exact: set[str] = set()
    long: set[str] = set()
    numbers: set[str] = set()
    stack = list(removed)
    while stack:
        value = stack.pop()
        if value.__class__ is str:  # the common case first: a censored string field
            if value:
                exact.add(value)
                if len(value) >= MIN_LENGTH:
                    long.add(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif value is None or isinstance(value, bool):
            continue
        else:
            text = str(value)
            if isinstance(value, str):
                exact.add(text)
                if len(text) >= MIN_LENGTH:
                    long.add(text)
            elif len(text) >= MIN_LENGTH:
                numbers.add(text)
    every = long | numbers if numbers else long
    return exact, sorted(long, key=len, reverse=True), sorted(every, key=len, reverse=True)


# Nothing any block escapes: printable ASCII but & < " \ |. Written as the characters it allows (the complement
# of a range up to U+10FFFF took milliseconds to compile at import), and matched whole: `$` would let a value
# ending in a newline pass for plain.
_PLAIN = re.compile(r"[\x20\x21\x23-\x25\x27-\x3b\x3d-\x5b\x5d-\x7b\x7d\x7e]*")


@lru_cache(maxsize=4096)
def _variants(value: str) -> tuple[str, ...]:
    """The forms a value takes once rendered into a block (just itself for plain ASCII text)."""
    if _PLAIN.fullmatch(value):
        return (value,)
    forms = [
        value,
        markup.attr(value),
        markup.bullet(value),  # a rule, directive or suggestion line
        markup.message(value),
        to_json(value).decode()[1:-1],
        json.dumps(value)[1:-1],
        ui.table_cell(value),  # the one function that writes table cells
        ui.line(value),  # a summary or list item
        ui.sealed(value),  # a block's body, unable to close it early
        ui.sealed(to_json(value).decode()[1:-1]),  # inside a JSON block (ui.json, charts), sealed
    ]
    return tuple(dict.fromkeys(f for f in forms if f))


@lru_cache(maxsize=4096)
def _quoted(value: str) -> str:
    """The value as a whole JSON string of the data block."""
    return to_json(value).decode()


def _scrub_text(text: str, needles: list[str], censor: str) -> str:
    for needle in needles:
        if needle in text:
            text = text.replace(needle, censor)
    return text


def _scrub_data(data: Any, exact: set[str], long: list[str], censor: str) -> Any:
    if isinstance(data, str):
        if data in exact:
            return censor
        return _scrub_text(data, long, censor)
    if isinstance(data, dict):
        return {k: _scrub_data(v, exact, long, censor) for k, v in data.items()}
    if isinstance(data, list):
        return [_scrub_data(v, exact, long, censor) for v in data]
    return data


def _scrub_view(view: ResponseView, found: list[str], mask: str) -> None:
    """The structured view (what the tester reads) says what the wire says."""
    view.system_rules = [_scrub_text(r, found, mask) for r in view.system_rules]
    view.suggestions = [Suggestion(s.action, _scrub_text(s.reason, found, mask)) for s in view.suggestions]
    view.ui_blocks = [
        replace(b, content=_scrub_text(b.content, found, mask),
                title=None if b.title is None else _scrub_text(b.title, found, mask))
        for b in view.ui_blocks
    ]


class Scrubber:
    """Censors the removed values out of a text sent later (an attached document). What to look for is
    worked out on first use: most responses attach nothing, and they pay nothing for it."""

    __slots__ = ("_removed", "_censor", "_needles")

    def __init__(self, removed: list[Any], censor: Any = DEFAULT_CENSOR) -> None:
        self._removed = removed  # taken over: see `scrubber`
        self._censor = censor
        self._needles: list[str] | None = None

    def __call__(self, text: str) -> str:
        needles = self._needles
        if needles is None:
            _, _, every = _values(self._removed)
            needles = self._needles = [form for value in every for form in _variants(value)]
        censor = self._censor
        return _scrub_text(text, needles, censor if isinstance(censor, str) else DEFAULT_CENSOR)


def scrubber(removed: list[Any], censor: Any = DEFAULT_CENSOR) -> Callable[[str], str]:
    """A function censoring the removed values out of a text sent later (an attached document). It takes
    `removed` over (a presenter's own list of one response, which nothing changes afterwards)."""
    return Scrubber(removed, censor)


def guard(response: ToolResponse, removed: list[Any], censor: Any = DEFAULT_CENSOR, *, pretty: bool = False) -> None:
    """Censor the removed values out of every block of a presenter's response, in place.

    The first text block is the serialized data: it is rebuilt from the guarded data, never edited as text
    (editing could break its JSON). Fails closed when a value survives (e.g. as an object key).
    """
    texts = response.texts
    if _clean(texts, removed):
        return
    exact, long, every = _values(removed)
    if not exact and not every:
        return
    mask = censor if isinstance(censor, str) else DEFAULT_CENSOR
    if every and len(texts) > 1:
        found = _forms_in(every, texts[1:])
        if found:
            for i in range(1, len(texts)):
                texts[i] = _scrub_text(texts[i], found, mask)
            _scrub_view(response.view, found, mask)
    data = response.view.data
    if data is None or isinstance(data, str):
        return
    head = texts[0]
    needles = [form for value in long for form in _variants(value)]
    if not _contains(head, needles, exact):
        return
    data = _scrub_data(data, exact, long, mask)
    texts[0] = dumps(data, pretty=pretty)
    if _contains(texts[0], needles, ()):
        raise RedactionError("a redacted value is still in the data block (an object key?)")
    response.view.data = data
    response.view.rewritten = True


def scrub_blocks(texts: list[str], removed: list[Any], censor: Any = DEFAULT_CENSOR) -> list[str]:
    """`texts` (blocks other than the data block) with every form of the long removed values censored, as
    `guard` censors the blocks of a response."""
    _, _, every = _values(removed)
    mask = censor if isinstance(censor, str) else DEFAULT_CENSOR
    found = _forms_in(every, texts)
    return [_scrub_text(text, found, mask) for text in texts] if found else texts


def _forms_in(every: list[str], texts: list[str]) -> list[str]:
    """The forms of the removed values that `texts` hold (one scan of them all per form; most find nothing)."""
    blocks = texts[0] if len(texts) == 1 else "\n".join(texts)
    return [form for value in every for form in _variants(value) if form in blocks]


def _clean(texts: list[str], removed: list[Any]) -> bool:
    """True when the guard would find nothing to censor: no removed string in any form in any block (one
    scan of all the blocks per form) and no short one as a whole string of the data block. The common
    case, decided without building the guard's sets; anything else (numbers, nested values, a form found
    somewhere) takes the full path, which decides for itself."""
    whole: str | None = None
    for value in removed:
        if value.__class__ is not str:
            if value is None or value is True or value is False:
                continue  # never guarded
            return False
        forms = _long_forms.get(value)  # known: a string of MIN_LENGTH or more
        if forms is None:
            if not value:
                continue
            if len(value) < MIN_LENGTH:
                if texts and _quoted(value) in texts[0]:
                    return False
                continue
            forms = _forms(value)
        if whole is None:
            # A form found only across a join (a value holding the separator) is a false alarm: the full
            # path looks block by block. A form in a block is always in the join.
            whole = "\n".join(texts)
        if forms.__class__ is str:  # plain text: its one form is itself
            if forms in whole:
                return False
            continue
        for form in forms:
            if form in whole:
                return False
    return True


# The forms of the long removed strings met lately (`_variants`; a plain one as itself), read by `_clean` as
# a plain dict: a value's forms are looked up on every guarded response, and a dict read costs less than
# the LRU cache's call. Emptied when full.
_long_forms: dict[str, str | tuple[str, ...]] = {}


def _forms(value: str) -> str | tuple[str, ...]:
    if len(_long_forms) >= 4096:
        _long_forms.clear()
    forms = _variants(value)
    known = _long_forms[value] = value if forms == (value,) else forms
    return known


def _contains(text: str, needles: list[str], exact: Any) -> bool:
    for needle in needles:
        if needle in text:
            return True
    return any(_quoted(value) in text for value in exact)
