"""The egress guard: the real value of a redacted field never leaves the server, in any block.

Redaction is late (UI, rule, directive and suggestion callbacks compute on real values), so a callback may
copy a value that the data block censors: `ui.summary(customer["email"])`. Before a presenter's response
leaves, the guard takes the real values its redaction removed (a removed mapping's keys too) and censors them
everywhere else:

- text blocks (UI, embeds, directives, rules, suggestions): every occurrence of a removed value at least
  `MIN_LENGTH` characters long, as written or JSON-escaped (`json.dumps` of it), each as escaped for the
  XML-ish blocks, inside JSON text and in a markdown table cell (a number also in the forms Python's format
  writes an amount in, `85,000` and `85,000.00`: `_number_forms`, and so is a string that is a Decimal's
  text, as a Decimal field reaches the guard: `"12345.50"` as `12,345.50` and `float()`'s `12345.5`; the
  whole number token around a match: no `[REDACTED].00`), is replaced by the censor; the wire format's own
  markup (tags, attribute names, a block's type, a suggestion's action when it is a name: letters, digits,
  `_.-`) is never touched;
- attached documents (`Scrubber`): every occurrence of every form of a long removed value, none kept for
  markup (a document is no block of the wire format), in each form a standard serializer writes it too
  (XML/HTML escapes and character references, CSV, YAML's quoted scalars, URL-encoded: `_document_forms`;
  not a value YAML folds over lines), a value that is no string in each way a document may write it too
  (`str(datetime)`, `85,000`);
- the structured data (the data block, `structuredContent`, the REST body): a string VALUE equal to a removed
  string, or containing a removed value at least `MIN_LENGTH` characters long (a number as its text, a string
  as written or JSON-escaped), is censored. Object keys are structure, never censored; nor is a string that
  the schema fixes (an enum or const member: `keep`), which a censor would turn into invalid output.

Many values in a long text (a list's rows, each with a redacted field) are looked for in one pass over it
(`_Search`, an Aho-Corasick automaton), not one scan a value: the guard's cost grows with the text and the
values, not with their product (a long value is looked for by its head and confirmed where that is found:
the automaton's size is bounded by the values' count, not their length); a small response (a handful of
values, a few KB) takes the plain loops.

Values shorter than `MIN_LENGTH` ("1", "EU", "") are matched only as whole strings of the structured data:
scanning free text for them would censor ordinary words and numbers. Booleans and `None` are never guarded.

The guard matches a value whatever its letter case (an email, a name, an id read the same to a human in
capitals): each form's key (`_key`: lower-cased, İ as i, a final sigma as a sigma) is looked for in the text
folded in place (`_fold`), and what is found is censored by its span in the text as written, never by a
`replace` of the key; the wire format's markup is told in the text as written. A short value's whole-string
match in the structured data and in an error is case-insensitive too ("EU" for a removed "eu"); a string the
schema fixes (`keep`) is kept as written only. A text that folding would lengthen (no character does in
Python's tables once İ is mapped: the fallback stays for newer ones) is matched exactly as written. The
guard does not match a partial copy, a copy with an invisible character inside it (a soft hyphen, a
zero-width space) or in another Unicode normalization, a form whose escapes differ by case (`\\u00c9`,
JSON's escape of an upper-cased `é`, is no form of `é`'s), nor, in blocks, a copy in an encoding the
application applied (URL-encoded: documents are searched for those, `Scrubber`). A presenter that
deliberately shows redacted values to a human operator opts out with `redact_pii(..., guard_blocks=False)`:
its data block and structured data are still redacted, its other blocks are not guarded.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import replace
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from functools import lru_cache
from math import isfinite
from typing import Any
from urllib.parse import quote
from uuid import UUID

import ahocorasick
from pydantic_core import PydanticSerializationError, to_json
from starlette.exceptions import HTTPException  # (FastAPI's is a subclass)

from . import markup, ui
from .errors import ToolError, ValidationFailed
from .redaction import DEFAULT_CENSOR
from .response import ResponseView, Suggestion, ToolResponse
from .serializer import dumps

MIN_LENGTH = 4


Amounts = set[tuple[str, ...]]  # the long removed numbers, each as its forms (`_number_forms`)


def _values(removed: list[Any]) -> tuple[set[str], list[str], Amounts]:
    """(every removed string, the long removed values as text: strings and numbers, longest first, the long
    removed numbers' forms)."""
    if all(v.__class__ is str or v is None for v in removed):  # the common case: censored string fields
        strings = {v for v in removed if v}
        texts = [v for v in strings if len(v) >= MIN_LENGTH]
        return strings, sorted(texts + _upper_twins(texts), key=len, reverse=True), _text_amounts(texts)
    exact: set[str] = set()
    long: set[str] = set()
    numbers: set[str] = set()
    amounts: Amounts = set()
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
            # A removed mapping's keys were removed with it (a dict keyed by email); short ones ("id") are
            # words, not worth censoring in every other answer.
            stack.extend(k for k in value if isinstance(k, str) and len(k) >= MIN_LENGTH)
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif value is None or isinstance(value, bool):
            continue
        elif value.__class__ is int or _finite(value):
            forms = _number_forms(value)
            if forms:
                numbers.add(forms[0])  # (its text: a needle as any value's)
                amounts.add(forms)
        else:
            text = str(value)
            if isinstance(value, str):
                exact.add(text)
                if len(text) >= MIN_LENGTH:
                    long.add(text)
            elif len(text) >= MIN_LENGTH:
                numbers.add(text)
    return exact, sorted(long | numbers | {*_upper_twins(long)}, key=len, reverse=True), amounts | _text_amounts(long)


def _upper_twins(texts: Iterable[str]) -> list[str]:
    """Each value's upper case where it is no case of the value letter for letter (`Weiß` as `WEISS`, `ﬁ` as
    `FI`: upper case writes them longer, so lower-casing the copy does not give the value back): looked for
    too, so that the guard's "whatever the letter case" holds for them. ASCII text has none."""
    return [upper for text in texts if not text.isascii()
            for upper in (text.upper(),) if _key(upper) != _key(text)]


# The text of a Decimal as `str()` and pydantic's JSON write it (`12345.50`, `-0.50`, `1E+5`), none other (no
# leading zero: `01234` is a code, not a number). A Decimal field reaches the callbacks and the redaction as
# this string, which a callback may still format as the amount it is: `f"{Decimal(e['salary']):,.2f}"`.
_DECIMAL_TEXT = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:E[+-]\d+)?")


def _text_amounts(texts: Iterable[str]) -> Amounts:
    """The number forms of each long removed string that is a Decimal's text (`_text_number_forms`)."""
    return {forms for text in texts if _DECIMAL_TEXT.fullmatch(text)
            for forms in (_text_number_forms(text),) if len(forms) > 1}


@lru_cache(maxsize=4096)
def _text_number_forms(text: str) -> tuple[str, ...]:
    """The forms (`_number_forms`) of the Decimal a string is the text of (`_DECIMAL_TEXT`), the text first,
    and of the float a callback may make of it (`float(salary)`: `12345.5`) when that float is the same
    number (15 significant digits or fewer; a longer one rounds to another). A form with fewer than
    `MIN_LENGTH` significant digits is left out (`1e-05`)."""
    number = Decimal(text)
    forms = _number_forms(number)
    if forms and len(number.as_tuple().digits) <= 15 and -64 <= number.adjusted() <= 64:
        forms += tuple(form for form in _number_forms(float(number)) if _significant(form))
    return tuple(dict.fromkeys(forms))


