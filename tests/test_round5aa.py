"""Round 5aa: mcpfusion's REST problems only for its own routes (the app's routes under /api, included routers,
several fusions on one app), the mount check seeing included routers, the app's sync handlers off the loop."""

import threading

import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import APIKeyHeader
from fastapi.testclient import TestClient
from starlette.exceptions import HTTPException as StarletteHTTPException

from mcpfusion import MCPFusion, Tool


def _shop() -> Tool:
    shop = Tool("shop")

    @shop.action(readonly=True)
    async def ping() -> str:
        """Ping."""
        return "pong"

    return shop


def _app_with_v1_router() -> FastAPI:
    app = FastAPI()
    router = APIRouter()

    @router.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        if item_id == 9:
            raise HTTPException(404, "Item not found")
        return {"id": item_id}

    app.include_router(router, prefix="/api/v1")

    @app.exception_handler(StarletteHTTPException)
    async def own(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": exc.detail, "mine": True}, status_code=exc.status_code, headers=exc.headers)

    MCPFusion("s", tools=[_shop()]).mount(app)
    return app


def test_app_routes_under_api_keep_their_handlers() -> None:
    client = TestClient(_app_with_v1_router())
    raised = client.get("/api/v1/items/9")
    assert raised.status_code == 404 and raised.json() == {"error": "Item not found", "mine": True}
    invalid = client.get("/api/v1/items/abc")  # FastAPI's own 422
    assert invalid.status_code == 422 and invalid.headers["content-type"] == "application/json"
    assert invalid.json()["detail"][0]["loc"] == ["path", "item_id"]
    unmatched = client.get("/api/v1/nope")  # under a segment the app's routes claim: the app's 404
    assert unmatched.json() == {"error": "Not Found", "mine": True}
    refused = client.delete("/api/v1/items/1")  # routing's 405 on the app's route: its Allow, its handler
    assert refused.status_code == 405 and refused.headers["allow"] == "GET" and refused.json()["mine"] is True


def test_unclaimed_paths_and_own_routes_stay_problems() -> None:
    client = TestClient(_app_with_v1_router())
    unknown = client.get("/api/nope")
    assert unknown.status_code == 404 and unknown.json()["code"] == "UNKNOWN_TOOL"
    assert "shop" in unknown.json()["recovery"]
    refused = client.delete("/api/shop/ping")
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["allow"] == "GET, HEAD, POST"


def test_an_allow_header_raised_with_stands() -> None:
    shop = Tool("shop")

    async def dep() -> None:
        raise HTTPException(405, "nope", headers={"Allow": "PATCH"})

    @shop.action(readonly=True)
    async def get(d: None = Depends(dep)) -> str:
        """Get."""
        return "x"

    app = FastAPI()
    MCPFusion("s", tools=[shop]).mount(app)
    answer = TestClient(app).get("/api/shop/get")
    assert answer.status_code == 405 and answer.headers["allow"] == "PATCH"
    assert answer.json()["code"] == "METHOD_NOT_ALLOWED"


@pytest.mark.parametrize("what", ["route", "docs"])
def test_mount_refuses_a_path_an_included_router_serves(what: str) -> None:
    app = FastAPI()
    router = APIRouter()
    router.get("/api/shop/ping" if what == "route" else "/tools")(lambda: "legacy")
    app.include_router(router)
    with pytest.raises(ValueError, match="already serves"):
        MCPFusion("s", tools=[_shop()]).mount(app)


def _two_fusions() -> FastAPI:
    key = APIKeyHeader(name="X-API-Key")
    billing, crm = Tool("billing"), Tool("crm")

    @billing.action(readonly=True)
    async def get_invoice(id: str, k: str = Depends(key)) -> str:
        """Get invoice."""
        return id

    @crm.action(readonly=True)
    async def get_customer(id: str) -> str:
        """Get customer."""
        return id

    app = FastAPI()
    MCPFusion("billing", tools=[billing]).mount(app)
    MCPFusion("crm", tools=[crm], path="/mcp-crm").mount(app, docs="/crm-tools")
    return app


def test_two_fusions_answer_their_own_routes() -> None:
    client = TestClient(_two_fusions())
    unknown = client.get("/api/billing/nope").json()
    assert unknown["code"] == "UNKNOWN_ACTION" and unknown["available_actions"] == ["billing.get_invoice"]
    assert client.get("/api/crm/nope").json()["available_actions"] == ["crm.get_customer"]
    unauthorized = client.get("/api/billing/get_invoice", params={"id": "1"})
    assert unauthorized.status_code == 401 and "X-API-Key" in unauthorized.json()["recovery"]
    assert client.get("/api/nope").json()["code"] == "UNKNOWN_TOOL"


def test_sync_handler_not_on_the_event_loop() -> None:
    seen: list[str] = []
    app = FastAPI()

    def not_found(request: Request, exc: Exception) -> JSONResponse:
        seen.append(threading.current_thread().name)
        return JSONResponse({}, status_code=404)

    @app.get("/where")
    async def where() -> str:
        return threading.current_thread().name

    app.add_exception_handler(404, not_found)
    MCPFusion("s").mount(app)
    with TestClient(app) as client:  # (one event loop thread for both requests)
        loop_thread = client.get("/where").json()
        assert client.get("/missing").status_code == 404
    assert seen and seen[0] != loop_thread


def test_crash_handler_registered_last_answers() -> None:
    app = FastAPI()

    @app.get("/own")
    async def own() -> None:
        raise RuntimeError("boom")

    MCPFusion("s").mount(app)

    async def five_hundred(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"app": "500"}, status_code=500)

    async def crash(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"app": "Exception"}, status_code=500)

    app.add_exception_handler(500, five_hundred)
    app.add_exception_handler(Exception, crash)
    assert TestClient(app, raise_server_exceptions=False).get("/own").json() == {"app": "Exception"}


def test_an_app_handler_of_its_own_http_exception_subclass_answers_on_rest() -> None:
    class Teapot(HTTPException):
        pass

    shop = Tool("shop")

    @shop.action(readonly=True)
    async def brew() -> str:
        """Brew."""
        raise Teapot(418, "short and stout")

    app = FastAPI()
    MCPFusion("s", tools=[shop]).mount(app)

    @app.exception_handler(Teapot)
    async def teapot(request: Request, exc: Teapot) -> JSONResponse:
        return JSONResponse({"teapot": True}, status_code=418)

    assert TestClient(app).get("/api/shop/brew").json() == {"teapot": True}


def test_a_crash_of_an_app_route_under_api_is_the_apps() -> None:
    app = FastAPI()

    @app.get("/api/legacy/boom")
    async def boom() -> None:
        raise RuntimeError("boom")

    async def crash(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"app": True}, status_code=500)

    app.add_exception_handler(Exception, crash)
    MCPFusion("s", tools=[_shop()]).mount(app)
    client = TestClient(app, raise_server_exceptions=False)
    assert client.get("/api/legacy/boom").json() == {"app": True}
    assert client.get("/api/nope").json()["code"] == "UNKNOWN_TOOL"
