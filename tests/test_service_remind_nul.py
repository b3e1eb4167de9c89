"""`remind`'s `message` holding NUL is refused at validation with the NUL rule of every other text the service
stores (`models.NO_NUL`): the same words, naming the field, over MCP and REST, before the invoice is looked
up; it was the store's own refusal (other words, and only once the call had reached the store)."""

from __future__ import annotations

import json

import pytest

from tests.service_kit import build, call

ADMIN = "demo-admin"
SAID = 'Value error, must not contain a NUL character (\\u0000). You sent: "hello\\u0000".'


def refusal(transport: str, raw: str) -> tuple[str, str]:
    """(field, what it says) of the one field a validation error names."""
    if transport == "rest":
        body = json.loads(raw)
        assert body["code"] == "VALIDATION_ERROR" and body["detail"].endswith("are not valid."), body
        [error] = body["errors"]
        return error["field"], error["detail"]
    text = json.loads(raw)["result"]["content"][0]["text"]
    assert text.startswith("<validation_error "), text
    field = text.split('<field name="', 1)[1]
    return field.split('"', 1)[0], field.split(">", 1)[1].split("</field>", 1)[0]


@pytest.mark.parametrize("transport", ["mcp", "rest"])
async def test_a_nul_in_the_reminders_message_is_refused_as_the_other_texts_are(tmp_path, transport):
    app = build(tmp_path)
    for invoice in ("inv_0001", "inv_9999"):  # (an unknown invoice too: refused before the store looks it up)
        outcome = await call(transport, app, "billing", "remind", {"id": invoice, "message": "hello\x00"}, ADMIN)
        assert outcome.error_code is not None and refusal(transport, outcome.raw) == ("message", SAID), outcome
    void = await call(transport, app, "billing", "void_invoice", {"id": "inv_0003", "reason": "hello\x00"}, ADMIN)
    assert refusal(transport, void.raw) == ("reason", SAID)  # the same words as another text field's
    got = await call("inproc", app, "billing", "get_invoice", {"id": "inv_0001"}, ADMIN)
    assert got.data["reminders_sent"] == 0


@pytest.mark.parametrize("transport", ["mcp", "rest"])
async def test_a_message_without_nul_still_reminds(tmp_path, transport):
    app = build(tmp_path)
    outcome = await call(transport, app, "billing", "remind", {"id": "inv_0001", "message": "Merci d'avance"}, ADMIN)
    assert outcome.error_code is None and outcome.data["reminders_sent"] == 1, outcome