def _finite(value: Any) -> bool:
    """A number with digits to write (not a boolean, an infinity or a NaN, which are words)."""
    if isinstance(value, float):
        return isfinite(value)
    if isinstance(value, Decimal):
        return value.is_finite()
    return isinstance(value, int) and not isinstance(value, bool)


# The number formats Python's format mini-language commonly writes an amount in (`f"{salary:,.2f}"`).
_NUMBER_SPECS = (",", "_", ".2f", ",.2f", "_.2f")


@lru_cache(maxsize=4096, typed=True)  # (typed: 85000 and 85000.0 are written differently)
def _number_forms(value: int | float | Decimal) -> tuple[str, ...]:
    """The texts a finite number is commonly written as, when its own text is at least `MIN_LENGTH` long
    (a shorter one is a word): `str()` and `repr()`, grouped (`85,000`, `85_000`), with two decimals (`.2f`,
    `,.2f`, `_.2f`), an integral float or Decimal as its int too. A form with fewer than `MIN_LENGTH`
    significant digits is left out: `0.00`, a tiny float's money form, is no copy of it. A negative number's
    forms are followed by its magnitude's."""
    text = str(value)
    if len(text) < MIN_LENGTH:
        return ()
    forms = [text, repr(value)] if isinstance(value, float) else [text]
    if isinstance(value, Decimal) and value.adjusted() > 64:  # (`1E+999999` would be written out in full)
        return tuple(forms)
    given: list[int | float | Decimal] = [value]
    if not isinstance(value, int) and value == int(value):
        given.append(int(value))
    for number in given:
        for spec in ("", *_NUMBER_SPECS):
            with suppress(ValueError):  # (a Decimal takes no `_`)
                form = format(number, spec)
                if _significant(form):
                    forms.append(form)
    if text[0] == "-":  # a negative number's magnitude is as telling (`abs(balance)`, `-balance`, `f"{-v:,}"`)
        forms += [form[1:] for form in forms if form[0] == "-" and _significant(form[1:])]
    return tuple(dict.fromkeys(forms))


def _significant(form: str) -> bool:
    """Whether a number's form has `MIN_LENGTH` significant digits or more."""
    return len(_NON_DIGIT.sub("", form).lstrip("0")) >= MIN_LENGTH


_NON_DIGIT = re.compile(r"\D")


@lru_cache(maxsize=4096)
def _probes(forms: tuple[str, ...], marked: bool, underscore: bool) -> tuple[str, ...]:
    """The forms of a number (`_number_forms`) worth looking for besides its text: each that holds neither
    its text nor another form (`85,000` for `85,000.00`: a text holding the one holds the other). A grouped
    or decimal one only if the text holds such a number (`marked`: see `_GROUPED`), grouped with `_` only if
    it holds a `_` (`underscore`)."""
    return tuple(form for form in forms[1:]
                 if (marked or not _SEPARATED.search(form)) and (underscore or "_" not in form)
                 and forms[0] not in form and not any(other != form and other in form for other in forms[1:]))


# What every grouped or decimal form holds (`85,000`, `85_000`, `85000.00`, `12,345.5`): a text without it
# holds none of them, and is scanned for none.
_GROUPED = re.compile(r"\d[,_]\d{3}|\d\.\d")
_SEPARATED = re.compile(r"[,_.]")


def _amount_forms(amounts: Amounts, text: str) -> list[str]:
    """Every form of each removed number that `text` holds in one of its forms (its text aside: `every`
    holds it, and a match of it censors its whole token)."""
    marked = _GROUPED.search(text) is not None
    underscore = marked and "_" in text
    if _many(len(amounts), len(text)):  # (many numbers: their probes looked for in one scan)
        probes = {forms: _probes(forms, marked, underscore) for forms in amounts}
        held = _Search([probe for each in probes.values() for probe in each]).found(text)
        return [form for forms, each in probes.items() if not held.isdisjoint(each) for form in forms]
    return [form for forms in amounts if any(probe in text for probe in _probes(forms, marked, underscore))
            for form in forms]


# Nothing any block escapes: printable ASCII but & < " \ |. Written as the characters it allows (the complement
# of a range up to U+10FFFF took milliseconds to compile at import), and matched whole: `$` would let a value
# ending in a newline pass for plain.
_PLAIN = re.compile(r"[\x20\x21\x23-\x25\x27-\x3b\x3d-\x5b\x5d-\x7b\x7d\x7e]*")


def _escaped(text: str) -> str:
    """`text` as a JSON string writes it, without the quotes (the data block's and `ui.json`'s escaping)."""
    try:
        return to_json(text).decode()[1:-1]
    except PydanticSerializationError:  # a lone surrogate (UTF-8 cannot hold it): escaped as json.dumps does
        return _SURROGATE.sub(_surrogate_escape, json.dumps(text, ensure_ascii=False)[1:-1])


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _surrogate_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match[0]):04x}"


@lru_cache(maxsize=4096)
def _data_forms(value: str) -> tuple[str, ...]:
    """The forms a value takes inside a string of the data: as written, and JSON-escaped (a JSON text the
    application built or stored, `json.dumps` escaping non-ASCII or not). Just itself for plain ASCII text."""
    if _PLAIN.fullmatch(value):
        return (value,)
    return tuple(dict.fromkeys(f for f in (value, _escaped(value), json.dumps(value)[1:-1]) if f))


@lru_cache(maxsize=4096)
def _head_forms(value: str) -> tuple[str, ...]:
    """The forms a value takes in the data block's text: each of its data forms, as JSON writes a string."""
    forms = _data_forms(value)
    return forms if len(forms) == 1 else tuple(dict.fromkeys(_escaped(f) for f in forms))


@lru_cache(maxsize=4096)
def _variants(value: str) -> tuple[str, ...]:
    """The forms a value takes once rendered into a block, or into the data block's text (just itself for
    plain ASCII text): each data form as written and as each block escapes it."""
    if _PLAIN.fullmatch(value):
        return (value,)
    forms: list[str] = []
    for text in _data_forms(value):
        escaped = _escaped(text)
        forms += [
            text,
            markup.attr(text),  # an attribute, or a rule, directive or suggestion line
            markup.bullet(text),
            markup.message(text),
            escaped,
            json.dumps(text)[1:-1],
            ui.table_cell(text),  # the one function that writes table cells
            ui.line(text),  # a summary or list item
            ui.sealed(text),  # a block's body, unable to close it early
            ui.sealed(escaped),  # inside a JSON block (ui.json, charts), sealed
        ]
    return tuple(dict.fromkeys(f for f in forms if f))


@lru_cache(maxsize=4096)
def _quoted(value: str) -> str:
    """The value as a whole JSON string of the data block."""
    return f'"{_escaped(value)}"'


# -- many needles at once ---------------------------------------------------------------------------------

# One `in` per needle costs ~0.3 ns a character of the text (and ~40 ns a call); one scan for them all
# (`_Search`) costs building its automaton, ~1 µs a needle, and ~5 ns a character. A list's rows bring a
# needle each into a text that grows with them: the loop's cost is their product, the square of the rows.
# The scan pays from `_FEW` needles in `_LONG` characters (bench/censor_scale.py); a small response (a
# handful of needles, a few KB) keeps the loop and pays one comparison.
_FEW = 32
_LONG = 8192


def _many(needles: int, chars: int) -> bool:
    """Whether `needles` needles are looked for in `chars` characters in one scan (`_Search`)."""
    return needles >= _FEW and chars >= _LONG


# A needle longer than this is looked for by its head (`_Search`): the automaton's size, whatever the needles'.
_HEAD = 32


