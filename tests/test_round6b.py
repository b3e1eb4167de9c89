"""Round 6b, mended: a write whose answer cannot be sent (egress limit, output check) says it was done and not to
call it again; a presenter's attachments are kept beside the handler's; `attach(data_block=False)` sends no
structuredContent unless an outputSchema is advertised; refused and allowed calls audit the same fields and
digest; a confirmation is bound to the app's `cursor_scope` (the tenant a header chose)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header, Request
from pydantic import BaseModel

from mcpfusion import Audit, EgressLimit, MCPFusion, Presenter, Tool, attach, document, image
from mcpfusion.auth import RequireBearer
from mcpfusion.content import EmbeddedResource, Image
from mcpfusion.listing import discriminated, mcp_name
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.testing import ToolTester
from tests.governance_kit import MODERN_META, Caller
from tests.service_kit import confirm_token, sse_messages

PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")


# -- 1. a write that ran is never reported as "nothing was done, ask again" --------------------------------------

class Receipt(BaseModel):
    id: str
    amount: int


def ledger(done: list[Any], seen: list[str]) -> Tool:
    tool = Tool("acct")

    async def session() -> AsyncIterator[str]:
        try:
            yield "db"
        except Exception:
            seen.append("rolled back")
            raise
        seen.append("committed")

    @tool.action(destructive=True, confirm=True, middleware=[EgressLimit(bytes=200)])
    async def close_all(owner: str) -> dict[str, Any]:
        """Close every account of an owner."""
        done.append(owner)
        return {"closed": owner, "report": "x" * 1000}

    @tool.action(readonly=True, middleware=[EgressLimit(bytes=200)])
    async def report(owner: str) -> dict[str, Any]:
        """A report too large to cut."""
        return {"owner": owner, "report": "x" * 1000}

    @tool.action()
    async def charge(amount: int, db: str = Depends(session)) -> Receipt:
        """Charge a card (its result breaks its output model)."""
        done.append(("charge", amount))
        return {"id": "ch_1", "amount": "not a number"}  # type: ignore[return-value]

    @tool.action(readonly=True)
    async def peek(amount: int) -> Receipt:
        """A read whose result breaks its output model."""
        return {"id": "ch_1", "amount": "not a number"}  # type: ignore[return-value]

    return tool


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_write_over_the_egress_limit_says_it_was_done(transport: str) -> None:
    done: list[Any] = []
    app = MCPFusion("acct", tools=[ledger(done, [])]).build_app()
    caller = Caller(app, transport, "acct", token=None)
    try:
        asked = await caller.call("close_all", {"owner": "bob"})
        ran = await caller.call("close_all", {"owner": "bob", "_confirm": confirm_token(asked.text)})
        read = await caller.call("report", {"owner": "bob"})
    finally:
        await caller.aclose()
    assert done == ["bob"] and ran.code == read.code == "RESPONSE_TOO_LARGE"
    assert "was done" in ran.text and "Do not call it again" in (ran.recovery or "")
    assert "Ask for less" not in ran.text
    assert "Ask for less" in (read.recovery or "") and "was done" not in read.text  # a read: as before
    if transport == "rest":
        assert ran.status == 400 and ran.problem is not None and ran.problem["details"] == {"completed": True}


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_write_whose_output_breaks_its_model_says_it_was_done(transport: str) -> None:
    done: list[Any] = []
    seen: list[str] = []
    app = MCPFusion("acct", tools=[ledger(done, seen)]).build_app()
    caller = Caller(app, transport, "acct", token=None)
    try:
        ran = await caller.call("charge", {"amount": 5})
        read = await caller.call("peek", {"amount": 5})
    finally:
        await caller.aclose()
    assert ran.code == read.code == "INVALID_OUTPUT"
    assert "was done" in ran.text and "Do not call it again" in (ran.recovery or "")
    assert "retry later" not in (ran.recovery or "") and "retry later" in (read.recovery or "")
    # What it did stays done: its session commits (it saw no failure to roll back).
    assert seen == ["committed"] and done == [("charge", 5)]


async def test_the_audit_event_of_a_write_done_carries_its_completed_error() -> None:
    events: list[dict[str, Any]] = []
    done: list[Any] = []
    fusion = MCPFusion("acct", tools=[ledger(done, [])], middleware=[Audit(sink=events.append)])
    result = await ToolTester(fusion.registry).call("acct", "charge", {"amount": 5})
    assert result.raw.view.error is not None and result.raw.view.error.details["completed"] is True
    assert [(e["outcome"], e["error_code"]) for e in events] == [("completed", "INVALID_OUTPUT")]


# -- 2. a presenter's attachments and the handler's are both sent -----------------------------------------------

class Customer(BaseModel):
    id: str
    name: str


async def test_a_presenter_attachment_is_kept_beside_the_handler_attach() -> None:
    crm = Tool("crm")
    card = Presenter("card").schema(Customer).attach(
        lambda shown: document(f"card of {shown['name']}", "text/plain", uri=f"crm://{shown['id']}"))

    @crm.action(readonly=True, returns=card, content_types=["text/plain", "image/png"])
    async def both(id: str) -> Any:
        """Presenter.attach and the handler's attach()."""
        return attach({"id": id, "name": "Ada"}, image(PNG))

    result = await ToolTester([crm]).call("crm", "both", {"id": "c1"})
    assert [type(c) for c in result.raw.content] == [EmbeddedResource, Image]  # the presenter's first
    assert result.raw.content[0].text == "card of Ada"


