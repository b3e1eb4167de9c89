"""Round 7 (censor4): the one-pass search's automaton is bounded by the needles' count, not their length.

`_Search` added every form of every long removed value whole: 500 rows of a 2,000-character redacted note
holding é < " & ' and line breaks (20-30 forms each, each as long as the note) made an automaton of their
total length, 1.5 GB and 20 s where the loops took 1 s. A needle longer than `censor._HEAD` is now added by
its head and confirmed where the head is found (`censor._confirmed`), by a search of the text when checking
would cost more. The tests count work, never time: the automaton's nodes, the characters compared; and the
results are the loops' (hypothesis, with a tiny head so that short needles exercise the long-needle path).
"""

from __future__ import annotations

import copy
import html
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpfusion import Presenter, censor, ui
from mcpfusion.censor import scrub_error, scrubber
from mcpfusion.errors import ToolError
from tests.test_round7_quad import (
    ALPHABET,
    CENSORS,
    SETTINGS,
    loops,
    old_hits,
    old_scrub_all,
    old_scrub_block,
    old_scrub_text,
    one_scan,
)


def brute(text: str, needles: list[str]) -> set[tuple[int, str]]:
    """Every occurrence of every needle, overlapping ones too: (start, needle)."""
    return {(at, n) for n in set(needles) for at in range(len(text)) if text.startswith(n, at)}


class Sized(censor._Search):
    """A `_Search` that records each automaton's node count and distinct needles."""

    built: list[tuple[int, int]] = []

    def __init__(self, needles: Any) -> None:
        super().__init__(needles)
        nodes = self._automaton.get_stats()["nodes_count"] if self._automaton is not None else 0
        Sized.built.append((nodes, len(self.places)))


def _bounded() -> None:
    """Each automaton built is at most a head a distinct needle (+ its root)."""
    assert Sized.built, "no scan was built"
    for nodes, needles in Sized.built:
        assert nodes <= censor._HEAD * needles + 1, (nodes, needles)


# -- the probe: long values with markup-escaped forms ------------------------------------------------------

ALPHA = "aé<\"&'\n "


def notes(n: int, size: int) -> list[str]:
    rng = random.Random(1)
    return ["".join(rng.choice(ALPHA) for _ in range(size)) + str(i) for i in range(n)]


def test_the_automaton_holds_heads_not_whole_long_values() -> None:
    """Every block and document form of 40 notes of 1,000 characters: the automaton is ~ a head a form, where
    it was their total length (~30x more here, growing with the notes' length)."""
    values = notes(40, 1000)
    needles = sorted({f for v in values for f in (*censor._variants(v), *censor._document_forms(v))},
                     key=len, reverse=True)
    total = sum(map(len, needles))
    search = censor._Search(needles)
    assert search._automaton is not None
    nodes = search._automaton.get_stats()["nodes_count"]
    assert nodes <= censor._HEAD * len(needles) + 1 < total // 20, (nodes, len(needles), total)
    text = "x" + html.escape(values[3]) + "y" + censor._escaped(values[7])
    assert search.found(text) >= {html.escape(values[3]), censor._escaped(values[7])}
    assert search.found(text) == {n for _, n in brute(text, needles)}


PROBE = (Presenter("r4").schema({"id": str, "secret": str}).redact_pii(["secret"])
         .ui(lambda r: ui.summary("ok " + r["id"] + " " + r["secret"])))  # (a copy in each row's block)


def test_the_probe_guard_builds_small_automatons_and_censors_as_the_loops() -> None:
    """The probe's shape (long redacted notes with é < " & ' and breaks, one copied into each row's UI block)
    through the guard and an attached document: each automaton bounded, the same output as the loops, no
    note left."""
    rows = [{"id": f"r{i}", "secret": s} for i, s in enumerate(notes(200, 500))]
    document = "<rows>" + "".join(f"<n>{html.escape(r['secret'])}</n>" for r in rows[::7]) + "</rows>"
    with pytest.MonkeyPatch.context() as m:
        Sized.built = []
        m.setattr(censor, "_Search", Sized)
        scanned = PROBE.present(copy.deepcopy(rows)).texts
        scanned_document = scrubber([r["secret"] for r in rows])(document)
        _bounded()
    with pytest.MonkeyPatch.context() as m:
        loops(m)
        looped = PROBE.present(copy.deepcopy(rows)).texts
        looped_document = scrubber([r["secret"] for r in rows])(document)
    assert scanned == looped
    assert scanned_document == looped_document
    wire = "\n".join(scanned)
    assert all(censor._escaped(r["secret"]) not in wire and r["secret"] not in wire for r in rows)
    assert scanned_document.count("[REDACTED]") == len(rows[::7])


