"""Round 5r: under the REST prefix mcpfusion's problem details win over the app's status-code exception handlers
(and over handlers registered after mount), while its own paths keep them; the OpenAPI document lists every
status and header a REST operation answers with (405 + Allow, 421, 503/429 + Retry-After, 504)."""

from __future__ import annotations

import asyncio

import httpx
from fastapi import Depends, FastAPI, HTTPException
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from starlette.requests import Request

from mcpfusion import Concurrency, MCPFusion, Timeout, Tool

PROBLEM = "application/problem+json"


def _fail(request: Request) -> None:
    status = request.headers.get("x-status")
    if status:
        raise HTTPException(int(status), "no such record")


def _tool() -> Tool:
    tool = Tool("t")

    @tool.action(readonly=True)
    async def get(x: str = "a", _: None = Depends(_fail)) -> str:
        """Get."""
        return "x"

    return tool


def _own_routes(app: FastAPI) -> None:
    @app.get("/own/crash")
    async def own_crash() -> None:
        raise RuntimeError("own route crashed")

    @app.get("/own/missing")
    async def own_missing() -> None:
        raise HTTPException(404, "gone")


def _handlers(app: FastAPI) -> None:
    """The app's own handlers: a status code's for 404, 405 and 500, and a class's for HTTPException."""
    for status in (404, 405, 500):
        app.add_exception_handler(status, lambda request, exc, s=status: JSONResponse({f"my{s}": True}, s))
    app.add_exception_handler(HTTPException, lambda request, exc: JSONResponse({"mine": exc.detail}, 418))


def _assert_rest_answers_problems(client: TestClient) -> None:
    missing = client.get("/api/t/get", headers={"x-status": "404"})
    assert missing.status_code == 404 and missing.headers["content-type"].startswith(PROBLEM)
    assert missing.json()["code"] == "NOT_FOUND" and missing.json()["detail"] == "no such record"
    assert missing.json()["recovery"]
    busy = client.get("/api/t/get", headers={"x-status": "503"})
    assert busy.status_code == 503 and busy.json()["code"] == "INTERNAL_ERROR"
    unknown = client.post("/api/nope/x", json={})
    assert unknown.status_code == 404 and unknown.json()["code"] == "UNKNOWN_TOOL"
    assert "/api/{tool}/{action}" in unknown.json()["recovery"]
    action = client.post("/api/t/nope", json={})
    assert action.json()["code"] == "UNKNOWN_ACTION" and "get" in action.json()["recovery"]
    wrong = client.put("/api/t/get")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD, POST"
    assert wrong.json()["code"] == "METHOD_NOT_ALLOWED"


def _assert_own_paths_keep_theirs(client: TestClient) -> None:
    assert client.get("/nowhere").json() == {"my404": True}
    assert client.get("/own/missing").json() == {"my404": True}  # (a status code's handler before a class's)
    assert client.put("/own/crash").json() == {"my405": True}
    crash = client.get("/own/crash")
    assert crash.status_code == 500 and crash.json() == {"my500": True}


def test_status_code_handlers_registered_before_mount_do_not_take_over_rest_errors():
    app = FastAPI()
    _own_routes(app)
    _handlers(app)
    MCPFusion("t", tools=[_tool()]).mount(app)
    client = TestClient(app, raise_server_exceptions=False)
    _assert_rest_answers_problems(client)
    _assert_own_paths_keep_theirs(client)
    assert client.get("/own/crash", headers={"x": "1"}).json() == {"my500": True}


def test_handlers_registered_after_mount_do_not_take_over_rest_errors():
    app = FastAPI()
    _own_routes(app)
    MCPFusion("t", tools=[_tool()]).mount(app)
    _handlers(app)
    app.add_exception_handler(Exception, lambda request, exc: JSONResponse({"my500": True}, 500))
    client = TestClient(app, raise_server_exceptions=False)
    _assert_rest_answers_problems(client)
    _assert_own_paths_keep_theirs(client)
    assert client.get("/api/t/get", headers={"x-status": "409"}).json()["code"] == "CONFLICT"
    # The app's registrations are left as it made them (wrapped only for the middleware stack).
    assert set(app.exception_handlers) >= {404, 405, 500, HTTPException, Exception}


def test_an_apps_500_handler_still_answers_its_own_crashes_after_mount():
    app = FastAPI()
    _own_routes(app)
    app.add_exception_handler(500, lambda request, exc: JSONResponse({"my500": request.url.path}, 500))
    MCPFusion("t", tools=[_tool()]).mount(app)
    crash = TestClient(app, raise_server_exceptions=False).get("/own/crash")
    assert crash.status_code == 500 and crash.json() == {"my500": "/own/crash"}


def test_two_fusions_on_one_app_answer_problems_under_the_app_status_handlers():
    app = FastAPI()
    _handlers(app)
    # (an unknown path under /api is answered by the last one mounted: it names its own tools and actions)
    MCPFusion("u", tools=[Tool("u")], path="/mcp-u").mount(app, docs=None)
    MCPFusion("t", tools=[_tool()]).mount(app)
    client = TestClient(app, raise_server_exceptions=False)
    _assert_rest_answers_problems(client)
    assert client.get("/nowhere").json() == {"my404": True}


def _documented(spec: dict, path: str, method: str, response: httpx.Response) -> dict:
    found = spec["paths"][path][method]["responses"].get(str(response.status_code))
    assert found is not None, (path, method, response.status_code)
    assert found["content"]["application/problem+json"]["schema"] == {"$ref": "#/components/schemas/Problem"}
    return found.get("headers", {})


def test_openapi_documents_every_status_and_header_rest_answers():
    tool = Tool("t")
    never, held, released = asyncio.Event(), asyncio.Event(), asyncio.Event()

    @tool.action(readonly=True, middleware=[Timeout(0.01)])
    async def slow(x: str = "a") -> dict:
        """Slow."""
        await never.wait()
        return {}

    @tool.action(readonly=True, middleware=[Concurrency(1)])
    async def busy(x: str = "a") -> dict:
        """Busy."""
        held.set()
        await released.wait()
        return {}

    app = MCPFusion("t", tools=[tool]).build_app()
    client = TestClient(app)
    spec = client.get("/openapi.json").json()

    timed_out = client.get("/api/t/slow")
    assert timed_out.json()["code"] == "TIMEOUT"
    _documented(spec, "/api/t/slow", "get", timed_out)
    wrong = client.put("/api/t/slow")
    assert "Allow" in _documented(spec, "/api/t/slow", "get", wrong) and wrong.headers["allow"]
    _documented(spec, "/api/t/slow", "post", client.get("/api/t/slow", headers={"host": "evil.example"}))
    _documented(spec, "/api/t/slow", "post", client.get("/api/t/slow", headers={"origin": "http://evil.example"}))

    async def two() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as ac:
            first = asyncio.create_task(ac.get("/api/t/busy"))
            await held.wait()  # the second call comes while the first holds the one slot
            second = await ac.get("/api/t/busy")
            released.set()
            assert (await first).status_code == 200
            return second

    refused = asyncio.run(two())
    assert refused.json()["code"] == "BUSY" and refused.headers["retry-after"]
    assert "Retry-After" in _documented(spec, "/api/t/busy", "get", refused)
    for operation in (spec["paths"]["/api/t/busy"]["get"], spec["paths"]["/api/t/busy"]["post"]):
        responses = operation["responses"]
        assert {"405", "421", "429", "503", "504"} <= set(responses)
        assert "Retry-After" in responses["429"]["headers"] and "Allow" in responses["405"]["headers"]
