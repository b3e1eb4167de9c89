"""Round 7 (censor, 3): a redacted Decimal formatted as an amount is censored; a number token is widened once,
however many times a needle occurs in it; per-row suggestions are told apart in one pass.

1. A Decimal field reaches the callbacks and the redaction as its JSON text (`"12345.50"`): a removed string
   that is a Decimal's text gets a number's forms too (`12,345.50`, `float()`'s `12345.5`, `85,000`), the whole
   token censored, on every wire, in documents and in errors. A code with a leading zero or a short value
   brings none.
2. A long run of a redacted number's digits (a stored note, an attached document) is widened to its token
   once, not once per occurrence: the work is linear in the text.
3. A per-row suggest() with distinct suggestions costs no comparison of each new one with all the others:
   duplicates still go, in first-seen order; unhashable values are compared as before.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from mcpfusion import MCPFusion, Presenter, Tool, attach, censor, document, presenter, suggest, ui
from mcpfusion.censor import scrub_blocks, scrub_error, scrubber
from mcpfusion.errors import ToolError
from mcpfusion.response import Suggestion
from tests.wire_kit import every_wire

CENSOR = "[REDACTED]"
SHOWN = ("12345.50", "12,345.50", "12345.5", "12,345.5", "12_345.5")


def rule(text: str) -> str:
    return f"<domain_rules>\n- pay {text} now\n</domain_rules>"


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [c.get("text") or c.get("resource", {}).get("text", "") for c in content]


# -- 1. a redacted Decimal formatted as an amount ---------------------------------------------------------


def hr_app() -> Any:
    view = (Presenter("employee").schema({"id": str, "salary": Decimal}).redact_pii(["salary"])
            .rules(lambda e: [f"Salary band set for {Decimal(e['salary']):,.2f} EUR"])
            .ui(lambda e: ui.summary(f"Salary {Decimal(e['salary']):,} / {float(e['salary'])}"))
            .suggest(lambda e: [suggest("hr.get", f"Review {float(e['salary']):,}")]))
    hr = Tool("hr")

    @hr.action(readonly=True, returns=view)
    async def get(id: str) -> Any:
        """Get an employee."""
        row = {"id": id, "salary": Decimal("12345.50")}
        return attach(row, document(f"Salary {row['salary']:,.2f} ({float(row['salary'])})", "text/plain",
                                    uri="mem://slip"))

    return MCPFusion("hr", tools=[hr]).build_app()


async def test_a_redacted_decimal_formatted_as_an_amount_is_censored_on_every_wire() -> None:
    rest, modern, legacy = await every_wire(hr_app(), "hr", "get", {"id": "e1"})
    assert rest.status_code == 200, rest.text
    for result in (modern, legacy):
        blocks = texts(result["content"])
        joined = "\n".join(blocks)
        assert not [form for form in SHOWN if form in joined], joined
        assert CENSOR + "0" not in joined and CENSOR + "." not in joined, joined  # no partial token left
        assert "Salary [REDACTED] / [REDACTED]" in joined
        assert "- Salary band set for [REDACTED] EUR" in joined
        assert "- hr.get: Review [REDACTED]" in joined  # (the action name kept)
        assert blocks[-1] == "Salary [REDACTED] ([REDACTED])"  # the document
    assert not [form for form in SHOWN if form in rest.text], rest.text


def test_the_structured_view_censors_a_decimal_amount_too() -> None:
    view = (Presenter("v").schema({"id": str, "salary": Decimal}).redact_pii(["salary"])
            .rules(lambda e: [f"Band: above {Decimal(e['salary']):,.2f}"]))
    response = view.present({"id": "e1", "salary": Decimal("85000.00")})
    assert response.view.system_rules == ["Band: above [REDACTED]"]
    assert "85,000" not in "\n".join(response.texts)


DECIMAL_CASES = [
    ("12345.50", "12,345.50"), ("12345.50", "12345.5"), ("12345.50", "12,345.5"), ("12345.50", "12_345.5"),
    ("12345.50", "12_345.50"), ("85000", "85,000"), ("85000", "85000.00"), ("85000", "85,000.00"),
    ("85000", "85_000"), ("85000", "85000.0"), ("-12345.50", "-12,345.50"), ("1E+5", "100,000"),
    ("12345.50", "12345.500"),  # (a form not listed: its whole token goes)
]


@pytest.mark.parametrize(("text", "shown"), DECIMAL_CASES, ids=[f"{t}-{s}" for t, s in DECIMAL_CASES])
def test_each_amount_form_of_a_decimal_text_is_censored_in_a_block(text: str, shown: str) -> None:
    [censored] = scrub_blocks([rule(shown)], [text])
    assert censored == rule(CENSOR), (text, shown, censored)


def test_only_a_decimal_text_long_enough_brings_number_forms() -> None:
    """A code with a leading zero is no number's text, and a value of fewer significant digits than
    MIN_LENGTH (or its float's, `1e-05`) brings no form: their look-alikes stay."""
    blocks = [rule("1,234 and 0.5 and 1.0 and 1e-05 and 12.5")]
    assert scrub_blocks(blocks, ["01234", "0.50", "1.00", "0.00001", "12.50"]) == blocks
    assert censor._values(["01234", "abcd"])[2] == set()


def test_a_decimal_text_with_more_digits_than_a_float_holds_brings_no_float_form() -> None:
    """`float()` of 17 significant digits is another number: its repr is no form of the value."""
    forms = censor._text_number_forms("12345678901234.567")
    assert "12,345,678,901,234.567" in forms
    assert not [form for form in forms if "e+" in form or form == repr(float("12345678901234.567"))]


def test_a_guarded_response_holding_only_an_amount_form_is_not_taken_for_clean() -> None:
    """The quick check (`_clean`) looks for a Decimal's text in its number forms too."""
    assert not censor._clean(['{"salary":"[REDACTED]"}', rule("12,345.50")], ["12345.50"])
    assert censor._clean(['{"salary":"[REDACTED]"}', rule("12,345.49")], ["12345.50"])


def test_an_error_is_censored_of_a_decimal_texts_forms() -> None:
    error = ToolError("OVER_BUDGET", "salary 12,345.50 is over the band", recovery="ask about 12345.5")
    scrub_error(error, ["12345.50"])
    assert (error.message, error.recovery) == ("salary [REDACTED] is over the band", "ask about [REDACTED]")


def test_a_document_is_censored_of_a_decimal_texts_forms() -> None:
    csv = 'name,salary\nAda,"12,345.50"\nBob,12345.5\nEve,12%2C345.50\n'
    assert scrubber(["12345.50"])(csv) == 'name,salary\nAda,"[REDACTED]"\nBob,[REDACTED]\nEve,[REDACTED]\n'


# -- 2. a number token widened once ---------------------------------------------------------------------


def _count_tokens(m: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts `_token`'s calls and the characters of the tokens it widened."""
    work = {"calls": 0, "chars": 0}
    token = censor._token

    def counted(text: str, start: int, end: int, sep: str) -> tuple[int, int]:
        span = token(text, start, end, sep)
        work["calls"] += 1
        work["chars"] += span[1] - span[0]
        return span

    m.setattr(censor, "_token", counted)
    return work


@pytest.mark.parametrize("repeats", [100, 4000])
def test_a_long_run_of_a_numbers_digits_in_a_document_is_widened_once(repeats: int) -> None:
    text = "85000" * repeats
    with pytest.MonkeyPatch.context() as m:
        work = _count_tokens(m)
        assert scrubber([85000])(text) == CENSOR
    assert work["calls"] <= 2 and work["chars"] <= 2 * len(text), work  # (it was one a hit: `repeats`)


def test_a_long_run_of_a_numbers_digits_in_a_ui_block_is_widened_once() -> None:
    view = (Presenter("employee").schema({"id": str, "salary": int, "note": str}).redact_pii(["salary"])
            .ui(lambda e: ui.summary(f"Note: {e['note']}")))
    note = "85000" * 4000
    with pytest.MonkeyPatch.context() as m:
        work = _count_tokens(m)
        answer = "\n".join(view.present({"id": "e1", "salary": 85000, "note": note}).texts)
    assert "85000" not in answer.split("\n", 1)[1]  # (the data block holds the note: its own field)
    assert "Note: [REDACTED]" in answer
    assert work["calls"] <= 4 and work["chars"] <= 4 * len(note), work


def test_each_separate_token_is_still_widened() -> None:
    text = "85000.5 and 185000 and 85000,12 and x85000.00.5 " * 3
    with pytest.MonkeyPatch.context() as m:
        work = _count_tokens(m)
        out = scrubber([85000])(text)
    assert out == "[REDACTED] and [REDACTED] and [REDACTED],12 and x[REDACTED] " * 3
    assert work["calls"] == 12 + 3  # one a token a needle is in: `85000` in all 12, `85000.00` in 3


# -- 3. per-row suggestions told apart in one pass ----------------------------------------------------


def _count_comparisons(m: pytest.MonkeyPatch) -> dict[str, int]:
    work = {"eq": 0}
    eq = Suggestion.__eq__

    def counted(self: Suggestion, other: object) -> bool:
        work["eq"] += 1
        return eq(self, other)  # type: ignore[no-any-return]

    m.setattr(Suggestion, "__eq__", counted)
    return work


def test_distinct_per_row_suggestions_are_not_each_compared_with_all() -> None:
    view = Presenter("row").schema({"id": str}).suggest(lambda r: suggest("crm.get", f"Open {r['id']}"))
    rows = [{"id": f"c{i}"} for i in range(2000)]
    with pytest.MonkeyPatch.context() as m:
        work = _count_comparisons(m)
        suggestions = view.present(rows).view.suggestions
    assert [s.reason for s in suggestions] == [f"Open c{i}" for i in range(2000)]
    assert work["eq"] <= 4 * len(rows), work  # (it was each with each: ~2,000,000)


def test_equal_suggestions_go_in_first_seen_order_past_a_few() -> None:
    def each(row: dict[str, Any]) -> list[Any]:  # new, equal objects: none the same one
        return [suggest("crm.get", f"Open {row['id']}"), suggest("crm.list", "List all"),
                suggest("crm.get", f"Open c{int(row['id'][1:]) // 2}")]

    view = Presenter("row").schema({"id": str}).suggest(each)
    suggestions = view.present([{"id": f"c{i}"} for i in range(12)]).view.suggestions
    expected = [("crm.get", "Open c0"), ("crm.list", "List all")] + [("crm.get", f"Open c{i}") for i in range(1, 12)]
    assert [(s.action, s.reason) for s in suggestions] == expected


def test_unhashable_suggestions_are_compared_as_before() -> None:
    """Values the set cannot hold (a dict), among hashable ones and with one already in the target."""
    target: list[Any] = [{"action": "a.b", "reason": "r0"}, suggest("a.b", "kept")]
    rows = list(range(20))

    def each(i: int) -> list[Any]:
        return [{"action": "a.b", "reason": f"r{i % 7}"}, suggest("a.b", f"s{i % 5}"), suggest("a.b", "kept")]

    expected = list(target)
    for i in rows:  # (what `_merge_unique` makes of them: compared with each)
        presenter._merge_unique(expected, each(i))
    presenter._suggest_each(target, lambda i, _ctx: each(i), rows, None)
    assert target == expected
    assert [s["reason"] if isinstance(s, dict) else s.reason for s in target] == [
        "r0", "kept", "s0", "r1", "s1", "r2", "s2", "r3", "s3", "r4", "s4", "r5", "r6"]
