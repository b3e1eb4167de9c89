"""Round 7 (quad): the egress guard's cost grows with the text and the removed values, not with their product.

A list presented with `redact_pii` removes one value a row, and each was looked for in the whole response
(`form in whole`, one scan a value: 16,000 rows took 3 s of event-loop time). Many values in a long text
are now looked for in one scan (`censor._Search`, an Aho-Corasick automaton). The tests count work (no
timing): the characters scanned and the needles looked for grow with the rows, never with their square;
a small response never builds a scan; and the scan gives the same result as the loops it replaces
(hypothesis: random texts and needles, overlapping and nested ones, numbers, markup, a censor that a
needle shares characters with, a lone surrogate), checked against the loops as they were (copied below).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfusion import Presenter, censor, suggest, ui
from mcpfusion.censor import (
    _NUMERIC,
    _grouping,
    _markup,
    _merged_spans,
    _token,
    _written,
    guard,
    scrub_blocks,
    scrub_error,
    scrubber,
)
from mcpfusion.errors import ToolError
from mcpfusion.response import Suggestion, assemble

# -- the loops as they were before the one-scan path (the reference for the same results) ------------------
# (matching whatever the letter case since the guard does, `censor._key`: each needle lower-cased looked for in
# the text lower-cased, spans replaced in the text; ALPHABET lowers in place, character by character)


def _replace(text: str, needle: str, censor_text: str) -> str:
    """`text.replace(needle, censor_text)` whatever the letter case."""
    low, key = text.lower(), needle.lower()
    spans: list[tuple[int, int]] = []
    at = low.find(key)
    while at >= 0:
        spans.append((at, at + len(key)))
        at = low.find(key, at + len(key))
    return _written(text, spans, censor_text)


def old_scrub_text(text: str, needles: list[str], censor_text: str) -> str:
    for needle in needles:
        if needle.lower() in text.lower():
            if _NUMERIC.fullmatch(needle):
                return old_scrub_all(text, needles, censor_text)
            text = _replace(text, needle, censor_text)
    return text


def old_hits(text: str, needles: list[str]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    text, needles = text.lower(), [needle.lower() for needle in needles]
    for needle in needles:
        at = text.find(needle)
        sep = _grouping(needle) if at >= 0 and _NUMERIC.fullmatch(needle) else None
        while at >= 0:
            found.append((at, at + len(needle)) if sep is None else _token(text, at, at + len(needle), sep))
            at = text.find(needle, at + 1)
    return _merged_spans(found)  # (the merge is not what changed: the library's own)


def old_outside(spans: list[tuple[int, int]], kept: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in spans:
        for k_start, k_end in kept:
            if k_end <= start or k_start >= end:
                continue
            if k_start > start:
                out.append((start, k_start))
            start = max(start, k_end)
        if start < end:
            out.append((start, end))
    return out


def old_scrub_all(text: str, needles: list[str], censor_text: str) -> str:
    return _written(text, old_hits(text, needles), censor_text)


def old_scrub_block(text: str, needles: list[str], censor_text: str) -> str:
    if not any(needle.lower() in text.lower() for needle in needles):
        return text
    kept = _markup(text)
    if not kept:
        return old_scrub_text(text, needles, censor_text)
    return _written(text, old_outside(old_hits(text, needles), kept), censor_text)


# -- forcing either path -------------------------------------------------------------------------------------


def one_scan(m: pytest.MonkeyPatch) -> None:
    """Every search takes the one-scan path, however few the needles and short the text."""
    m.setattr(censor, "_FEW", 1)
    m.setattr(censor, "_LONG", 0)


def loops(m: pytest.MonkeyPatch) -> None:
    """Every search takes the loops, however many the needles."""
    m.setattr(censor, "_FEW", 10**12)


# -- the same results ----------------------------------------------------------------------------------------

# Characters that make needles overlap, nest and repeat, numbers with their separators, the censor's own
# characters, markup's, non-ASCII (indexes are characters) and a lone surrogate (no UTF-8 for it).
ALPHABET = "aab[]REDACT19,._-: é\n\ud800"
CENSORS = ["[REDACTED]", "", "*", "D]a", "a[R", "aa"]
needle_lists = st.lists(st.text(ALPHABET, min_size=1, max_size=6), max_size=8)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[str], str]:
    needles = draw(needle_lists)
    if draw(st.booleans()):
        needles.sort(key=len, reverse=True)  # as the guard orders them
    pieces = st.text(ALPHABET, max_size=4) | st.sampled_from(needles or ["a"])
    text = "".join(draw(st.lists(pieces, max_size=14)))
    return text, needles, draw(st.sampled_from(CENSORS))


SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(cases())
def test_one_scan_replaces_as_the_loop_did(case: tuple[str, list[str], str]) -> None:
    text, needles, mask = case
    with pytest.MonkeyPatch.context() as m:
        one_scan(m)
        assert censor._scrub_text(text, needles, mask) == old_scrub_text(text, needles, mask)
        assert censor._scrub_text(text, censor._Needles(needles), mask) == old_scrub_text(text, needles, mask)
        assert censor._hits(text, needles) == old_hits(text, needles)
        assert censor._scrub_all(text, needles, mask) == old_scrub_all(text, needles, mask)


def _blocks(draw: st.DrawFn, parts: st.SearchStrategy[str]) -> list[str]:
    """Blocks of the wire format (bullets, a suggestion's action, a title) and plain texts, of `parts`."""
    one = lambda: draw(parts).replace("\n", " ")  # noqa: E731 - (a bullet is one line)
    return [
        f"<domain_rules>\n- {one()}\n- {one()}\n</domain_rules>",
        f"<action_suggestions>\n- {one()}: {one()}\n- crm.call: {one()}\n</action_suggestions>",
        f'<ui_passthrough type="summary" title="{one()}">\n{draw(parts)}\n</ui_passthrough>',
        draw(parts),
        draw(parts),
    ]


@st.composite
def block_cases(draw: st.DrawFn) -> tuple[list[str], list[str], str]:
    needles = draw(needle_lists)
    pieces = st.text(ALPHABET, max_size=4) | st.sampled_from(needles or ["a"])
    parts = st.lists(pieces, max_size=8).map("".join)
    return _blocks(draw, parts), needles, draw(st.sampled_from(CENSORS))


@SETTINGS
@given(block_cases())
def test_one_scan_keeps_the_markup_as_the_loop_did(case: tuple[list[str], list[str], str]) -> None:
    """Each block alone, and the blocks spread over in one scan (`_spread`: each gets the needles it holds)."""
    texts, needles, mask = case
    expected = [old_scrub_block(text, needles, mask) for text in texts]
    with pytest.MonkeyPatch.context() as m:
        one_scan(m)
        assert [censor._scrub_block(text, needles, mask) for text in texts] == expected
        assert censor._scrub_blocks(texts, needles, mask) == expected
        spread = censor._spread(texts, needles, mask)
        assert [censor._scrub_text(t, held, mask) for t, held in zip(texts, spread, strict=True)] == [
            old_scrub_text(text, needles, mask) for text in texts]


spans = st.lists(st.integers(0, 40), max_size=16).map(lambda cuts: sorted(set(cuts)))


@SETTINGS
@given(spans, spans, st.data())
def test_outside_walks_both_lists_once_with_the_same_spans(cuts: list[int], kept_cuts: list[int],
                                                           data: st.DataObject) -> None:
    """`_outside` of the hits and the markup: one walk of both, the same spans as every pair looked at."""
    pairs = list(zip(cuts[::2], cuts[1::2], strict=False))
    kept = list(zip(kept_cuts[::2], kept_cuts[1::2], strict=False))
    if data.draw(st.booleans()):
        kept = [(s, s) for s, _ in kept]  # empty markup spans too
    assert censor._outside(pairs, kept) == old_outside(pairs, kept)


def _response(draw: st.DrawFn, parts: st.SearchStrategy[str]) -> Any:
    data = {"id": "inv_1", "email": "[REDACTED]", "rows": [draw(parts) for _ in range(3)], "n": 3}
    blocks = [ui.table(["Field", "Value"], [["Note", draw(parts)], ["Id", "inv_1"]]), ui.summary(draw(parts))]
    rules = [draw(parts), "Be brief."]
    suggestions = [Suggestion("billing.remind", draw(parts)), Suggestion(f"x {draw(parts)}", draw(parts))]
    return assemble(data, False, blocks, [draw(parts)], [], rules, suggestions)


REMOVED_VALUES = st.lists(st.text("ab[]é.,_19<&\"|\n ", min_size=1, max_size=7) | st.integers(1000, 10**7),
                          min_size=1, max_size=6)


@st.composite
def guarded(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    removed = draw(REMOVED_VALUES)
    texts = [v if isinstance(v, str) else f"{v:,}" if draw(st.booleans()) else str(v) for v in removed]
    pieces = st.text("ab[]é.,_19 ", max_size=4) | st.sampled_from(texts)
    return _response(draw, st.lists(pieces, max_size=6).map("".join)), removed


def _state(response: Any) -> tuple[Any, ...]:
    view = response.view
    return (response.texts, view.data, view.rewritten, view.system_rules, view.suggestions,
            [(b.content, b.title) for b in view.ui_blocks])


@SETTINGS
@given(guarded())
def test_the_guard_gives_the_same_response_either_way(case: tuple[Any, list[Any]]) -> None:
    """The whole guard (quick test, blocks, structured view, data), with one scan and with the loops."""
    response, removed = case
    scanned, looped = copy.deepcopy(response), copy.deepcopy(response)
    with pytest.MonkeyPatch.context() as m:
        one_scan(m)
        guard(scanned, copy.deepcopy(removed))
        blocks_scanned = scrub_blocks(response.texts[1:], copy.deepcopy(removed))
        document_scanned = scrubber(copy.deepcopy(removed))("\n".join(response.texts))
    with pytest.MonkeyPatch.context() as m:
        loops(m)
        guard(looped, copy.deepcopy(removed))
        blocks_looped = scrub_blocks(response.texts[1:], copy.deepcopy(removed))
        document_looped = scrubber(copy.deepcopy(removed))("\n".join(response.texts))
    assert _state(scanned) == _state(looped)
    assert blocks_scanned == blocks_looped
    assert document_scanned == document_looped


def test_a_lone_surrogate_is_scanned_as_any_character() -> None:
    """pyahocorasick takes any code point: a text holding a lone surrogate takes the one scan too."""
    needles = [f"v{i}\ud800x" for i in range(64)]
    text = "a\ud800" + "".join(f"[{n}]" for n in needles[::2]) * 2000
    assert censor._many(len(needles), len(text))
    scrubbed = censor._scrub_text(text, needles, "*")
    assert scrubbed == old_scrub_text(text, needles, "*")
    assert scrubbed.count("[*]") == 64_000 and "\ud800x" not in scrubbed


# -- the work grows with the rows --------------------------------------------------------------------------


class Counted(censor._Search):
    """A `_Search` that counts its work: the needles it was built of and the characters it scanned."""

    needles = 0
    scanned = 0
    built = 0

    def __init__(self, needles: Any) -> None:
        needles = list(needles)
        Counted.needles += len(needles)
        Counted.built += 1
        super().__init__(needles)

    def occurrences(self, text: str) -> Iterator[tuple[int, str]]:
        Counted.scanned += len(text)
        return super().occurrences(text)


def _count(m: pytest.MonkeyPatch) -> dict[str, int]:
    """The guard's work from now on: scans (as `Counted`) and the loops' needles x characters (`_many`
    declined: one `in` per needle)."""
    work = {"loops": 0}
    Counted.needles = Counted.scanned = Counted.built = 0
    m.setattr(censor, "_Search", Counted)
    many = censor._many

    def counted_many(needles: int, chars: int) -> bool:
        taken = many(needles, chars)
        if not taken:
            work["loops"] += needles * chars
        return taken

    m.setattr(censor, "_many", counted_many)
    return work


def contacts(n: int) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "name": f"Customer number {i}", "email": f"person{i}@example.com",
             "note": f"reach me at person{i}@example.com"} for i in range(n)]


