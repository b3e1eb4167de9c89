"""REST edges found by black-box testing: a query string on POST, `_select` in OpenAPI, HTTPException statuses
that are not errors, HEAD and CORS, recovery texts a REST client can follow, non-UTF-8 bodies, and a NUL in the
reference service's customer search."""

from __future__ import annotations

import logging
import socket
import warnings
from typing import Any

import httpx
import pytest
from fastapi import Depends, Header, HTTPException
from fastapi.middleware.cors import CORSMiddleware
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.testing import ToolTester
from tests.service_kit import asgi_client, auth, build, in_process, serve

ADMIN = auth("demo-admin")


# -- 1. POST reads its body only ------------------------------------------------------------------------------

async def test_post_with_a_query_string_is_a_422_naming_its_parameters(tmp_path):
    async with asgi_client(build(tmp_path)) as client:
        r = await client.post("/api/billing/list_invoices?status=sent&zzz=1&zzz=2", json={}, headers=ADMIN)
        assert r.status_code == 422, r.text
        problem = r.json()
        assert problem["code"] == "VALIDATION_ERROR"
        assert [e["field"] for e in problem["errors"]] == ["status", "zzz"]
        assert all("JSON body" in e["detail"] and "GET" in e["detail"] for e in problem["errors"])
        # a write action (no GET route) is told to use the body only
        write = await client.post("/api/billing/create_invoice?x=1", json={}, headers=ADMIN)
        assert write.status_code == 422 and "GET" not in write.json()["errors"][0]["detail"]
        # an empty query string is no query parameter
        assert (await client.post("/api/billing/list_invoices?", json={}, headers=ADMIN)).status_code == 200


async def test_a_query_string_that_is_no_utf8_is_a_422_not_a_replaced_value(tmp_path):
    # `?id=%ff` reached the handler as "\ufffd" (a 404 for an id never sent), where the same byte in a JSON body
    # is refused: the query is refused too, and text that is UTF-8 (or holds U+FFFD itself) still goes through.
    async with asgi_client(build(tmp_path)) as client:
        for query in ("id=%ff", "id=inv%C3", "%ff=1&id=inv_0001"):
            r = await client.get(f"/api/billing/get_invoice?{query}", headers=ADMIN)
            assert r.status_code == 422, (query, r.text)
            assert r.json()["errors"][0]["field"] == "(query)" and "not UTF-8" in r.json()["errors"][0]["detail"]
        assert (await client.get("/api/billing/get_invoice?id=inv_0001", headers=ADMIN)).status_code == 200
        for sent in ("%C3%A9t%C3%A9", "%EF%BF%BD"):  # é and U+FFFD sent as UTF-8: a plain unknown id
            assert (await client.get(f"/api/billing/get_invoice?id={sent}", headers=ADMIN)).status_code == 404


async def test_following_the_next_link_with_post_does_not_return_the_first_page(tmp_path):
    async with asgi_client(build(tmp_path)) as client:
        first = await client.get("/api/billing/list_invoices", headers=ADMIN)
        link = first.headers["link"]
        next_url = link[1:link.index(">")]
        posted = await client.post(next_url, json={}, headers=ADMIN)
        assert posted.status_code == 422 and posted.json()["errors"][0]["field"] == "cursor"
        second = await client.get(next_url, headers=ADMIN)  # the link followed as it is meant: GET
        assert second.status_code == 200
        assert {r["id"] for r in second.json()}.isdisjoint(r["id"] for r in first.json())


# -- 2. `_select` in OpenAPI: each operation's own fields ------------------------------------------------------

crm = Tool("crm", select=True)


@crm.action(readonly=True, returns=Presenter("customer").schema({"id": str, "name": str}))
async def get_customer(id: str) -> dict:
    """Customer."""
    return {"id": id, "name": "Ada"}


@crm.action(readonly=True, returns=Presenter("invoice").schema({"id": str, "total_cents": int}))
async def get_invoice(id: str) -> dict:
    """Invoice."""
    return {"id": id, "total_cents": 5}


@crm.action()
async def ping() -> dict:
    """No declared output."""
    return {"ok": True}


def _select_enum(operation: dict[str, Any], method: str) -> list[str] | None:
    if method == "get":
        found = [p for p in operation.get("parameters", []) if p["name"] == "_select"]
        return found[0]["schema"]["items"]["enum"] if found else None
    properties = operation["requestBody"]["content"]["application/json"]["schema"]["properties"]
    return properties["_select"]["items"]["enum"] if "_select" in properties else None