def _confirmed(text: str, needle: str, heads: list[int], every: bool) -> Iterator[int]:
    """Where `needle` starts in `text` (in order; the first place only unless `every`), given where its head
    starts (`heads`, in order): each checked, or the text searched for it when checking would compare more
    characters than a search (a head found all over, `aaaa...`): never more work than the loops' search."""
    if len(heads) * len(needle) <= len(text):
        for at in heads:
            if text.startswith(needle, at):
                yield at
                if not every:
                    return
        return
    at = text.find(needle)
    while at >= 0:
        yield at
        at = text.find(needle, at + 1) if every else -1


class _Search:
    """Many needles looked for at once: an Aho-Corasick automaton (pyahocorasick, which takes any code point,
    a lone surrogate too) gives every occurrence of each of them, overlapping ones too, in one pass over a
    text. Needles are never empty (every one is a form of a value of `MIN_LENGTH` or more).

    A needle longer than `_HEAD` is added by its head (its first `_HEAD` characters) and confirmed where its
    head is found (`_confirmed`): the automaton is at most `_HEAD` characters a needle, whatever the values'
    length (a long value's 20-30 forms, each as long as it, made its size their total length: 1.5 GB and
    20 s for 500 rows of 2,000 characters, where the loops took 1 s)."""

    __slots__ = ("_automaton", "places", "_touching")

    def __init__(self, needles: Iterable[str]) -> None:
        self.places: dict[str, list[int]] = {}  # each needle's places in the list given (it may repeat one)
        heads: dict[str, list[str]] = {}  # each head, the needles it starts (a short needle is its own head)
        for i, needle in enumerate(needles):
            if needle in self.places:
                self.places[needle].append(i)
            else:
                self.places[needle] = [i]
                heads.setdefault(needle[:_HEAD], []).append(needle)
        automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY)
        for head, starting in heads.items():
            # (whether the head is a needle itself, and the longer needles it starts)
            automaton.add_word(head, (head, head in self.places, tuple(n for n in starting if n != head)))
        # (an automaton of no needle cannot be scanned with: none is found)
        self._automaton = automaton if len(automaton) else None
        if self._automaton is not None:
            automaton.make_automaton()
        self._touching: tuple[str, frozenset[str]] | None = None

    def occurrences(self, text: str) -> Iterator[tuple[int, str]]:
        """(start, needle) of each occurrence in `text`: a short needle's in the order they end, then each long
        one's in order."""
        return self._each(text, True)

    def _each(self, text: str, every: bool) -> Iterator[tuple[int, str]]:
        """`occurrences`, or with `every` false each long needle's first one only (enough to tell it is held)."""
        if self._automaton is None:
            return
        longer: dict[str, tuple[tuple[str, ...], list[int]]] = {}  # each long needles' head found, and where
        for last, (head, whole, starting) in self._automaton.iter(text):
            start = last + 1 - len(head)
            if whole:
                yield start, head
            if starting:
                if head in longer:
                    longer[head][1].append(start)
                else:
                    longer[head] = (starting, [start])
        for starting, starts in longer.values():
            for needle in starting:
                for at in _confirmed(text, needle, starts, every):
                    yield at, needle

    def any(self, text: str) -> bool:
        """Whether `text` holds a needle (a short one ends the scan)."""
        return next(self._each(text, False), None) is not None

    def found(self, text: str) -> set[str]:
        """The needles `text` holds."""
        return {needle for _, needle in self._each(text, False)}

    def starts(self, text: str) -> dict[str, list[int]]:
        """Where each needle `text` holds starts, in order."""
        starts: dict[str, list[int]] = {}
        for at, needle in self.occurrences(text):
            if needle in starts:
                starts[needle].append(at)
            else:
                starts[needle] = [at]
        return starts

    def touching(self, censor: str) -> frozenset[str]:
        """The needles a censor written into a text may complete: one holding it, held in it, or starting with
        its end or ending with its start (with "[REDACTED]", `]x` or `x[RED`). No other needle is found in a
        text after a replacement that was not in it before."""
        if self._touching is None or self._touching[0] != censor:
            heads = tuple(censor[:i] for i in range(1, len(censor) + 1))
            tails = tuple(censor[i:] for i in range(len(censor)))
            found = frozenset(needle for needle in self.places if censor in needle or needle in censor
                              or needle.endswith(heads) or needle.startswith(tails))
            self._touching = (censor, found)
        return self._touching[1]


class _Needles(list[str]):
    """A list of needles that keeps its keys (`_keys`) and its `_Search`es, made on first use: the guard looks
    for the same needles in several blocks, and a scrubber in each document."""

    # (class defaults: made as a plain list is, with no __init__ of its own)
    keys: list[str] | None = None
    search: _Search | None = None  # of the keys
    exact: _Search | None = None  # of the needles as written (a text that cannot be folded: `_fold`)


def _search(needles: list[str], folded: bool = True) -> _Search:
    """The scan for `needles`' keys (`_key`), or for the needles as written when not `folded`: a `_Needles`'
    own, else a new one."""
    if isinstance(needles, _Needles):
        if folded:
            if needles.search is None:
                needles.search = _Search(_keys(needles))
            return needles.search
        if needles.exact is None:
            needles.exact = _Search(needles)
        return needles.exact
    return _Search(_keys(needles) if folded else needles)


# -- letter case: a removed value is censored whatever the case it is written in --------------------------


# The letters `str.lower` leaves apart from their capital's lower case (ı and i are both I's, ſ and s both S's,
# µ and μ both Μ's...), each as that one, and İ (which `str.lower` writes as two characters) as i: a value
# typed with one is the same value to a reader. Python's tables hold no others (`tests/test_censor_case.py`).
_CASE_TWINS = str.maketrans({
    "\u0130": "i", "\u0131": "i", "\u017f": "s", "\u00b5": "\u03bc", "\u0345": "\u03b9", "\u03c2": "\u03c3",
    "\u03d0": "\u03b2", "\u03d1": "\u03b8", "\u03d5": "\u03c6", "\u03d6": "\u03c0", "\u03f0": "\u03ba",
    "\u03f1": "\u03c1", "\u03f5": "\u03b5", "\u1c80": "\u0432", "\u1c81": "\u0434", "\u1c82": "\u043e",
    "\u1c83": "\u0441", "\u1c84": "\u0442", "\u1c85": "\u0442", "\u1c86": "\u044a", "\u1c87": "\u0463",
    "\u1c88": "\ua64b", "\u1e9b": "\u1e61", "\u1fbe": "\u03b9",
})


def _key(text: str) -> str:
    """`text` case-folded, each character on its own, into one character: lower-cased, each letter as its
    capital's lower case (`_CASE_TWINS`: ı as i, ſ as s, İ as i rather than `str.lower`'s two characters), a
    final sigma as a sigma (`str.lower` writes Σ as ς or σ by the letters around it: a value cut out of a word
    would not be found in it). Python's tables have no other character lowered into more than one, nor by its
    context (`tests/test_censor_case.py`)."""
    if text.isascii():  # (the common case: one C call)
        return text.lower()
    low = text.translate(_CASE_TWINS).lower()
    return low.replace("\u03c2", "\u03c3") if "\u03c2" in low else low


def _fold(text: str) -> str | None:
    """`text` as its needles' keys (`_key`) are looked for in it: each character at its place, so a span found
    in it is the text's span; None if folding changed its length (no character of today's tables does), a
    text then matched exactly as written."""
    low = _key(text)
    return low if len(low) == len(text) else None


