"""The reference service advertises `resources.subscribe` for its `invoice://{id}` documents: every write that
changes an invoice (over MCP or REST) tells the clients subscribed to it, on the session wire
(`resources/subscribe` + the GET stream) and on 2026-07-28 (`subscriptions/listen`); a read tells no one, nor
does a refused write, and another tenant never hears of acme's invoices."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.service_kit import build, confirm_token, serve
from tests.test_elicit_subscribe_mends import MODERN, data_of, meta, open_session, updates

ADMIN = {"authorization": "Bearer demo-admin"}
GLOBEX = {"authorization": "Bearer demo-globex-admin"}
SENT = "inv_0002"  # a sent acme invoice of the demo data


@pytest.fixture
def service(tmp_path):
    with serve(build(tmp_path)) as base:
        yield base


async def rest(c: httpx.AsyncClient, action: str, body: dict[str, Any], headers: dict[str, str] = ADMIN
               ) -> httpx.Response:
    return await c.post(f"/api/billing/{action}", json=body, headers=headers)


async def subscribed(c: httpx.AsyncClient, uri: str, auth: dict[str, str]) -> dict[str, str]:
    session = await open_session(c, {}, **auth)
    subscribe = {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": uri}}
    reply = data_of((await c.post("/mcp", json=subscribe, headers=session)).text)[-1]
    assert "result" in reply or reply["error"]["code"] in (-32002, -32602), reply
    return {**session, "accept": "text/event-stream"}


async def test_each_write_tells_the_session_wire_subscribers_of_that_invoice(service):
    async with httpx.AsyncClient(base_url=service, timeout=10) as c:
        created = await rest(c, "create_invoice", {"customer_id": "cus_0001", "due_date": "2031-01-01",
                                                   "lines": [{"description": "Watched", "unit_price_cents": 900}]})
        invoice = created.json()["id"]
        watching = await subscribed(c, f"invoice://{invoice}", ADMIN)
        other = await subscribed(c, f"invoice://{SENT}", ADMIN)
        foreign = await subscribed(c, f"invoice://{invoice}", GLOBEX)  # refused: not globex's
        async with updates(c, "GET", watching) as told, updates(c, "GET", other) as told_other, \
                updates(c, "GET", foreign) as told_foreign:
            assert (await rest(c, "get_invoice", {"id": invoice})).status_code == 200  # a read: nothing
            sent = await rest(c, "update_invoice_status", {"id": invoice, "status": "sent"})
            assert sent.status_code == 200, sent.text
            refused = await rest(c, "record_payment", {"id": invoice, "amount_cents": 10**9})  # over the total
            assert refused.status_code == 409, refused.text
            paid = await rest(c, "record_payment", {"id": invoice, "amount_cents": 400})
            assert paid.status_code == 200, paid.text
            reminded = await rest(c, "remind", {"id": invoice})
            assert reminded.status_code == 200, reminded.text
        assert told == [{"uri": f"invoice://{invoice}"}] * 3  # status, payment, reminder
        assert told_other == [] and told_foreign == []


async def test_a_void_over_mcp_tells_a_2026_listener(service):
    async with httpx.AsyncClient(base_url=service, timeout=10) as c:
        created = await rest(c, "create_invoice", {"customer_id": "cus_0001", "due_date": "2031-01-01",
                                                   "lines": [{"description": "To void", "unit_price_cents": 700}]})
        invoice = created.json()["id"]
        uri = f"invoice://{invoice}"
        listen = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
                  "params": {"_meta": meta(), "notifications": {"resourceSubscriptions": [uri]}}}
        headers = {**ADMIN, "accept": "application/json, text/event-stream", "content-type": "application/json",
                   "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}

        async def void(arguments: dict[str, Any]) -> dict[str, Any]:
            body = {"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                    "params": {"name": "billing_void_invoice", "arguments": arguments, "_meta": meta()}}
            call_headers = {**headers, "mcp-method": "tools/call", "mcp-name": "billing_void_invoice"}
            reply: dict[str, Any] = data_of((await c.post("/mcp", json=body, headers=call_headers)).text)[-1]
            return reply

        async with updates(c, "POST", headers, listen) as told:
            asked = await void({"id": invoice, "reason": "issued twice"})  # asks first: nothing changed yet
            token = confirm_token(json.dumps(asked))
            done = await void({"id": invoice, "reason": "issued twice", "_confirm": token})
            assert done["result"]["isError"] is False, done
        assert [u["uri"] for u in told] == [uri]
