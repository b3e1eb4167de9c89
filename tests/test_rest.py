"""REST side by side with MCP: same data for the same call, same self-healing error for the same bad call."""

import json
from typing import Literal
from xml.etree import ElementTree

import httpx
import pytest
from fastapi import Depends, Header, HTTPException
from pydantic import BaseModel

from mcpfusion import MCPFusion, Page, Presenter, Tool, ToolError, ui

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


def tool_error_parts(text: str) -> dict:
    """The agent's `<tool_error>` / `<validation_error>` as a dict (it is well-formed XML)."""
    root = ElementTree.fromstring(text)
    return {
        "code": root.get("code", "VALIDATION_ERROR"),
        "detail": root.findtext("message"),
        "recovery": root.findtext("recovery"),
        "available_actions": [a.text for a in root.iter("action")],
        "errors": [{"field": f.get("name"), "detail": f.text} for f in root.iter("field")],
    }


def assert_problem(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == f"urn:mcpfusion:error:{code}" and body["code"] == code and body["status"] == status
    assert body["title"] and body["detail"]
    assert "<tool_error" not in response.text and "<validation_error" not in response.text and "</" not in response.text
    return body


async def test_same_error_for_the_same_bad_call(client):
    auth = {"authorization": "Bearer good"}
    cases = [({"id": "inv_404"}, 404, "NOT_FOUND"), ({"id": 5, "extra": 1}, 422, "VALIDATION_ERROR")]
    for args, status, code in cases:
        rest = await client.post("/api/billing/get_invoice", json=args, headers=auth)
        body = assert_problem(rest, status, code)
        mcp = (await mcp_call(client, {"action": "get_invoice", **args}, auth)).json()["result"]
        assert mcp["isError"] is True
        agent = tool_error_parts(mcp["content"][0]["text"])
        # the same recovery, but for the fields REST lists in `errors` (the agent's are "above" it)
        assert body["recovery"] == ("Fix the fields listed in errors and send the request again."
                                    if code == "VALIDATION_ERROR" else agent["recovery"])
        assert body.get("available_actions", []) == agent["available_actions"]
        assert body.get("errors", []) == agent["errors"]
        if code != "VALIDATION_ERROR":
            assert body["detail"] == agent["detail"]
    assert [e["field"] for e in body["errors"]] == ["id", "extra"]


async def test_unknown_tool_action_method_and_bodies_are_problems(client):
    unknown_tool = assert_problem(await client.post("/api/nope/x", json={}), 404, "UNKNOWN_TOOL")
    assert "available_actions" not in unknown_tool and unknown_tool["instance"] == "/api/nope/x"
    assert "/api/{tool}/{action}" in unknown_tool["recovery"] and "billing" in unknown_tool["recovery"]
    unknown_action = assert_problem(await client.post("/api/billing/nope", json={}), 404, "UNKNOWN_ACTION")
    assert "billing.get_invoice" in unknown_action["available_actions"]
    assert "get_invoice" in unknown_action["recovery"]
    assert_problem(await client.post("/api/billing", json={}), 404, "UNKNOWN_ACTION")
    assert_problem(await client.post("/api/billing/totals/deeper", json={}), 404, "UNKNOWN_ACTION")
    wrong_method = assert_problem(await client.delete("/api/billing/totals"), 405, "METHOD_NOT_ALLOWED")
    assert "POST" in wrong_method["recovery"]
    for body in (b"{not json", b"[1,2]", b'"str"'):
        bad = await client.post("/api/billing/totals", content=body, headers={"content-type": "application/json"})
        assert assert_problem(bad, 422, "VALIDATION_ERROR")["errors"][0]["field"] == "(body)"
    assert (await client.get("/nope")).json() == {"detail": "Not Found"}  # the app's other paths: untouched


async def test_rate_limit_and_crashes_are_problems():
    limited = Tool("limited")

    @limited.action()
    async def hit():
        """Always throttled"""
        raise ToolError("RATE_LIMITED", "Too many calls.", recovery="Slow down.", retry_after=2.5)

    app = MCPFusion(name="limits", tools=[limited]).build_app()

    @app.post("/api/crash/now")
    async def crash():
        raise RuntimeError("secret internals")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        r = await http.post("/api/limited/hit", json={})
        body = assert_problem(r, 429, "RATE_LIMITED")
        assert body["retry_after"] == 2.5 and r.headers["retry-after"] == "3" and body["recovery"] == "Slow down."
        own = await http.post("/api/crash/now")  # the app's own route under /api: the app's answer (no handler)
        assert own.status_code == 500 and "secret" not in own.text


async def test_auth_dependency_gives_401_with_www_authenticate_on_rest_and_mcp(client):
    rest = await client.post("/api/billing/get_invoice", json={"id": "inv_1"})
    assert assert_problem(rest, 401, "UNAUTHORIZED")["detail"] == "Missing or bad bearer token"
    assert rest.headers["www-authenticate"] == "Bearer"
    mcp = await mcp_call(client, {"action": "get_invoice", "id": "inv_1"})
    assert mcp.status_code == 401 and mcp.headers["www-authenticate"] == "Bearer"


async def test_openapi_documents_every_action_and_healthz(client):
    spec = (await client.get("/openapi.json")).json()
    op = spec["paths"]["/api/billing/get_invoice"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["required"] == ["id"]
    assert "email" in json.dumps(op["responses"]["200"])
    assert "/api/billing/totals" in spec["paths"]
    problem_schema = spec["components"]["schemas"]["Problem"]
    for path, operations in spec["paths"].items():
        for operation in operations.values() if path.startswith("/api/") else ():
            for status in ("401", "404", "422", "429", "500", "default"):
                content = operation["responses"][status]["content"]
                assert content == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert problem_schema["required"] == ["type", "title", "status", "detail", "code"]
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/docs")).status_code == 200


async def test_get_for_read_only_actions_with_scalar_parameters():
    shop = Tool("shop", select=True)

    class Hit(BaseModel):
        q: str
        page: int
        exact: bool
        kind: str | None
        price: float | None

    @shop.action(readonly=True)
    async def search(
        q: str, page: int = 1, exact: bool = False, kind: Literal["a", "b"] | None = None, price: float | None = None
    ) -> Hit:
        """Search"""
        return Hit(q=q, page=page, exact=exact, kind=kind, price=price)

    @shop.action(readonly=True)
    async def by_ids(ids: list[str]) -> dict:
        """Not scalar: POST only"""
        return {"ids": ids}

    @shop.action()
    async def buy(item: str) -> dict:
        """Not read-only: POST only"""
        return {"item": item}

    app = MCPFusion(name="get", tools=[shop]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        query = "q=t%C3%A9&page=2&exact=true&kind=b&price=9.5&_select=q&_select=page"
        got = await http.get(f"/api/shop/search?{query}")
        posted = await http.post("/api/shop/search", json={"q": "té", "page": 2, "exact": True, "kind": "b",
                                                           "price": 9.5, "_select": ["q", "page"]})
        assert got.status_code == 200 and got.content == posted.content == b'{"q":"t\xc3\xa9","page":2}'
        assert (await http.get("/api/shop/search?q=x")).json()["exact"] is False
        bad = assert_problem(await http.get("/api/shop/search?q=x&page=two&color=red"), 422, "VALIDATION_ERROR")
        assert [e["field"] for e in bad["errors"]] == ["page", "color"]
        assert_problem(await http.get("/api/shop/search?q=x&q=y"), 422, "VALIDATION_ERROR")
        assert_problem(await http.get("/api/shop/search"), 422, "VALIDATION_ERROR")
        for name in ("by_ids", "buy"):
            refused = assert_problem(await http.get(f"/api/shop/{name}?item=x"), 405, "METHOD_NOT_ALLOWED")
            assert refused["recovery"] == "Use one of these methods: POST."
        both = await http.delete("/api/shop/search")
        assert assert_problem(both, 405, "METHOD_NOT_ALLOWED") and both.headers["allow"] == "GET, HEAD, POST"
        spec = (await http.get("/openapi.json")).json()
    get = spec["paths"]["/api/shop/search"]["get"]
    params = {p["name"]: p for p in get["parameters"]}
    assert list(params) == ["q", "page", "exact", "kind", "price", "_select"]
    assert params["q"]["required"] and not params["page"]["required"] and params["_select"]["explode"]
    assert get["responses"]["422"]["content"] == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    assert get["operationId"] == "shop_search_get" and set(spec["paths"]["/api/shop/buy"]) == {"post"}
    assert set(spec["paths"]["/api/shop/by_ids"]) == {"post"}


async def test_forbidden_and_throttled_dependencies_are_problems():
    guarded = Tool("guarded")

    def role(x_role: str | None = Header(None)) -> str:
        if x_role == "intern":
            raise HTTPException(403, "Interns may not read payroll.")
        if x_role == "greedy":
            raise HTTPException(429, "Too many requests.", headers={"Retry-After": "7"})
        return x_role or "admin"

    @guarded.action(readonly=True)
    async def payroll(who: str = Depends(role)) -> dict:
        """Guarded by a role dependency"""
        return {"who": who}

    app = MCPFusion(name="guarded", tools=[guarded]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        forbidden = assert_problem(await http.get("/api/guarded/payroll", headers={"x-role": "intern"}), 403,
                                   "FORBIDDEN")
        assert forbidden["detail"] == "Interns may not read payroll." and forbidden["recovery"]
        throttled = await http.post("/api/guarded/payroll", json={}, headers={"x-role": "greedy"})
        assert assert_problem(throttled, 429, "RATE_LIMITED")["retry_after"] == 7
        assert throttled.headers["retry-after"] == "7"
        assert (await http.get("/api/guarded/payroll")).json() == {"who": "admin"}


async def test_the_openapi_body_of_a_confirm_action_takes_the_token_its_428_asks_for():
    """A strict client generated from /openapi.json can send the `_confirm` a 428 CONFIRMATION_REQUIRED
    answer asks for (the body schema forbids other keys)."""
    import jsonschema

    from mcpfusion import MCPFusion, Tool

    tool = Tool("ledger", description="Ledger")

    @tool.action(destructive=True, confirm=True)
    async def void(id: str) -> dict:
        """Void"""
        return {"id": id, "void": True}

    app = MCPFusion("ledger", tools=[tool]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        body = (await http.get("/openapi.json")).json()["paths"]["/api/ledger/void"]["post"]["requestBody"]
        schema = body["content"]["application/json"]["schema"]
        asked = await http.post("/api/ledger/void", json={"id": "a"})
        assert asked.status_code == 428
        confirmed = {"id": "a", "_confirm": asked.json()["details"]["confirm_token"]}
        jsonschema.validate(confirmed, schema)
        assert (await http.post("/api/ledger/void", json=confirmed)).json() == {"id": "a", "void": True}


async def test_the_openapi_200_of_a_presenter_is_the_item_as_sent_one_or_a_list_as_annotated():
    """Serialization mode (a computed field is documented: it is sent), and one shape per action: an object
    for `-> dict`, an array for `-> list[dict]` (generated clients get no union that never occurs)."""
    import jsonschema
    from pydantic import BaseModel, computed_field

    from mcpfusion import MCPFusion, Presenter, Tool

    class Line(BaseModel):
        quantity: int
        unit_cents: int

        @computed_field  # type: ignore[prop-decorator]
        @property
        def amount_cents(self) -> int:
            return self.quantity * self.unit_cents

    view = Presenter("line").schema(Line)
    tool = Tool("lines", description="Lines")

    @tool.action(readonly=True, returns=view)
    async def one() -> dict:
        """One"""
        return {"quantity": 2, "unit_cents": 5}

    @tool.action(readonly=True, returns=view)
    async def many() -> list[dict]:
        """Many"""
        return [{"quantity": 2, "unit_cents": 5}]

    app = MCPFusion("lines", tools=[tool]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        paths = (await http.get("/openapi.json")).json()["paths"]
        for action, kind in (("one", "object"), ("many", "array")):
            schema = paths[f"/api/lines/{action}"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
            assert schema["type"] == kind and "amount_cents" in json.dumps(schema)
            jsonschema.validate((await http.post(f"/api/lines/{action}", json={})).json(), schema)


async def test_a_refused_cursor_over_rest_says_how_to_start_again_on_this_route():
    from mcpfusion import MCPFusion, Presenter, Tool

    tool = Tool("notes", description="Notes", exposition="profiles")

    @tool.action(readonly=True, returns=Presenter("n").schema({"id": str}), paginate=2)
    async def browse(page: Page) -> list[dict]:
        """Browse"""
        return [{"id": str(i)} for i in range(5)]

    app = MCPFusion("notes", tools=[tool]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        refused = await http.get("/api/notes/browse?cursor=forged")
    assert refused.status_code == 400 and refused.json()["code"] == "INVALID_CURSOR"
    assert refused.json()["recovery"] == ("Call GET /api/notes/browse again with the same parameters and no cursor "
                                          "to start from the first page.")
