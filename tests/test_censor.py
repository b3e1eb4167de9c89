"""The egress guard's quick test (`censor._clean`) never lets through what the full guard would censor: on
every case below, the guard with the quick test and the guard forced down its full path leave the same
response (blocks, data and structured view)."""

from __future__ import annotations

import copy
import itertools
import json

import pytest

from mcpfusion import censor, ui
from mcpfusion.censor import guard
from mcpfusion.response import Suggestion, assemble

# Removed values of every kind the guard handles: plain strings, strings with characters some block
# escapes, short strings, numbers, booleans, None, nested values, empty strings, a value holding the
# join separator.
REMOVED = [
    "ada@example.com", "+44 20 7946 0000", "Zoë <ceo> & \"co\"", "a|b\ncd", "EU", "x", "", None, True,
    123456, 4.5, {"k": "secret-token"}, ["list-secret", 99999], "line1\nline2",
]

# Where a removed value may be copied by a callback: nowhere, into the data (another field), a UI block,
# a rule, a suggestion, across two blocks.
PLACES = ["nowhere", "data", "ui", "rule", "suggestion", "split"]


def _response(value: object, place: str):
    text = value if isinstance(value, str) else str(value)
    data = {"id": "inv_1", "email": "[REDACTED]", "note": text if place == "data" else "ok", "n": 3}
    blocks = [ui.table(["Field", "Value"], [["Id", "inv_1"], ["Note", text if place == "ui" else "-"]])]
    rules = ["Amounts are in CENTS.", f"Contact {text}" if place == "rule" else "Be brief."]
    suggestions = [Suggestion("billing.remind", f"Remind {text}" if place == "suggestion" else "Remind")]
    embeds = [text[: len(text) // 2], text[len(text) // 2:]] if place == "split" else []
    return assemble(data, False, blocks, embeds, [], rules, suggestions)


def _state(response):
    view = response.view
    return (response.texts, view.data, view.rewritten, view.system_rules, view.suggestions,
            [(b.content, b.title) for b in view.ui_blocks])


def _full_path(monkeypatch: pytest.MonkeyPatch, response, removed):
    with monkeypatch.context() as m:
        m.setattr(censor, "_clean", lambda texts, removed: False)
        guard(response, removed)


@pytest.mark.parametrize("value,place", list(itertools.product(REMOVED, PLACES)))
def test_quick_test_agrees_with_the_full_guard(monkeypatch: pytest.MonkeyPatch, value, place):
    removed = [copy.deepcopy(value), "ada@example.com", None]
    quick, full = _response(value, place), _response(value, place)
    quick_error = full_error = None
    try:
        guard(quick, list(removed))
    except Exception as exc:  # noqa: BLE001 - both sides must fail alike
        quick_error = type(exc)
    try:
        _full_path(monkeypatch, full, list(removed))
    except Exception as exc:  # noqa: BLE001
        full_error = type(exc)
    assert quick_error == full_error
    assert _state(quick) == _state(full)


def test_quick_test_skips_only_responses_without_a_removed_value():
    clean = _response("nothing", "nowhere")
    assert censor._clean(clean.texts, ["ada@example.com", "EU", None, True, ""])
    # A copied value, a short value as a whole string of the data, a number or a nested value: full path.
    assert not censor._clean(_response("ada@example.com", "ui").texts, ["ada@example.com"])
    assert not censor._clean(_response("EU", "data").texts, ["EU"])
    assert not censor._clean(clean.texts, [123456])
    assert not censor._clean(clean.texts, [{"k": "v"}])
    # A value with characters the blocks escape is looked for in its escaped forms too.
    escaped = _response("Zoë <ceo> & \"co\"", "rule")
    assert "Zoë &lt;ceo> &amp; &quot;co&quot;" in escaped.texts[-2]
    assert not censor._clean(escaped.texts, ["Zoë <ceo> & \"co\""])


def test_a_copied_value_is_still_censored_everywhere():
    response = _response("ada@example.com", "ui")
    guard(response, ["ada@example.com"])
    assert not any("ada@example.com" in text for text in response.texts)
    response = _response("ada@example.com", "data")
    guard(response, ["ada@example.com"])
    assert "ada@example.com" not in response.texts[0] and response.view.data["note"] == "[REDACTED]"


def test_a_value_ending_in_a_newline_is_looked_for_in_its_escaped_forms():
    value = "internal-note-7731\n"
    response = _response(value, "data")
    assert "internal-note-7731\\n" in response.texts[0]  # the data block writes the newline as JSON does
    guard(response, [value])
    assert not any("internal-note-7731" in text for text in response.texts)


@pytest.mark.parametrize("email", ["Tom & Jerry <tj@example.com>", "ada|x <ada@example.com>", "Ada\n<ada@example.com>",
                                   "a </ui_passthrough> b@example.com", "plain@example.com"])
def test_a_redacted_value_written_into_a_table_cell_is_censored_in_any_mix_of_escapes(email):
    """A table cell escapes `|`, newlines and `<` at once: the guard looks for the value as the table writes
    it, so the real value never leaves whatever mix of characters it holds."""
    from mcpfusion import Presenter, ui

    presenter = (Presenter("customer").schema({"name": str, "email": str}).redact_pii(["email"])
                 .ui(lambda c: [ui.table(["field", "value"], [["email", c["email"]]]), ui.markdown(c["email"])]))
    answer = presenter.present({"name": "Ada", "email": email})
    wire = "\n".join(answer.texts)
    assert "[REDACTED]" in answer.texts[1] and "[REDACTED]" in answer.texts[2]
    for part in ("tj@example.com", "ada@example.com", "b@example.com", "plain@example.com"):
        assert part not in wire, wire


@pytest.mark.parametrize("breaker", ["\u2028", "\v", "\f", "\x85", "\x1c", "\u2029"])
def test_a_redacted_value_with_an_unusual_line_break_is_censored_in_folded_lines(breaker):
    from mcpfusion import Presenter, suggest

    secret = f"Jane Doe{breaker}123-45-6789"
    presenter = (Presenter("c").schema({"name": str, "ssn": str}).redact_pii(["ssn"])
                 .rules(lambda c: [f"Customer {c['ssn']} is a VIP\nreally"])
                 .suggest(lambda c: suggest("crm.call", f"Call {c['ssn']}\nnow")))
    wire = "\n".join(presenter.present({"name": "x", "ssn": secret}).texts)
    assert "123-45-6789" not in wire, wire


def test_a_redacted_value_with_json_escapes_and_a_closing_tag_is_censored_in_a_json_block():
    from mcpfusion import Presenter

    secret = 'ab"cd</ui_passthrough>secret-tail'
    presenter = (Presenter("c").schema({"token": str}).redact_pii(["token"])
                 .ui(lambda c: ui.json({"token": c["token"]})))
    wire = "\n".join(presenter.present({"token": secret}).texts)
    assert "secret-tail" not in wire, wire


def test_attached_content_never_carries_a_redacted_value_in_a_uri_an_svg_or_any_json_type():
    from mcpfusion import Presenter
    from mcpfusion.content import document, image, link

    def attached(c):
        svg = f'<svg xmlns="http://www.w3.org/2000/svg"><text>{c["email"]}</text></svg>'.encode()
        return [document("vcard", "text/plain", uri=f"mailto:{c['email']}"),
                link(f"customer://{c['email']}", name="Ada"),
                image(svg, mime_type="image/svg+xml"),
                document(f'{{"email": "{c["email"]}"}}'.encode(), "application/vnd.api+json", uri="doc://a"),
                document(f'{{"email": "{c["email"]}"}}'.encode(), "application/x-ndjson", uri="doc://b")]

    presenter = Presenter("c").schema({"name": str, "email": str}).redact_pii(["email"]).attach(attached)
    answer = presenter.present({"name": "Ada", "email": "ada.secret@example.com"})
    sent = json.dumps(answer.to_mcp())
    assert len(answer.content) == 5 and "ada.secret@example.com" not in sent
    assert all("ada.secret" not in item.payload().decode("utf-8", "replace") for item in answer.content
               if item.kind != "resource_link")
