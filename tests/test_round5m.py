"""Who a caller is, read one way, and what a `subscriptions/listen` costs.

- A principal naming its subject `id` or `user_id` (as `ActionCall` reads it) is that subject for MCP sessions
  and per-caller state too: bob cannot go on with alice's 2026 `requestState` nor use her 2025 session.
- A principal that names no subject, on a request without an Authorization header, is bound to a digest of its
  fields (with a warning), never to "nobody in its tenant".
- `subscriptions/listen` with resource URIs is charged against the app's rate limit once, before any read:
  over the limit it is refused with -32010 as `resources/read` is, and no reader runs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import httpx
from fastapi import HTTPException
from starlette.requests import Request

from mcpfusion import Context, MCPFusion, ProtectedResource, RateLimit, Tool
from mcpfusion.identity import ANONYMOUS, AUTH_SCOPE_KEY, SUBJECT_NAMES, identity_of, subject_of
from mcpfusion.mcp.wire import caller_key, default_principal
from mcpfusion.middleware import ActionCall
from tests.mcp_app import serve

MODERN = "2026-07-28"
SESSION = "2025-11-25"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class User:
    id: str
    tenant_id: str


@dataclass
class Key:  # names no subject: what an app keeps of an API key
    key_name: str
    tenant: str


def request_of(auth: Any, headers: list[tuple[bytes, bytes]] | None = None) -> Request:
    return Request({"type": "http", "headers": headers or [], AUTH_SCOPE_KEY: auth})


# -- 1. one reading of the subject --------------------------------------------------------------------------


def test_every_subject_name_is_read_by_sessions_and_by_middleware_alike():
    assert SUBJECT_NAMES == ("subject", "sub", "id", "user_id")
    for name in SUBJECT_NAMES:
        for auth in ({name: "alice", "tenant": "acme"}, type("P", (), {name: "alice", "tenant": "acme"})()):
            call = ActionCall.__new__(ActionCall)
            call.request = request_of(auth)
            assert call.principal_id == subject_of(auth) == "alice"
            assert identity_of(auth) is not None and identity_of(auth)[1] == "acme"
            bob = {**auth, name: "bob"} if isinstance(auth, dict) else type("P", (), {name: "bob", "tenant": "acme"})()
            assert identity_of(auth) != identity_of(bob)
            assert caller_key(request_of(auth)) != caller_key(request_of(bob))
    # The first name found wins, in the same order on both sides.
    both = {"id": "row-7", "sub": "alice"}
    assert subject_of(both) == "alice" and identity_of(both) == identity_of({"sub": "alice"})


def build_bank(authenticate: Any) -> Any:
    pay = Tool("pay")

    @pay.action()
    async def transfer(amount: int, ctx: Context) -> str:
        """Transfer money after two approvals."""
        a = await ctx.elicit("Manager approval?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        b = await ctx.elicit("Final approval?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"transferred {amount}: {a} {b}"

    fusion = MCPFusion("bank", tools=[pay], authorization=ProtectedResource(
        authorization_servers=["https://as.example"], authenticate=authenticate))
    return fusion.build_app()


def by_api_key(keys: dict[str, Any]) -> Any:
    async def authenticate(request: Request) -> Any:
        found = keys.get(request.headers.get("x-api-key", ""))
        if found is None:
            raise HTTPException(401, "bad key")
        return found

    return authenticate


async def modern_call(c: httpx.AsyncClient, key: str, extra: dict[str, Any]) -> dict[str, Any]:
    headers = {"accept": "application/json", "mcp-protocol-version": MODERN, "mcp-method": "tools/call",
               "mcp-name": "pay", "x-api-key": key}
    params = {"name": "pay", "arguments": {"action": "transfer", "amount": 100}, "_meta": META, **extra}
    r = await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                    "params": params})
    return r.json()


async def open_session(c: httpx.AsyncClient, key: str) -> dict[str, str]:
    headers = {**ACCEPT, "x-api-key": key}
    r = await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers |= {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": SESSION}
    await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


async def tools_list_status(c: httpx.AsyncClient, headers: dict[str, str]) -> int:
    r = await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    return r.status_code


async def test_request_state_and_session_of_a_user_named_by_id_are_not_another_users():
    app = build_bank(by_api_key({"key-alice": User("alice", "acme"), "key-bob": User("bob", "acme")}))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        first = (await modern_call(c, "key-alice", {}))["result"]
        k1 = next(iter(first["inputRequests"]))
        second = (await modern_call(c, "key-alice", {"inputResponses": {k1: {"action": "accept", "content": {
            "ok": True}}}, "requestState": first["requestState"]}))["result"]
        assert second["resultType"] == "input_required"
        k2 = next(iter(second["inputRequests"]))
        answer = {"inputResponses": {k2: {"action": "accept", "content": {"ok": True}}},
                  "requestState": second["requestState"]}
        replayed = await modern_call(c, "key-bob", answer)
        assert replayed["error"]["code"] == -32602 and "Invalid requestState" in replayed["error"]["message"]
        assert (await modern_call(c, "key-alice", answer))["result"]["resultType"] == "complete"

        alice = await open_session(c, "key-alice")
        assert await tools_list_status(c, alice) == 200
        assert await tools_list_status(c, {**alice, "x-api-key": "key-bob"}) == 404


# -- 1b. a principal naming no subject ------------------------------------------------------------------------


async def test_a_principal_naming_no_subject_is_bound_to_its_fields_not_to_its_tenant(caplog):
    keys = {"key-alice": Key("alice-key", "acme"), "key-bob": Key("bob-key", "acme")}
    app = build_bank(by_api_key(keys))
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
            alice = await open_session(c, "key-alice")
            assert await tools_list_status(c, alice) == 200
            assert await tools_list_status(c, {**alice, "x-api-key": "key-bob"}) == 404
    assert any("names no subject" in r.getMessage() and "Key" in r.getMessage() for r in caplog.records)

    alice_key, bob_key = (default_principal(request_of(keys[k])) for k in ("key-alice", "key-bob"))
    assert alice_key[0] is not None and alice_key != bob_key and alice_key[1] == bob_key[1] == "acme"
    assert default_principal(request_of(Key("alice-key", "acme"))) == alice_key  # (stable across requests)
    # A credential, when sent, still tells callers apart; nobody named (no principal, ANONYMOUS) binds nothing.
    bearer = default_principal(request_of(keys["key-alice"], [(b"authorization", b"Bearer t1")]))
    assert bearer[0] != alice_key[0] and bearer[1] is None
    assert default_principal(request_of(None)) == default_principal(request_of(ANONYMOUS)) == (None, None)


def test_a_principal_whose_fields_cannot_be_read_fails_closed(caplog):
    class Opaque:
        __slots__ = ("handle",)

        def __init__(self) -> None:
            self.handle = object()  # (no data: its repr is an address another caller's object may reuse)

    @dataclass
    class Slotted:
        __slots__ = ("key",)
        key: str

    one = Opaque()
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        first, again = default_principal(request_of(one)), default_principal(request_of(one))
    assert first[0] is not None and again[0] is not None and first != again
    assert any("cannot be read" in r.getMessage() for r in caplog.records)
    assert default_principal(request_of(Slotted("a"))) != default_principal(request_of(Slotted("b")))
    assert default_principal(request_of(Slotted("a"))) == default_principal(request_of(Slotted("a")))


# -- 2. subscriptions/listen is charged ------------------------------------------------------------------------


def build_shop(limit: int, reads: list[str]) -> tuple[MCPFusion, Any]:
    async def authenticate(request: Request) -> dict[str, str]:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token not in ("alice", "bob"):
            raise HTTPException(401, "bad token")
        return {"sub": token, "tenant": "acme"}

    fusion = MCPFusion("shop", tools=[Tool("noop")], middleware=[RateLimit(limit, per=3600)],
                       authorization=ProtectedResource(authorization_servers=["https://as.example"],
                                                       authenticate=authenticate))

    @fusion.resource_template("invoice://{id}", mime_type="text/plain")
    async def invoice(id: str) -> str:  # noqa: A002
        reads.append(id)
        return f"invoice {id}"

    return fusion, fusion.build_app()


def modern_headers(method: str, token: str = "alice") -> dict[str, str]:
    return {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": method, "authorization": f"Bearer {token}"}


async def read(c: httpx.AsyncClient, uri: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": uri, "_meta": META}}
    r = await c.post("/mcp", json=body, headers={**modern_headers("resources/read"), "mcp-name": uri})
    return r.json()


async def listen_first_message(c: httpx.AsyncClient, uris: list[str]) -> tuple[int, dict[str, Any]]:
    """The status and first message of a listen (the acknowledgement of a stream, or the one JSON error)."""
    body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": uris}, "_meta": META}}
    async with c.stream("POST", "/mcp", json=body, headers=modern_headers("subscriptions/listen")) as r:
        if "event-stream" not in r.headers.get("content-type", ""):
            return r.status_code, json.loads(await r.aread())
        async for line in r.aiter_lines():
            if line.startswith("data:") and line[5:].strip():
                return r.status_code, json.loads(line[5:])
    raise AssertionError("the listen stream ended without a message")


async def test_listen_over_the_rate_limit_is_refused_before_any_read():
    reads: list[str] = []
    fusion, app = build_shop(1, reads)
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            assert "result" in await read(c, "invoice://r0")
            limited = await read(c, "invoice://r1")
            assert limited["error"]["code"] == -32010
            status, refused = await listen_first_message(c, [f"invoice://L{i}" for i in range(20)])
            assert "error" in refused, refused
            assert refused["id"] == 9 and refused["error"]["code"] == limited["error"]["code"]
            assert refused["error"]["data"]["status"] == 429 and refused["error"]["data"]["code"] == "RATE_LIMITED"
            assert "subscriptions/listen" in refused["error"]["message"]
            assert reads == ["r0"]
    assert fusion.transport.modern_wire.listening == {}  # (the refused listen holds no stream slot)


async def test_a_listen_that_reads_resources_counts_once_against_the_limit():
    reads: list[str] = []
    _, app = build_shop(2, reads)
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            status, ack = await listen_first_message(c, [f"invoice://L{i}" for i in range(5)])
            assert status == 200 and ack["method"] == "notifications/subscriptions/acknowledged"
            assert len(ack["params"]["notifications"]["resourceSubscriptions"]) == 5
            assert "result" in await read(c, "invoice://r0")  # the second of two
            assert (await read(c, "invoice://r1"))["error"]["code"] == -32010
