"""`/mcp` is plain FastAPI routes: dependency overrides, middleware and exception handlers apply to MCP."""

from __future__ import annotations

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tests.mcp_app import build_fusion, tenant

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
ACCEPT = {"accept": "application/json", "content-type": "application/json"}


def modern(name: str) -> dict[str, str]:
    return {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": name}


def call(name: str, arguments: dict, request_id: int = 1) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": META}}


async def test_overrides_middleware_and_exception_handlers_apply_to_mcp():
    app = FastAPI()

    @app.get("/existing")
    async def existing() -> dict:
        return {"ok": True}

    @app.middleware("http")
    async def stamp(request: Request, call_next):
        response = await call_next(request)
        response.headers["x-seen-by-middleware"] = request.url.path
        return response

    @app.exception_handler(HTTPException)
    async def custom(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"custom": exc.detail}, status_code=exc.status_code)

    build_fusion().mount(app)
    app.dependency_overrides[tenant] = lambda: "overridden"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.get("/existing")).json() == {"ok": True}
        r = await client.post("/mcp", json=call("billing_whoami", {}), headers=modern("billing_whoami"))
        assert r.json()["result"]["content"][0]["text"] == "tenant=overridden"
        assert r.headers["x-seen-by-middleware"] == "/mcp"

        # Session wire (JSON answers) too.
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t",
                                                                                              "version": "1"}}}
        r = await client.post("/mcp", json=init, headers=ACCEPT)
        assert r.json()["result"]["protocolVersion"] == "2025-06-18"
        session = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        legacy_call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "billing_whoami"}}
        r = await client.post("/mcp", json=legacy_call, headers=session)
        assert r.json()["result"]["content"][0]["text"] == "tenant=overridden"

        # An HTTPException from the handler's dependencies goes to the app's exception handler.
        r = await client.post("/mcp", json=call("billing_get_invoice", {"id": "http"}),
                              headers=modern("billing_get_invoice"))
        assert (r.status_code, r.json()) == (404, {"custom": "no such invoice"})

        # REST and /healthz are mounted next to /mcp.
        assert (await client.get("/healthz")).status_code == 200
        rest = await client.post("/api/billing/whoami", json={})
        assert rest.status_code == 200 and "overridden" in rest.text


async def test_app_level_dependencies_guard_mcp_too():
    from fastapi import Depends

    async def require_key(request: Request) -> None:
        if request.headers.get("x-key") != "secret":
            raise HTTPException(401, "missing key")

    app = FastAPI(dependencies=[Depends(require_key)])
    build_fusion().mount(app)
    ping = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.post("/mcp", json=ping, headers=headers)).status_code == 401
        ok = await client.post("/mcp", json=ping, headers={**headers, "x-key": "secret"})
        assert ok.status_code == 200 and ok.json()["result"]["resultType"] == "complete"