def _keys(needles: list[str]) -> list[str]:
    """Each needle's key (`_key`), in the needles' order (a `_Needles`' own, made once)."""
    if isinstance(needles, _Needles):
        if needles.keys is None:
            needles.keys = _folded(needles)
        return needles.keys
    return _folded(needles)


def _folded(texts: list[str]) -> list[str]:
    """Each text's key (`_key`): all folded at once, joined by line breaks, when none holds one (folding is
    character by character: a list's thousands of needles cost one `lower`, not a call each)."""
    if len(texts) < 4:
        return [_key(text) for text in texts]
    keys = _key("\n".join(texts)).split("\n")
    return keys if len(keys) == len(texts) else [_key(text) for text in texts]


def _scanned(text: str, needles: list[str], censor: str = "") -> tuple[str, list[str], bool]:
    """(what to look in, what to look for, whether case-folded): `text` folded (`_fold`) and the needles' keys,
    or both as written when the text, or the censor written into it, cannot be folded in place."""
    low = _fold(text)
    if low is None or (censor and _mask(censor) is None):
        return text, needles, False
    return low, _keys(needles), True


@lru_cache(maxsize=64)
def _mask(censor: str) -> str | None:
    """The censor as a folded text holds it once written (`_fold`): a presenter's few censors, folded once."""
    return _fold(censor)


def _every(text: str, needle: str) -> list[tuple[int, int]]:
    """The spans `str.replace` would replace: each occurrence of `needle` left to right, none overlapping the
    one before."""
    spans: list[tuple[int, int]] = []
    size = len(needle)
    at = text.find(needle)
    while at >= 0:
        spans.append((at, at + size))
        at = text.find(needle, at + size)
    return spans


def _spread(texts: list[str], needles: list[str], censor: str) -> list[list[str]]:
    """For each of `texts`, the needles that may change it: all of them, or for many needles in many texts
    (a list's rows, each with its strings, UI block or suggestion) the ones it holds and those the censor may
    complete (`_Search.touching`), in their order, from one scan of all the texts; none for a text holding
    none, which stays as it is. Either way `_scrub_text` and `_scrub_block` give the same result. The scan
    is case-folded (`_key`)."""
    # (a text costs the loop a call a needle besides its characters: as ~128 characters more)
    if len(texts) < 2 or not _many(len(needles), sum(map(len, texts)) + 128 * len(texts)):
        return [needles] * len(texts)
    needles = needles if isinstance(needles, _Needles) else _Needles(needles)
    scan, _, folded = _scanned("\n".join(texts), needles, censor)
    if not folded:  # (no character folds out of place today: each text then decides for itself)
        return [needles] * len(texts)
    search = _search(needles)
    starts = [0]
    for text in texts[:-1]:
        starts.append(starts[-1] + len(text) + 1)
    held: dict[int, set[str]] = {}
    for at, key in search.occurrences(scan):
        i = bisect_right(starts, at) - 1
        if at + len(key) <= starts[i] + len(texts[i]):  # (not across the join)
            held.setdefault(i, set()).add(key)
    places = search.places
    touching = {place for key in search.touching(_mask(censor) or censor) for place in places[key]}
    spread: list[list[str]] = [[] for _ in texts]
    for i, found in held.items():
        order = sorted(touching.union(*(places[key] for key in found)))
        # (all of them: the list itself, whose scan is built already)
        # (a plain list: a row's few needles are folded again where used, cheaper than a `_Needles` made)
        spread[i] = needles if len(order) == len(needles) else [needles[place] for place in order]
    return spread


def _replaced(text: str, needles: list[str], censor: str) -> str:
    """`_scrub_text` of many needles in a long text, the same text from one scan (`_Search`) instead of one
    `replace` per needle: each needle's occurrences that no earlier replacement broke are replaced left to
    right as `str.replace` does (one overlapping the previous one is skipped). A needle the censor may
    complete (`_Search.touching`) is looked for in the text as written so far, and the text scanned again
    once it replaced one. Keys are looked for in the folded text (`_scanned`), spans replaced in the text."""
    needles = needles if isinstance(needles, _Needles) else _Needles(needles)
    scan, keys, folded = _scanned(text, needles, censor)
    search = _search(needles, folded)
    mask = (_mask(censor) or censor) if folded else censor  # (the censor as the folded text holds it)
    touching = search.touching(mask)
    starts = search.starts(scan)
    taken = bytearray(len(text))  # the characters replaced so far (1)
    spans: list[tuple[int, int]] = []
    for key in keys:
        if key in touching:
            written = _written(scan, spans, mask)
            if key in written:
                text = _written(text, spans, censor)
                if _NUMERIC.fullmatch(key):
                    return _scrub_all(text, needles, censor)
                text = _written(text, _every(written, key), censor)
                scan = written.replace(key, mask)  # (the new text folded: folding is character by character)
                starts, taken, spans = search.starts(scan), bytearray(len(text)), []
            continue
        size = len(key)
        for at in starts.get(key, ()):
            if taken.find(1, at, at + size) < 0:  # intact in the text the earlier needles left
                if _NUMERIC.fullmatch(key):  # a number: its whole token and every needle's occurrence go
                    return _scrub_all(_written(text, spans, censor), needles, censor)
                taken[at:at + size] = b"\1" * size
                spans.append((at, at + size))
    return _written(text, spans, censor)


def _written(text: str, spans: list[tuple[int, int]], censor: str) -> str:
    """`text` with each of `spans` (none overlapping another) replaced by the censor."""
    if not spans:
        return text
    parts: list[str] = []
    at = 0
    for start, end in sorted(spans):
        parts += [text[at:start], censor]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def _scrub_text(text: str, needles: list[str], censor: str) -> str:
    """`text` with each needle in turn (longest first) replaced by the censor in what the earlier ones left,
    whatever its letter case (its key in the folded text: `_scanned`); a number's whole token and every other
    needle's occurrence once one is found (`_scrub_all`)."""
    if not needles:  # (most strings of a list's rows: `_spread` gave them none)
        return text
    if _many(len(needles), len(text)):
        return _replaced(text, needles, censor)
    # (`_scanned` written out: this runs on each string of a list's rows that holds a needle)
    low, folded_mask = _fold(text), _mask(censor)
    folded = low is not None and folded_mask is not None
    scan, mask, keys = (low or text, folded_mask or censor, _keys(needles)) if folded else (text, censor, needles)
    for key in keys:
        if key in scan:
            if _NUMERIC.fullmatch(key):  # a number: its whole token goes (`_hits`)
                return _scrub_all(text, needles, censor)
            if not folded:
                text = scan = text.replace(key, censor)
                continue
            # (replaced by its spans in the text, never a `replace` of the key, which the text may not hold)
            text = _written(text, _every(scan, key), censor)
            scan = scan.replace(key, mask)  # (the new text folded: folding is character by character)
    return text


def _scrub_data(data: Any, exact: set[str], needles: list[str], keep: frozenset[str], censor: str) -> Any:
    """`data` with its string values censored: equal to a removed string, or holding a needle. Keys stay (they
    are the structure), and so do strings in `keep`. Returns `data` itself when nothing changed. Whatever the
    letter case: a string equal to a removed one but in case (`_key`: "EU" for a removed "eu") is censored
    whole as the value itself, a needle found as `_scrub_text` finds it; `keep` is matched as written (the
    schema's members are exact)."""
    strings = list(dict.fromkeys(_strings(data)))
    # (the needles each string may hold: its rows' strings are not each scanned for every row's values)
    held = dict(zip(strings, _spread(strings, needles, censor), strict=True))
    # (a long one in other case is a needle found whole: censored whole by `_scrub_text`, no key made per string)
    short = {_key(value) for value in exact if len(value) < MIN_LENGTH}
    return _scrub_value(data, exact, short, held, keep, censor)