# -- 3. attach(..., data_block=False): only the content, unless an outputSchema is advertised ---------------------

def nodata_tool(exposition: str, untyped_sibling: bool) -> Tool:
    crm = Tool("crm", exposition=exposition)

    @crm.action(readonly=True, returns=Customer, content_types=["text/plain"])
    async def nodata(id: str) -> Any:
        """Only a document."""
        return attach({"id": id, "name": "Ada"}, lambda shown: document(f"for {shown['name']}", "text/plain",
                                                                        uri="crm://x"), data_block=False)

    if untyped_sibling:
        @crm.action(readonly=True)
        async def raw(id: str) -> dict[str, Any]:
            """Untyped: the grouped tool advertises no outputSchema."""
            return {"id": id}

    return crm


async def mcp_result(app: FastAPI, transport: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The raw `tools/call` result over the 2025-11-25 wire (a session), 2026-07-28 or stdio."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    if transport == "stdio":
        lines: list[dict[str, Any]] = []
        bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers={})
        try:
            await bridge.handle_line(json.dumps({**body, "params": {**body["params"], "_meta": MODERN_META}}))
        finally:
            await bridge.close()
        return next(m for m in lines if m.get("id") == 7)["result"]  # type: ignore[no-any-return]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        if transport == "mcp-2026":
            headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                       "mcp-name": name}
            r = await c.post("/mcp", headers=headers, json={**body, "params": {**body["params"], "_meta": MODERN_META}})
            return r.json()["result"]  # type: ignore[no-any-return]
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        r = await c.post("/mcp", json=init, headers=headers)
        headers.update({"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"})
        await c.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        r = await c.post("/mcp", json=body, headers=headers)
        return next(m for m in sse_messages(r.text) if m.get("id") == 7)["result"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("transport", ["mcp-2025", "mcp-2026", "stdio"])
@pytest.mark.parametrize(("exposition", "sibling", "schemas", "kept"), [
    ("grouped", True, True, False),   # the grouped tool advertises no outputSchema
    ("grouped", False, True, True),   # it advertises one: the spec requires structuredContent
    ("flat", True, True, True),
    ("flat", True, False, False),     # output_schemas=False: none advertised
])
async def test_data_block_false_sends_structured_content_only_with_an_output_schema(
        transport: str, exposition: str, sibling: bool, schemas: bool, kept: bool) -> None:
    app = MCPFusion("crm", tools=[nodata_tool(exposition, sibling)], output_schemas=schemas).build_app()
    registry = app.state.mcpfusion.registry
    listed = registry.mcp_tools()
    action = registry.tools["crm"].actions["nodata"]
    name = mcp_name(action)
    result = await mcp_result(app, transport, name, {"id": "c1", **({"action": "nodata"} if discriminated(action)
                                                                     else {})})
    entry = next(e for e in listed if e["name"] == name)
    assert ("outputSchema" in entry) is kept
    assert [c["type"] for c in result["content"]] == ["resource"] and not result.get("isError")
    assert result.get("structuredContent") == ({"id": "c1", "name": "Ada"} if kept else None)


# -- 4. a refused call and the same call that runs audit the same fields and digest -------------------------------

async def scoped(request: Request) -> dict[str, str]:
    token = request.headers.get("authorization", "").removeprefix("Bearer ")
    return {"sub": token, "tenant": "acme", "scope": "led:write" if token == "alice" else ""}


async def test_refused_and_run_calls_audit_the_same_fields_and_digest() -> None:
    events: list[dict[str, Any]] = []
    led = Tool("ledger")

    @led.action(destructive=True, confirm=True, scopes=["led:write"])
    async def void(id: str) -> str:
        """Void one entry."""
        return f"voided {id}"

    app = MCPFusion("ledger", tools=[led], middleware=[Audit(sink=events.append)]).build_app()
    app.add_middleware(RequireBearer, authenticate=scoped, prefixes=("/mcp", "/api/"))
    alice, rita = Caller(app, "rest", "ledger", token="alice"), Caller(app, "rest", "ledger", token="rita")
    try:
        asked = await alice.call("void", {"id": "inv_1"})
        sent = {"id": "inv_1", "_confirm": confirm_token(asked.text)}
        ran = await alice.call("void", sent)
        refused = await rita.call("void", sent)
    finally:
        await alice.aclose()
        await rita.aclose()
    assert (ran.code, refused.code) == (None, "FORBIDDEN")
    (_, run_event, refused_event) = events
    assert run_event["outcome"] == "ok" and refused_event["error_code"] == "FORBIDDEN"
    assert run_event["arguments"] == refused_event["arguments"]
    assert run_event["arguments"]["fields"] == ["_confirm", "id"]


# -- 5. a confirmation is bound to the app's cursor scope (the tenant a header chose) ----------------------------

def tenant(x_tenant: str = Header(default="acme")) -> str:
    return x_tenant


def tenants_app(voided: list[tuple[str, str]], scope: bool) -> FastAPI:
    led = Tool("ledger")

    @led.action(destructive=True, confirm="Void {id}?")
    async def void(id: str, t: str = Depends(tenant)) -> str:
        """Void one entry of the caller's tenant."""
        voided.append((t, id))
        return f"voided {id} in {t}"

    return MCPFusion("ledger", tools=[led], **({"cursor_scope": tenant} if scope else {})).build_app()


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2025", "mcp-2026", "stdio"])
async def test_a_confirm_token_of_one_tenant_runs_nothing_in_another(transport: str) -> None:
    voided: list[tuple[str, str]] = []
    app = tenants_app(voided, scope=True)
    acme, globex = Caller(app, transport, "ledger"), Caller(app, transport, "ledger")
    acme.headers["x-tenant"], globex.headers["x-tenant"] = "acme", "globex"
    try:
        token = confirm_token((await acme.call("void", {"id": "inv_1"})).text)
        elsewhere = await globex.call("void", {"id": "inv_1", "_confirm": token})
        assert elsewhere.code == "CONFIRMATION_REQUIRED" and voided == []
        here = await acme.call("void", {"id": "inv_1", "_confirm": token})
    finally:
        await acme.aclose()
        await globex.aclose()
    assert here.code is None and voided == [("acme", "inv_1")]


async def test_without_a_cursor_scope_a_confirmation_binds_the_caller_only() -> None:
    voided: list[tuple[str, str]] = []
    app = tenants_app(voided, scope=False)
    acme, globex = Caller(app, "rest", "ledger"), Caller(app, "rest", "ledger")
    acme.headers["x-tenant"], globex.headers["x-tenant"] = "acme", "globex"
    try:
        token = confirm_token((await acme.call("void", {"id": "inv_1"})).text)
        done = await globex.call("void", {"id": "inv_1", "_confirm": token})
    finally:
        await acme.aclose()
        await globex.aclose()
    assert done.code is None and voided == [("globex", "inv_1")]  # unchanged: the header is not the caller


async def test_a_2026_answer_given_in_one_tenant_is_asked_again_in_another() -> None:
    voided: list[tuple[str, str]] = []
    app = tenants_app(voided, scope=True)
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        async def call(tenant: str, **extra: Any) -> dict[str, Any]:
            headers = {"authorization": "Bearer alice", "x-tenant": tenant, "accept": "application/json",
                       "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "ledger"}
            params = {"name": "ledger", "arguments": {"action": "void", "id": "inv_1"}, "_meta": meta, **extra}
            r = await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                            "params": params})
            return r.json()["result"]  # type: ignore[no-any-return]

        first = await call("acme")
        (key, _), = first["inputRequests"].items()
        yes = {"inputResponses": {key: {"action": "accept", "content": {"confirm": True}}},
               "requestState": first["requestState"]}
        elsewhere = await call("globex", **yes)
        assert elsewhere["resultType"] == "input_required" and voided == []  # asked again, nothing run
        here = await call("acme", **yes)
    assert here.get("isError") is not True and voided == [("acme", "inv_1")]