def test_openapi_select_lists_only_the_operations_own_fields():
    client = TestClient(MCPFusion("x", tools=[crm]).build_app())
    paths = client.get("/openapi.json").json()["paths"]
    for method in ("post", "get"):
        assert _select_enum(paths["/api/crm/get_customer"][method], method) == ["id", "name"]
        assert _select_enum(paths["/api/crm/get_invoice"][method], method) == ["id", "total_cents"]
    assert _select_enum(paths["/api/crm/ping"]["post"], "post") is None  # it accepts none
    # every documented value is accepted
    r = client.post("/api/crm/get_invoice", json={"id": "1", "_select": ["total_cents"]})
    assert (r.status_code, r.json()) == (200, {"total_cents": 5})


# -- 3. HTTPException with a status that is not an error's -----------------------------------------------------

raising = Tool("t")


@raising.action()
async def http_exc(code: int) -> dict:
    """Raise HTTPException(code)."""
    raise HTTPException(code, "boom detail")


def _refuse(x_status: int | None = Header(None)) -> None:
    if x_status is not None:
        raise HTTPException(x_status, "from a dependency")


@raising.action(readonly=True)
async def guarded(_: None = Depends(_refuse)) -> dict:
    """A dependency raises HTTPException(X-Status)."""
    return {}


NOT_ERRORS = [100, 200, 302, 600, 0, -1]


