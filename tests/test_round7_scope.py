"""The app's `cursor_scope` dependency, solved with a paginated or confirm= action: what it reads from the
request (headers, cookies) is documented with the action (OpenAPI, the docs' curl and try-it fields), and on a
confirmed call it runs once, as a dependency does within one FastAPI request (its headers sent once)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fastapi import Cookie, Depends, FastAPI, Header, Response
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Page, Tool
from mcpfusion.docs import examples

CALLS: list[str] = []


def tenant(response: Response, x_tenant: str = Header(), sid: str = Cookie()) -> str:
    CALLS.append(x_tenant)
    response.headers["x-tenant-seen"] = x_tenant
    return x_tenant


def make_app(scope: Any = tenant) -> tuple[MCPFusion, FastAPI]:
    shop = Tool("shop")

    @shop.action(readonly=True, paginate=2)
    async def items(page: Page) -> list[dict[str, int]]:
        """Items."""
        return [{"n": i} for i in range(5)]

    @shop.action(destructive=True, confirm=True)
    async def void(id: str, t: str = Depends(scope)) -> dict[str, str]:
        """Void."""
        return {"id": id, "t": t}

    @shop.action(readonly=True)
    async def plain() -> dict[str, int]:
        """No scope solved."""
        return {"a": 1}

    fusion = MCPFusion("shop", tools=[shop], cursor_scope=scope)
    return fusion, fusion.mount(FastAPI())


SENT = {"headers": {"x-tenant": "acme", "cookie": "sid=s1"}}


def test_openapi_lists_the_cursor_scope_headers_and_cookies() -> None:
    _, app = make_app()
    paths = TestClient(app).get("/openapi.json").json()["paths"]
    for path, methods in (("/api/shop/items", ("post", "get")), ("/api/shop/void", ("post",))):
        for method in methods:
            found = [(p["in"], p["name"], p["required"]) for p in paths[path][method].get("parameters", [])
                     if p["in"] in ("header", "cookie")]
            assert found == [("header", "x-tenant", True), ("cookie", "sid", True)], (path, method)
    assert not [p for p in paths["/api/shop/plain"]["post"].get("parameters", []) if p["in"] != "query"]


def test_docs_examples_send_the_cursor_scope_headers_and_cookies() -> None:
    fusion, app = make_app()
    registry = fusion.registry
    items = registry.tools["shop"].actions["items"]
    sent = examples.request_examples(items, registry)
    assert [(p["in"], p["name"], p["required"]) for p in sent] == [("header", "x-tenant", True),
                                                                 ("cookie", "sid", True)]
    curl = examples.curl("/api/shop/items", {}, "http://testserver", sent)
    assert "-H 'x-tenant: " in curl and "-H 'Cookie: sid=" in curl
    # What the example sends is what the route needs: no 422.
    headers = dict(examples.sent_headers(sent))
    assert headers["Cookie"] == "sid=sid_1"
    assert TestClient(app).post("/api/shop/items", json={}, headers=headers).status_code == 200
    assert TestClient(app).post("/api/shop/items", json={}).status_code == 422
    assert examples.request_examples(registry.tools["shop"].actions["plain"], registry) == []


def confirmed(client: TestClient, body: dict[str, Any], **sent: Any) -> Any:
    asked = client.post("/api/shop/void", json=body, **sent)
    assert asked.status_code == 428, asked.text
    CALLS.clear()
    return client.post("/api/shop/void", json={**body, "_confirm": asked.json()["details"]["confirm_token"]}, **sent)


def test_confirmed_rest_call_runs_the_scope_dependency_once() -> None:
    _, app = make_app()
    client = TestClient(app)
    done = confirmed(client, {"id": "a"}, **SENT)
    assert done.status_code == 200 and done.json() == {"id": "a", "t": "acme"}
    assert CALLS == ["acme"]
    assert done.headers.get_list("x-tenant-seen") == ["acme"]
    # Another call solves its own (another caller's header): nothing is kept from the call before.
    other = confirmed(client, {"id": "b"}, headers={"x-tenant": "globex", "cookie": "sid=s2"})
    assert other.json() == {"id": "b", "t": "globex"} and CALLS == ["globex"]
    assert other.headers.get_list("x-tenant-seen") == ["globex"]


OPENED: list[str] = []


def session() -> Iterator[str]:
    """A yield dependency: the scope's copy is closed before the confirmation is asked."""
    OPENED.append("open")
    yield f"session{OPENED.count('open')}"
    OPENED.append("closed")


def tenant_of_session(s: str = Depends(session), x_tenant: str = Header()) -> str:
    return f"{x_tenant}@{s}"


def test_a_yield_dependency_of_the_scope_is_opened_again_for_the_action() -> None:
    _, app = make_app(tenant_of_session)
    client = TestClient(app)
    asked = client.post("/api/shop/void", json={"id": "a"}, headers={"x-tenant": "acme"})
    OPENED.clear()
    done = client.post("/api/shop/void", headers={"x-tenant": "acme"},
                       json={"id": "a", "_confirm": asked.json()["details"]["confirm_token"]})
    assert done.status_code == 200
    # The action gets a session of its own, open while it runs (not the scope's, closed already).
    assert done.json() == {"id": "a", "t": "acme@session2"} and OPENED == ["open", "closed", "open", "closed"]


def test_the_docs_pages_carry_the_cursor_scope_headers_and_cookies() -> None:
    _, app = make_app()
    client = TestClient(app)
    manifest = client.get("/tools.json").json()
    entry = next(a for t in manifest["tools"] for a in t["actions"] if a["name"] == "items")
    assert "-H 'x-tenant: " in entry["examples"]["curl"] and "-H 'Cookie: sid=" in entry["examples"]["curl"]
    page = client.get("/tools").text
    assert 'data-header="x-tenant"' in page and 'data-cookie="sid"' in page