def test_an_error_quoting_many_long_values_is_censored_with_a_bounded_automaton() -> None:
    values = notes(60, 400)
    exc = ToolError("X_FAILED", "failed: " + " | ".join(values))
    with pytest.MonkeyPatch.context() as m:
        Sized.built = []
        m.setattr(censor, "_Search", Sized)
        scrub_error(exc, list(values), "[REDACTED]")
        _bounded()
    assert exc.message == "failed: " + " | ".join(["[REDACTED]"] * 60)


# -- a head found all over: confirmed by a search, never more work than the loops ------------------------


class Counting(str):
    """A text that counts the characters its searches compare: `startswith` the needle's, `find` those up to
    the end of what it finds (the rest of the text when it finds nothing)."""

    compared = 0

    def startswith(self, prefix: Any, *args: Any) -> bool:
        Counting.compared += len(prefix)
        return super().startswith(prefix, *args)

    def find(self, sub: Any, start: Any = 0, *args: Any) -> int:
        at = super().find(sub, start, *args)
        Counting.compared += len(self) - start if at < 0 else at + len(sub) - start
        return at


def loops_work(text: Counting, needles: list[str], every: bool) -> int:
    """The characters the loops compare: one search a needle (`in`), or each occurrence found (`_hits`)."""
    Counting.compared = 0
    for needle in needles:
        at = text.find(needle)
        while every and at >= 0:
            at = text.find(needle, at + 1)
    return Counting.compared


def test_a_head_found_all_over_costs_no_more_than_the_loops() -> None:
    """40 long needles sharing one head, in a text that is that head's character over and over: checking each
    at every place the head is found would compare ~needles x text x needle; the search compares no more than
    the loops (one search a needle to tell which are held, each occurrence found to censor them), and finds
    the same."""
    needles = [f"{'a' * 100}{i}é" for i in range(38)] + ["a" * 120, "a" * 40]
    text = Counting("a" * 20_000 + "".join(needles[::5]) + "a" * 200)
    search = censor._Search(needles)
    assert search._automaton is not None
    assert search._automaton.get_stats()["nodes_count"] <= censor._HEAD + 1  # (one head: "a" x 32)
    Counting.compared = 0
    occurrences = set(search.occurrences(text))
    compared = Counting.compared
    assert compared <= 2 * loops_work(text, needles, True), compared
    assert occurrences == brute(str(text), needles)
    Counting.compared = 0
    assert search.found(text) == {n for _, n in occurrences}
    assert search.any(text)
    compared = Counting.compared
    assert compared <= 2 * loops_work(text, needles, False), compared


def test_long_needles_sharing_a_head_with_a_short_one() -> None:
    """A needle that is another's head, long needles overlapping and nested, a lone surrogate past the head."""
    head = "h" * censor._HEAD
    needles = [head, head + "x", head + "xy\ud800", head + "y", "hh" + head, head[:-1]]
    text = "z" + head + "xy\ud800" + head + "y" + "hh" + head + "x" + head[:5]
    search = censor._Search(needles)
    assert set(search.occurrences(text)) == brute(text, needles)
    assert search.starts(text) == {n: sorted(a for a, m in brute(text, needles) if m == n)
                                   for n in {m for _, m in brute(text, needles)}}
    assert not search.any("z" + head[:-2]) and search.found("q" + head + "x") == {head, head + "x", head[:-1]}


# -- the same results as the loops, long needles exercised by a tiny head -------------------------------

needle_lists = st.lists(st.text(ALPHABET, min_size=1, max_size=8), max_size=8)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, list[str], str, int]:
    needles = draw(needle_lists)
    if draw(st.booleans()):
        needles.sort(key=len, reverse=True)  # as the guard orders them
    pieces = st.text(ALPHABET, max_size=4) | st.sampled_from(needles or ["a"])
    text = "".join(draw(st.lists(pieces, max_size=14)))
    return text, needles, draw(st.sampled_from(CENSORS)), draw(st.integers(1, 4))


@SETTINGS
@given(cases())
def test_heads_find_and_replace_as_the_loops_did(case: tuple[str, list[str], str, int]) -> None:
    text, needles, mask, head = case
    with pytest.MonkeyPatch.context() as m:
        one_scan(m)
        m.setattr(censor, "_HEAD", head)
        search = censor._Search(needles)
        occurrences = list(search.occurrences(text))
        assert len(occurrences) == len(set(occurrences))
        assert set(occurrences) == brute(text, needles)
        assert search.found(text) == {n for _, n in occurrences}
        assert search.any(text) == bool(occurrences)
        assert censor._scrub_text(text, needles, mask) == old_scrub_text(text, needles, mask)
        assert censor._hits(text, needles) == old_hits(text, needles)
        assert censor._scrub_all(text, needles, mask) == old_scrub_all(text, needles, mask)
        lines = text.split("\n")
        assert censor._scrub_blocks(lines, needles, mask) == [old_scrub_block(t, needles, mask) for t in lines]
