"""Round 7, REST: exact `Decimal` query values, quoted query text kept as sent, the Host guard before routing
and authentication on every path a fusion serves, and JSON bodies with a UTF-8 byte order mark."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Literal

import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.auth import bearer_token, unauthorized
from mcpfusion.authorization import ProtectedResource
from mcpfusion.body import InvalidJSON, parse_json

ACCEPT = "application/json, text/event-stream"
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def echo_tool() -> Tool:
    echo = Tool("echo", description="Echo what the handler receives")

    @echo.action(readonly=True)
    async def amount(amount: Decimal, fee: Decimal | None = None) -> dict:
        """The amounts as received."""
        return {"amount": str(amount), "fee": None if fee is None else str(fee)}

    @echo.action(readonly=True)
    async def search(q: str | None = None, mode: Literal["a", "b"] | None = None, n: int | str = "") -> dict:
        """The parameters as received."""
        return {"q": q, "mode": mode, "n": n}

    return echo


def client(**options: object) -> TestClient:
    return TestClient(MCPFusion("echo", tools=[echo_tool()], **options).build_app())  # type: ignore[arg-type]


# -- 1. Decimal query values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["1.10", "12345678901234567.89", "0.1000000000000000055511151231257827", "1e2"])
def test_a_decimal_query_value_reaches_the_handler_as_exactly_as_post_gives_it(text):
    http = client()
    got = http.get("/api/echo/amount", params={"amount": text, "fee": text})
    posted = http.post("/api/echo/amount", json={"amount": text, "fee": text})
    assert got.status_code == posted.status_code == 200, got.text
    assert got.json() == posted.json() == {"amount": str(Decimal(text)), "fee": str(Decimal(text))}


def test_other_query_readings_stand_beside_exact_decimals():
    http = client()
    assert http.get("/api/echo/amount", params={"amount": "5", "fee": "null"}).json() == {"amount": "5", "fee": None}
    assert http.get("/api/echo/search", params={"n": "5"}).json()["n"] == 5  # `int | str`: still the number
    refused = http.get("/api/echo/amount", params={"amount": "abc"})
    assert refused.status_code == 422 and 'You sent: "abc"' in refused.json()["errors"][0]["detail"]


# -- 2. quoted query text -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ['"exact phrase"', '"\\u0041BC"', '"\\u0000"', '"5"'])
def test_a_quoted_query_text_reaches_the_handler_as_sent(text):
    http = client()
    got = http.get("/api/echo/search", params={"q": text, "n": text})
    posted = http.post("/api/echo/search", json={"q": text, "n": text})
    assert got.json() == posted.json() == {"q": text, "mode": None, "n": text}


def test_a_quoted_literal_is_refused_on_get_as_on_post():
    http = client()
    got = http.get("/api/echo/search", params={"mode": '"a"'})
    posted = http.post("/api/echo/search", json={"mode": '"a"'})
    assert got.status_code == posted.status_code == 422
    assert got.json()["errors"][0]["field"] == posted.json()["errors"][0]["field"] == "mode"
    assert http.get("/api/echo/search", params={"mode": "a"}).json()["mode"] == "a"


# -- 3. the Host guard before routing and authentication ------------------------------------------------------

def foreign(app: FastAPI, host: str = "http://evil.example") -> TestClient:
    return TestClient(app, base_url=host, follow_redirects=False)


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/echo/amount?amount=1"), ("GET", "/api/echo/amount/?amount=1"), ("GET", "/api/echo/nope"),
    ("PUT", "/api/echo/amount"), ("GET", "/api/nothing/here"), ("GET", "/api"), ("GET", "/mcp/"),
    ("POST", "/mcp/"), ("GET", "/tools/"), ("GET", "/tools/static/nope"), ("GET", "/tools.json")])
def test_a_foreign_host_is_refused_before_any_redirect_404_or_405(method, path):
    answer = foreign(MCPFusion("echo", tools=[echo_tool()]).build_app()).request(method, path)
    assert answer.status_code == 421, answer.text
    assert "location" not in answer.headers and "evil.example" not in answer.text
    assert "MCPFUSION_ALLOWED_HOSTS" in answer.text


def test_a_foreign_origin_is_refused_before_a_redirect_too():
    http = TestClient(MCPFusion("echo", tools=[echo_tool()]).build_app(), follow_redirects=False)
    evil = {"origin": "http://evil.example"}
    assert http.get("/api/echo/amount/?amount=1", headers=evil).status_code == 403
    assert http.get("/mcp/", headers=evil).status_code == 403
    assert http.get("/api/echo/amount/?amount=1").status_code == 307  # an allowed Host: routing as before
    assert http.get("/tools.json", headers=evil).status_code == 200  # a read-only page: the Host only


def test_the_app_own_routes_are_not_guarded():
    app = FastAPI()

    @app.get("/api/own")
    async def own() -> dict:
        return {"own": True}

    MCPFusion("echo", tools=[echo_tool()]).mount(app)
    http = foreign(app)
    assert http.get("/api/own").json() == {"own": True}
    assert http.get("/healthz").status_code == 200
    assert http.get("/api/echo/amount?amount=1").status_code == 421


def test_allowed_hosts_are_served_on_every_guarded_path():
    http = foreign(MCPFusion("echo", tools=[echo_tool()], allowed_hosts=["api.example.com"]).build_app(),
                   "https://api.example.com")
    assert http.get("/api/echo/amount?amount=1.10").json()["amount"] == "1.10"
    assert http.get("/api/echo/amount/?amount=1").headers["location"].startswith("https://api.example.com/")
    assert http.get("/tools.json").status_code == 200
    assert foreign(http.app).get("/api/echo/amount?amount=1").status_code == 421  # type: ignore[arg-type]


async def authenticate(request):
    if bearer_token(request) != "good":
        raise unauthorized("Unknown token.")
    return {"sub": "u"}


def test_a_foreign_host_is_refused_before_the_bearer_check_and_its_challenge():
    app = MCPFusion("echo", tools=[echo_tool()], authorization=ProtectedResource(
        authorization_servers=["https://auth.example.test"], authenticate=authenticate)).build_app()
    http = foreign(app)
    for answer in (http.get("/api/echo/amount?amount=1"), http.post("/mcp", json=PING, headers={"accept": ACCEPT}),
                   http.get("/.well-known/oauth-protected-resource"),
                   http.get("/.well-known/oauth-protected-resource/mcp")):
        assert answer.status_code == 421, answer.text
        assert "www-authenticate" not in answer.headers and "evil.example" not in answer.text
    local = TestClient(app)
    challenged = local.get("/api/echo/amount?amount=1")
    assert challenged.status_code == 401 and "resource_metadata" in challenged.headers["www-authenticate"]
    assert local.get("/api/echo/amount?amount=1", headers={"authorization": "Bearer good"}).status_code == 200
    assert local.get("/.well-known/oauth-protected-resource").status_code == 200


def test_an_app_middleware_inside_the_guard_never_answers_a_foreign_host_first():
    app = FastAPI()

    @app.middleware("http")
    async def login(request, call_next):  # the app's own bearer check, added before mount
        if request.headers.get("authorization") != "Bearer good":
            return JSONResponse({"login": f"http://{request.headers['host']}/login"}, status_code=401)
        return await call_next(request)

    MCPFusion("echo", tools=[echo_tool()]).mount(app)
    http = foreign(app)
    for answer in (http.post("/mcp", json=PING, headers={"accept": ACCEPT}), http.get("/api/echo/amount?amount=1")):
        assert answer.status_code == 421 and "evil.example" not in answer.text, answer.text
    assert TestClient(app).get("/api/echo/amount?amount=1").status_code == 401


# -- 4. a UTF-8 byte order mark -------------------------------------------------------------------------------

BOM = b"\xef\xbb\xbf"


def test_a_body_with_a_utf8_byte_order_mark_is_read_on_rest_and_mcp():
    http = client(json_response=True)
    headers = {"content-type": "application/json"}
    rest = http.post("/api/echo/amount", content=BOM + b'{"amount": "1.10"}', headers=headers)
    assert rest.status_code == 200 and rest.json()["amount"] == "1.10"
    mcp = http.post("/mcp", content=BOM + json.dumps(INITIALIZE).encode(), headers={**headers, "accept": ACCEPT})
    assert mcp.status_code == 200 and mcp.json()["result"]["serverInfo"]["name"] == "echo"


@pytest.mark.parametrize(("encoding", "name"), [("utf-16", "UTF-16"), ("utf-32", "UTF-32"),
                                                ("utf-16-be", "UTF-16"), ("utf-32-be", "UTF-32")])
def test_another_encodings_byte_order_mark_is_refused_by_name(encoding, name):
    bom = {"utf-16-be": b"\xfe\xff", "utf-32-be": b"\x00\x00\xfe\xff"}.get(encoding, b"")
    http = client(json_response=True)
    headers = {"content-type": "application/json"}
    rest = http.post("/api/echo/amount", content=bom + '{"amount": "1"}'.encode(encoding), headers=headers)
    assert rest.status_code == 422 and f"the body is {name}" in rest.json()["errors"][0]["detail"]
    mcp = http.post("/mcp", content=bom + json.dumps(PING).encode(encoding), headers={**headers, "accept": ACCEPT})
    assert mcp.status_code == 400 and f"the body is {name}" in mcp.json()["error"]["message"]


def test_parse_json_skips_one_utf8_byte_order_mark_only():
    assert parse_json(BOM + b"[1]") == [1]
    for body in (BOM, BOM + BOM + b"[1]", BOM + b"not json"):
        with pytest.raises(InvalidJSON) as refused:
            parse_json(body)
        assert refused.value.reason == "the body is not valid JSON"
    with pytest.raises(InvalidJSON) as deep:
        parse_json(BOM + b"[" * 300 + b"]" * 300)
    assert "nests deeper" in deep.value.reason
