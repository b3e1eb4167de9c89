"""Sessions bound to the verified identity, session quotas per principal and tenant, bounded subscriptions."""

from __future__ import annotations

import copy
import inspect
import pickle
from dataclasses import FrozenInstanceError

import httpx
import jwt
import pytest

from mcpfusion.identity import identity_of
from mcpfusion.mcp.sessions import InMemorySessionStore, Session, SessionLimits, SessionQuotaError
from tests.mcp_app import build_fusion
from tests.service_kit import McpSession, asgi_client, build, sse_messages
from tests.test_service_auth import AUDIENCE, ISSUER, SECRET, claims

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def reply_of(r: httpx.Response) -> dict:
    messages = sse_messages(r.text) if "event-stream" in r.headers.get("content-type", "") else [r.json()]
    return next(m for m in messages if "id" in m)


async def test_refreshed_token_keeps_its_session_and_another_identity_does_not_get_it(tmp_path):
    app = build(tmp_path, demo_mode=False, jwt_key=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    first = jwt.encode(claims(exp=None) | {"exp": 2_000_000_000, "iat": 1_700_000_000}, SECRET, algorithm="HS256")
    refreshed = jwt.encode(claims(exp=None) | {"exp": 2_000_000_100, "iat": 1_700_000_100}, SECRET, algorithm="HS256")
    assert first != refreshed
    intruder = jwt.encode(claims(sub="user-2"), SECRET, algorithm="HS256")
    other_tenant = jwt.encode(claims(tenant="acme"), SECRET, algorithm="HS256")
    async with asgi_client(app) as client:
        session = McpSession(client, first)
        assert (await session.start()).status_code == 200
        session.headers["authorization"] = f"Bearer {refreshed}"
        reply = await session.call("billing", "list_invoices", {})
        assert reply["result"]["isError"] is False
        for token in (intruder, other_tenant):
            session.headers["authorization"] = f"Bearer {token}"
            r = await session.rpc("tools/call", {"name": "billing", "arguments": {"action": "list_invoices"}})
            assert r.status_code == 404, r.text


def test_identity_is_issuer_subject_and_tenant():
    from app.auth import Principal

    a = identity_of(Principal("u1", "acme", "admin", "https://issuer.example"))
    assert a == identity_of({"iss": "https://issuer.example", "sub": "u1", "tenant": "acme", "exp": 1})
    assert a[1] == "acme"
    assert a != identity_of(Principal("u1", "acme", "support", "https://other.example"))
    assert a != identity_of(Principal("u1", "globex", "admin", "https://issuer.example"))
    assert identity_of(None) is None and identity_of({"tenant": "acme"}) is None


async def test_per_principal_and_per_tenant_quotas_on_the_reference_service(tmp_path):
    app = build(tmp_path)
    app.state.mcpfusion.transport.sessions.limits = SessionLimits(total=100, per_principal=3, per_tenant=5)
    async with asgi_client(app) as client:
        opened = [await McpSession(client, "demo-support").start() for _ in range(4)]
        assert [r.status_code for r in opened] == [200, 200, 200, 429]
        assert opened[-1].headers["retry-after"] and "principal" in opened[-1].text
        admin = [await McpSession(client, "demo-admin").start() for _ in range(3)]  # same tenant: acme
        assert [r.status_code for r in admin] == [200, 200, 429]
        assert "tenant" in admin[-1].text
        assert (await McpSession(client, "demo-globex-admin").start()).status_code == 200
        # closing a session gives its slot back
        session = McpSession(client, "demo-admin")
        sid = opened[0].headers["mcp-session-id"]
        r = await client.delete("/mcp", headers={**session.headers, "authorization": "Bearer demo-support",
                                                 "mcp-session-id": sid})
        assert r.status_code == 200
        assert (await McpSession(client, "demo-support").start()).status_code == 200  # its slot is free again
        assert (await McpSession(client, "demo-support").start()).status_code == 429


async def test_in_memory_quota_frees_expired_sessions():
    store = InMemorySessionStore(idle_timeout=60, limits=SessionLimits(total=10, per_principal=1, per_tenant=10))
    await store.create(Session("a", "2025-11-25", principal="p", tenant="t"))
    with pytest.raises(SessionQuotaError):
        await store.create(Session("b", "2025-11-25", principal="p", tenant="t"))
    store._sessions["a"].last_seen -= 120  # idle past the timeout
    await store.create(Session("b", "2025-11-25", principal="p", tenant="t"))
    await store.create(Session("c", "2025-11-25"))  # anonymous sessions only count against the total


async def test_redis_store_enforces_the_same_quotas(redis_server):
    from mcpfusion.redis import from_url

    stores = from_url(redis_server.url, prefix="quota:", limits=SessionLimits(total=10, per_principal=2, per_tenant=3))
    try:
        sessions = stores.sessions
        await sessions.create(Session("a", "2025-11-25", principal="p1", tenant="t"))
        await sessions.create(Session("b", "2025-11-25", principal="p1", tenant="t"))
        with pytest.raises(SessionQuotaError, match="principal"):
            await sessions.create(Session("c", "2025-11-25", principal="p1", tenant="t"))
        await sessions.create(Session("d", "2025-11-25", principal="p2", tenant="t"))
        with pytest.raises(SessionQuotaError, match="tenant"):
            await sessions.create(Session("e", "2025-11-25", principal="p3", tenant="t"))
        await sessions.create(Session("f", "2025-11-25", principal="p3", tenant="other"))
        assert await sessions.delete("a")
        await sessions.create(Session("g", "2025-11-25", principal="p1", tenant="t"))
        assert (await sessions.get("g")).tenant == "t"
    finally:
        await stores.aclose()


# -- subscriptions -------------------------------------------------------------------------------------

async def test_subscriptions_are_bounded_and_known():
    app = build_fusion(max_subscriptions=2, max_uri_length=256, json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        r = await client.post("/mcp", json=init, headers=ACCEPT)
        headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}

        async def subscribe(uri):
            body = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": uri}}
            return reply_of(await client.post("/mcp", json=body, headers=headers))

        assert "result" in await subscribe("file:///readme.txt")
        missing = (await subscribe("file:///nothing-here.txt"))["error"]
        assert missing["code"] == -32002 and missing["data"] == {"uri": "file:///nothing-here.txt"}  # as read answers
        assert (await subscribe("invoices://" + "x" * 1_000_000 + "/summary"))["error"]["code"] == -32602
        assert "result" in await subscribe("invoices://inv_1/summary")  # a template's URI is a resource
        assert "result" in await subscribe("file:///readme.txt")  # already held: not counted twice
        third = await subscribe("file:///logo.png")
        assert third["error"]["code"] == -32602 and "at most 2" in third["error"]["message"]
        session = await app.state.mcpfusion.transport.sessions.get(headers["mcp-session-id"])
        assert session.subscriptions == ["file:///readme.txt", "invoices://inv_1/summary"]


async def test_server_without_resources_refuses_subscriptions():
    from mcpfusion import MCPFusion, Tool

    tool = Tool("t", description="x")

    @tool.action()
    async def ping() -> str:
        return "pong"

    app = MCPFusion("bare", tools=[tool], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        r = await client.post("/mcp", json=init, headers=ACCEPT)
        headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        for n in range(3):
            body = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": f"file:///{n}"}}
            assert reply_of(await client.post("/mcp", json=body, headers=headers))["error"]["code"] == -32002  # (2025-11-25)
        session = await app.state.mcpfusion.transport.sessions.get(headers["mcp-session-id"])
        assert session.subscriptions == []


def test_session_and_limits_keep_the_dataclass_behaviour():
    # Plain classes (slots.Fields / Frozen) standing for the dataclasses they were.
    first, second = Session("a", "2025-06-18"), Session("a", "2025-06-18")
    assert first.client_info is not second.client_info and first.subscriptions is not second.subscriptions
    assert first.created_at > 0 and first != second  # times of their own
    assert Session.from_dict(first.to_dict()) == first and copy.deepcopy(first) == first
    data = first.to_dict()
    assert list(data) == list(Session.__match_args__) and data["client_info"] is not first.client_info
    with pytest.raises(TypeError):
        hash(first)
    assert repr(Session("i", "v", created_at=1.0, last_seen=2.0)) == (
        "Session(id='i', protocol_version='v', client_info={}, client_capabilities={}, log_level=None, "
        "principal=None, tenant=None, subscriptions=[], initialized=False, created_at=1.0, last_seen=2.0, "
        "peer=None)")
    assert str(inspect.signature(Session).parameters["client_info"]) == "client_info: 'dict[str, Any]' = <factory>"

    limits = SessionLimits(per_tenant=5)
    assert repr(limits) == "SessionLimits(total=10000, per_principal=100, per_tenant=5)"
    assert limits == SessionLimits(10_000, 100, 5) != SessionLimits() and hash(limits) == hash((10_000, 100, 5))
    assert pickle.loads(pickle.dumps(limits)) == limits
    with pytest.raises(FrozenInstanceError):
        limits.total = 1  # type: ignore[misc]
