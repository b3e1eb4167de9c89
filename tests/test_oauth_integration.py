"""The reference service behind a real OAuth 2 authorization server (oidc-provider, tests/oauth_server.py):
JWT access tokens from the client-credentials grant, audience-bound to the MCP resource (RFC 8707), verified
through the server's JWKS on MCP (both wires) and REST, across a signing-key rotation."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import jwt
import pytest
from fastapi import FastAPI, HTTPException

from mcpfusion.auth import JWTVerifier
from tests.oauth_server import AuthorizationServer, running_authorization_server, signing_key
from tests.service_kit import McpSession, build, free_socket, mcp, rest, serve


@dataclass
class Stack:
    server: AuthorizationServer
    app: FastAPI
    base: str  # the reference service's URL

    @property
    def resource(self) -> str:
        return f"{self.base}/mcp"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    """The reference service (demo tokens off) trusting a running oidc-provider, both on free ports."""
    sock = free_socket()  # the service's port, known first: its /mcp URL is the tokens' audience
    resource = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    with running_authorization_server(tmp_path, resources=[resource]) as server:
        app = build(tmp_path, demo_mode=False, jwt_jwks_url=server.jwks_url, jwt_issuer=server.issuer,
                    jwt_audience=resource, jwt_algorithms=["RS256"])
        with serve(app, sock) as base:
            yield Stack(server, app, base)


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


async def test_provider_refuses_a_scope_the_client_was_not_given(stack):
    r = httpx.post(stack.server.token_endpoint, data={"grant_type": "client_credentials",
                                                      "scope": "billing:read billing:write"},
                   auth=("billing-support", "demo-support-secret"))
    assert r.status_code == 400 and r.json()["error"] == "invalid_scope"


async def test_tokens_from_the_provider_call_mcp_both_wires_and_rest(stack):
    token = stack.server.token("billing-admin", scope="billing:read", resource=stack.resource)
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        r = await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, token)
        assert r.status_code == 200, r.text
        assert r.json()["id"] == "inv_0001"
        r = await mcp(client, "billing", "get_invoice", {"id": "inv_0001"}, token)  # 2026-07-28, sessionless
        assert r.status_code == 200, r.text
        assert r.json()["result"]["isError"] is False
        session = McpSession(client, token)  # 2025-11-25, with a session
        assert (await session.start()).status_code == 200
        reply = await session.call("billing", "get_invoice", {"id": "inv_0001"})
        assert reply["result"]["isError"] is False
        # The globex client's token sees globex's data only (tenant claim from the provider).
        globex = stack.server.token("globex-admin", scope="billing:read", resource=stack.resource)
        r = await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, globex)
        assert r.status_code == 404, r.text


async def test_no_token_and_a_foreign_token_are_401(stack):
    async with httpx.AsyncClient(base_url=stack.base, timeout=30) as client:
        for r in (await rest(client, "billing", "list_invoices"), await mcp(client, "billing", "list_invoices")):
            assert r.status_code == 401, r.text
            assert r.headers["www-authenticate"].startswith("Bearer")
        # A token of this provider minted for another resource is refused by audience.
        foreign = signing_key("not-the-provider's")
        forged = jwt.encode({"iss": stack.server.issuer, "aud": stack.resource, "exp": 2**31, "tenant": "acme",
                             "role": "admin"}, jwt.PyJWK(foreign).key, algorithm="RS256", headers={"kid": "key-1"})
        r = await rest(client, "billing", "list_invoices", {}, forged)
        assert r.status_code == 401 and "InvalidSignatureError" in r.text