PROBE = Presenter("contact").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])
# Copies of each row's email everywhere the guard looks: the data (a note), a UI block and a suggestion per
# row, and a table of the list.
COPIES = (Presenter("contact_copies").schema({"id": str, "name": str, "email": str, "note": str})
          .redact_pii(["email"])
          .ui(lambda c: ui.summary(f"Contact {c['email']}"))
          .suggest(lambda c: suggest("crm.mail", f"Write to {c['email']}"))
          .collection_ui(lambda items: ui.table(["id", "email"], [[i["id"], i["email"]] for i in items])))


def _work(presenter: Presenter, n: int) -> tuple[int, int, str]:
    """(the guard's work for `n` rows: characters scanned, needles built and the loops' work; the wire)."""
    data = contacts(n)
    with pytest.MonkeyPatch.context() as m:
        loops_work = _count(m)
        wire = "\n".join(presenter.present(data).texts)
        return Counted.scanned + Counted.needles + loops_work["loops"], Counted.built, wire


@pytest.mark.parametrize("presenter", [PROBE, COPIES], ids=["probe", "copies"])
def test_the_guard_work_grows_with_the_rows_not_their_square(presenter: Presenter) -> None:
    """The probe (each row's email removed, found nowhere) and a list copying each email into the data, a UI
    block, a suggestion and a table: 4x the rows is about 4x the work (it was 16x: each value a scan of the
    whole response), with a bounded number of scans."""
    small, small_builds, _ = _work(presenter, 1000)
    large, large_builds, wire = _work(presenter, 4000)
    assert large <= 5 * small, (small, large)
    assert large_builds <= small_builds <= 12, (small_builds, large_builds)
    assert "@example.com" not in wire  # (every copy censored)


