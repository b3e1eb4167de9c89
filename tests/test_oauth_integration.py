"""The reference service behind a real OAuth 2 authorization server (oidc-provider, tests/oauth_server.py):
JWT access tokens from the client-credentials grant, audience-bound to the MCP resource (RFC 8707), verified
through the server's JWKS on MCP (both wires) and REST; scopes decide what each caller sees and may call; a
client without a token finds the server from the 401 (RFC 9728), the official SDK client included."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import pytest
from fastapi import FastAPI, HTTPException
from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from mcpfusion import Tool
from mcpfusion.app import MCPFusion
from mcpfusion.auth import JWTVerifier
from mcpfusion.authorization import ProtectedResource
from tests.oauth_server import SECRETS, AuthorizationServer, running_authorization_server, signing_key
from tests.service_kit import (
    META,
    WRITES,
    McpSession,
    auth,
    build,
    free_socket,
    mcp,
    mcp_target,
    rest,
    serve,
    sse_messages,
)

LINES = [{"description": "Audit", "quantity": 2, "unit_price_cents": 1500}]
NEW_INVOICE = {"customer_id": "cus_0001", "due_date": "2031-01-31", "lines": LINES}


@dataclass
class Stack:
    server: AuthorizationServer
    app: FastAPI
    base: str  # the reference service's URL

    @property
    def resource(self) -> str:
        return f"{self.base}/mcp"

    def token(self, client_id: str, scope: str) -> str:
        return self.server.token(client_id, scope=scope, resource=self.resource)


@pytest.fixture
def settings() -> dict[str, Any]:
    """Settings of the reference service on top of the stack's (a test parametrizes it to change them)."""
    return {}


@pytest.fixture
def stack(tmp_path: Path, settings: dict[str, Any]) -> Iterator[Stack]:
    """The reference service (demo tokens off) trusting a running oidc-provider, both on free ports: its
    metadata names the provider, and tokens must name its /mcp URL as their audience."""
    sock = free_socket()  # the service's port, known first: its /mcp URL is the resource tokens are bound to
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    with running_authorization_server(tmp_path, resources=[resource]) as server:
        app = build(tmp_path, demo_mode=False, jwt_jwks_url=server.jwks_url, jwt_issuer=server.issuer,
                    jwt_algorithms=["RS256"], resource_url=resource, authorization_servers=[server.issuer],
                    oauth_token_url=server.token_endpoint, **settings)
        with serve(app, sock) as base:
            yield Stack(server, app, base)


async def modern(client: httpx.AsyncClient, method: str, params: dict[str, Any] | None = None,
                 token: str | None = None) -> httpx.Response:
    """One request on the sessionless 2026-07-28 wire."""
    params = {**(params or {}), "_meta": META}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method,
               **({"mcp-name": params["name"]} if "name" in params else {}), **auth(token)}
    return await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                             headers=headers)


