"""The egress guard censors a removed value whatever its letter case.

Two black-box testers wrote a customer's email upper-cased into an invoice line ("BILLING@CONTOSO-BAKERY.EXAMPLE"):
the support role read it back in every block, `structuredContent` and the PDF, while the exact copy was
censored. The guard now looks for each value's forms case-folded (`censor._key`) in the text case-folded in
place (`censor._fold`), and censors the spans found in the text as written.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any, Literal

import pytest

from mcpfusion import Presenter, Tool, censor, suggest, ui
from mcpfusion.censor import guard, scrub_error, scrubber
from mcpfusion.content import document
from mcpfusion.errors import ToolError
from mcpfusion.response import assemble

EMAIL = "billing@contoso-bakery.example"
UPPER = EMAIL.upper()
MIXED = "Billing@Contoso-Bakery.Example"
NAME = "Contoso Bakery Ltd"


def _lines(c: dict[str, Any]) -> Any:
    return ui.table(["description", "amount"], [[line["description"], line["amount"]] for line in c["lines"]],
                    title="Line items")


CUSTOMER = (
    Presenter("Customer")
    .schema({"id": str, "name": str, "email": str, "lines": list[dict[str, Any]], "note": str})
    .redact_pii(["email", "name"])
    .ui(lambda c: [_lines(c), ui.summary(f"Write to {c['email'].upper()} ({c['name'].swapcase()})")])
    .suggest(lambda c: [suggest("billing.remind", f"remind {c['email'].title()}")])
)


def _customer() -> dict[str, Any]:
    return {"id": "cus_0002", "name": NAME, "email": EMAIL, "note": f"cc {MIXED}, {NAME.upper()}",
            "lines": [{"description": UPPER, "amount": 1200}, {"description": EMAIL, "amount": 5}]}


def _leaks(text: str) -> list[str]:
    """The removed values `text` holds in any letter case."""
    low = text.lower()
    return [value for value in (EMAIL, NAME.lower()) if value in low]


def test_a_case_variant_is_censored_in_every_block_and_the_structured_data() -> None:
    response = CUSTOMER.present(_customer())
    wire = "\n".join(response.texts)
    assert not _leaks(wire), wire
    assert not _leaks(json.dumps(response.view.data)), response.view.data
    assert "Line items" in wire and "[REDACTED]" in response.texts[1]
    assert response.view.data["note"] == "cc [REDACTED], [REDACTED]"
    assert response.view.data["lines"][0]["description"] == "[REDACTED]"
    assert "billing.remind" in wire  # the action, a name, kept


async def test_no_path_carries_a_case_variant() -> None:
    from tests.firewall_kit import PATHS, app_for, every_path

    customers = Tool("customers", description="Customers")

    @customers.action(readonly=True, returns=CUSTOMER)
    async def get(id: str) -> dict[str, object]:
        """One customer."""
        return _customer()

    answers = await every_path(app_for(customers), "customers", "get", {"id": "cus_0002"})
    assert set(answers) == set(PATHS)
    for path, answer in answers.items():
        assert answer.error is None, (path, answer.raw)
        assert not _leaks(answer.raw), (path, answer.raw)
        if answer.data is not None:
            assert not _leaks(json.dumps(answer.data)), (path, answer.data)


def test_mixed_case_copies_each_censored_and_the_text_around_them_kept() -> None:
    presenter = (Presenter("c").schema({"id": str, "email": str}).redact_pii(["email"])
                 .ui(lambda c: ui.markdown(f"a {MIXED} b {UPPER} c {EMAIL} d bIlLiNg@CoNtOsO-bAkErY.eXaMpLe e")))
    block = presenter.present({"id": "x", "email": EMAIL}).texts[1]
    assert "a [REDACTED] b [REDACTED] c [REDACTED] d [REDACTED] e" in block, block


def test_a_copy_in_other_case_inside_a_longer_string_of_the_data_and_a_short_value_as_a_whole_string() -> None:
    presenter = (Presenter("c").schema({"id": str, "email": str, "region": str, "other": str, "note": str})
                 .redact_pii(["email", "region"]))
    data = presenter.present({"id": "x", "email": EMAIL, "region": "eu", "other": "EU",
                              "note": f"<{UPPER}>"}).view.data
    # A short value (under MIN_LENGTH) only as a whole string, whatever its case: "EU" for a removed "eu".
    assert data == {"id": "x", "email": "[REDACTED]", "region": "[REDACTED]", "other": "[REDACTED]",
                    "note": "<[REDACTED]>"}


def test_a_member_the_schema_fixes_stays_whatever_its_case() -> None:
    presenter = (Presenter("c").schema({"id": str, "status": Literal["ACTIVE", "CLOSED"], "code": str})
                 .redact_pii(["code"]))
    data = presenter.present({"id": "x", "status": "ACTIVE", "code": "active"}).view.data
    assert data == {"id": "x", "status": "ACTIVE", "code": "[REDACTED]"}


# -- many values: the one-scan path (`censor._Search`, `_spread`, `_replaced`) ---------------------------------


def _rows(n: int) -> list[dict[str, str]]:
    rows = [{"id": f"c{i}", "email": f"person{i}@example.com", "note": f"row {i} " + "x" * 120} for i in range(n)]
    rows[7]["note"] = f"forward to {rows[42]['email'].upper()} and {rows[3]['email'].title()}"
    return rows


ROWS = (Presenter("rows").schema({"id": str, "email": str, "note": str}).redact_pii(["email"])
        .ui(lambda r: ui.summary(f"{r['id']}: {r['note']} / {r['email'].upper()}")))


def test_many_rows_one_holding_another_rows_value_in_capitals() -> None:
    rows = _rows(80)
    response = ROWS.present(copy.deepcopy(rows))
    wire = "\n".join(response.texts).lower()
    assert censor._many(len(rows), len(wire))  # the one scan, not the loops
    assert not [r["email"] for r in rows if r["email"] in wire]
    assert response.view.data[7]["note"] == "forward to [REDACTED] and [REDACTED]"


def test_many_rows_give_the_loops_result() -> None:
    rows = _rows(80)
    scanned = ROWS.present(copy.deepcopy(rows))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(censor, "_FEW", 10**12)  # every search takes the loops
        looped = ROWS.present(copy.deepcopy(rows))
    assert scanned.texts == looped.texts and scanned.view.data == looped.view.data


@pytest.mark.parametrize("few", [1, 10**12])
def test_the_scan_and_the_loops_agree_on_a_text(few: int) -> None:
    needles = censor._Needles(sorted({f"Person{i}@Example.com" for i in range(60)} | {"85000"}, key=len,
                                     reverse=True))
    text = "x PERSON7@EXAMPLE.COM y person12@example.com Person59@example.COM z 85000.00 PERSON7"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(censor, "_FEW", few)
        m.setattr(censor, "_LONG", 0)
        assert censor._scrub_text(text, needles, "#") == "x # y # # z # PERSON7"
        assert censor._scrub_all(text, needles, "#") == "x # y # # z # PERSON7"
        assert censor._scrub_block(text, needles, "#") == "x # y # # z # PERSON7"
        assert censor._spread(text.split(" "), needles, "#")[1] != []


# -- markup kept ----------------------------------------------------------------------------------------------


def test_a_tag_or_an_action_name_equal_to_a_value_in_other_case_stays_intact() -> None:
    presenter = (
        Presenter("m").schema({"id": str, "tag": str, "action": str}).redact_pii(["tag", "action"])
        .rules(lambda r: [f"mind {r['tag'].upper()} here"])
        .ui(lambda r: ui.summary(f"see {r['tag'].upper()}"))
        .suggest(lambda r: [suggest("billing.remind", f"then {r['action'].upper()}")])
    )
    response = presenter.present({"id": "x", "tag": "domain_rules", "action": "billing.remind"})
    wire = "\n".join(response.texts)
    assert "<domain_rules>" in wire and "</domain_rules>" in wire, wire
    assert "- mind [REDACTED] here" in wire and "DOMAIN_RULES" not in wire, wire
    assert "- billing.remind: then [REDACTED]" in wire and "BILLING.REMIND" not in wire, wire
    assert "see [REDACTED]" in wire


def test_a_block_written_in_capitals_has_no_markup_kept() -> None:
    # Markup is told in the text as written: `<DOMAIN_RULES>` is no tag of the wire format.
    texts = ["{}", "<DOMAIN_RULES>\n- x\n</DOMAIN_RULES>"]
    assert censor.scrub_blocks(texts, ["domain_rules"]) == ["{}", "<[REDACTED]>\n- x\n</[REDACTED]>"]


# -- characters whose lower case is not one character in place ------------------------------------------------


def test_lower_case_moves_no_character_but_those_the_key_handles() -> None:
    # `censor._key` maps İ (lowered into two characters) and the final sigma (lowered by its context) itself:
    # Python's tables have no other such character. A new one would make `_fold` fall back to exact matching.
    grown = [c for c in map(chr, range(sys.maxunicode + 1)) if len(c.lower()) != 1]
    assert grown == ["\u0130"]
    contextual = [c for c in map(chr, range(0x10000)) if ("a" + c).lower()[1:] != c.lower()]
    assert contextual == ["\u03a3"]
    assert all(len(censor._key(c)) == 1 for c in map(chr, range(0x10000)))


def test_letters_of_one_capital_share_a_key() -> None:
    # ı and i are both I's, ſ and s both S's, µ and μ both Μ's: every letter whose capital is one character folds
    # as that capital's lower case (`censor._CASE_TWINS` lists those `str.lower` leaves apart).
    apart = [c for c in map(chr, range(sys.maxunicode + 1)) if not 0xD800 <= ord(c) <= 0xDFFF
             and len(c.upper()) == 1 and censor._key(c) != censor._key(c.upper())]
    assert apart == []


def test_a_dotless_i_or_a_long_s_copy_is_censored() -> None:
    scrub = scrubber(["ana.lima@northwind.example", "accounts@tailspin.example"])
    assert scrub("cc ana.l\u0131ma@northw\u0131nd.example, accounts@tail\u017fpin.example") == \
        "cc [REDACTED], [REDACTED]"
    needles = censor._Needles(["ana.lima@northwind.example"])
    assert censor._scrub_text("| ANA.L\u0131MA@NORTHWIND.EXAMPLE |", needles, "[X]") == "| [X] |"


def test_a_text_holding_a_dotted_capital_i_is_censored_in_place() -> None:
    needles = censor._Needles(["istanbul-office@example.com", "i\u0307zmir-branch"])
    text = "İSTANBUL-OFFICE@EXAMPLE.COM, Straße ΟΔΟΣ, İZMİR-BRANCH, istanbul-office@example.com!"
    # (İ is i: "İZMİR" is no copy of "i̇zmir", whose i is followed by a combining dot)
    assert censor._scrub_text(text, needles, "[X]") == "[X], Straße ΟΔΟΣ, İZMİR-BRANCH, [X]!"
    assert censor._scrub_all(text, needles, "[X]") == "[X], Straße ΟΔΟΣ, İZMİR-BRANCH, [X]!"
    assert censor.scrubber(["İzmir-Branch"])(text) == "İSTANBUL-OFFICE@EXAMPLE.COM, Straße ΟΔΟΣ, [REDACTED], " \
        "istanbul-office@example.com!"


def test_a_sigma_is_found_wherever_it_stands_in_a_word() -> None:
    # `str.lower` writes a final Σ as ς: a value cut out of a word holds σ there, the word ς, or the reverse.
    scrub = scrubber(["ΟΔΟΣ-7", "λόγος"])
    assert scrub("ΟΔΟΣ-7ΑΒΓ ΛΌΓΟΣ ΛΌΓΟΣΑ λόγοσ") == "[REDACTED]ΑΒΓ [REDACTED] [REDACTED]Α [REDACTED]"


def test_a_text_that_cannot_be_folded_in_place_is_matched_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Were a character lowered into two (here ß, by a stand-in fold), the text holding it is matched exactly:
    # no crash, no span shifted, the exact copy censored, a copy in other case left.
    fold = censor._key
    monkeypatch.setattr(censor, "_key", lambda text: fold(text).replace("ß", "ss"))
    needles = censor._Needles(["strasse-7@example.com", "Zoë <ceo>"])
    text = "Straße: STRASSE-7@EXAMPLE.COM or strasse-7@example.com, Zoë <ceo>"
    expected = "Straße: STRASSE-7@EXAMPLE.COM or #, #"
    assert censor._scrub_text(text, needles, "#") == expected
    assert censor._scrub_all(text, needles, "#") == expected
    assert censor._scrub_block(text, needles, "#") == expected
    monkeypatch.setattr(censor, "_FEW", 1)
    monkeypatch.setattr(censor, "_LONG", 0)
    assert censor._scrub_text(text, needles, "#") == expected
    assert censor._scrub_all(text, needles, "#") == expected
    assert censor._spread([text, "STRASSE-7@EXAMPLE.COM"], needles, "#") == [needles, needles]
    assert censor.scrub_blocks(["{}", text], ["strasse-7@example.com", "Zoë <ceo>"], "#") == ["{}", expected]
    # A text without it is still folded.
    assert censor._scrub_text("STRASSE-7@EXAMPLE.COM", needles, "#") == "#"


def test_a_response_with_a_dotted_capital_i_is_guarded() -> None:
    presenter = (Presenter("t").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])
                 .ui(lambda c: ui.markdown(f"{c['name']} <{c['email'].upper()}> İİ")))
    response = presenter.present({"id": "x", "name": "İpek Işık", "email": "ipek@example.com"})
    assert response.texts[1].endswith("İpek Işık <[REDACTED]> İİ\n</ui_passthrough>"), response.texts[1]


# -- documents, errors, numbers -------------------------------------------------------------------------------


def test_documents_lose_every_case_variant_in_every_serializer_form() -> None:
    scrub = scrubber([EMAIL, "Zoë & Co <ceo>"])
    csv = f"id,email\n1,{UPPER}\n2,{MIXED}\n"
    assert scrub(csv) == "id,email\n1,[REDACTED]\n2,[REDACTED]\n"
    assert scrub("<p>ZOË &amp; CO &lt;CEO&gt;</p>") == "<p>[REDACTED]</p>"
    assert scrub("mailto:BILLING%40CONTOSO-BAKERY.EXAMPLE") == "mailto:[REDACTED]"
    assert scrub("x=zo%c3%ab%20%26%20co%20%3cceo%3e") == "x=[REDACTED]"  # (percent-escapes in any case)


def test_an_attached_csv_and_a_pdf_text_are_censored() -> None:
    presenter = (
        Presenter("c").schema({"id": str, "email": str}).redact_pii(["email"])
        .attach(lambda c: [document(f"id,email\n{c['id']},{c['email'].upper()}\n".encode(), "text/csv",
                                    uri="doc://csv"),
                           document(f"BT (Email: {c['email'].upper()}) Tj ET", "text/plain", uri="doc://pdf")])
    )
    answer = presenter.present({"id": "x", "email": EMAIL})
    payloads = [item.payload().decode() for item in answer.content]
    assert payloads == ["id,email\nx,[REDACTED]\n", "BT (Email: [REDACTED]) Tj ET"], payloads
    assert not _leaks(json.dumps(answer.to_mcp()))


def test_an_error_a_callback_raised_loses_a_case_variant() -> None:
    error = ToolError("BAD", f"no mail to {UPPER}", details={"to": "Eu", "cc": MIXED})
    scrub_error(error, [EMAIL, "eu"])
    assert error.message == "no mail to [REDACTED]"
    assert error.details == {"to": "[REDACTED]", "cc": "[REDACTED]"}


def test_numbers_are_censored_as_before() -> None:
    presenter = (Presenter("n").schema({"id": str, "code": str, "salary": int}).redact_pii(["code", "salary"])
                 .ui(lambda r: ui.markdown(f"{r['code'].upper()} earns {r['salary']:,.2f} (1E+5)")))
    block = presenter.present({"id": "x", "code": "ab12-cd", "salary": 85000}).texts[1]
    assert "[REDACTED] earns [REDACTED] (1E+5)" in block, block


def test_nothing_removed_changes_nothing() -> None:
    response = assemble({"email": UPPER}, False, [ui.summary(UPPER)], [], [], [], [])
    texts = list(response.texts)
    guard(response, [])
    assert response.texts == texts


def test_a_value_whose_upper_case_is_longer_is_censored_upper_cased() -> None:
    # `ß` upper-cases to `SS`, `ﬁ` to `FI`: lower-casing the copy does not give the value back, so the value's
    # upper case is looked for too (a mailing label, a shouted summary).
    name, firm = "Jürgen Weiß-Großmann", "ﬁnanz Straße GmbH"
    view = (Presenter("contact").schema({"id": str, "name": str, "firm": str, "label": str})
            .redact_pii(["name", "firm"])
            .ui(lambda c: ui.summary(f"Write to {c['name'].upper()} at {c['firm'].upper()}"))
            .rules(lambda c: [f"Address {c['name'].title()}"]))
    response = view.present({"id": "c1", "name": name, "firm": firm, "label": f"{name.upper()} / {firm.upper()}"})
    wire = "\n".join(response.texts)
    for leaked in ("WEISS-GROSSMANN", "FINANZ STRASSE", "Weiß-Großmann", "Jürgen"):
        assert leaked not in wire and leaked not in json.dumps(response.view.data, ensure_ascii=False), wire
    assert response.view.data["label"] == "[REDACTED] / [REDACTED]" and "Write to [REDACTED] at [REDACTED]" in wire
