"""`/mcp` is plain FastAPI routes: dependency overrides, middleware and exception handlers apply to MCP."""

from __future__ import annotations

import json

import httpx
import pytest
from fastapi import FastAPI, Header, Request
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

        # An HTTPException from the handler's dependencies other than 401/403 (which go to the app's exception
        # handler, see below) is a JSON-RPC error with the call's id: a bare 404 on the MCP endpoint would
        # tell the client its session is gone.
        r = await client.post("/mcp", json=call("billing_get_invoice", {"id": "http"}),
                              headers=modern("billing_get_invoice"))
        assert r.status_code == 200 and r.json()["id"] == call("x", {})["id"]
        assert r.json()["error"] == {"code": -32010, "message": "HTTP 404: no such invoice",
                                     "data": {"status": 404, "detail": "no such invoice"}}

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


async def test_the_mcp_route_keeps_fastapis_body_limit_and_closes_the_tools_yield_dependencies():
    """Served without FastAPI's per-request exit stacks: the app's `max_body_size` still refuses a large
    body before MCP reads it, and a tool's yield dependency is still closed once the call is answered."""
    from fastapi import Depends

    from mcpfusion import MCPFusion, Tool

    closed: list[str] = []

    async def connection():
        yield "conn"
        closed.append("conn")

    probe = Tool("probe", description="A tool with a yield dependency")

    @probe.action(readonly=True)
    async def use(conn: str = Depends(connection)) -> dict:
        """Use the connection"""
        return {"conn": conn, "closed_before_answer": list(closed)}

    app = FastAPI(max_body_size=2_000)
    MCPFusion("t", tools=[probe]).mount(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        r = await client.post("/mcp", json=call("probe", {"action": "use"}), headers=modern("probe"))
        assert r.status_code == 200, r.text
        assert json.loads(r.json()["result"]["content"][0]["text"]) == {"conn": "conn", "closed_before_answer": []}
        assert closed == ["conn"]
        big = call("probe", {"action": "use", "pad": "x" * 5_000})
        r = await client.post("/mcp", json=big, headers=modern("probe"))
        assert r.status_code == 413


@pytest.mark.parametrize("wire", ["2026-07-28", "2025-11-25"])
async def test_http_exceptions_of_dependencies_on_mcp(wire):
    """401 and 403 are the app's (its exception handler answers, with the challenge); any other status is a
    JSON-RPC error with the request's id on both wires, and a server error's detail never leaves."""
    from fastapi import Depends

    from mcpfusion import MCPFusion, Tool

    def gate(x_status: int = Header(0)) -> None:
        if x_status:
            raise HTTPException(x_status, "tenant gone" if x_status < 500 else "dsn=postgres://secret")

    crm = Tool("crm", description="CRM")

    @crm.action(readonly=True)
    async def whoami(_: None = Depends(gate)) -> str:
        """Who am I"""
        return "me"

    app = FastAPI()

    @app.exception_handler(HTTPException)
    async def custom(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse({"custom": exc.detail}, status_code=exc.status_code)

    MCPFusion("crm", tools=[crm], json_response=True).mount(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        if wire == "2026-07-28":
            body, headers = call("crm", {"action": "whoami"}, 7), modern("crm")
        else:
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": wire, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
            r = await client.post("/mcp", json=init, headers=ACCEPT)
            headers = {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": wire}
            body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "crm", "arguments": {"action": "whoami"}}}
        for status, detail in ((404, "tenant gone"), (409, "tenant gone"), (503, "Service Unavailable")):
            r = await client.post("/mcp", json=body, headers={**headers, "x-status": str(status)})
            assert r.status_code == 200, r.text
            assert r.json() == {"jsonrpc": "2.0", "id": 7, "error": {
                "code": -32010, "message": f"HTTP {status}: {detail}", "data": {"status": status, "detail": detail}}}
        r = await client.post("/mcp", json=body, headers={**headers, "x-status": "401"})
        assert (r.status_code, r.json()) == (401, {"custom": "tenant gone"})


def test_a_second_mcpfusion_at_the_same_path_is_refused_and_another_path_serves_both():
    """Two MCPFusion objects (or one twice) on one app at one path would leave one silently unserved."""
    from mcpfusion import MCPFusion, Tool

    first, second = Tool("a", description="A"), Tool("b", description="B")
    app = FastAPI()
    MCPFusion("one", tools=[first]).mount(app)
    with pytest.raises(ValueError, match="already serves MCP at /mcp"):
        MCPFusion("two", tools=[second]).mount(app)
    other = MCPFusion("two", tools=[second], path="/mcp-b")
    other.mount(app, docs="/b-tools")  # (its docs at /tools would be hidden behind the first one's: refused)
    assert "/mcp-b" in [getattr(r, "path", None) for r in app.routes]
    with pytest.raises(ValueError, match="already serves MCP at /mcp-b"):
        other.mount(app)


async def test_the_apps_exception_handlers_answer_an_actions_exception_on_rest():
    """An exception the app has its own handler for is answered by it on REST, as from the app's own routes;
    MCP answers it as an internal error (no HTTP response there), and an exception without a handler is
    the usual INTERNAL_ERROR on both."""
    from mcpfusion import MCPFusion, Tool

    class OutOfStock(Exception):
        pass

    class Broken(Exception):
        pass

    app = FastAPI()

    @app.exception_handler(OutOfStock)
    async def out_of_stock(request: Request, exc: OutOfStock) -> JSONResponse:
        return JSONResponse({"detail": "out of stock"}, status_code=409)

    shop = Tool("shop", description="Shop", exposition="flat")

    @shop.action(destructive=False)
    async def buy(sku: str) -> str:
        """Buy one."""
        raise OutOfStock()

    @shop.action(destructive=False)
    async def fail(sku: str) -> str:
        """Fail."""
        raise Broken()

    MCPFusion("shop", tools=[shop]).mount(app)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        bought = await http.post("/api/shop/buy", json={"sku": "a"})
        assert bought.status_code == 409 and bought.json() == {"detail": "out of stock"}
        failed = await http.post("/api/shop/fail", json={"sku": "a"})
        assert failed.status_code == 500 and failed.json()["code"] == "INTERNAL_ERROR"
        r = await http.post("/mcp", headers=modern("shop_buy"), json=call("shop_buy", {"sku": "a"}))
        result = r.json()["result"]
        assert r.status_code == 200 and result["isError"] and 'code="INTERNAL_ERROR"' in result["content"][0]["text"]