def messages(r: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a reply, answered as SSE or as JSON."""
    return sse_messages(r.text) if "event-stream" in r.headers["content-type"] else [r.json()]


def challenge_params(header: str) -> dict[str, str]:
    """The auth-params of a `Bearer ...` challenge."""
    assert header.startswith("Bearer")
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', header))


async def test_provider_token_verifies_with_jwtverifier_against_its_jwks(stack):
    token = stack.server.token("billing-admin", scope="billing:read billing:write", resource=stack.resource)
    assert jwt.get_unverified_header(token)["typ"] == "at+jwt"
    verifier = JWTVerifier(jwks_url=stack.server.jwks_url, issuer=stack.server.issuer, audience=stack.resource)
    claims = await verifier.averify(token)
    assert claims["aud"] == stack.resource and claims["iss"] == stack.server.issuer
    assert claims["sub"] == claims["client_id"] == "billing-admin"
    assert (claims["tenant"], claims["role"]) == ("acme", "admin")
    assert claims["scope"].split() == ["billing:read", "billing:write"]
    # Bound to this resource: another audience refuses it (RFC 8707).
    other = JWTVerifier(jwks_url=stack.server.jwks_url, issuer=stack.server.issuer, audience="http://other/mcp")
    with pytest.raises(HTTPException) as refused:
        await other.averify(token)
    assert refused.value.status_code == 401 and "InvalidAudienceError" in str(refused.value.detail)


@pytest.mark.parametrize(("client", "asked", "granted"), [
    ("billing-support", "billing:read billing:write payments:write customers:read", "billing:read customers:read"),
    ("billing-support", "billing:read billing:write", "billing:read"),
    ("billing-admin", "billing:read billing:write nonsense", "billing:read billing:write"),
])
async def test_provider_grants_only_the_scopes_the_client_may_have(stack, client, asked, granted):
    """Asked for more (an MCP client asks for every scope the resource supports), a client gets the subset
    it was given (RFC 6749 section 3.3), never another scope."""
    r = httpx.post(stack.server.token_endpoint, data={"grant_type": "client_credentials", "scope": asked},
                   auth=(client, SECRETS[client]))
    assert r.status_code == 200, r.text
    assert r.json()["scope"] == granted
    claims = jwt.decode(r.json()["access_token"], options={"verify_signature": False})
    assert claims["scope"] == granted and claims["aud"] == stack.resource  # the default resource


async def test_right_scopes_are_answered_on_mcp_both_wires_and_rest(stack):
    reader = stack.token("billing-admin", "billing:read")
    writer = stack.token("billing-admin", "billing:read billing:write")
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        r = await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, reader)
        assert r.status_code == 200 and r.json()["id"] == "inv_0001", r.text
        r = await rest(client, "billing", "create_invoice", NEW_INVOICE, writer)
        assert r.status_code == 200 and r.json()["status"] == "draft", r.text
        for token, action, args in ((reader, "get_invoice", {"id": "inv_0001"}), (writer, "create_invoice", NEW_INVOICE)):
            r = await mcp(client, "billing", action, args, token)  # 2026-07-28, sessionless
            assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text
            session = McpSession(client, token)  # 2025-11-25, with a session
            assert (await session.start()).status_code == 200
            assert (await session.call("billing", action, args))["result"]["isError"] is False
        # The tenant claim comes from the provider: the globex client's token sees globex's data only.
        globex = stack.token("globex-admin", "billing:read")
        assert (await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, globex)).status_code == 404


async def test_a_missing_scope_is_403_insufficient_scope_on_rest_and_hidden_on_mcp(stack):
    token = stack.token("billing-admin", "billing:read customers:read")  # an admin's client asking for less
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        for action, args, needed in (("create_invoice", NEW_INVOICE, "billing:write"),
                                     ("record_payment", {"id": "inv_0001", "amount_cents": 100, "method": "card"},
                                      "payments:write")):
            r = await rest(client, "billing", action, args, token)
            assert r.status_code == 403, r.text
            params = challenge_params(r.headers["www-authenticate"])
            assert params["error"] == "insufficient_scope" and needed in params["scope"].split()
            assert params["resource_metadata"] == f"{stack.base}/.well-known/oauth-protected-resource/api"
            assert needed in r.json()["detail"]
        # On MCP the action is not offered, and calling it is answered like an unknown tool on both wires.
        name, arguments = mcp_target("billing", "create_invoice", NEW_INVOICE)
        r = await modern(client, "tools/call", {"name": name, "arguments": arguments}, token)
        assert r.json()["error"]["code"] == -32602 and f"Unknown tool: {name}" in r.json()["error"]["message"]
        session = McpSession(client, token)
        assert (await session.start()).status_code == 200
        reply = await session.call("billing", "create_invoice", NEW_INVOICE)
        assert reply["error"]["code"] == -32602, reply
        assert (await rest(client, "billing", "list_invoices", {}, token)).status_code == 200


@pytest.mark.parametrize("wire", ["rest", "2026-07-28", "2025-11-25"])
async def test_no_token_is_401_naming_the_metadata_that_names_the_authorization_server(stack, wire):
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        if wire == "rest":
            r = await rest(client, "billing", "list_invoices")
        elif wire == "2026-07-28":
            r = await modern(client, "tools/list")
        else:
            r = await McpSession(client, None).start()
        assert r.status_code == 401, r.text
        metadata_url = challenge_params(r.headers["www-authenticate"])["resource_metadata"]
        metadata = (await client.get(metadata_url)).json()
    # On REST, the REST routes' own resource (RFC 9728 section 3.3: the URL the client requested is under it).
    assert metadata["resource"] == (stack.resource.removesuffix("/mcp") + "/api" if wire == "rest" else stack.resource)
    assert metadata["authorization_servers"] == [stack.server.issuer]
    assert {"billing:read", "billing:write", "payments:write", "customers:read"} <= set(metadata["scopes_supported"])
    # ...whose own metadata (RFC 8414) says where to get a token: the real server's token endpoint.
    server = httpx.get(f"{metadata['authorization_servers'][0]}/.well-known/oauth-authorization-server").json()
    assert server["issuer"] == stack.server.issuer and server["token_endpoint"] == stack.server.token_endpoint
    assert "client_credentials" in server["grant_types_supported"]


async def test_foreign_tokens_are_401(stack):
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        # Signed by a key the provider does not publish, under a kid it does.
        forged = jwt.encode({"iss": stack.server.issuer, "aud": stack.resource, "exp": 2**31, "tenant": "acme",
                             "role": "admin", "scope": "billing:read"}, jwt.PyJWK(signing_key("key-1")).key,
                            algorithm="RS256", headers={"kid": "key-1"})
        r = await rest(client, "billing", "list_invoices", {}, forged)
        assert r.status_code == 401 and "InvalidSignatureError" in r.text
        # A real token of the provider, for another resource (RFC 8707): refused by audience.
        stack.server.restart(stack.server.keys, resources=[stack.resource, "http://127.0.0.1:1/mcp"])
        elsewhere = stack.server.token("billing-admin", scope="billing:read", resource="http://127.0.0.1:1/mcp")
        r = await rest(client, "billing", "list_invoices", {}, elsewhere)
        assert r.status_code == 401 and "InvalidAudienceError" in r.text


async def test_a_rotated_signing_key_is_accepted_after_the_jwks_refresh(stack):
    before = stack.token("billing-admin", "billing:read")
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        assert (await rest(client, "billing", "list_invoices", {}, before)).status_code == 200  # the JWKS is fetched
        # Rotation: the provider restarts with a new key first (it signs), the old one still published.
        stack.server.restart([signing_key("key-2"), *stack.server.keys])
        after = stack.token("billing-admin", "billing:read")
        assert jwt.get_unverified_header(after)["kid"] == "key-2"
        for token in (after, before):
            assert (await rest(client, "billing", "list_invoices", {}, token)).status_code == 200
            r = await mcp(client, "billing", "list_invoices", {}, token)
            assert r.status_code == 200 and r.json()["result"]["isError"] is False, r.text
            session = McpSession(client, token)
            assert (await session.start()).status_code == 200


@pytest.mark.parametrize("settings", [{"jwks_refetch_floor": 0}])  # a second rotation at once, without waiting
async def test_a_retired_signing_key_is_refused_after_the_next_rotation(stack):
    first = stack.token("billing-admin", "billing:read")
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        assert (await rest(client, "billing", "list_invoices", {}, first)).status_code == 200
        stack.server.restart([signing_key("key-2"), *stack.server.keys])
        assert (await rest(client, "billing", "list_invoices", {}, stack.token("billing-admin", "billing:read"))
                ).status_code == 200
        stack.server.restart([signing_key("key-3"), stack.server.keys[0]])  # key-1 leaves the JWKS
        newest = stack.token("billing-admin", "billing:read")
        assert (await rest(client, "billing", "list_invoices", {}, newest)).status_code == 200  # refetched
        for r in (await rest(client, "billing", "list_invoices", {}, first),
                  await mcp(client, "billing", "list_invoices", {}, first)):
            assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"], r.text


@pytest.mark.parametrize("wire", ["2026-07-28", "2025-11-25"])
async def test_support_tools_list_shows_no_write_action(stack, wire):
    tokens = {"support": stack.token("billing-support", "billing:read customers:read"),
              "admin": stack.token("billing-admin", "billing:read billing:write payments:write customers:read")}
    listed: dict[str, dict[str, Any]] = {}
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        for who, token in tokens.items():
            if wire == "2026-07-28":
                r = await modern(client, "tools/list", {}, token)
                assert r.status_code == 200, r.text
                tools = r.json()["result"]["tools"]
            else:
                session = McpSession(client, token)
                assert (await session.start()).status_code == 200
                r = await session.rpc("tools/list")
                tools = next(m for m in messages(r) if m.get("id") == session.next_id)["result"]["tools"]
            listed[who] = {t["name"]: t for t in tools}
    support, admin = listed["support"], listed["admin"]
    assert {"billing_read", "customers"} <= set(support)
    assert all(t["annotations"].get("readOnlyHint") is True for t in support.values()), support
    assert not offered(support) & WRITES
    assert not [w for w in WRITES if re.search(rf"\b{w}\b", str(support))]  # not even in a description
    # The admin's full-scope token sees the writes: what support misses is the scopes, not the service.
    assert {"billing_write", "billing_void_invoice"} <= set(admin) and offered(admin) >= WRITES


def offered(tools: dict[str, dict[str, Any]]) -> set[str]:
    """The actions a tools/list offers: each tool's `action` enum, or the tool itself (one action per tool)."""
    found = set()
    for name, tool in tools.items():
        enum = tool["inputSchema"].get("properties", {}).get("action", {}).get("enum")
        found |= set(enum) if enum else {name.removeprefix("billing_")}
    return found


class MemoryStorage:
    """The SDK's TokenStorage, in memory (the provider keeps the token it got here)."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 sessionless, 2025-11-25 with a session
async def test_sdk_client_credentials_provider_discovers_the_metadata_from_a_401(stack, mode):
    """The official SDK's OAuth (mcp.client.auth.extensions.client_credentials) with no token to start
    with: the 401 names the resource metadata, which names the authorization server; the SDK reads both
    documents, gets a token with the client-credentials grant and lists and calls tools with it."""
    exchanges: list[tuple[str, str, int]] = []

    async def record(response: httpx2.Response) -> None:
        exchanges.append((response.request.method, str(response.request.url), response.status_code))

    storage = MemoryStorage()
    auth = ClientCredentialsOAuthProvider(server_url=stack.resource, storage=storage, client_id="billing-admin",
                                          client_secret=SECRETS["billing-admin"], issuer=stack.server.issuer)
    async with (httpx2.AsyncClient(auth=auth, event_hooks={"response": [record]}, timeout=30) as http,
                Client(streamable_http_client(stack.resource, http_client=http), mode=mode) as client):
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"billing_read", "billing_write", "billing_void_invoice"} <= tools
        name, arguments = mcp_target("billing", "get_invoice", {"id": "inv_0001"})
        result = await client.call_tool(name, arguments)
        assert result.is_error is False, result
    steps = [(method, url, status) for method, url, status in exchanges]
    metadata_url = f"{stack.base}/.well-known/oauth-protected-resource/mcp"
    assert steps[0][1:] == (stack.resource, 401)
    assert ("GET", metadata_url, 200) in steps
    assert ("GET", f"{stack.server.issuer}/.well-known/oauth-authorization-server", 200) in steps
    assert ("POST", stack.server.token_endpoint, 200) in steps
    assert steps.index(("GET", metadata_url, 200)) < steps.index(("POST", stack.server.token_endpoint, 200))
    got_token = steps.index(("POST", stack.server.token_endpoint, 200))
    assert [status for _, url, status in steps[got_token:] if url == stack.resource and status >= 400] == [], steps
    token = storage.tokens
    assert token is not None
    claims = jwt.decode(token.access_token, options={"verify_signature": False})
    assert claims["aud"] == stack.resource and claims["iss"] == stack.server.issuer  # RFC 8707 resource sent


async def test_sdk_client_of_the_support_role_sees_and_calls_no_write(stack):
    """The same SDK flow for the support client: it asks for every scope the metadata lists, gets only its
    own, and the service offers it no write (calling one is answered like an unknown tool)."""
    storage = MemoryStorage()
    auth = ClientCredentialsOAuthProvider(server_url=stack.resource, storage=storage, client_id="billing-support",
                                          client_secret=SECRETS["billing-support"], issuer=stack.server.issuer)
    async with (httpx2.AsyncClient(auth=auth, timeout=30) as http,
                Client(streamable_http_client(stack.resource, http_client=http)) as client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"billing_read", "customers"}
        assert all(t.annotations.read_only_hint for t in tools.values())
        name, arguments = mcp_target("billing", "void_invoice", {"id": "inv_0001", "reason": "duplicate"})
        with pytest.raises(Exception, match=f"Unknown tool: {name}"):
            await client.call_tool(name, arguments)
    assert storage.tokens is not None and storage.tokens.scope == "billing:read customers:read"



@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[Stack]:
    """A small mcpfusion server whose whole resource needs `billing:read` (ProtectedResource(required_scopes=))
    and whose tokens are verified through the real provider's JWKS."""
    sock = free_socket()
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    notes = Tool("notes", description="Notes")

    @notes.action(readonly=True)
    async def count() -> dict:
        """How many notes there are"""
        return {"count": 3}

    with running_authorization_server(tmp_path, resources=[resource]) as server:
        verifier = JWTVerifier(jwks_url=server.jwks_url, issuer=server.issuer, audience=resource)
        protected = ProtectedResource(resource=resource, authorization_servers=[server.issuer], verifier=verifier,
                                      required_scopes=["billing:read"])
        app = MCPFusion("notes", tools=[notes], authorization=protected).build_app()
        with serve(app, sock) as base:
            yield Stack(server, app, base)


async def test_a_token_without_the_resources_required_scope_is_403_on_mcp_both_wires(guarded):
    weak = guarded.token("billing-admin", "customers:read")
    async with httpx.AsyncClient(base_url=guarded.base, timeout=30) as client:
        for r in (await McpSession(client, weak).start(), await modern(client, "tools/list", {}, weak)):
            assert r.status_code == 403, r.text
            params = challenge_params(r.headers["www-authenticate"])
            assert params["error"] == "insufficient_scope" and params["scope"] == "billing:read"
            assert params["resource_metadata"] == f"{guarded.base}/.well-known/oauth-protected-resource/mcp"
        strong = guarded.token("billing-admin", "billing:read")
        assert (await McpSession(client, strong).start()).status_code == 200
        listed = await modern(client, "tools/list", {}, strong)
        assert [t["name"] for t in listed.json()["result"]["tools"]] == ["notes"]


async def test_sdk_client_steps_up_on_403_insufficient_scope(guarded):
    """The SDK holding a token without the required scope gets the 403, asks the provider for the challenged
    scope on top of what it had, and goes on with the new token."""
    storage = MemoryStorage()
    storage.tokens = OAuthToken(access_token=guarded.token("billing-admin", "customers:read"), token_type="Bearer",
                                scope="customers:read")
    exchanges: list[tuple[str, int]] = []

    async def record(response: httpx2.Response) -> None:
        exchanges.append((str(response.request.url), response.status_code))

    auth = ClientCredentialsOAuthProvider(server_url=guarded.resource, storage=storage, client_id="billing-admin",
                                          client_secret=SECRETS["billing-admin"], issuer=guarded.server.issuer)
    async with (httpx2.AsyncClient(auth=auth, event_hooks={"response": [record]}, timeout=30) as http,
                Client(streamable_http_client(guarded.resource, http_client=http)) as client):
        result = await client.call_tool("notes", {"action": "count"})
        assert result.is_error is False and "count" in result.content[0].text and "3" in result.content[0].text
    assert exchanges[0] == (guarded.resource, 403)
    assert (guarded.server.token_endpoint, 200) in exchanges
    assert storage.tokens is not None and set(storage.tokens.scope.split()) == {"customers:read", "billing:read"}


@pytest.fixture
def introspecting(tmp_path: Path) -> Iterator[Stack]:
    """The reference service checking the provider's opaque tokens at its introspection endpoint (RFC 7662),
    with its own client credentials."""
    sock = free_socket()
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    with running_authorization_server(tmp_path, resources=[resource], opaque=[resource]) as server:
        app = build(tmp_path, demo_mode=False, jwt_issuer=server.issuer, resource_url=resource,
                    authorization_servers=[server.issuer], introspection_url=server.introspection_endpoint,
                    introspection_client_id="billing-api", introspection_client_secret=SECRETS["billing-api"])
        with serve(app, sock) as base:
            yield Stack(server, app, base)


async def test_opaque_tokens_are_checked_by_introspection(introspecting):
    support = introspecting.token("billing-support", "billing:read customers:read")
    assert support.count(".") != 2  # opaque: not a JWT the service could read by itself
    async with httpx.AsyncClient(base_url=introspecting.base, timeout=30) as client:
        r = await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, support)
        assert r.status_code == 200 and r.json()["id"] == "inv_0001", r.text
        r = await rest(client, "billing", "create_invoice", NEW_INVOICE, support)
        assert r.status_code == 403 and "insufficient_scope" in r.headers["www-authenticate"], r.text
        listed = await modern(client, "tools/list", {}, support)  # tenant, role and scope from introspection
        assert {t["name"] for t in listed.json()["result"]["tools"]} == {"billing_read", "customers"}
        session = McpSession(client, support)
        assert (await session.start()).status_code == 200
        assert (await session.call("billing", "get_invoice", {"id": "inv_0001"}))["result"]["isError"] is False
        # A token the provider does not know (or no longer knows) is inactive: 401 naming the metadata.
        r = await rest(client, "billing", "list_invoices", {}, support[:-4] + "AAAA")
        assert r.status_code == 401 and "resource_metadata=" in r.headers["www-authenticate"], r.text
