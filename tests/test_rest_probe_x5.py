"""REST under a path prefix, actions added after the app was built, GET query values, and the recoveries REST
writes (black-box probe X5)."""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI, Security
from fastapi.security import APIKeyCookie, APIKeyHeader
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, RateLimit, Tool
from mcpfusion.problem import unauthorized_recovery
from tests.service_kit import serve

PROBLEM = "application/problem+json"


def notes_app() -> FastAPI:
    notes = Tool("notes")

    @notes.action(readonly=True)
    async def search(q: str = "") -> list[dict[str, Any]]:
        """Search."""
        return [{"id": "n1", "q": q}]

    return MCPFusion("notes", tools=[notes]).build_app()


def serve_under(app: FastAPI, root_path: str) -> AbstractContextManager[str]:
    """`app` on uvicorn with `--root-path` (a free port on 127.0.0.1), stopped on exit."""
    return serve(app, root_path=root_path, lifespan="off")


def check_prefixed_errors(client: httpx.Client | TestClient, base: str) -> None:
    """Under a prefix (`base`), routing's errors are problem details whose recovery names the prefixed routes."""
    assert client.get(f"{base}/api/notes/search", params={"q": "x"}).json() == [{"id": "n1", "q": "x"}]
    tool = client.get(f"{base}/api/nope/x")
    assert tool.status_code == 404 and tool.headers["content-type"] == PROBLEM
    assert tool.json()["code"] == "UNKNOWN_TOOL" and f"{base}/api/{{tool}}/{{action}}" in tool.json()["recovery"]
    action = client.post(f"{base}/api/notes/nope", json={})
    assert action.status_code == 404 and action.headers["content-type"] == PROBLEM
    assert action.json()["code"] == "UNKNOWN_ACTION" and "search" in action.json()["recovery"]
    wrong = client.put(f"{base}/api/notes/search")
    assert wrong.status_code == 405 and wrong.headers["content-type"] == PROBLEM
    assert wrong.headers["allow"] == "GET, HEAD, POST" and wrong.json()["code"] == "METHOD_NOT_ALLOWED"
    for path in ("/api", "/api/"):  # no tool named: the tools, not FastAPI's plain 404
        for method in ("GET", "POST"):
            bare = client.request(method, base + path)
            assert bare.status_code == 404 and bare.headers["content-type"] == PROBLEM, (method, path)
            assert bare.json()["code"] == "UNKNOWN_TOOL" and "notes" in bare.json()["recovery"]
    other = client.get(f"{base}/elsewhere")  # the app's other paths keep FastAPI's own answer
    assert other.status_code == 404 and other.json() == {"detail": "Not Found"}


def test_rest_errors_are_problem_details_in_an_app_mounted_under_a_prefix():
    outer = FastAPI()
    outer.mount("/svc", notes_app())
    check_prefixed_errors(TestClient(outer), "/svc")


def test_rest_errors_are_problem_details_under_uvicorn_root_path():
    with serve_under(notes_app(), "/svc") as url, httpx.Client(base_url=url, timeout=30) as client:
        check_prefixed_errors(client, "")


def test_rest_errors_are_problem_details_without_a_prefix():
    check_prefixed_errors(TestClient(notes_app()), "")


