"""The reference service's guards: a rate limit on every call, a timeout on `remind`, at most two
`export_invoices` at once, the audit trail on mutations and `void_invoice` confirmed by the user (the
official SDK client's elicitation callback on both wires); the docs page shows each action's guards."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import ElicitResult, TextContent

from app.deps import get_store
from mcpfusion import Timeout
from routers.billing import billing
from tests.governance_kit import TRANSPORTS, Caller
from tests.service_kit import build, mcp_target, serve


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 and 2025-11-25
async def test_the_sdk_client_confirms_void_invoice_and_only_then_it_is_voided(tmp_path, mode):
    answers = iter(["decline", "accept"])
    asked: list[str] = []

    async def elicit(context, params):
        asked.append(params.message)
        if next(answers) == "accept":
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action="decline")

    async def status(client: Client) -> str:
        got = await client.call_tool(*mcp_target("billing", "get_invoice", {"id": "inv_0003"}))
        return json.loads(got.content[0].text)["status"]

    with serve(build(tmp_path)) as base:
        http = create_mcp_http_client(headers={"authorization": "Bearer demo-admin"})
        async with Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode,
                          elicitation_callback=elicit) as client:
            assert await status(client) == "draft"
            args = {"id": "inv_0003", "reason": "duplicate"}
            declined = await client.call_tool(*mcp_target("billing", "void_invoice", args))
            assert declined.is_error and 'code="NOT_CONFIRMED"' in text_of(declined)
            assert await status(client) == "draft"  # the user said no: nothing happened
            voided = await client.call_tool(*mcp_target("billing", "void_invoice", args))
            assert voided.is_error is False and json.loads(voided.content[0].text)["status"] == "void"
            assert await status(client) == "void"
    assert asked == ['Void invoice "inv_0003" (reason: "duplicate")? This cannot be undone.'] * 2


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_call_is_rate_limited_per_principal(tmp_path, transport):
    app = build(tmp_path, rate_limit=3)
    admin, support = Caller(app, transport, "billing", "demo-admin"), Caller(app, transport, "billing", "demo-support")
    try:
        codes = [(await admin.call(action, args)).code for action, args in
                 [("revenue_summary", {}), ("get_invoice", {"id": "inv_0001"}), ("list_invoices", {})]]
        assert codes == [None, None, None]
        refused = await admin.call("revenue_summary")
        assert refused.code == "RATE_LIMITED"
        assert refused.retry_after >= 1
        if transport == "rest":
            assert refused.status == 429 and int(refused.headers["retry-after"]) >= 1
        assert (await support.call("revenue_summary")).code is None  # another principal
    finally:
        await admin.aclose()
        await support.aclose()


class SlowStore:
    """A store whose calls wait for the test (or forever)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.inside = 0
        self.closed = 0

    async def remind(self, invoice_id: str) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def list_invoices(self, status: str | None = None, customer_id: str | None = None) -> list[Any]:
        self.inside += 1
        await self.gate.wait()
        return []


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_remind_times_out_and_export_invoices_runs_two_at_once(tmp_path, transport, monkeypatch):
    app = build(tmp_path)
    store = SlowStore()

    async def slow_store() -> AsyncIterator[SlowStore]:
        try:
            yield store
        finally:
            store.closed += 1

    app.dependency_overrides[get_store] = slow_store
    (timeout,) = [mw for mw in billing.actions["remind"].middleware if isinstance(mw, Timeout)]
    monkeypatch.setattr(timeout, "seconds", 0.2)  # the service waits 10 s; the test need not
    callers = [Caller(app, transport, "billing", "demo-admin") for _ in range(3)]
    try:
        late = await callers[0].call("remind", {"id": "inv_0001"})
        assert late.code == "TIMEOUT" and store.closed == 1  # the handler's dependencies were torn down
        running = [asyncio.create_task(c.call("export_invoices")) for c in callers[:2]]
        while store.inside < 2:
            await asyncio.sleep(0.01)
        busy = await callers[2].call("export_invoices")
        assert busy.code == "BUSY" and busy.retry_after == 1
        store.gate.set()
        assert [(await task).code for task in running] == [None, None]
    finally:
        for caller in callers:
            await caller.aclose()


async def test_mutations_leave_an_audit_event(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="mcpfusion.audit")
    caller = Caller(build(tmp_path), "rest", "billing", "demo-admin")
    try:
        assert (await caller.call("get_invoice", {"id": "inv_0001"})).code is None  # a read: no event
        assert (await caller.call("remind", {"id": "inv_0001", "message": "Kind regards"})).code is None
    finally:
        await caller.aclose()
    events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mcpfusion.audit"]
    assert [(e["action"], e["principal"], e["tenant"], e["outcome"]) for e in events] == [
        ("billing.remind", "demo-admin", "acme", "ok")]
    assert events[0]["arguments"]["fields"] == ["id", "message"] and "Kind regards" not in caplog.text


async def test_the_docs_page_shows_each_actions_guards(tmp_path):
    app = build(tmp_path)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        manifest = (await client.get("/tools.json")).json()
        page = (await client.get("/tools")).text
    actions = {a["name"]: a for t in manifest["tools"] if t["name"] == "billing" for a in t["actions"]}
    assert "rate limit: 600 calls per 60 s per principal" in actions["get_invoice"]["guards"]
    assert "timeout: 10 s" in actions["remind"]["guards"]
    assert any(g.startswith("concurrency: at most 2 at once") for g in actions["export_invoices"]["guards"])
    assert any(g.startswith("confirmation:") for g in actions["void_invoice"]["guards"])
    assert any(g.startswith("voidable: refuses a void that cannot happen") for g in actions["void_invoice"]["guards"])
    assert any(g.startswith("audit:") for g in actions["void_invoice"]["guards"])
    assert "timeout: 10 s" in page and "confirmation: asks the user" in page
