"""Recoveries an agent can follow and declarations that do what they say: a completion's dependencies are
resolved per call (a multi-tenant completion sees the caller's tenant), confirmation and rate-limit
recoveries name the MCP tool as the agent calls it (REST still names the route), and the reference service's
`billing.remind` keeps the personal line it is given."""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from fastapi import Depends, FastAPI, Header, HTTPException

from mcpfusion import MCPFusion, RateLimit, Tool
from mcpfusion.confirm import CONFIRM_PARAM
from mcpfusion.testing import make_request
from tests.service_kit import confirm_token

MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {}}
NOTES = {"acme": ["a1", "a2"], "globex": ["g1"]}


# -- completions resolve their dependencies -------------------------------------------------------------------

def tenant_of(x_tenant: str = Header()) -> str:
    if x_tenant == "gone":
        raise HTTPException(404, "No such tenant.")
    if x_tenant == "banned":
        raise HTTPException(403, "Not for you.")
    return x_tenant


def notes_app() -> tuple[MCPFusion, FastAPI]:
    fusion = MCPFusion("notes")

    @fusion.resource_template("notes://{id}", mime_type="text/plain")
    def note(id: str, tenant: str = Depends(tenant_of)) -> str:
        return f"{tenant}'s {id}"

    @fusion.completion(resource_template="notes://{id}", argument="id")
    def note_ids(value: str, arguments: dict, tenant: str = Depends(tenant_of)) -> list[str]:
        return [i for i in NOTES[tenant] if i.startswith(value)]

    return fusion, fusion.build_app()


async def complete(app: FastAPI, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        return await client.post("/mcp", headers={
            "accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "completion/complete",
            **headers}, json={"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
                "ref": {"type": "ref/resource", "uri": "notes://{id}"}, "argument": {"name": "id", "value": ""},
                "_meta": MODERN_META}})


async def test_a_completion_gets_its_dependencies_solved_against_the_request():
    fusion, app = notes_app()
    completion = fusion.completions[("ref/resource", "notes://{id}", "id")]
    for tenant, values in NOTES.items():
        request = make_request(app, {"x-tenant": tenant})
        assert await completion(value="", arguments={}, request=request) == values
    assert await completion(value="a2", arguments={}, request=make_request(app, {"x-tenant": "acme"})) == ["a2"]


async def test_a_completion_sees_the_callers_tenant_over_mcp():
    _, app = notes_app()
    for tenant, values in NOTES.items():
        answer = (await complete(app, {"x-tenant": tenant})).json()
        assert answer["result"]["completion"]["values"] == values


async def test_a_completion_whose_dependency_refuses_is_a_clean_error():
    _, app = notes_app()
    missing = await complete(app, {})  # the dependency's header is not sent: its validation error
    assert missing.status_code < 500  # (400 on the 2026 wire, as for a prompt's -32602)
    error = missing.json()["error"]
    assert error["code"] == -32602 and "x-tenant" in error["message"]


async def test_a_completion_dependency_raising_http_errors_is_answered_as_for_a_prompt():
    fusion = MCPFusion("notes")

    def refusing() -> str:
        raise HTTPException(404, "No such tenant.")

    def forbidding() -> str:
        raise HTTPException(403, "Not for you.")

    @fusion.prompt()
    def ask(topic: str) -> str:
        return topic

    @fusion.resource_template("notes://{id}")
    def note(id: str) -> str:
        return id

    @fusion.completion(prompt="ask", argument="topic")
    def topics(value: str, tenant: str = Depends(refusing)) -> list[str]:
        return ["never"]

    @fusion.completion(resource_template="notes://{id}", argument="id")
    def ids(value: str, tenant: str = Depends(forbidding)) -> list[str]:
        return ["never"]

    app = fusion.build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                   "mcp-method": "completion/complete"}
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "completion/complete", "params": {
            "ref": {"type": "ref/prompt", "name": "ask"}, "argument": {"name": "topic", "value": ""},
            "_meta": MODERN_META}}
        gone = await client.post("/mcp", headers=headers, json=body)
        assert gone.status_code == 200 and gone.json()["error"]["code"] == -32010
        assert "No such tenant." in gone.json()["error"]["message"]
        body["params"] |= {"ref": {"type": "ref/resource", "uri": "notes://{id}"},
                           "argument": {"name": "id", "value": ""}}
        forbidden = await client.post("/mcp", headers=headers, json=body)
        assert forbidden.status_code == 403 and "Not for you." in forbidden.text  # as a prompt's 403


def test_a_completion_parameter_nothing_fills_is_refused_at_declaration():
    fusion = MCPFusion("notes")
    with pytest.raises(TypeError, match="limit is neither `value`, `arguments` nor a dependency"):
        @fusion.completion(prompt="ask", argument="topic")
        def topics(value: str, limit: int) -> list[str]:
            return []


# -- recoveries name the MCP tool the agent calls -------------------------------------------------------------

