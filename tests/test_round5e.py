"""A token naming no audience under a configured audience (RFC 8707, the MCP authorization spec: a server
accepts only tokens issued for it): a 401 `invalid_token` naming the resource metadata, on MCP (both wires)
and REST, for JWTs and introspected tokens; a resource derived from the request stays lenient."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from fastapi import HTTPException

from mcpfusion import MCPFusion, ProtectedResource, Tool
from mcpfusion.auth import IntrospectionVerifier, JWTVerifier, check_audience
from tests.service_kit import asgi_client, build, mcp, rest

RESOURCE = "https://notes.example.test/mcp"
ISSUER = "https://as.example.test"
KEY = "k" * 40
METADATA = 'resource_metadata="https://notes.example.test/.well-known/oauth-protected-resource/mcp"'
NO_AUD = object()  # a token whose claims carry no `aud`


def claims(aud: Any) -> dict[str, Any]:
    values = {"iss": ISSUER, "sub": "u1", "scope": "notes:read", "exp": int(time.time()) + 600}
    return values if aud is NO_AUD else {**values, "aud": aud}


def signed(aud: Any) -> str:
    return jwt.encode(claims(aud), KEY, algorithm="HS256")


def introspected(tokens: dict[str, dict[str, Any]], **options: Any) -> IntrospectionVerifier:
    """An introspection verifier whose endpoint (in process) answers `tokens` (token -> claims, active)."""

    def answer(request: httpx.Request) -> httpx.Response:
        token = dict(httpx.QueryParams(request.content.decode()))["token"]
        return httpx.Response(200, json={"active": True, **tokens[token]} if token in tokens else {"active": False})

    return IntrospectionVerifier("https://as.example.test/introspect", client_id="rs", client_secret="s",
                                 http=httpx.AsyncClient(transport=httpx.MockTransport(answer)), **options)


def notes_app(verifier: Any, resource: str | None = RESOURCE) -> Any:
    notes = Tool("notes", scopes=["notes:read"])

    @notes.action(readonly=True)
    async def show() -> dict:
        """Show the notes"""
        return {"ok": True}

    protected = ProtectedResource(resource=resource, authorization_servers=[ISSUER], verifier=verifier)
    return MCPFusion("notes", tools=[notes], authorization=protected, json_response=True).build_app()


async def statuses(app: Any, token: str) -> list[httpx.Response]:
    """REST, a 2025-11-25 initialize and a sessionless 2026-07-28 tools/call, with `token`."""
    auth = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        modern = await client.post("/mcp", headers={**auth, "accept": "application/json, text/event-stream"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        sessionless = await client.post("/mcp", headers={
            **auth, "accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
            "mcp-name": "notes"}, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "notes", "arguments": {"action": "show"}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}}})
        return [await client.post("/api/notes/show", json={}, headers=auth), modern, sessionless]


def jwt_case(aud: Any) -> tuple[Any, str]:
    return JWTVerifier(key=KEY, algorithms=["HS256"], issuer=ISSUER), signed(aud)


def introspection_case(aud: Any) -> tuple[Any, str]:
    return introspected({"opaque": claims(aud)}, issuer=ISSUER), "opaque"


CASES = [pytest.param(jwt_case, id="jwt"), pytest.param(introspection_case, id="introspection")]


@pytest.mark.parametrize("case", CASES)
async def test_a_token_naming_no_audience_is_a_401_under_a_configured_resource_on_mcp_and_rest(case):
    verifier, token = case(NO_AUD)
    for r in await statuses(notes_app(verifier), token):
        assert r.status_code == 401, (r.request.url, r.text)
        challenge = r.headers["www-authenticate"]
        # (REST's challenge points at the /api resource's own metadata, RFC 9728 §3.3; /mcp's at /mcp's)
        metadata = METADATA if r.request.url.path.startswith("/mcp") else METADATA.replace("/mcp\"", "/api\"")
        assert challenge.startswith('Bearer error="invalid_token"') and metadata in challenge, challenge
        assert "names no audience" in r.text and "Traceback" not in r.text


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("aud", [RESOURCE, RESOURCE + "/", [ISSUER, RESOURCE]])
async def test_a_token_for_the_configured_resource_still_passes(case, aud):
    verifier, token = case(aud)
    assert [r.status_code for r in await statuses(notes_app(verifier), token)] == [200, 200, 200]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("aud", [None, [], "https://mail.example.test/mcp"])
async def test_an_empty_or_foreign_audience_is_a_401_under_a_configured_resource(case, aud):
    verifier, token = case(aud)
    assert [r.status_code for r in await statuses(notes_app(verifier), token)] == [401, 401, 401]


@pytest.mark.parametrize("case", CASES)
async def test_a_derived_resource_lets_a_token_without_audience_in_but_not_one_for_another(case):
    """No resource= configured: the URL derived from the Host header refuses a foreign audience only."""
    verifier, token = case(NO_AUD)
    assert [r.status_code for r in await statuses(notes_app(verifier, None), token)] == [200, 200, 200]
    verifier, token = case("https://mail.example.test/mcp")
    assert [r.status_code for r in await statuses(notes_app(verifier, None), token)] == [401, 401, 401]


async def test_a_verifier_with_its_own_audience_refuses_a_token_without_aud():
    verifier = JWTVerifier(key=KEY, algorithms=["HS256"], audience=RESOURCE)
    with pytest.raises(HTTPException) as refused:
        await verifier.averify(signed(NO_AUD))
    assert refused.value.status_code == 401
    opaque = introspected({"opaque": claims(NO_AUD)}, audience=RESOURCE)
    with pytest.raises(HTTPException) as refused:
        await opaque.averify("opaque")
    assert refused.value.status_code == 401 and "names no audience" in str(refused.value.detail)


async def test_verifiers_require_the_audience_passed_when_told_to():
    verifier = JWTVerifier(key=KEY, algorithms=["HS256"])
    assert (await verifier.averify(signed(NO_AUD), audience=RESOURCE))["sub"] == "u1"  # derived: lenient
    with pytest.raises(HTTPException) as refused:
        await verifier.averify(signed(NO_AUD), audience=RESOURCE, audience_required=True)
    assert refused.value.status_code == 401
    with pytest.raises(HTTPException):
        verifier.verify(signed(NO_AUD), audience=RESOURCE, audience_required=True)
    assert verifier.verify(signed(RESOURCE), audience=RESOURCE, audience_required=True)["aud"] == RESOURCE
    with pytest.raises(HTTPException):
        check_audience({"sub": "u1"}, RESOURCE, required=True)
    check_audience({"sub": "u1"}, RESOURCE)  # not required: passes
    check_audience({"sub": "u1"}, None, required=True)  # no audience to check


# -- the reference service ---------------------------------------------------------------------------------

SERVICE_RESOURCE = "http://127.0.0.1/mcp"


def service_token(aud: Any) -> str:
    values = {"sub": "user-1", "tenant": "acme", "role": "support", "iss": ISSUER, "exp": int(time.time()) + 600}
    return jwt.encode(values if aud is NO_AUD else {**values, "aud": aud}, KEY, algorithm="HS256")


async def service_statuses(app: Any, token: str) -> list[int]:
    async with asgi_client(app) as client:
        return [(await rest(client, "billing", "list_invoices", {}, token)).status_code,
                (await mcp(client, "billing", "list_invoices", {}, token)).status_code]


async def test_the_service_refuses_a_jwt_without_aud_when_its_resource_url_is_set(tmp_path):
    app = build(tmp_path, demo_mode=False, jwt_key=KEY, jwt_issuer=ISSUER, resource_url=SERVICE_RESOURCE)
    assert await service_statuses(app, service_token(NO_AUD)) == [401, 401]
    assert await service_statuses(app, service_token(SERVICE_RESOURCE)) == [200, 200]


async def test_the_service_requires_the_configured_resource_of_a_verifier_without_audience(tmp_path):
    """Whatever verifier the app holds: a configured resource URL is an audience every token must name."""
    app = build(tmp_path, demo_mode=False, jwt_key=KEY, jwt_issuer=ISSUER, resource_url=SERVICE_RESOURCE)
    app.state.jwt_verifier = JWTVerifier(key=KEY, algorithms=["HS256"], issuer=ISSUER)
    assert await service_statuses(app, service_token(NO_AUD)) == [401, 401]
    assert await service_statuses(app, service_token(SERVICE_RESOURCE)) == [200, 200]
    assert await service_statuses(app, service_token("https://other.example/mcp")) == [401, 401]


async def test_demo_tokens_name_no_audience_and_still_work_in_demo_mode(tmp_path):
    """The demo tokens are the service's own fixed credentials, not issued for a resource by an authorization
    server: demo mode accepts them with a resource URL set, while its JWTs must name the resource."""
    app = build(tmp_path, jwt_key=KEY, jwt_issuer=ISSUER, resource_url=SERVICE_RESOURCE)
    assert await service_statuses(app, "demo-support") == [200, 200]
    assert await service_statuses(app, service_token(NO_AUD)) == [401, 401]