@pytest.mark.parametrize("exposition", ["grouped", "flat", "profiles"])
def test_an_action_added_after_build_app_is_routed_and_documented(exposition, caplog):
    t = Tool("t", exposition=exposition)

    @t.action(readonly=True)
    async def first() -> dict[str, int]:
        """First."""
        return {"a": 1}

    client = TestClient(MCPFusion("t", tools=[t]).build_app())
    assert [p for p in client.get("/openapi.json").json()["paths"] if p.startswith("/api")] == ["/api/t/first"]

    @t.action(readonly=True)
    async def second(n: int = 0) -> dict[str, int]:
        """Second."""
        return {"b": n}

    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        # The document made before it was added is made again, without a REST call to it first.
        spec = client.get("/openapi.json").json()
        assert {"/api/t/first", "/api/t/second"} <= set(spec["paths"])
        assert set(spec["paths"]["/api/t/second"]) == {"get", "post"}
        assert client.post("/api/t/second", json={"n": 2}).json() == {"b": 2}
        assert client.get("/api/t/second", params={"n": 3}).json() == {"b": 3}
        assert client.post("/api/t/first", json={}).json() == {"a": 1}
        wrong = client.put("/api/t/second")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "GET, HEAD, POST"
        # MCP serves it too (a flat tool's new name is routed on its first call: where the log spoke).
        name, arguments = ("t_second", {}) if exposition == "flat" else ("t", {"action": "second"})
        assert mcp_call(client, name, arguments) == {"b": 0}

        @t.action(readonly=True)
        async def third() -> dict[str, int]:
            """Third: added after a REST call of the second."""
            return {"c": 3}

        assert client.post("/api/t/third", json={}).json() == {"c": 3}
        assert "/api/t/third" in client.get("/openapi.json").json()["paths"]
    # A flat tool's own names are not "another tool's" (the log said so on its first late action).
    assert not [r for r in caplog.records if "another tool's" in r.getMessage()]