def shop_app(exposition: str) -> FastAPI:
    shop = Tool("shop", exposition=exposition)

    @shop.action(destructive=True, confirm="Delete order {id}?")
    async def delete_order(id: str) -> dict:
        """Delete an order."""
        return {"deleted": id}

    @shop.action(readonly=True, middleware=[RateLimit(1, per=60)])
    async def ping() -> dict:
        """Ping."""
        return {"ok": True}

    return MCPFusion("shop", tools=[shop]).build_app()


async def mcp_call(client: httpx.AsyncClient, name: str, arguments: dict[str, Any],
                   meta: dict[str, Any] = MODERN_META, **extra: Any) -> dict[str, Any]:
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": name}
    r = await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": meta, **extra}})
    return r.json()["result"]  # type: ignore[no-any-return]


def recovery(result: dict[str, Any]) -> str:
    text = result["content"][0]["text"]
    return text[text.index("<recovery>") + len("<recovery>"):text.index("</recovery>")]


@pytest.mark.parametrize(("exposition", "delete", "ping", "called"), [
    ("flat", ("shop_delete_order", {}), ("shop_ping", {}), ("shop_delete_order", "shop_ping")),
    ("grouped", ("shop", {"action": "delete_order"}), ("shop", {"action": "ping"}),
     ("shop with action delete_order", "shop with action ping")),
])
async def test_confirmation_and_rate_limit_recoveries_name_the_mcp_tool(exposition, delete, ping, called):
    app = shop_app(exposition)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        asked = await mcp_call(client, delete[0], {**delete[1], "id": "o1"})
        told = recovery(asked)
        assert f"Only if they agree, call {called[0]} again with exactly the same arguments" in told
        assert "shop.delete_order" not in told
        # Following it as written runs the action.
        done = await mcp_call(client, delete[0], {**delete[1], "id": "o1", CONFIRM_PARAM: confirm_token(told)})
        assert done["content"][0]["text"] == '{"deleted":"o1"}'
        await mcp_call(client, ping[0], ping[1])
        limited = await mcp_call(client, ping[0], ping[1])
        assert limited["isError"] and recovery(limited) == f"Wait 60 s, then call {called[1]} again."


async def test_rest_recoveries_still_name_the_route():
    app = shop_app("flat")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        asked = (await client.post("/api/shop/delete_order", json={"id": "o1"})).json()
        assert "Only if they agree, call POST /api/shop/delete_order again with exactly" in asked["recovery"]
        await client.post("/api/shop/ping", json={})
        limited = (await client.post("/api/shop/ping", json={})).json()
        assert limited["recovery"] == "Wait 60 s, then call POST /api/shop/ping again."


async def test_a_spent_confirmation_answer_names_the_mcp_tool_to_ask_again():
    app = shop_app("flat")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        first = await mcp_call(client, "shop_delete_order", {"id": "o1"}, meta)
        (key, _), = first["inputRequests"].items()
        yes = {key: {"action": "accept", "content": {"confirm": True}}}
        state = first["requestState"]
        done = await mcp_call(client, "shop_delete_order", {"id": "o1"}, meta, inputResponses=yes, requestState=state)
        assert done["content"][0]["text"] == '{"deleted":"o1"}'
        replayed = await mcp_call(client, "shop_delete_order", {"id": "o1"}, meta, inputResponses=yes,
                                  requestState=state)
        assert 'code="NOT_CONFIRMED"' in replayed["content"][0]["text"]
        assert recovery(replayed) == "Call shop_delete_order again to ask the user once more."


# -- billing.remind keeps its personal line -------------------------------------------------------------------

async def test_remind_records_the_personal_line(service_app, monkeypatch):
    from app import store as billing_store
    from app.auth import Principal
    from app.store import BillingStore

    monkeypatch.setattr(billing_store, "REMIND_COOLDOWN", dt.timedelta(0))  # two reminders in a row
    from mcpfusion import Context
    from mcpfusion.testing import ToolTester

    logged: list[Any] = []

    class Recording(Context):
        async def log(self, level: str, data: Any, logger: str | None = None) -> None:
            logged.append(data)

    tester = ToolTester(service_app.state.mcpfusion, app=service_app)
    admin = {"authorization": "Bearer demo-admin"}
    plain = await tester.call("billing", "remind", {"id": "inv_0001"}, headers=admin)
    personal = await tester.call("billing", "remind", {"id": "inv_0001", "message": "Please pay by Friday."},
                                 headers=admin, context=Recording(None, transport="mcp"))
    assert plain.error_code is None and personal.data["reminders_sent"] == 2
    assert logged == [f"reminder #2 queued for {personal.data['number']} with the personal line"]
    store = BillingStore(service_app.state.db, Principal("demo-admin", "acme", "admin"))
    sent = await store.reminders("inv_0001")
    assert [r["message"] for r in sent] == [None, "Please pay by Friday."]
    assert await BillingStore(service_app.state.db, Principal("x", "globex", "admin")).reminders("inv_0001") == []
