"""Authorization defects found by black-box probing: the bearer check under a path prefix, sessions bound to
`tenant_id`, scope strings split on U+0020 only, anonymous callers granted no scope, JWKS waits off the
threadpool, the resource URL's trailing slash, the 503 of an unreachable authorization server."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from starlette.requests import Request

from mcpfusion import Audit, MCPFusion, ProtectedResource, Tool
from mcpfusion.auth import AUTH_UNAVAILABLE, IntrospectionVerifier, JWTVerifier, bearer_token, unauthorized
from mcpfusion.authorization import scopes_of
from mcpfusion.identity import ANONYMOUS, AUTH_SCOPE_KEY, identity_of, tenant_of
from mcpfusion.middleware import ActionCall
from mcpfusion.testing import ToolTester
from tests.jwks_kit import JWKSEndpoint
from tests.service_kit import build, mcp, rest, serve

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
WELL_KNOWN = "/.well-known/oauth-protected-resource"


def client_of(app: Any, **transport: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, **transport), base_url="http://127.0.0.1")


async def call_mcp(client: httpx.AsyncClient, path: str, name: str, arguments: dict, token: str | None = None
                   ) -> httpx.Response:
    """One sessionless (2026-07-28) `tools/call`, answered as JSON."""
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": name, **({"authorization": f"Bearer {token}"} if token else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META}}
    return await client.post(path, json=body, headers=headers)


# -- 1. the bearer check wherever the app is served ---------------------------------------------------------

TOKENS = {"admin": {"sub": "u", "scope": "admin"}, "reader": {"sub": "r", "scope": "read"}}


def admin_app(**fusion: Any) -> FastAPI:
    admin = Tool("admin", description="admin", scopes=["admin"])

    @admin.action(destructive=True)
    async def drop_all() -> str:
        """Drop everything"""
        return "DROPPED EVERYTHING"

    async def authenticate(request):
        claims = TOKENS.get(bearer_token(request))
        if claims is None:
            raise unauthorized("Unknown token.")
        return claims

    resource = ProtectedResource(authorization_servers=["https://as"], authenticate=authenticate)
    return MCPFusion("x", tools=[admin], json_response=True, authorization=resource, **fusion).build_app()


def mounted() -> FastAPI:
    parent = FastAPI()
    parent.mount("/notes", admin_app())
    return parent


# (app, ASGI root_path, MCP URL path, REST URL path, the resource the client reached, its metadata's URL; the
# REST routes are a resource of their own, `.../api`, with their metadata at `.../oauth-protected-resource/api`)
SETUPS = {
    "root-path": (admin_app, "/notes", "/notes/mcp", "/notes/api/admin/drop_all", "http://127.0.0.1/notes/mcp",
                  f"http://127.0.0.1/notes{WELL_KNOWN}/mcp"),
    "mount": (mounted, "", "/notes/mcp", "/notes/api/admin/drop_all", "http://127.0.0.1/notes/mcp",
              f"http://127.0.0.1/notes{WELL_KNOWN}/mcp"),
    "mcp-path": (lambda: admin_app(path="/agent"), "", "/agent", "/api/admin/drop_all", "http://127.0.0.1/agent",
                 f"http://127.0.0.1{WELL_KNOWN}/agent"),
}
REST_OF = {"root-path": ("http://127.0.0.1/notes/api", f"http://127.0.0.1/notes{WELL_KNOWN}/api"),
           "mount": ("http://127.0.0.1/notes/api", f"http://127.0.0.1/notes{WELL_KNOWN}/api"),
           "mcp-path": ("http://127.0.0.1/api", f"http://127.0.0.1{WELL_KNOWN}/api")}


@pytest.mark.parametrize("setup", list(SETUPS))
async def test_the_bearer_check_and_scopes_hold_under_a_path_prefix_and_a_custom_mcp_path(setup):
    make, root_path, mcp_path, api_path, resource, metadata = SETUPS[setup]
    async with client_of(make(), root_path=root_path) as client:
        anonymous = [(await call_mcp(client, mcp_path, "admin", {"action": "drop_all"}), resource, metadata),
                     (await client.post(api_path, json={}), *REST_OF[setup])]
        for r, its_resource, its_metadata in anonymous:
            assert r.status_code == 401 and "DROPPED" not in r.text, r.text
            assert r.headers["www-authenticate"] == f'Bearer resource_metadata="{its_metadata}"'
            served = await client.get(its_metadata.removeprefix("http://127.0.0.1"))
            assert served.status_code == 200 and served.json()["resource"] == its_resource  # the URL resolves

        hidden = await call_mcp(client, mcp_path, "admin", {"action": "drop_all"}, "reader")
        assert hidden.status_code in (200, 400) and "error" in hidden.json() and "DROPPED" not in hidden.text
        forbidden = await client.post(api_path, json={}, headers={"authorization": "Bearer reader"})
        assert forbidden.status_code == 403 and "DROPPED" not in forbidden.text

        allowed = await call_mcp(client, mcp_path, "admin", {"action": "drop_all"}, "admin")
        assert allowed.status_code == 200 and "DROPPED EVERYTHING" in allowed.text
        allowed = await client.post(api_path, json={}, headers={"authorization": "Bearer admin"})
        assert allowed.status_code == 200 and allowed.json() == "DROPPED EVERYTHING"


def serve_under(app: FastAPI, root_path: str) -> AbstractContextManager[str]:
    """`app` on uvicorn with `--root-path` (a free port on 127.0.0.1), stopped on exit."""
    return serve(app, root_path=root_path)


async def test_the_reference_service_under_uvicorn_root_path_checks_tokens_and_scopes(tmp_path: Path):
    with serve_under(build(tmp_path), "/billing") as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as client:
            anonymous = await rest(client, "billing", "list_invoices")
            assert anonymous.status_code == 401
            metadata = f'{url}/billing{WELL_KNOWN}/api'  # (REST's own: its resource is .../billing/api)
            assert anonymous.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'
            assert (await mcp(client, "billing", "list_invoices")).status_code == 401
            # (uvicorn's --root-path: the proxy in front strips /billing)
            document = (await client.get(f"{WELL_KNOWN}/mcp")).json()
            assert document["resource"] == f"{url}/billing/mcp"

            write = await rest(client, "billing", "void_invoice", {"id": "inv_0001"}, "demo-support")
            assert write.status_code == 403 and "billing:write" in write.text
            payment = await mcp(client, "billing", "record_payment",
                                {"id": "inv_0001", "amount_cents": 1, "method": "card"}, "demo-support")
            assert "error" in payment.json() and "Unknown tool" in payment.text
            read = await rest(client, "billing", "list_invoices", token="demo-support")
            assert read.status_code == 200 and read.json()


# -- 2. sessions bound to the tenant, whichever claim names it ---------------------------------------------


def test_one_reading_of_the_tenant_for_sessions_and_calls():
    class Principal:
        issuer, subject, tenant_id = "https://as", "alice", "globex"

    acme = {"iss": "https://as", "sub": "alice", "tenant_id": "acme"}
    globex = {"iss": "https://as", "sub": "alice", "tenant_id": "globex"}
    assert identity_of(acme) != identity_of(globex)
    assert identity_of(globex) == identity_of(Principal()) and identity_of(globex)[1] == "globex"
    assert identity_of({**acme, "tenant": "acme"}) == identity_of({"iss": "https://as", "sub": "alice",
                                                                   "tenant": "acme"})
    for auth in (acme, globex, Principal(), {"sub": "a", "tenant": "t", "tenant_id": "other"}, {"sub": "a"}):
        call = ActionCall.__new__(ActionCall)  # (its tenant reads nothing but the request's scope)
        call.request = Request({"type": "http", "headers": [], AUTH_SCOPE_KEY: auth})
        assert call.tenant == tenant_of(auth) == identity_of(auth)[1]


async def test_a_session_is_not_usable_or_deletable_by_the_same_subject_of_another_tenant_id():
    tokens = {"acme-alice": {"iss": "https://as", "sub": "alice", "tenant_id": "acme", "scope": "n"},
              "globex-alice": {"iss": "https://as", "sub": "alice", "tenant_id": "globex", "scope": "n"}}
    events: list[dict] = []

    async def authenticate(request):
        claims = tokens.get(bearer_token(request))
        if claims is None:
            raise unauthorized("Unknown token.")
        return claims

    notes = Tool("notes", scopes=["n"])

    @notes.action(destructive=False)
    async def touch() -> str:
        """touch"""
        return "ok"

    app = MCPFusion("x", tools=[notes], json_response=True, middleware=[Audit(sink=events.append)],
                    authorization=ProtectedResource(authorization_servers=["https://as"],
                                                    authenticate=authenticate)).build_app()

    def headers(token: str, session: str | None = None) -> dict:
        return {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream",
                **({"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"} if session else {})}

    def rpc(method: str, params: dict | None = None) -> dict:
        return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}

    touch_call = rpc("tools/call", {"name": "notes", "arguments": {"action": "touch"}})
    async with client_of(app) as client:
        init = await client.post("/mcp", headers=headers("acme-alice"), json=rpc("initialize", {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
        sid = init.headers["mcp-session-id"]
        assert (await client.post("/mcp", headers=headers("acme-alice", sid), json=touch_call)).status_code == 200
        assert (await client.post("/mcp", headers=headers("globex-alice", sid), json=touch_call)).status_code == 404
        assert (await client.post("/mcp", headers=headers("globex-alice", sid), json=rpc("ping"))).status_code == 404
        assert (await client.delete("/mcp", headers=headers("globex-alice", sid))).status_code == 404
        still = await client.post("/mcp", headers=headers("acme-alice", sid), json=rpc("ping"))
        assert still.status_code == 200 and still.json()["result"] == {}
    assert [e["tenant"] for e in events] == ["acme"]


# -- 3. scope strings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("separator", ["\u00a0", "\t", "\n", "\r", "\u2028", "\u3000", "\x1c", "\x0b", "\u200b"])
def test_a_scope_string_is_split_on_the_space_character_alone(separator):
    assert scopes_of({"sub": "u", "scope": f"crm:read{separator}crm:admin"}) == frozenset()
    assert scopes_of({"sub": "u", "scope": f"crm:read crm:read{separator}crm:admin"}) == {"crm:read"}


def test_valid_scope_tokens_are_read_and_invalid_ones_grant_nothing():
    assert scopes_of({"scope": "a:read  b:write "}) == {"a:read", "b:write"}
    assert scopes_of({"scope": 'a "b" c\\d é'}) == {"a"}  # %x22, %x5C and non-ASCII are not scope characters
    assert scopes_of({"scp": ["a", "b\u00a0c", "", 3, "d"]}) == {"a", "d"}


# -- 4. anonymous callers under a protected resource -------------------------------------------------------


def crm_app(**fusion: Any) -> FastAPI:
    public = Tool("public")

    @public.action(readonly=True)
    async def hello() -> str:
        """hello"""
        return "hello"

    crm = Tool("crm", scopes=["crm:read"])

    @crm.action(readonly=True)
    async def get() -> str:
        """get"""
        return "record"

    @crm.action(scopes=["crm:admin"], destructive=True)
    async def erase_all() -> str:
        """erase"""
        return "ERASED"

    async def authenticate(request):
        if "authorization" not in request.headers:
            return None  # anonymous: the public actions only
        if bearer_token(request) != "reader":
            raise unauthorized("Unknown token.")
        return {"sub": "r", "scope": "crm:read"}

    resource = ProtectedResource(authorization_servers=["https://as"], authenticate=authenticate)
    return MCPFusion("x", tools=[public, crm], json_response=True, authorization=resource, **fusion).build_app()


@pytest.mark.parametrize("own_scopes_of", [False, True], ids=["default", "app-scopes_of"])
async def test_an_anonymous_caller_is_granted_no_scope_and_challenged(own_scopes_of):
    # An app's own scopes_of may not know the anonymous caller (here: no `scopes` attribute on a mapping).
    app = crm_app(scopes_of=lambda auth: frozenset(auth["scope"].split(" "))) if own_scopes_of else crm_app()
    async with client_of(app) as client:
        assert (await client.post("/api/public/hello", json={})).json() == "hello"
        for path in ("/api/crm/erase_all", "/api/crm/get"):
            refused = await client.post(path, json={})
            assert refused.status_code == 401 and "ERASED" not in refused.text, refused.text
            challenge = refused.headers["www-authenticate"]
            assert challenge.startswith('Bearer scope="crm:') and "error=" not in challenge
            assert f'resource_metadata="http://127.0.0.1{WELL_KNOWN}/api"' in challenge
        assert "crm:admin" in (await client.post("/api/crm/erase_all", json={})).headers["www-authenticate"]
        reader = await client.post("/api/crm/erase_all", json={}, headers={"authorization": "Bearer reader"})
        assert reader.status_code == 403

        listed = await client.post("/mcp", headers={"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                                                    "mcp-method": "tools/list"},
                                   json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
        assert [t["name"] for t in listed.json()["result"]["tools"]] == ["public"]
        hidden = await call_mcp(client, "/mcp", "crm", {"action": "erase_all"})
        assert "error" in hidden.json() and "ERASED" not in hidden.text

    tester = ToolTester(app.state.mcpfusion.registry, app=app)
    assert (await tester.call("crm", "erase_all")).is_error
    assert not (await tester.call("public", "hello")).is_error


def test_the_anonymous_caller_names_nobody():
    assert scopes_of(ANONYMOUS) == frozenset() and identity_of(ANONYMOUS) is None and tenant_of(ANONYMOUS) is None
    assert not ANONYMOUS and dict(ANONYMOUS) == {}


# -- 5. JWKS lookups wait on the event loop, not on threadpool threads -------------------------------------


def rsa_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return key, jwk


def signed(key: Any, kid: str, **claims: Any) -> str:
    now = int(time.time())
    return jwt.encode({"sub": "client-1", "iat": now, "exp": now + 600, **claims}, key, algorithm="RS256",
                      headers={"kid": kid})


async def test_unknown_key_ids_waiting_for_a_held_jwks_fetch_hold_no_thread_and_known_keys_verify():
    key, jwk = rsa_key("k1")
    stranger, _ = rsa_key("other")
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(jwk)
        verifier = JWTVerifier(jwks_url=endpoint.url, jwks_refetch_floor=0)
        verifier.jwks.timeout = 60  # the fetch ends when the test releases it, never by itself
        known = signed(key, "k1")
        assert (await verifier.averify(known))["sub"] == "client-1"  # the set is fetched, k1 known
        endpoint.delay = 60  # the authorization server hangs now (until released)
        limiter = anyio.to_thread.current_default_thread_limiter()
        waiting = [asyncio.create_task(verifier.averify(signed(stranger, f"made-up-{n}")))
                   for n in range(int(limiter.total_tokens) + 20)]  # more than the threadpool has threads
        while endpoint.in_flight != 1:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # every waiting verification has reached its wait
        assert limiter.borrowed_tokens == 0  # none of them holds a threadpool thread

        for _ in range(3):  # (wait_for only bounds a hang: with the fetch held, an answer came without it)
            assert (await asyncio.wait_for(verifier.averify(known), 20))["sub"] == "client-1"
        assert endpoint.in_flight == 1 and not any(task.done() for task in waiting)

        endpoint.release.set()
        outcomes = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(o, HTTPException) and o.status_code == 401 for o in outcomes)  # not in the set
    assert verifier.jwks.fetches == 2  # one refetch shared by all of them


# -- 6. the resource URL's trailing slash -------------------------------------------------------------------

SECRET = "hs-secret-0123456789-0123456789-abc"


@pytest.mark.parametrize("configured", ["http://testserver/mcp/", "http://testserver/mcp"])
def test_the_reference_service_accepts_the_advertised_audience_whatever_the_trailing_slash(tmp_path, configured):
    app = build(tmp_path, jwt_key=SECRET, demo_mode=False, resource_url=configured,
                authorization_servers=["https://issuer.test"])
    with TestClient(app) as client:
        advertised = client.get(f"{WELL_KNOWN}/mcp").json()["resource"]
        assert advertised == "http://testserver/mcp"
        now = int(time.time())
        for aud, status in ((advertised, 200), (advertised + "/", 200), ("http://testserver/other", 401)):
            token = jwt.encode({"sub": "u", "tenant": "acme", "role": "admin", "aud": aud, "exp": now + 600},
                               SECRET, algorithm="HS256")
            r = client.post("/api/billing/revenue_summary", json={}, headers={"authorization": f"Bearer {token}"})
            assert r.status_code == status, (aud, r.text)


async def test_verifiers_accept_either_spelling_of_their_audience():
    now = int(time.time())
    for audience, aud in (("https://x.test/mcp/", "https://x.test/mcp"), ("https://x.test/mcp", "https://x.test/mcp/")):
        verifier = JWTVerifier(key=SECRET, algorithms=["HS256"], audience=audience)
        assert verifier.verify(jwt.encode({"aud": aud, "exp": now + 60}, SECRET, algorithm="HS256"))["aud"] == aud
        introspection = IntrospectionVerifier("http://127.0.0.1:9/", client_id="c", client_secret="s",
                                              audience=audience)
        assert introspection._check({"active": True, "aud": [aud]}, now)["aud"] == [aud]
    with pytest.raises(HTTPException) as refused:
        JWTVerifier(key=SECRET, algorithms=["HS256"], audience="https://x.test/mcp").verify(
            jwt.encode({"aud": "https://x.test/mcp/other", "exp": now + 60}, SECRET, algorithm="HS256"))
    assert refused.value.status_code == 401


# -- 7. the authorization server unreachable ----------------------------------------------------------------


def unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def hello_app(verifier: Any) -> FastAPI:
    tool = Tool("t")

    @tool.action(readonly=True)
    async def hi() -> str:
        """hi"""
        return "hi"

    resource = ProtectedResource(resource="http://127.0.0.1/mcp", verifier=verifier)
    return MCPFusion("x", tools=[tool], authorization=resource).build_app()


@pytest.mark.parametrize("kind", ["jwks", "introspection"])
async def test_an_unreachable_authorization_server_is_an_auth_unavailable_503_on_rest_and_mcp(kind):
    down = f"http://127.0.0.1:{unused_port()}/"  # nothing listens there
    if kind == "jwks":
        verifier: Any = JWTVerifier(jwks_url=down + "jwks")
        token = signed(rsa_key("k1")[0], "k1")
        message = "The authorization server's keys could not be fetched; retry later."
    else:
        verifier = IntrospectionVerifier(down, client_id="c", client_secret="s", timeout=5)
        token = "opaque"
        message = "The authorization server could not check the token; retry later."
    headers = {"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"}
    async with client_of(hello_app(verifier)) as client:
        for path in ("/api/t/hi", "/mcp"):
            r = await client.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)
            assert r.status_code == 503 and r.headers["content-type"] == "application/problem+json", r.text
            body = r.json()
            assert body["code"] == AUTH_UNAVAILABLE and body["detail"] == message and body["recovery"]
            assert int(r.headers["retry-after"]) >= 1 and body["retry_after"] == int(r.headers["retry-after"])

