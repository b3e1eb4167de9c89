"""`record_payment(idempotency_key=...)`: a blank key (spaces only, or nothing that shows) is a validation error of the field saying
what a key must be, over MCP, REST and in process, and nothing is recorded: it was taken as a real key, so an
agent sending the same spaces with every payment had its second payment answered as the first one's retry.
A key with spaces inside, or any other printable text, is still a key; the advertised schema is unchanged."""

from __future__ import annotations

import json

import pytest
from pydantic import TypeAdapter, ValidationError

from models import NOT_BLANK_KEY
from routers.billing import IdempotencyKey
from tests.service_kit import build, call
from tests.test_service_idempotent_payment import ADMIN, TRANSPORTS, _pay, _sent_invoice, _stored

SAID = ("must not be blank: send a key of your own for this payment, 8 to 64 characters of which some show "
        "(e.g. a UUID), and the same key again only on its retry")
# Spaces, and what pastes as blank: zero-width characters, a BOM, word joiners, marks, no-break spaces,
# controls, Hangul fillers and the blank Braille pattern (alone, mixed, or inside a key).
BLANK = [" " * 8, " " * 64, "\t" + " " * 10 + "\n", "\u3000" * 8, "\u200b" * 8, "\ufeff" * 8, "\u2060" * 8,
         "\u200e" * 8, "\u3164" * 8, "\u2800" * 8, "\x01" * 8, "\u00a0" * 8, " \u200b\u3164\u2800 \ufeff  ",
         "\u034f" * 8, "\ufe0f" * 8, "\U000e0100" * 8, "\u17b4" * 8, "\U0001d165" * 8, "\u0300" * 8]


@pytest.mark.parametrize("key", BLANK)
def test_a_blank_key_is_refused_by_the_model(key):
    with pytest.raises(ValidationError) as raised:
        TypeAdapter(IdempotencyKey).validate_python(key)
    [error] = raised.value.errors()
    assert error["type"] == "value_error" and error["msg"] == f"Value error, {SAID}"


@pytest.mark.parametrize("key", ["pay 7f3a 0001", "  pay-0001 ", "Commande n°42 — été", "........",
                                 "pay\u200b-0001", "\u200b\u200b\u200bx\u200b\u200b\u200b\u200b", "支払い-0001-確認",
                                 "🧾🧾🧾🧾🧾🧾🧾🧾", "e\u0301e\u0301e\u0301e\u0301"])
def test_keys_with_spaces_inside_or_printable_text_are_keys(key):
    assert TypeAdapter(IdempotencyKey).validate_python(key) == key


def test_null_and_the_schema_are_as_they_were():
    assert TypeAdapter(IdempotencyKey).validate_python(None) is None
    schema = TypeAdapter(IdempotencyKey).json_schema()
    assert schema["anyOf"][0] == {"maxLength": 64, "minLength": 8, "type": "string"}
    assert NOT_BLANK_KEY.func(None) is None


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_blank_key_is_refused_on_every_transport_and_records_nothing(tmp_path, transport):
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app)
    outcome = await _pay(transport, app, invoice_id, 1000, " " * 12)
    assert outcome.error_code is not None, outcome
    said = f'Value error, {SAID}. You sent: "{" " * 12}".'
    if transport == "mcp":  # (the tool's answer: a <validation_error> naming the field)
        text = json.loads(outcome.raw)["result"]["content"][0]["text"]
        assert text.startswith('<validation_error action="billing/record_payment">\n') and \
            f'<field name="idempotency_key">{said}</field>' in text, text
    elif transport == "rest":
        assert outcome.error_code == "VALIDATION_ERROR"
        assert json.loads(outcome.raw)["errors"] == [{"field": "idempotency_key", "detail": said}]
    else:
        assert "idempotency_key" in outcome.raw and SAID in outcome.raw, outcome.raw
    assert (await _stored(app, invoice_id))["paid_cents"] == 0


async def test_a_key_with_spaces_inside_still_records_once(tmp_path):
    app = build(tmp_path)
    invoice_id = await _sent_invoice("mcp", app)
    for transport in ("mcp", "rest"):
        paid = await call(transport, app, "billing", "record_payment",
                          {"id": invoice_id, "amount_cents": 1000, "method": "card", "idempotency_key": "pay 7f3a 0001"},
                          ADMIN)
        assert paid.error_code is None, paid
    stored = await _stored(app, invoice_id)
    assert stored["paid_cents"] == 1000 and len(stored["payments"]) == 1