def _strings(data: Any) -> Iterator[str]:
    """Every string value in `data` (not the keys)."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            yield value
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)


def _scrub_value(data: Any, exact: set[str], short: set[str], held: dict[str, list[str]], keep: frozenset[str],
                 censor: str) -> Any:
    """`_scrub_data`, each string given the needles it may hold (`_spread`); `short` holds the keys (`_key`) of
    the removed strings shorter than `MIN_LENGTH`."""
    if isinstance(data, str):
        if data in keep:
            return data
        if data in exact or (len(data) < MIN_LENGTH and _key(data) in short):
            return censor
        return _scrub_text(data, held[data], censor)
    if isinstance(data, dict):
        items = {k: _scrub_value(v, exact, short, held, keep, censor) for k, v in data.items()}
        return data if all(items[k] is v for k, v in data.items()) else items
    if isinstance(data, list):
        values = [_scrub_value(v, exact, short, held, keep, censor) for v in data]
        return data if all(new is old for new, old in zip(values, data, strict=True)) else values
    return data


# -- text blocks: the removed values censored, the wire format's own markup kept ---------------------------

# A block of the wire format: its opening tag first (`ui.py`, `markup.bullet_block`), its closing tag last.
_OPENING = re.compile(r'<(ui_passthrough|domain_rules|llm_directives|action_suggestions)((?: [a-z_]+="[^"]*")*)>\n')
_TITLE = re.compile(r' title="([^"]*)"')  # the one attribute a writer's text may fill
_BULLETS = ("domain_rules", "llm_directives", "action_suggestions")
# A suggestion's action as the framework's vocabulary writes it: a tool's and an action's name, dotted. Anything
# else there was built from data (`suggest(f"mail.{email}", ...)`) and is guarded like the reason.
_ACTION = re.compile(r"[A-Za-z0-9_.-]{1,129}")


def _markup(text: str) -> list[tuple[int, int]]:
    """The spans of `text` that are the wire format's own markup, in order: a block's tags and attributes
    (but a title's value), each bullet's `- ` and a suggestion's action. None for any other text."""
    opening = _OPENING.match(text)
    if opening is None:
        return []
    tag, end = opening.group(1), opening.end()
    closing = f"\n</{tag}>"
    body_end = len(text) - len(closing) if text.endswith(closing) else len(text)
    spans: list[tuple[int, int]] = []
    at = 0
    for title in _TITLE.finditer(text, 0, end):
        spans.append((at, title.start(1)))
        at = title.end(1)
    spans.append((at, end))
    if tag in _BULLETS:
        start = end
        while start < body_end:
            stop = text.find("\n", start, body_end)
            stop = body_end if stop < 0 else stop
            if text.startswith("- ", start):
                # A suggestion's action name, up to its `: `, is the framework's vocabulary too.
                colon = text.find(": ", start, stop) if tag == "action_suggestions" else -1
                if colon >= 0 and _ACTION.fullmatch(text, start + 2, colon) is None:
                    colon = -1
                spans.append((start, colon + 2 if colon >= 0 else start + 2))
            start = stop + 1
    if body_end < len(text):
        spans.append((body_end, len(text)))
    return spans


# A needle that is a number's text (`85000`, `-85,000.00`, a string of digits), and the digits that continue
# its token on either side: `85000` found in `85000.000` censors the whole token, none of it left
# (`[REDACTED].000` would tell the form and part of the value). A decimal point joins digits; a `,` or `_`
# only when the needle is grouped with it (`85,000` in `85,000,000`): an ungrouped one in `[85000,12]` keeps 12.
_NUMERIC = re.compile(r"-?\d[\d,_]*(?:\.\d+)?")
_TOKEN_HEADS = {sep: re.compile(rf"(?:\d[.{sep}]?)+\Z") for sep in ("", ",", "_")}
_TOKEN_TAILS = {sep: re.compile(rf"(?:[.{sep}]?\d)+") for sep in ("", ",", "_")}
_JOINED = frozenset("0123456789.,_")  # what may come just before a token's digits


def _grouping(needle: str) -> str:
    """The grouping separator a numeric needle is written with ("" for none)."""
    return "," if "," in needle else "_" if "_" in needle else ""


def _token(text: str, start: int, end: int, sep: str) -> tuple[int, int]:
    """The span of the number token around `text[start:end]`, a numeric needle grouped with `sep`."""
    tail = _TOKEN_TAILS[sep].match(text, end)
    if tail is not None:
        end = tail.end()
    while start and text[start - 1] in _JOINED and text[start] != "-":  # (a sign of its own starts the token)
        # Looked for in a window before the hit (a regex cannot run backwards); a longer token goes on.
        window = max(0, start - 64)
        head = _TOKEN_HEADS[sep].search(text, window, start)
        if head is None:
            break
        start = head.start()
        if start > window or not window:
            break
    return start, end


def _widen(text: str, start: int, end: int, sep: str, widened: dict[str, tuple[int, int]]) -> bool:
    """Whether `text[start:end]`, a numeric needle's occurrence, is in a token not yet widened: if so, that
    token (`_token`) is the one last widened for `sep` in `widened`."""
    last = widened.get(sep)
    if last is not None and last[0] <= start and end <= last[1]:
        return False
    widened[sep] = _token(text, start, end, sep)
    return True


def _hits(text: str, needles: list[str]) -> list[tuple[int, int]]:
    """Every occurrence of every needle in `text` (overlapping ones too), overlapping spans merged; a
    number's whole token (`_token`), each token widened once: an occurrence inside the token last widened
    for its grouping is in that token (widening each would cost the square of a long run of digits). Found
    whatever their letter case: the needles' keys in the folded text (`_scanned`), whose spans are the text's."""
    return _spans(*_scanned(text, needles), needles)


def _spans(text: str, keys: list[str], folded: bool, needles: list[str]) -> list[tuple[int, int]]:
    """`_hits` of `keys` in `text`, as `_scanned` gives them (`needles`: their scan, `_search`)."""
    found: list[tuple[int, int]] = []
    widened: dict[str, tuple[int, int]] = {}  # per grouping, the token last widened
    if _many(len(keys), len(text)):
        seps: dict[str, str | None] = {}
        for at, key in _search(needles, folded).occurrences(text):
            if key not in seps:
                seps[key] = _grouping(key) if _NUMERIC.fullmatch(key) else None
            sep = seps[key]
            if sep is None:
                found.append((at, at + len(key)))
            elif _widen(text, at, at + len(key), sep, widened):
                found.append(widened[sep])
    else:
        for key in keys:
            at = text.find(key)
            sep = _grouping(key) if at >= 0 and _NUMERIC.fullmatch(key) else None
            while at >= 0:
                if sep is None:
                    found.append((at, at + len(key)))
                elif _widen(text, at, at + len(key), sep, widened):
                    found.append(widened[sep])
                at = text.find(key, at + 1)
    return _merged_spans(found)


def _merged_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` (start, end) in order, those that overlap merged into one."""
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _outside(spans: list[tuple[int, int]], kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` without the parts of them in `kept` (both in order, neither overlapping itself): one walk of
    both (a block of many bullets with many hits is no product of the two)."""
    out: list[tuple[int, int]] = []
    first = 0  # the first kept span that may still meet a span: those before it end before this one starts
    for start, end in spans:
        while first < len(kept) and kept[first][1] <= start:
            first += 1
        i = first
        while i < len(kept) and kept[i][0] < end:
            k_start, k_end = kept[i]
            if k_start > start:
                out.append((start, k_start))
            start = max(start, k_end)
            i += 1
        if start < end:
            out.append((start, end))
    return out


def _scrub_block(text: str, needles: list[str], censor: str) -> str:
    """`text` (a block of the wire format, or any text) with every needle censored but in its markup: a
    stored value equal to a tag or an action name never breaks the format (fail closed: the rest of an
    occurrence that straddles markup is censored). Markup is told in the text as written (a tag in capitals
    is none), an occurrence found whatever its case (`_scanned`)."""
    scan, keys, folded = _scanned(text, needles)
    if not (_search(needles, folded).any(scan) if _many(len(keys), len(scan)) else any(k in scan for k in keys)):
        return text
    kept = _markup(text)
    if not kept:
        return _scrub_text(text, needles, censor)
    return _written(text, _outside(_spans(scan, keys, folded, needles), kept), censor)


def _scrub_view(view: ResponseView, found: list[str], mask: str) -> None:
    """The structured view (what the tester reads) says what the wire says."""
    held: dict[str, list[str]] | None = None
    if len(found) >= _FEW:  # (a list's rows, each with a UI block or a suggestion: one scan for all)
        texts = list(dict.fromkeys([
            *view.system_rules, *(s.reason for s in view.suggestions), *(b.content for b in view.ui_blocks),
            *(b.title for b in view.ui_blocks if b.title is not None),
            *(s.action for s in view.suggestions if _guarded_action(s.action))]))
        held = dict(zip(texts, _spread(texts, found, mask), strict=True))

    def scrub(text: str) -> str:
        return _scrub_text(text, found if held is None else held[text], mask)

    view.system_rules = [scrub(r) for r in view.system_rules]
    view.suggestions = [Suggestion(scrub(s.action) if _guarded_action(s.action) else s.action, scrub(s.reason))
                        for s in view.suggestions]
    view.ui_blocks = [replace(b, content=scrub(b.content), title=None if b.title is None else scrub(b.title))
                      for b in view.ui_blocks]


def _guarded_action(action: Any) -> bool:
    """Whether a suggestion's action is censored: a text that is no name (`_ACTION`)."""
    return action.__class__ is str and not _ACTION.fullmatch(action)


class Scrubber:
    """Censors the removed values out of a text sent later (an attached document). What to look for is
    worked out on first use: most responses attach no document, and they pay nothing for it.

    A document is no block of the wire format: every occurrence is censored, whatever the text around it
    (a document that starts like `<action_suggestions>` keeps no markup of its own), in each form the
    standard serializers write (`_document_forms`: a handler's YAML, XML, CSV or link escapes what it
    writes). A value that is no string is looked for in every way a document may write it (`_renderings`):
    a handler building a CSV from its own rows writes `str(datetime)` and the int it read, not their JSON
    forms."""

    __slots__ = ("_removed", "_censor", "_needles")

    def __init__(self, removed: list[Any], censor: Any = DEFAULT_CENSOR) -> None:
        self._removed = removed  # taken over: see `scrubber`
        self._censor = censor
        self._needles: list[str] | None = None

    def __call__(self, text: str) -> str:
        needles = self._needles
        if needles is None:
            needles = self._needles = _document_needles(self._removed + self.more())
        if not needles:
            return text
        censor = self._censor
        return _scrub_all(text, needles, censor if isinstance(censor, str) else DEFAULT_CENSOR)

    def block(self, text: str) -> str:
        """`text`, a block of the wire format the framework wrote again (never a document, nor any text a
        handler made): censored as the guard censors a block, its own markup kept (`_scrub_block`)."""
        needles = self._needles
        if needles is None:
            needles = self._needles = _document_needles(self._removed + self.more())
        censor = self._censor
        return _scrub_block(text, needles, censor if isinstance(censor, str) else DEFAULT_CENSOR)

    def more(self) -> list[Any]:
        """More values to censor, asked for once, on first use (a presenter's: see `presenter._Unsent`)."""
        return []


def _document_needles(removed: list[Any]) -> list[str]:
    """Every form of every long removed value a document may hold: as `_variants` and the standard
    serializers (`_document_forms`) write a text, and each value that is no string as `_renderings` writes
    it."""
    _, every, amounts = _values(removed)
    texts = set(every).union(*amounts)  # (a Decimal's text in its number forms: `_text_number_forms`)
    stack = list(removed)
    while stack:
        value = stack.pop()
        if value.__class__ is str or value is None or isinstance(value, bool):
            continue
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        else:
            texts.update(text for text in _renderings(value) if len(text) >= MIN_LENGTH)
    forms = {form for text in texts for form in _variants(text)}
    forms.update(form for text in texts for form in _document_forms(text))
    return _Needles(sorted(forms, key=len, reverse=True))


# What the markup serializers escape, each its own way: `&`, `<` and `>` always, then quotes and breaks as
# xml.sax.saxutils.escape (ElementTree's text, html.escape(quote=False)), ElementTree's attributes,
# saxutils.quoteattr (a `"` only when the value holds both quotes), html.escape, markupsafe (Jinja2) and
# XML's `&apos;` write them. The first table is no escaping: a non-ASCII character alone may be referenced.
_MARKUP = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BREAKS = {"\r": "&#13;", "\n": "&#10;"}
_MARKUPS = tuple(str.maketrans(table) for table in (
    {},
    _MARKUP,
    {**_MARKUP, '"': "&quot;", **_BREAKS, "\t": "&#09;"},
    {**_MARKUP, **_BREAKS, "\t": "&#9;"},
    {**_MARKUP, '"': "&quot;", **_BREAKS, "\t": "&#9;"},
    {**_MARKUP, '"': "&quot;", "'": "&#x27;"},
    {**_MARKUP, '"': "&#34;", "'": "&#39;"},
    {**_MARKUP, '"': "&quot;", "'": "&apos;"},
))
_MARKED = re.compile("[&<>\"'\r\n\t]")  # what some table escapes
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_QUOTED = re.compile("[\"'\\\\]")  # what YAML's quoted scalars escape in printable ASCII
_URI_KEPT = re.compile(r"[!'()*]")  # what encodeURIComponent keeps, and urllib's `quote` does not
_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]*")  # what no serializer escapes (urllib's `quote` keeps just these)
# What a YAML double-quoted scalar escapes (PyYAML's `write_double_quoted`): with allow_unicode=False (its
# default) every character but printable ASCII, else only the non-printable ones; named escapes first.
_YAML_ASCII = re.compile(r'[^\x20-\x7e]|["\\]')
# Spelled as the characters escaped rather than the printable ones kept: the same set, but `re` compiles a
# negated class over the BMP's ranges in ~2.5 ms at import and this one in ~0.5 ms.
_YAML_UNICODE = re.compile(r'[\x00-\x1f"\\\x7f-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff\U00010000-\U0010ffff]')
_YAML_NAMED = {"\0": "0", "\x07": "a", "\x08": "b", "\t": "t", "\n": "n", "\x0b": "v", "\x0c": "f", "\r": "r",
               "\x1b": "e", '"': '"', "\\": "\\", "\x85": "N", "\xa0": "_", "\u2028": "L", "\u2029": "P"}