def test_a_long_list_is_checked_in_one_scan() -> None:
    """The quick test of the probe's response: one scan, of as many needles as rows."""
    data = contacts(2000)
    for row in data:
        del row["note"]
    with pytest.MonkeyPatch.context() as m:
        work = _count(m)
        PROBE.present(data)
    assert Counted.built == 1 and Counted.needles == 2000
    assert work["loops"] == 0


def test_a_small_response_builds_no_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handful of values in a few KB (the presenter's hot path) keeps the plain loops: no automaton."""

    def refused(*_: Any) -> None:
        raise AssertionError("a small response built a scan")

    monkeypatch.setattr(censor, "_Search", refused)
    answer = COPIES.present(contacts(5))
    assert "@example.com" not in "\n".join(answer.texts)
    assert not censor._many(31, 10**9) and not censor._many(10**6, 4000)


def test_an_error_quoting_many_values_is_censored_in_one_scan() -> None:
    """A callback's error quoting every row's value: censored as before, its needles scanned once."""
    removed = [f"person{i}@example.com" for i in range(3000)]
    message = "failed for " + ", ".join(removed)
    exc = ToolError("X_FAILED", message)
    with pytest.MonkeyPatch.context() as m:
        _count(m)
        scrub_error(exc, removed, "[REDACTED]")
        assert Counted.built == 1
    assert "@example.com" not in exc.message
    assert exc.message == old_scrub_text(message, sorted(removed, key=len, reverse=True), "[REDACTED]")