def mcp_call(client: TestClient, name: str, arguments: dict[str, Any]) -> Any:
    """A stateless (2026-07-28) MCP tools/call; the JSON of its first text block."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": name}
    params = {"name": name, "arguments": arguments, "_meta": meta}
    answer = client.post("/mcp", headers=headers,
                         json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).json()
    assert answer["result"]["isError"] is False, answer
    return json.loads(answer["result"]["content"][0]["text"])


def test_a_late_action_of_an_unknown_path_is_still_a_problem():
    client = TestClient(notes_app())
    missing = client.post("/api/notes/later", json={})
    assert missing.status_code == 404 and missing.json()["code"] == "UNKNOWN_ACTION"


def pick_client() -> TestClient:
    t = Tool("t")

    @t.action(readonly=True)
    async def pick(size: Literal[1, 2, 3] = 1, mixed: Literal[1, "two"] = 1, opt: Literal[10, 20] | None = None,
                   union: int | str = 0, text: str = "", maybe: int | None = 7, flag: bool = False
                   ) -> dict[str, Any]:
        """Pick."""
        return {"size": size, "mixed": mixed, "opt": opt, "union": union, "text": text, "maybe": maybe,
                "flag": flag}

    return TestClient(MCPFusion("t", tools=[t]).build_app())


@pytest.mark.parametrize("query, sent", [
    ({"size": "2"}, {"size": 2}),
    ({"mixed": "1"}, {"mixed": 1}),
    ({"mixed": "two"}, {"mixed": "two"}),
    ({"opt": "10"}, {"opt": 10}),
    ({"opt": "null"}, {"opt": None}),
    ({"union": "5"}, {"union": 5}),
    ({"union": "five"}, {"union": "five"}),
    ({"text": "5"}, {"text": "5"}),  # a string parameter keeps its text, whatever it looks like
    ({"text": "null"}, {"text": "null"}),
    ({"maybe": "null"}, {"maybe": None}),
    ({"flag": "yes"}, {"flag": True}),
])
def test_get_hands_the_handler_what_post_does(query, sent):
    client = pick_client()
    got = client.get("/api/t/pick", params=query)
    posted = client.post("/api/t/pick", json=sent)
    assert got.status_code == posted.status_code == 200, got.text
    assert got.json() == posted.json()
    assert type(got.json()[next(iter(sent))]) is type(next(iter(sent.values())))


def test_get_refusal_quotes_what_was_sent():
    refused = pick_client().get("/api/t/pick", params={"size": "5"})
    assert refused.status_code == 422
    assert refused.json()["errors"] == [{"field": "size", "detail": "Input should be 1, 2 or 3. You sent: 5."}]
    words = pick_client().get("/api/t/pick", params={"opt": "ten"})
    assert words.status_code == 422 and 'You sent: "ten"' in words.json()["errors"][0]["detail"]


def test_get_or_head_with_a_body_is_refused_like_post_with_a_query():
    client = pick_client()
    for method in ("GET", "HEAD"):
        refused = client.request(method, "/api/t/pick", content=b'{"size": 2}',
                                 headers={"content-type": "application/json"})
        assert refused.status_code == 422 and refused.headers["content-type"] == PROBLEM
    refused = client.request("GET", "/api/t/pick", content=b'{"size": 2}')
    assert refused.json()["errors"][0]["field"] == "(body)" and "query" in refused.json()["errors"][0]["detail"]
    assert client.request("GET", "/api/t/pick", content=b"").status_code == 200  # an empty body is none


def test_a_missing_api_key_names_the_header_or_cookie_the_scheme_reads():
    svc = Tool("svc")

    @svc.action(readonly=True)
    async def keyed(key: str = Security(APIKeyHeader(name="X-API-Key"))) -> dict[str, bool]:
        """Needs an API key header."""
        return {"ok": True}

    @svc.action(readonly=True)
    async def cookied(key: str = Security(APIKeyCookie(name="session"))) -> dict[str, bool]:
        """Needs a session cookie."""
        return {"ok": True}

    client = TestClient(MCPFusion("svc", tools=[svc]).build_app())
    keyed_401 = client.post("/api/svc/keyed", json={})
    assert keyed_401.status_code == 401
    assert keyed_401.json()["recovery"] == "Send the header X-API-Key, with a valid key."
    cookied_401 = client.get("/api/svc/cookied")
    assert cookied_401.status_code == 401
    assert cookied_401.json()["recovery"] == "Send the cookie session, with a valid key."
    assert client.post("/api/svc/keyed", json={}, headers={"X-API-Key": "k"}).json() == {"ok": True}


def test_unauthorized_recovery_follows_the_challenge():
    assert "Bearer TOKEN" in unauthorized_recovery(None)
    assert "Bearer TOKEN" in unauthorized_recovery('Bearer resource_metadata="https://x/.well-known/y"')
    assert "Basic" in unauthorized_recovery('Basic realm="x"')
    assert unauthorized_recovery("APIKey", [{"type": "apiKey", "in": "query", "name": "key"}]) == \
        "Send the query parameter key, with a valid key."
    assert "API key" in unauthorized_recovery("APIKey")


def test_rest_recoveries_name_the_route_called():
    shop = Tool("shop")

    @shop.action(readonly=True, middleware=[RateLimit(1, per=60)])
    async def ping() -> dict[str, bool]:
        """Ping."""
        return {"ok": True}

    @shop.action(destructive=True, confirm="Delete order {id}? (call shop.delete_order again says nothing)")
    async def delete_order(id: str) -> dict[str, str]:
        """Delete an order."""
        return {"deleted": id}

    client = TestClient(MCPFusion("shop", tools=[shop]).build_app())
    assert client.post("/api/shop/ping", json={}).status_code == 200
    limited = client.post("/api/shop/ping", json={})
    assert limited.status_code == 429
    assert limited.json()["recovery"].endswith("then call POST /api/shop/ping again.")
    asked = client.post("/api/shop/delete_order", json={"id": "o1"})
    assert asked.status_code == 428
    recovery = asked.json()["recovery"]
    # The user's question is quoted as written; the call to make again is the route.
    assert '"Delete order "o1"? (call shop.delete_order again says nothing)"' in recovery
    assert "Only if they agree, call POST /api/shop/delete_order again with exactly the same" in recovery
    token = asked.json()["details"]["confirm_token"]
    assert client.post("/api/shop/delete_order", json={"id": "o1", "_confirm": token}).json() == {"deleted": "o1"}