def _yaml_escape(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    named = _YAML_NAMED.get(char)
    if named is not None:
        return "\\" + named
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


def _hex_upper(match: re.Match[str]) -> str:
    return f"&#x{ord(match[0]):X};"


def _hex_lower(match: re.Match[str]) -> str:
    return f"&#x{ord(match[0]):x};"


@lru_cache(maxsize=4096)
def _document_forms(value: str) -> tuple[str, ...]:
    """The forms the standard serializers write a value in, besides its JSON ones (`_data_forms`): each data
    form escaped for XML/HTML (`_MARKUPS`) with non-ASCII characters as they are or as numeric references
    (ElementTree with encoding="us-ascii": `&#233;`; `&#xE9;`), and in a CSV field (`"` doubled); the value
    itself in a YAML scalar (double-quoted, single-quoted), as Python's `repr()` and `ascii()` write it, and
    URL-encoded (urllib's quote and quote_plus, JavaScript's encodeURIComponent). Derived from the value once
    (the cache): a document is then scanned for plain strings, never decoded. A value YAML folds over lines
    (past its width, or a line break in a single-quoted scalar) has no one form: not matched."""
    if _URL_SAFE.fullmatch(value):  # (most short codes and ids: no serializer escapes them)
        return ()
    forms: list[str] = []
    for text in _data_forms(value):
        forms.append(text.replace('"', '""'))
        # (the tables are dicts: `translate` looks every character up, so only when it changes something)
        for table in _MARKUPS if _MARKED.search(text) else _MARKUPS[:1]:
            escaped = text.translate(table) if table else text
            forms.append(escaped)
            if not escaped.isascii():
                forms += [escaped.encode("ascii", "xmlcharrefreplace").decode(),
                          _NON_ASCII.sub(_hex_upper, escaped), _NON_ASCII.sub(_hex_lower, escaped)]
    if not value.isascii() or not value.isprintable() or _QUOTED.search(value):
        forms += [_YAML_ASCII.sub(_yaml_escape, value), _YAML_UNICODE.sub(_yaml_escape, value),
                  value.replace("'", "''"), repr(value)[1:-1], ascii(value)[1:-1]]  # (`str(row)`, `ascii(row)`)
    # (a lone surrogate, which UTF-8 cannot hold, percent-encoded as Python's "surrogatepass" writes it)
    encoded = quote(value, safe="", errors="surrogatepass")
    forms += [encoded, encoded.replace("%20", "+")]  # (quote_plus: a space is the one `%20`)
    if "/" in value:
        forms.append(quote(value, errors="surrogatepass"))
    if _URI_KEPT.search(value):
        forms.append(quote(value, safe="!'()*", errors="surrogatepass"))  # encodeURIComponent
    return tuple(dict.fromkeys(f for f in forms if f and f != value))


def _renderings(value: Any) -> list[str]:
    """The texts a value that is no string is commonly written as: `str()`, its JSON form, a date's ISO forms
    (with and without its offset), a number's forms (`_number_forms`: grouped `85,000`, money `.2f`...)."""
    forms = [str(value)]
    with suppress(Exception):  # a value JSON cannot write: its other forms still count
        forms.append(to_json(value).decode().strip('"'))
    if isinstance(value, datetime | time):
        forms.append(value.isoformat())
        if value.tzinfo is not None:  # written without its offset (`strftime`, a naive column)
            naive = value.replace(tzinfo=None)
            forms += [str(naive), naive.isoformat()]
    elif isinstance(value, date):
        forms.append(value.isoformat())
    elif isinstance(value, Enum):
        forms += _renderings(value.value) if not isinstance(value.value, str) else [value.value]
        forms.append(value.name)
    elif _finite(value):
        forms += _number_forms(value)
    elif isinstance(value, UUID):
        forms.append(value.hex)
    elif isinstance(value, bytes):
        forms.append(value.decode("utf-8", "replace"))
    return forms


def _scrub_all(text: str, needles: list[str], censor: str) -> str:
    """`text` with every occurrence of every needle censored (overlapping ones as one: no part of either is
    left)."""
    return _written(text, _hits(text, needles), censor)


def scrubber(removed: list[Any], censor: Any = DEFAULT_CENSOR) -> Callable[[str], str]:
    """A function censoring the removed values out of a text sent later (an attached document). It takes
    `removed` over (a presenter's own list of one response, which nothing changes afterwards)."""
    return Scrubber(removed, censor)


def _nothing() -> frozenset[str]:
    return frozenset()


def guard(response: ToolResponse, removed: list[Any], censor: Any = DEFAULT_CENSOR, *, pretty: bool = False,
          keep: Callable[[], frozenset[str]] = _nothing) -> None:
    """Censor the removed values out of every block of a presenter's response, in place.

    The first text block is the serialized data: it is rebuilt from the guarded data, never edited as text
    (editing could break its JSON). `keep()` gives the strings the data's schema fixes (enum members),
    asked for only when the data holds a removed value.
    """
    texts = response.texts
    if _clean(texts, removed):
        return
    exact, every, amounts = _values(removed)
    if not exact and not every:
        return
    mask = censor if isinstance(censor, str) else DEFAULT_CENSOR
    if every and len(texts) > 1:
        found = _forms_in(every, texts[1:], amounts)
        if found:
            texts[1:] = _scrub_blocks(texts[1:], found, mask)
            _scrub_view(response.view, found, mask)
    data = response.view.data
    if data is None or isinstance(data, str):
        return
    if not _contains(texts[0], every, exact):
        return
    needles = [form for value in every for form in _data_forms(value)]
    scrubbed = _scrub_data(data, exact, needles, keep(), mask)
    if scrubbed is data:  # found in a key, or in a string the schema fixes: nothing to rewrite
        return
    texts[0] = dumps(scrubbed, pretty=pretty)
    response.view.data = scrubbed
    response.view.rewritten = True


def scrub_blocks(texts: list[str], removed: list[Any], censor: Any = DEFAULT_CENSOR) -> list[str]:
    """`texts` (blocks other than the data block) with every form of the long removed values censored, as
    `guard` censors the blocks of a response."""
    _, every, amounts = _values(removed)
    mask = censor if isinstance(censor, str) else DEFAULT_CENSOR
    found = _forms_in(every, texts, amounts)
    return _scrub_blocks(texts, found, mask) if found else texts


def _scrub_blocks(texts: list[str], found: list[str], mask: str) -> list[str]:
    """Each of `texts` censored (`_scrub_block`) of the needles it may hold (`_spread`: a list's rows may each
    have a UI block)."""
    return [_scrub_block(text, held, mask) if held else text
            for text, held in zip(texts, _spread(texts, found, mask), strict=True)]


def _forms_in(every: list[str], texts: list[str], amounts: Amounts) -> list[str]:
    """The forms of the removed values that `texts` hold, every form of such a value (the structured view
    holds it unescaped), a number's as Python writes it (`_amount_forms`); one scan of them all per form,
    and most find nothing (one scan for all the forms of many values in a long text). A form is looked for
    whatever its letter case (its key in the folded blocks: `_fold`), and found as written."""
    blocks = texts[0] if len(texts) == 1 else "\n".join(texts)
    forms = [_variants(value) for value in every]
    scan, keys, _ = _scanned(blocks, [form for each in forms for form in each])
    found: list[str] = []
    at = 0  # (each value's keys: the next len(its forms) of `keys`)
    if _many(len(every), len(scan)):
        held = _Search(keys).found(scan)
        for each in forms:
            if not held.isdisjoint(keys[at:at + len(each)]):
                found += each
            at += len(each)
    else:
        for each in forms:
            if any(key in scan for key in keys[at:at + len(each)]):
                found += each
            at += len(each)
    if amounts:
        found += _amount_forms(amounts, blocks)
    return _Needles(sorted(set(found), key=len, reverse=True))


def _clean(texts: list[str], removed: list[Any]) -> bool:
    """True when the guard would find nothing to censor: no removed string in any form in any block (one
    scan of all the blocks per form) and no short one as a whole string of the data block. The common
    case, decided without building the guard's sets; anything else (numbers, nested values, a form found
    somewhere) takes the full path, which decides for itself."""
    if len(removed) >= _FEW and _many(len(removed), sum(map(len, texts))):
        return _clean_many(texts, removed)
    whole: str | None = None  # the blocks folded (`_fold`): the forms' keys are looked for
    for value in removed:
        if value.__class__ is not str:
            if value is None or value is True or value is False:
                continue  # never guarded
            return False
        if whole is None:
            if not value:
                continue
            # A form found only across a join (a value holding the separator) is a false alarm: the full
            # path looks block by block. A form in a block is always in the join.
            whole = _fold("\n".join(texts))
            if whole is None:  # (a text that cannot be folded in place: the full path matches it exactly)
                return False
        forms = _long_forms.get(value)  # known: a string of MIN_LENGTH or more
        if forms is None:
            if not value:
                continue
            if len(value) < MIN_LENGTH:  # (as a whole string of the data block: the join's first text)
                if texts and whole.find(_key(_quoted(value)), 0, len(texts[0])) >= 0:
                    return False
                continue
            forms = _forms(value)
        if forms.__class__ is str:  # plain text: its one form is itself
            if forms in whole:
                return False
            continue
        for form in forms:
            if form in whole:
                return False
    return True


def _clean_many(texts: list[str], removed: list[Any]) -> bool:
    """`_clean` of many values (a list's rows) in a long text: all their forms' keys looked for in one scan of
    the folded text."""
    whole = _fold("\n".join(texts))
    if whole is None:  # (a text that cannot be folded in place: the full path matches it exactly)
        return False
    forms: list[str] = []
    quoted: set[str] = set()  # the short values as whole strings of the data block
    for value in removed:
        if value.__class__ is not str:
            if value is None or value is True or value is False:
                continue  # never guarded
            return False
        if len(value) >= MIN_LENGTH:
            known = _long_forms.get(value) or _forms(value)
            if isinstance(known, str):
                forms.append(known)
            else:
                forms += known
        elif value:
            quoted.add(_key(_quoted(value)))
    head = len(texts[0]) if texts else 0
    search = _Search(forms + list(quoted))
    long = set(forms)
    # (a short value counts in the data block alone: the join's first text)
    return not any(needle in long or at + len(needle) <= head for at, needle in search.occurrences(whole))


# The keys (`_key`) of the forms of the long removed strings met lately (`_variants`, a Decimal's text's number
# forms too; a plain one as its one key), read by `_clean` as a plain dict: a value's forms are looked up on
# every guarded response, and a dict read costs less than the LRU cache's call. Emptied when full.
_long_forms: dict[str, str | tuple[str, ...]] = {}


def _forms(value: str) -> str | tuple[str, ...]:
    if len(_long_forms) >= 4096:
        _long_forms.clear()
    forms = _variant_keys(value)
    if _DECIMAL_TEXT.fullmatch(value):  # a Decimal's text: a block may hold it as a callback formatted it
        forms = tuple(dict.fromkeys((*forms, *map(_key, _text_number_forms(value)))))
    known = _long_forms[value] = forms[0] if len(forms) == 1 else forms
    return known


@lru_cache(maxsize=4096)
def _variant_keys(value: str) -> tuple[str, ...]:
    """The keys (`_key`) of a value's forms (`_variants`)."""
    return tuple(dict.fromkeys(_key(form) for form in _variants(value)))


def _contains(text: str, every: list[str], exact: Any) -> bool:
    """Whether the data block's text holds a long value (`every`) in a form JSON writes it in, or a removed
    string (`exact`) as a whole JSON string, whatever its letter case (keys in the folded text)."""
    scan = _fold(text)
    if scan is None:  # (a text that cannot be folded in place: the data's own scrub decides)
        return True
    keys = _folded([form for value in every for form in _head_forms(value)])
    if _many(len(keys) + len(exact), len(scan)):
        return _Search([*keys, *(_key(_quoted(value)) for value in exact)]).any(scan)
    for key in keys:
        if key in scan:
            return True
    return any(_key(_quoted(value)) in scan for value in exact)


# -- errors a presenter's callback raised ----------------------------------------------------------------


def _numbers(removed: list[Any]) -> tuple[set[Any], set[str]]:
    """The removed numbers (not booleans), at any depth of the removed values, and their texts."""
    found: set[Any] = set()
    stack = list(removed)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
        elif _number(value):
            found.add(value)
    return found, {str(value) for value in found}


def _number(value: Any) -> bool:
    """A number that can be compared and hashed: not a boolean, not NaN (a signaling one cannot be hashed)."""
    if isinstance(value, Decimal):
        return not value.is_nan()
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


# What a callback may raise that the client reads: its texts leave without the guard (they are no block).
CARRIED = (ToolError, ValidationFailed, HTTPException)


def scrub_error(exc: BaseException, removed: list[Any], censor: Any = DEFAULT_CENSOR) -> None:
    """Censor the removed values out of what an error (`CARRIED`) tells the client, in place: a ToolError's
    message, recovery, details and actions, a ValidationFailed's fields, an HTTPException's detail and
    header values. Its code, status and severity stay. Matched as the guard matches the blocks: a long
    value wherever it occurs, a short one as a whole text; a number (`details={"ssn": 987654321}`) equal to a
    removed value, or written as one is, is replaced by the censor text too."""
    exact, every, amounts = _values(removed)
    numbers, texts = _numbers(removed)
    if not exact and not every and not numbers:
        return
    exact |= texts  # a removed number's text, given alone ("ssn": "42")
    exact = {_key(value) for value in exact}  # (a string equal to one whatever its letter case)
    needles = _Needles(sorted({form for value in every for form in _variants(value)}.union(*amounts), key=len,
                              reverse=True))
    mask = censor if isinstance(censor, str) else DEFAULT_CENSOR

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return mask if _key(value) in exact else _scrub_text(value, needles, mask)
        if isinstance(value, dict):  # (its keys too: an error's details are no schema's structure)
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if _number(value):
            # the error leaves as JSON: a number is written as its text, and 42 == 42.0 == Decimal(42)
            return mask if value in numbers or _key(str(value)) in exact else value
        return value

    clean_error(exc, clean)


def clean_error(exc: BaseException, clean: Callable[[Any], Any]) -> None:
    """Apply `clean` to everything an error (`CARRIED`) tells the client, in place: a ToolError's message,
    recovery, details and actions, a ValidationFailed's fields, an HTTPException's detail and header values.
    Its code, status and severity stay."""
    if isinstance(exc, ToolError):
        exc.message, exc.recovery = clean(exc.message), clean(exc.recovery)
        exc.details, exc.available_actions = clean(exc.details), clean(exc.available_actions)
        exc.args = tuple(clean(a) for a in exc.args)
    elif isinstance(exc, ValidationFailed):
        exc.fields = [(clean(name), clean(message)) for name, message in exc.fields]
        exc.message = clean(exc.message)
        if "recovery" in vars(exc):
            exc.recovery = clean(exc.recovery)
        exc.args = tuple(clean(a) for a in exc.args)
    elif isinstance(exc, HTTPException):
        exc.detail = clean(exc.detail)
        if exc.headers:
            exc.headers = {k: clean(v) for k, v in exc.headers.items()}