@pytest.mark.parametrize("code", NOT_ERRORS)
def test_rest_answers_a_non_error_status_as_a_500_problem(code, caplog):
    client = TestClient(MCPFusion("p", tools=[raising]).build_app(), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        for r in (client.post("/api/t/http_exc", json={"code": code}),
                  client.get("/api/t/guarded", headers={"X-Status": str(code)})):
            assert r.status_code == 500, r.text
            assert r.headers["content-type"] == "application/problem+json"
            problem = r.json()
            assert (problem["status"], problem["code"]) == (500, "INTERNAL_ERROR")
            assert "boom" not in r.text and "dependency" not in r.text
    assert f"status {code}" in caplog.text


def test_rest_answers_204_and_304_without_a_body():
    client = TestClient(MCPFusion("p", tools=[raising]).build_app())
    for code in (204, 304):
        r = client.post("/api/t/http_exc", json={"code": code})
        assert (r.status_code, r.content) == (code, b"")
        assert "content-type" not in r.headers


def _redirect(x_to: str | None = Header(None)) -> None:
    raise HTTPException(307, "login first", headers={"Location": x_to} if x_to else None)


@raising.action(readonly=True)
async def redirected(_: None = Depends(_redirect)) -> dict:
    """A dependency redirects (X-To: where)."""
    return {}


def test_rest_answers_a_redirect_with_a_location_as_itself():
    """A dependency sending the caller elsewhere (FastAPI answers its route with the redirect)."""
    client = TestClient(MCPFusion("p", tools=[raising]).build_app(), raise_server_exceptions=False)
    r = client.get("/api/t/redirected", headers={"X-To": "/login?next=1"}, follow_redirects=False)
    assert (r.status_code, r.headers["location"], r.content) == (307, "/login?next=1", b"")
    nowhere = client.get("/api/t/redirected", follow_redirects=False)  # a redirect to nowhere is a server bug
    assert (nowhere.status_code, nowhere.json()["code"]) == (500, "INTERNAL_ERROR")


def test_non_error_statuses_leave_the_connection_usable():
    """Over a real server: before, a 1xx/600/0 broke the status line or dropped the connection."""
    with serve(MCPFusion("p", tools=[raising]).build_app()) as base, httpx.Client(base_url=base, timeout=5) as c:
        for code in (100, 600, 0, 304, 400):  # one keep-alive connection throughout
            r = c.post("/api/t/http_exc", json={"code": code})
            assert r.status_code == {304: 304, 400: 400}.get(code, 500)
        assert c.post("/api/t/http_exc", json={"code": 404}).json()["code"] == "NOT_FOUND"


@pytest.mark.parametrize("code", [*NOT_ERRORS, 204, 304])
async def test_mcp_answers_a_non_error_status_as_an_internal_error(code, caplog):
    tester = ToolTester([raising])
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        for action, args in (("http_exc", {"code": code}), ("guarded", {})):
            result = await tester.call("t", action, args, headers={"X-Status": str(code)})
            assert result.is_error and result.error_code == "INTERNAL_ERROR", result.text
            assert "boom" not in result.text
    assert f"status {code}" in caplog.text


async def test_mcp_keeps_the_code_of_an_error_status():
    result = await ToolTester([raising]).call("t", "http_exc", {"code": 404})
    assert result.error_code == "NOT_FOUND" and "boom detail" in result.text


# -- 4. HEAD wherever GET is served; CORS when the app adds it --------------------------------------------------

async def test_head_answers_like_get_without_a_body(tmp_path):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        for path, headers in (("/api/billing/revenue_summary", ADMIN), ("/api/billing/list_invoices", ADMIN),
                              ("/healthz", {}), ("/readyz", {})):
            got = await client.get(path, headers=headers)
            head = await client.head(path, headers=headers)
            assert (head.status_code, got.status_code) == (200, 200), (path, head.text)
            assert head.content == b""
            assert head.headers["content-length"] == got.headers["content-length"]
            assert head.headers.get("next-cursor") is None or "link" in head.headers
        assert (await client.head("/api/billing/revenue_summary")).status_code == 401  # still authenticated
        refused = await client.put("/api/billing/revenue_summary", headers=ADMIN)
        assert (refused.status_code, refused.headers["allow"]) == (405, "GET, HEAD, POST")
        post_only = await client.put("/api/billing/create_invoice", headers=ADMIN)
        assert post_only.headers["allow"] == "POST"  # no HEAD where there is no GET
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no duplicate operation ids
            spec = (await client.get("/openapi.json")).json()
    assert not any("head" in operations for operations in spec["paths"].values())


def test_head_sends_no_body_over_the_wire(tmp_path):
    with serve(build(tmp_path)) as base:
        port = int(base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"HEAD /api/billing/revenue_summary HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Authorization: Bearer demo-admin\r\nConnection: close\r\n\r\n")
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"content-length: " in head.lower()
    assert body == b""


PREFLIGHT = {"Origin": "http://localhost:3000", "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type, mcp-session-id, mcp-protocol-version"}


async def test_cors_is_off_by_default_and_corsmiddleware_answers_the_preflight(tmp_path):
    async with asgi_client(build(tmp_path)) as client:
        assert (await client.options("/api/billing/list_invoices", headers=PREFLIGHT)).status_code == 405
    app = build(tmp_path)
    app.add_middleware(  # as docs/rest.md says
        CORSMiddleware, allow_origins=["http://localhost:3000"], allow_methods=["GET", "HEAD", "POST", "DELETE"],
        allow_headers=["Authorization", "Content-Type", "Mcp-Session-Id", "MCP-Protocol-Version", "Last-Event-ID"],
        expose_headers=["Mcp-Session-Id", "Next-Cursor", "Link", "Retry-After", "WWW-Authenticate"],
    )
    async with asgi_client(app) as client:
        for path in ("/api/billing/list_invoices", "/mcp"):
            preflight = await client.options(path, headers=PREFLIGHT)
            assert preflight.status_code == 200, (path, preflight.text)
            assert preflight.headers["access-control-allow-origin"] == "http://localhost:3000"
            allowed = preflight.headers["access-control-allow-headers"].lower()
            assert {"authorization", "mcp-session-id", "mcp-protocol-version"} <= set(allowed.replace(" ", "").split(","))
        r = await client.get("/api/billing/list_invoices", headers={**ADMIN, "Origin": "http://localhost:3000"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
        assert "next-cursor" in r.headers["access-control-expose-headers"].lower()


# -- 5. Recovery texts a REST client can follow -----------------------------------------------------------------

async def test_rest_recovery_names_routes_not_mcp_calls(tmp_path):
    async with asgi_client(build(tmp_path)) as client:
        tool = (await client.get("/api/nope/list", headers=ADMIN)).json()
        action = (await client.get("/api/billing/nope", headers=ADMIN)).json()
        invalid = (await client.post("/api/billing/get_invoice", json={"id": 5, "zzz": 1}, headers=ADMIN)).json()
        not_json = (await client.post("/api/billing/get_invoice", content=b"{", headers=ADMIN)).json()
    assert tool["code"] == "UNKNOWN_TOOL" and "available_actions" not in tool  # it listed tool names
    assert tool["recovery"] == ("Call /api/{tool}/{action} with one of these tools: billing, customers; "
                                "/openapi.json documents every route.")
    assert action["code"] == "UNKNOWN_ACTION"
    assert action["recovery"].startswith("Call /api/billing/{action} with one of these actions: list_invoices, ")
    assert "billing.list_invoices" in action["available_actions"]
    for problem in (invalid, not_json):
        assert problem["code"] == "VALIDATION_ERROR" and problem["errors"]
        assert problem["recovery"] == "Fix the fields listed in errors and send the request again."
    for problem in (tool, action, invalid):
        assert "tools/list" not in problem["recovery"] and "action set to" not in problem["recovery"]


def test_unknown_tool_recovery_follows_the_root_path():
    client = TestClient(MCPFusion("x", tools=[crm]).build_app(), root_path="/svc")  # behind a proxy at /svc
    problem = client.get("/api/nope/x").json()
    assert problem["recovery"] == ("Call /svc/api/{tool}/{action} with one of these tools: crm; "
                                   "/svc/openapi.json documents every route.")


# -- 6. The body is UTF-8 JSON -------------------------------------------------------------------------------

@pytest.mark.parametrize(("charset", "body"), [
    ("utf-16", '{"search": "Contoso"}'.encode("utf-16")),
    ("latin-1", '{"search": "Caf\u00e9"}'.encode("latin-1")),
    ("iso-8859-1", b'{"search": "Contoso"}'),  # even when the bytes happen to be ASCII
    ("no-such-charset", b'{"search": "Contoso"}'),
])
async def test_a_charset_other_than_utf8_is_a_415(tmp_path, charset, body):
    async with asgi_client(build(tmp_path)) as client:
        r = await client.post("/api/customers/list", content=body,
                              headers={**ADMIN, "Content-Type": f"application/json; charset={charset}"})
    assert r.status_code == 415, r.text
    assert r.json()["code"] == "UNSUPPORTED_MEDIA_TYPE" and "UTF-8" in r.json()["detail"]


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", 'application/json; charset="UTF8"',
                                          "application/json;charset=UTF-8", "application/json"])
async def test_utf8_json_is_read(tmp_path, content_type):
    async with asgi_client(build(tmp_path)) as client:
        r = await client.post("/api/customers/list", content=b'{"search": "Contoso"}',
                              headers={**ADMIN, "Content-Type": content_type})
    assert r.status_code == 200 and [c["name"] for c in r.json()] == ["Contoso Bakery"]


# -- 7. Reference service: NUL in the customer search -------------------------------------------------------------

@pytest.mark.parametrize("search", ["\x00", "Contoso\x00", "\x00%"])
async def test_customer_search_with_nul_matches_nothing(tmp_path, search):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        r = await client.get("/api/customers/list", params={"search": search}, headers=ADMIN)
        assert (r.status_code, r.json()) == (200, [])
        assert len((await client.get("/api/customers/list", headers=ADMIN)).json()) > 0
    result = await in_process(app).call("customers", "list", {"search": search}, headers=ADMIN)
    assert not result.is_error and result.data == []


async def test_head_is_answered_on_the_tool_docs_and_the_protected_resource_metadata():
    import httpx

    from mcpfusion import MCPFusion
    from mcpfusion.authorization import ProtectedResource

    app = MCPFusion("h", authorization=ProtectedResource(authorization_servers=["https://as.example"])).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for path in ("/tools", "/tools.json", "/.well-known/oauth-protected-resource"):
            got, head = await http.get(path), await http.head(path)
            assert got.status_code == head.status_code == 200 and head.content == b"", path


# -- OpenAPI documents the security schemes the actions' dependencies use ------------------------------------

def test_openapi_documents_security_dependencies_as_fastapi_does():
    """`Security(HTTPBearer())` or an OAuth2 scheme among an action's dependencies shows in its operations and
    in components, as FastAPI documents a route with the same dependencies (Swagger's Authorize button)."""
    from fastapi import FastAPI, Security
    from fastapi.security import HTTPBearer, OAuth2PasswordBearer

    bearer = HTTPBearer(auto_error=False)
    oauth = OAuth2PasswordBearer(tokenUrl="/token", scopes={"read": "r", "write": "w"}, auto_error=False)

    def user(token: str | None = Security(oauth, scopes=["read"])) -> str | None:
        return token

    secured = Tool("secured", description="Secured actions")

    @secured.action(readonly=True)
    async def by_bearer(credentials: object = Depends(bearer)) -> dict:
        """Bearer."""
        return {}

    @secured.action()
    async def by_oauth(who: str | None = Security(user, scopes=["write"])) -> dict:
        """OAuth2."""
        return {}

    @secured.action(readonly=True)
    async def open_one() -> dict:
        """No scheme."""
        return {}

    plain = FastAPI()
    plain.get("/bearer")(lambda credentials=Depends(bearer): {})
    plain.post("/oauth")(lambda who=Security(user, scopes=["write"]): {})
    expected = plain.openapi()
    spec = TestClient(MCPFusion("p", tools=[secured]).build_app()).get("/openapi.json").json()
    assert spec["components"]["securitySchemes"] == expected["components"]["securitySchemes"]
    paths = spec["paths"]
    assert paths["/api/secured/by_bearer"]["get"]["security"] == expected["paths"]["/bearer"]["get"]["security"]
    assert paths["/api/secured/by_bearer"]["post"]["security"] == [{"HTTPBearer": []}]
    assert paths["/api/secured/by_oauth"]["post"]["security"] == expected["paths"]["/oauth"]["post"]["security"]
    assert "security" not in paths["/api/secured/open_one"]["post"]
