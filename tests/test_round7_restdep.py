"""A dependency taking FastAPI's `Response` sets headers, cookies and a status as on a FastAPI route: REST answers
with them (the status on a success only), the MCP wires do not (a JSON-RPC reply has no HTTP headers of one
call's), and only the actions with such a dependency collect them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import Depends, FastAPI, Header, HTTPException, Response
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Page, Tool, ToolError
from mcpfusion.dependencies import plan_of, takes_response


def session_cookie(response: Response) -> str:
    response.set_cookie("session", "abc123")
    response.headers["x-rate-remaining"] = "41"
    return "sess"


async def created(response: Response) -> str:
    """An `async def` dependency (the kind a plan runs without FastAPI's solver) setting a status."""
    response.status_code = 201
    response.headers["x-created"] = "yes"
    return "made"


async def no_content(response: Response) -> None:
    response.status_code = 204


def region(x_region: str = Header()) -> str:
    return x_region


def shop_tool() -> Tool:
    shop = Tool("shop")

    @shop.action(readonly=True)
    async def whoami(s: str = Depends(session_cookie)) -> str:
        """Who am I."""
        return s

    @shop.action()
    async def make(name: str, how: str = Depends(created), s: str = Depends(session_cookie)) -> dict[str, str]:
        """Make a thing."""
        if name == "missing":
            raise ToolError("NOT_FOUND", f"No {name}.", recovery="Make another.")
        if name == "teapot":
            raise HTTPException(418, "I'm a teapot")
        return {"name": name, "how": how}

    @shop.action()
    async def forget(name: str, _: None = Depends(no_content)) -> str:
        """Forget a thing."""
        return name

    @shop.action()
    async def where(s: str = Depends(session_cookie), at: str = Depends(region)) -> str:
        """Where."""
        return at

    @shop.action(readonly=True)
    async def plain() -> str:
        """No dependency."""
        return "plain"

    return shop


@pytest.fixture
def client() -> TestClient:
    return TestClient(MCPFusion("shop", tools=[shop_tool()]).build_app())


def test_headers_and_cookies_a_dependency_sets_are_on_the_rest_answer_as_on_a_fastapi_route(client):
    app = FastAPI()

    @app.get("/plain")
    async def plain(s: str = Depends(session_cookie)) -> str:
        return s

    route = TestClient(app).get("/plain")
    for answer in (client.post("/api/shop/whoami", json={}), client.get("/api/shop/whoami")):
        assert answer.status_code == 200 and answer.json() == "sess"
        assert answer.headers["set-cookie"] == route.headers["set-cookie"] == "session=abc123; Path=/; SameSite=lax"
        assert answer.headers["x-rate-remaining"] == route.headers["x-rate-remaining"] == "41"
        assert answer.cookies["session"] == "abc123"
    # Per call: a second call carries its own header once, never the first call's too.
    again = client.get("/api/shop/whoami")
    assert again.headers.get_list("x-rate-remaining") == ["41"]


def test_an_async_dependency_taking_a_response_is_solved_by_fastapi_not_a_plan():
    action = shop_tool().actions["make"]
    assert takes_response(action.dependant) and plan_of(action.dependant) is None
    assert not takes_response(shop_tool().actions["plain"].dependant)


def test_a_status_a_dependency_sets_answers_a_success_as_fastapi_does(client):
    made = client.post("/api/shop/make", json={"name": "lamp"})
    assert made.status_code == 201 and made.json() == {"name": "lamp", "how": "made"}
    assert made.headers["x-created"] == "yes" and made.cookies["session"] == "abc123"
    gone = client.post("/api/shop/forget", json={"name": "lamp"})
    assert gone.status_code == 204 and gone.content == b"" and "content-length" not in gone.headers


def test_an_error_answer_keeps_the_headers_but_its_own_status(client):
    missing = client.post("/api/shop/make", json={"name": "missing"})
    assert missing.status_code == 404 and missing.json()["code"] == "NOT_FOUND"  # not the dependency's 201
    assert missing.headers["content-type"].startswith("application/problem+json")
    assert missing.headers["x-created"] == "yes" and missing.cookies["session"] == "abc123"


def test_an_http_exception_is_answered_without_them_as_fastapi_answers_it(client):
    app = FastAPI()

    @app.post("/plain")
    async def plain(s: str = Depends(session_cookie)) -> str:
        raise HTTPException(418, "I'm a teapot")

    route = TestClient(app).post("/plain")
    teapot = client.post("/api/shop/make", json={"name": "teapot"})
    assert teapot.status_code == route.status_code == 418
    assert "set-cookie" not in teapot.headers and "set-cookie" not in route.headers
    # A dependency failing FastAPI's validation (a header missing): FastAPI's 422 drops them too.
    invalid = client.post("/api/shop/where", json={})
    assert invalid.status_code == 422 and "set-cookie" not in invalid.headers
    ok = client.post("/api/shop/where", json={}, headers={"x-region": "eu"})
    assert ok.json() == "eu" and ok.cookies["session"] == "abc123"


def test_an_override_taking_a_response_sets_headers_too():
    geo = Tool("geo")

    @geo.action(readonly=True)
    async def here(at: str = Depends(region)) -> str:  # (no dependency of its own takes a Response)
        """Here."""
        return at

    app = MCPFusion("geo", tools=[geo]).build_app()

    def test_region(response: Response) -> str:
        response.headers["x-overridden"] = "1"
        return "test"

    app.dependency_overrides[region] = test_region
    answer = TestClient(app).post("/api/geo/here", json={})
    assert answer.json() == "test" and answer.headers["x-overridden"] == "1"


def test_a_cursor_scope_taking_a_response_sets_headers_on_every_page():
    def scope(response: Response, x_tenant: str = Header("acme")) -> str:
        response.headers["x-tenant-seen"] = x_tenant
        return x_tenant

    rows = Tool("rows")

    @rows.action(readonly=True, paginate=2)
    async def seek(page: Page) -> list[dict[str, int]]:
        """Rows."""
        after = page.after or 0
        return page.keyset([{"n": n} for n in range(after, 5)][:page.size + 1], key=lambda r: r["n"] + 1)

    client = TestClient(MCPFusion("rows", tools=[rows], cursor_scope=scope).build_app())
    first = client.get("/api/rows/seek", headers={"x-tenant": "globex"})
    assert first.json() == [{"n": 0}, {"n": 1}] and first.headers["x-tenant-seen"] == "globex"
    second = client.get("/api/rows/seek", params={"cursor": first.headers["next-cursor"]},
                        headers={"x-tenant": "globex"})
    assert second.json() == [{"n": 2}, {"n": 3}] and second.headers["x-tenant-seen"] == "globex"


def mcp_call(client: TestClient, arguments: dict[str, Any]) -> Any:
    """A stateless (2026-07-28) MCP tools/call of the shop tool: the HTTP answer."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "shop"}
    params = {"name": "shop", "arguments": arguments, "_meta": meta}
    return client.post("/mcp", headers=headers,
                       json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})


def test_the_mcp_wire_answers_the_call_without_the_dependencys_headers(client):
    answer = mcp_call(client, {"action": "make", "name": "lamp"})
    assert answer.status_code == 200
    result = answer.json()["result"]
    assert result["isError"] is False and json.loads(result["content"][0]["text"]) == {"name": "lamp", "how": "made"}
    assert "set-cookie" not in answer.headers and "x-created" not in answer.headers


def test_an_actions_own_response_parameter_is_refused_naming_the_dependency_way():
    tool = Tool("t")

    async def headers(response: Response) -> dict[str, str]:
        """Headers."""
        return {}

    with pytest.raises(TypeError, match="return the data.*on REST in a dependency that takes the Response"):
        tool.action(readonly=True)(headers)
