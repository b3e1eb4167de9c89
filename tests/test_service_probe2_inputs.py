"""The reference service's inputs of the second black-box probe, round 2 (/tmp/probe2 items 2 and 13):
`create_invoice` answers a hidden model field (`tenant`, `processor_token`) exactly as any unknown field, so
its errors no longer tell which names the model hides; and a void's `reason` of spaces or invisible characters
alone is a validation error of the field, before the user is asked to confirm, and nothing is voided."""

from __future__ import annotations

import pytest

from models.invoice import HIDDEN_FIELDS
from tests.service_kit import asgi_client, build, call, rest
from tests.test_service_idempotent_payment import ADMIN, TRANSPORTS, _sent_invoice, _stored

NEW = {"customer_id": "cus_0001", "due_date": "2031-01-01", "lines": [{"description": "x", "unit_price_cents": 1}]}


# -- 2. a hidden field is an unknown field like any other -----------------------------------------------------

async def test_a_hidden_field_is_refused_with_the_words_of_any_unknown_field(tmp_path):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        answers = {name: await rest(client, "billing", "create_invoice", {**NEW, name: "x"}, ADMIN)
                   for name in (*HIDDEN_FIELDS, "foo", "processor_ref", "Tenant")}
    details = {}
    for name, answer in answers.items():
        assert answer.status_code == 422, answer.text
        (error,) = answer.json()["errors"]
        assert error["field"] == name
        details[name] = error["detail"]
    assert set(details.values()) == {"Unknown field. This action accepts: customer_id, due_date, lines, "
                                     "internal_note, idempotency_key."}


@pytest.mark.parametrize("name", HIDDEN_FIELDS)
async def test_a_hidden_field_reads_as_an_unknown_one_over_mcp_too(tmp_path, name):
    app = build(tmp_path)
    hidden = await call("inproc", app, "billing", "create_invoice", {**NEW, name: "x"}, ADMIN)
    unknown = await call("inproc", app, "billing", "create_invoice", {**NEW, "foo": "x"}, ADMIN)
    assert hidden.error_code == unknown.error_code == "VALIDATION_ERROR"
    assert hidden.raw.replace(name, "foo") == unknown.raw


# -- 13. a void's reason must say something -----------------------------------------------------------------------

BLANK_REASONS = ["   ", " " * 20, "\u200b\u200b\u200b", "\u00a0\u00a0\u00a0", "\t\n ", "\u3164\u3164\u3164",
                 " \ufeff\u2060 "]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("reason", BLANK_REASONS)
async def test_a_void_reason_of_nothing_that_shows_is_refused_before_any_confirmation(tmp_path, transport, reason):
    app = build(tmp_path)
    invoice_id = await _sent_invoice(transport, app)
    refused = await call(transport, app, "billing", "void_invoice", {"id": invoice_id, "reason": reason}, ADMIN)
    # Not CONFIRMATION_REQUIRED: nothing is asked of the user for a call that cannot be made.
    if transport == "mcp":  # (the tool's answer: a <validation_error> naming the field)
        assert '<validation_error action=\\"billing/void_invoice\\">' in refused.raw, refused
        assert '<field name=\\"reason\\">Value error, must say something' in refused.raw
    else:
        assert refused.error_code == "VALIDATION_ERROR", refused
        assert "reason" in refused.raw and "must say something" in refused.raw
    assert (await _stored(app, invoice_id))["status"] == "sent"


@pytest.mark.parametrize("reason", ["Customer cancelled", "  dup  ", "重复开票", "n/a"])
async def test_a_reason_that_shows_still_asks_for_the_confirmation(tmp_path, reason):
    app = build(tmp_path)
    invoice_id = await _sent_invoice("inproc", app)
    asked = await call("inproc", app, "billing", "void_invoice", {"id": invoice_id, "reason": reason}, ADMIN)
    assert asked.error_code == "CONFIRMATION_REQUIRED", asked
