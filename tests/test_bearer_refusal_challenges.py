"""RFC 6750 section 3: every refusal of a request for its credentials carries a Bearer challenge naming the
resource metadata: a 403 an authentication raises itself (a role the service does not accept) says
`insufficient_scope`, a 400 for two Authorization headers `invalid_request`; a 401 keeps its own."""

from __future__ import annotations

import httpx
import pytest
from fastapi import HTTPException, Request

from mcpfusion import MCPFusion, ProtectedResource, Tool
from mcpfusion.auth import single_authorization, unauthorized

notes = Tool("notes")


@notes.action(readonly=True)
async def ping() -> str:
    """Ping."""
    return "pong"


async def authenticate(request: Request) -> dict[str, str]:
    token = (single_authorization(request) or "").removeprefix("Bearer ")  # (400 for two headers)
    if token == "root":
        raise HTTPException(status_code=403, detail="Role 'root' may not use this service.")
    if token != "ok":
        raise unauthorized("Unknown token.")
    return {"sub": "u1"}


def app():
    resource = ProtectedResource(authorization_servers=["https://auth.example"], authenticate=authenticate)
    return MCPFusion("notes", tools=[notes], authorization=resource).build_app()


PATHS = [("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}), ("/api/notes/ping", {})]
ACCEPT = ("accept", "application/json, text/event-stream")


async def post(path: str, body: dict, *tokens: str) -> httpx.Response:
    """`body` to `path` with one Authorization header per token."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app()), base_url="http://127.0.0.1") as client:
        return await client.post(path, json=body, headers=[("authorization", f"Bearer {t}") for t in tokens] + [ACCEPT])


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_a_refused_role_is_challenged(path, body):
    r = await post(path, body, "root")
    challenge = r.headers["www-authenticate"]
    assert r.status_code == 403 and challenge.startswith('Bearer error="insufficient_scope"'), challenge
    assert "error_description=\"Role 'root' may not use this service.\"" in challenge
    assert 'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource' in challenge


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_two_authorization_headers_are_challenged_as_an_invalid_request(path, body):
    r = await post(path, body, "ok", "root")
    challenge = r.headers.get("www-authenticate", "")
    assert r.status_code == 400 and challenge.startswith('Bearer error="invalid_request"'), (r.text, challenge)
    assert "resource_metadata=" in challenge


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_a_401_keeps_its_own_challenge(path, body):
    r = await post(path, body, "nope")
    challenge = r.headers["www-authenticate"]
    assert r.status_code == 401 and challenge.startswith('Bearer error="invalid_token"') and "resource_metadata=" in challenge
