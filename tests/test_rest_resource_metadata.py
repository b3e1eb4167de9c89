"""The REST routes are a protected resource of their own (/tmp/probe2 item 3). RFC 9728 section 3.3: a client
that got `resource_metadata` from a 401 on `/api/...` must find that URL as the document's `resource`, or not
use it. `/api`'s challenge now points at `/.well-known/oauth-protected-resource/api` (resource `.../api`),
`/mcp`'s stays as it was, and a token issued for the REST resource is accepted on REST (one for the MCP
resource still is)."""

from __future__ import annotations

import time

import jwt
import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.auth import JWTVerifier
from mcpfusion.authorization import WELL_KNOWN, ProtectedResource

SECRET = "a-test-secret-of-thirty-two-bytes!!"
shop = Tool("shop", description="Shop")


@shop.action(readonly=True)
async def echo(text: str = "a") -> str:
    """Echo."""
    return text


async def refuse(request):
    raise HTTPException(401, "no token", headers={"WWW-Authenticate": "Bearer"})


def served(resource: str | None = None, **options) -> TestClient:
    protected = ProtectedResource(resource=resource, authorization_servers=["https://as.example"], **options)
    return TestClient(MCPFusion("shop", tools=[shop], authorization=protected).build_app())


def _metadata_url(answer) -> str:
    challenge = answer.headers["www-authenticate"]
    return challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize("resource, origin", [(None, "http://testserver"), ("https://h.example/mcp",
                                                                             "https://h.example")])
def test_a_rest_401_points_at_metadata_naming_the_rest_resource(resource, origin):
    client = served(resource, authenticate=refuse)
    refused = client.get("/api/shop/echo")
    assert refused.status_code == 401
    assert _metadata_url(refused) == f"{origin}{WELL_KNOWN}/api"
    document = client.get(f"{WELL_KNOWN}/api").json()
    assert document["resource"] == f"{origin}/api"  # the URL the client requested is under it
    assert document["authorization_servers"] == ["https://as.example"]
    # /mcp keeps its own, as before
    mcp = client.post("/mcp", json={})
    assert _metadata_url(mcp) == f"{origin}{WELL_KNOWN}/mcp"
    assert client.get(f"{WELL_KNOWN}/mcp").json()["resource"] == f"{origin}/mcp"
    assert client.get(WELL_KNOWN).json()["resource"] == f"{origin}/mcp"


def test_the_rest_metadata_answers_head_and_its_405_lists_it():
    client = served(authenticate=refuse)
    assert client.head(f"{WELL_KNOWN}/api").status_code == 200
    refused = client.post(f"{WELL_KNOWN}/api")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"


def _token(audience: str) -> str:
    return jwt.encode({"sub": "u1", "aud": audience, "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")


@pytest.mark.parametrize("audience, rest, mcp", [("http://testserver/api", 200, 401),
                                                 ("http://testserver/mcp", 200, 200),
                                                 ("https://other.example/api", 401, 401)])
def test_a_token_for_the_rest_resource_is_accepted_on_rest(audience, rest, mcp):
    client = served(verifier=JWTVerifier(key=SECRET, algorithms=["HS256"]))
    headers = {"authorization": f"Bearer {_token(audience)}"}
    assert client.get("/api/shop/echo", headers=headers).status_code == rest
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    answer = client.post("/mcp", json=ping, headers={**headers, "accept": "application/json, text/event-stream"})
    assert (answer.status_code == 401) == (mcp == 401), answer.text
