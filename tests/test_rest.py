"""REST side by side with MCP: same data for the same call, same self-healing error for the same bad call."""

import json

import httpx
import pytest
from fastapi import Depends, Header, HTTPException
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool, ToolError, ui

INVOICES = {
    "inv_1": {"id": "inv_1", "email": "ada@example.com", "amount_cents": 1250, "status": "overdue", "secret": "s"},
}


def require_token(authorization: str | None = Header(None)) -> str:
    if authorization != "Bearer good":
        raise HTTPException(401, "Missing or bad bearer token", headers={"WWW-Authenticate": "Bearer"})
    return "good"


class Totals(BaseModel):
    count: int
    total_cents: int


presenter = (
    Presenter("Invoice")
    .schema({"id": str, "email": str, "amount_cents": int, "status": str})
    .redact_pii(["email"])
    .rules(["amount_cents is in CENTS."])
    .ui(lambda inv: ui.markdown(f"Invoice {inv['id']} for {inv['email']}"))
)
billing = Tool("billing", description="Invoices", select=True)


@billing.action(readonly=True, returns=presenter)
async def get_invoice(id: str, token: str = Depends(require_token)):
    """Fetch one invoice."""
    if id not in INVOICES:
        raise ToolError("NOT_FOUND", f'Invoice "{id}" was not found.', recovery="List invoices first.")
    return INVOICES[id]


@billing.action(readonly=True)
async def totals() -> Totals:
    """Totals over all invoices."""
    return Totals(count=len(INVOICES), total_cents=sum(i["amount_cents"] for i in INVOICES.values()))


@pytest.fixture
async def client():
    app = MCPFusion(name="parity", version="1.0.0", tools=[billing], json_response=True).build_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        yield http


async def mcp_call(http: httpx.AsyncClient, arguments: dict, headers: dict | None = None) -> httpx.Response:
    base = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    init = await http.post("/mcp", headers=base, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    })
    assert init.status_code == 200, init.text
    session = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post("/mcp", headers={**base, **session}, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return await http.post("/mcp", headers={**base, **session, **(headers or {})}, json={
        "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "billing", "arguments": arguments},
    })


async def test_same_data_on_rest_and_mcp_after_select_and_redaction(client):
    auth = {"authorization": "Bearer good"}
    for args in ({"id": "inv_1"}, {"id": "inv_1", "_select": ["id", "email"]}):
        rest = await client.post("/api/billing/get_invoice", json=args, headers=auth)
        assert rest.status_code == 200
        mcp = await mcp_call(client, {"action": "get_invoice", **args}, auth)
        result = mcp.json()["result"]
        assert not result["isError"]
        assert json.loads(result["content"][0]["text"]) == rest.json()
    assert rest.json() == {"id": "inv_1", "email": "[REDACTED]"}
    assert "ada@example.com" not in rest.text


async def test_same_error_for_the_same_bad_call(client):
    auth = {"authorization": "Bearer good"}
    cases = [({"id": "inv_404"}, 404, "NOT_FOUND"), ({"id": 5, "extra": 1}, 422, "VALIDATION_ERROR")]
    for args, status, code in cases:
        rest = await client.post("/api/billing/get_invoice", json=args, headers=auth)
        assert rest.status_code == status
        assert rest.json()["error"]["code"] == code
        mcp = (await mcp_call(client, {"action": "get_invoice", **args}, auth)).json()["result"]
        assert mcp["isError"] is True
        assert mcp["content"][0]["text"] == rest.json()["error"]["message"]


async def test_structured_output_and_bad_bodies(client):
    rest = await client.post("/api/billing/totals", json={})
    assert rest.json() == {"count": 1, "total_cents": 1250}
    mcp = (await mcp_call(client, {"action": "totals"})).json()["result"]
    assert mcp.get("structuredContent") is None or mcp["structuredContent"] == rest.json()
    for body in (b"{not json", b"[1,2]", b'"str"'):
        bad = await client.post("/api/billing/totals", content=body, headers={"content-type": "application/json"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "VALIDATION_ERROR"
    assert (await client.post("/api/billing/nope", json={})).status_code in (404, 405)


async def test_auth_dependency_gives_401_with_www_authenticate_on_rest_and_mcp(client):
    rest = await client.post("/api/billing/get_invoice", json={"id": "inv_1"})
    assert rest.status_code == 401 and rest.headers["www-authenticate"] == "Bearer"
    mcp = await mcp_call(client, {"action": "get_invoice", "id": "inv_1"})
    assert mcp.status_code == 401 and mcp.headers["www-authenticate"] == "Bearer"


async def test_openapi_documents_every_action_and_healthz(client):
    spec = (await client.get("/openapi.json")).json()
    op = spec["paths"]["/api/billing/get_invoice"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["id"]
    assert "email" in json.dumps(op["responses"]["200"])
    assert "/api/billing/totals" in spec["paths"]
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/docs")).status_code == 200
