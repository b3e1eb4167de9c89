"""Round 5q: an egress cut of a list a presenter's `limit` already cut counts the handler's rows; the docs read
the compared constants of each part of chained rules; a principal naming no subject is one caller for rate
limits and confirmations as it is for MCP sessions (a digest of its fields, not its client address)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException
from fastapi.testclient import TestClient
from starlette.requests import Request

from mcpfusion import MCPFusion, Presenter, ProtectedResource, RateLimit, Tool, ui
from mcpfusion.docs import presenters as sampler
from mcpfusion.egress import EgressLimit
from mcpfusion.identity import ANONYMOUS, AUTH_SCOPE_KEY
from mcpfusion.mcp.wire import caller_key
from mcpfusion.middleware import ActionCall, GuardState
from mcpfusion.testing import ToolTester

# -- 1. an egress cut after a presenter's limit ----------------------------------------------------------


def _limited_tool(limit: int, rows: int, budget: int, chart: bool = False) -> Tool:
    tool = Tool("t")
    presenter = Presenter("p").schema({"id": str, "note": str}).limit(limit)
    if chart:
        presenter.collection_ui(lambda items: ui.summary("y" * 300))

    @tool.action(readonly=True, returns=presenter, middleware=[EgressLimit(bytes=budget)])
    async def lst() -> list:
        """List."""
        return [{"id": f"n{i}", "note": "x" * 60} for i in range(rows)]

    return tool


def test_an_egress_cut_of_a_presenter_cut_list_counts_the_handlers_rows():
    tool = _limited_tool(10, 50, 400)
    response = asyncio.run(ToolTester([tool]).call("t", "lst", {})).raw
    assert len(response.view.data) == 2
    assert response.view.truncated == (2, 50, "rows")
    notices = [text for text in response.texts[1:] if "⚠️" in text]
    assert len(notices) == 1, response.texts  # the egress notice in place of the presenter's, not beside it
    assert "2 of 50 rows shown" in notices[0] and "UI block(s) left out" not in notices[0]
    answer = TestClient(MCPFusion("s", tools=[tool]).build_app()).post("/api/t/lst", json={})
    assert answer.status_code == 200 and len(answer.json()) == 2
    assert answer.headers["Truncated"] == "shown=2, total=50, unit=rows"


def test_an_egress_limit_that_only_drops_a_ui_block_still_says_the_total():
    # The 10 rows and a notice fit, the 300-byte UI block does not: no row cut, the notice says 10 of 50.
    full = asyncio.run(ToolTester([_limited_tool(10, 50, 100_000)]).call("t", "lst", {})).raw
    budget = len(full.texts[0].encode()) + 250
    response = asyncio.run(ToolTester([_limited_tool(10, 50, budget, chart=True)]).call("t", "lst", {})).raw
    assert len(response.view.data) == 10 and response.view.truncated == (10, 50, "rows")
    assert len(response.texts) == 2 and "y" * 300 not in response.texts[1]
    assert "10 of 50 rows shown, 1 UI block(s) left out" in response.texts[1]


def test_an_egress_cut_without_a_presenter_limit_counts_its_own_rows():
    response = asyncio.run(ToolTester([_limited_tool(100, 50, 400)]).call("t", "lst", {})).raw
    assert response.view.truncated == (2, 50, "rows") and "2 of 50 rows shown" in response.texts[1]


# -- 2. the docs read each part of chained rules -----------------------------------------------------------


def _late(invoice: dict) -> list[str]:
    return ["Remind the customer."] if invoice["status"] == "late" else []


def test_the_docs_read_the_constants_of_a_function_rule_added_after_other_rules():
    alone = Presenter("alone").schema({"status": str}).rules(_late)
    chained = Presenter("chained").schema({"status": str}).rules(["Base."]).rules(_late).rules("End.")
    twice = Presenter("twice").schema({"status": str, "kind": str}).rules(_late).rules(
        lambda i: ["Refund."] if i["kind"] == "refund" else [])
    assert sampler.tested_values(alone) == sampler.tested_values(chained) == {"status": ["late"]}
    assert sampler.tested_values(twice) == {"status": ["late"], "kind": ["refund"]}
    assert "Remind the customer." in sampler.describe(alone)["rules"]
    assert set(sampler.describe(chained)["rules"]) == {"Base.", "Remind the customer.", "End."}
    assert {"Remind the customer.", "Refund."} <= set(sampler.describe(twice)["rules"])


# -- 3. a principal naming no subject ------------------------------------------------------------------------


@dataclass
class Key:  # names no subject: what an app keeps of an API key
    key_name: str
    tenant: str


class Opaque:  # a field that cannot be read as data
    def __init__(self) -> None:
        self.handle = object()


def _call(auth: Any, host: str = "10.0.0.5", headers: list[tuple[bytes, bytes]] | None = None) -> ActionCall:
    call = ActionCall.__new__(ActionCall)
    call.request = Request({"type": "http", "headers": headers or [], "client": (host, 1234), AUTH_SCOPE_KEY: auth})
    call.guards = GuardState(b"k" * 32)
    return call


def test_subjectless_principals_behind_one_address_are_told_apart_as_sessions_tell_them():
    one, other = _call(Key("k1", "acme")), _call(Key("k2", "acme"))
    assert caller_key(one.request) != caller_key(other.request)  # MCP sessions / requestState
    assert one.caller_key != other.caller_key and one.principal_id != other.principal_id
    again = _call(Key("k1", "acme"), host="10.0.0.9")  # the same fields from elsewhere: the same caller
    assert again.principal_id == one.principal_id and again.caller_key == one.caller_key
    assert one.principal_id.startswith("fields:")
    assert "10.0.0.5" not in one.principal_id and "k1" not in one.principal_id
    # Keyed: the digest the audit logs is not the plain one sessions use.
    assert one.principal_id.removeprefix("fields:") not in caller_key(one.request)
    assert _call({"scope": "read"}).principal_id != _call({"scope": "write"}).principal_id


def test_the_client_address_only_for_no_principal_and_an_unreadable_one_is_never_per_request():
    assert _call(None).principal_id == _call(ANONYMOUS).principal_id == "anonymous:10.0.0.5"
    assert _call({}).principal_id == "anonymous:10.0.0.5"
    assert _call(Opaque()).principal_id == _call(Opaque()).principal_id == "unreadable:10.0.0.5"
    assert _call(Key("k1", "acme"), headers=[(b"authorization", b"Basic eDp5")]).principal_id.startswith("token:")
    assert _call({"sub": "alice"}).principal_id == "alice"


def test_two_subjectless_callers_behind_one_address_have_their_own_rate_limit_bucket():
    tool = Tool("t")

    @tool.action(readonly=True, middleware=[RateLimit(1, per=3600)])
    async def ping() -> str:
        """Ping."""
        return "pong"

    keys = {"a": Key("k1", "acme"), "b": Key("k2", "acme")}

    async def authenticate(request: Request) -> Any:
        found = keys.get(request.headers.get("x-api-key", ""))
        if found is None:
            raise HTTPException(401, "bad key")
        return found

    app = MCPFusion("s", tools=[tool], authorization=ProtectedResource(
        authorization_servers=["https://as.example"], authenticate=authenticate)).build_app()
    client = TestClient(app)
    assert client.post("/api/t/ping", json={}, headers={"x-api-key": "a"}).status_code == 200
    assert client.post("/api/t/ping", json={}, headers={"x-api-key": "b"}).status_code == 200
    assert client.post("/api/t/ping", json={}, headers={"x-api-key": "a"}).status_code == 429
