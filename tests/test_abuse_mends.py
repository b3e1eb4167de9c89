"""Abuse that costs the server more than the caller: long query strings, floods of unknown keys, invalid
calls past a rate limit, huge request heads, huge method names. Each is refused at a cost that does not grow
with what was sent (checked by structure, never by timing)."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from starlette.datastructures import ImmutableMultiDict

from mcpfusion import MCPFusion, Presenter, RateLimit, Tool, server
from mcpfusion import tool as tool_module
from mcpfusion.errors import ValidationFailed
from mcpfusion.rest import MAX_QUERY_NAMES
from mcpfusion.testing import ToolTester
from tests.service_kit import free_socket

MODERN = {"accept": "application/json", "mcp-protocol-version": "2026-07-28"}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def shop(middleware: list | None = None) -> MCPFusion:
    tool = Tool("shop", description="Shop", select=True)

    @tool.action(readonly=True, returns=Presenter("row"))
    async def search(text: str = "", limit: int = 10) -> list:
        """Search"""
        return [{"text": text, "limit": limit}]

    return MCPFusion("shop", tools=[tool], middleware=middleware or [])


def client(fusion: MCPFusion) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()), base_url="http://127.0.0.1")


# -- 1. REST GET query strings ----------------------------------------------------------------------------

async def test_a_get_reads_its_query_in_one_pass(monkeypatch):
    def getlist(self, key):  # a scan of every pair per name: quadratic in the URL
        raise AssertionError("getlist called")

    monkeypatch.setattr(ImmutableMultiDict, "getlist", getlist)
    async with client(shop()) as http:
        one = await http.get("/api/shop/search?text=a&limit=3")
        repeated = await http.get("/api/shop/search?text=a&text=b")
    assert one.status_code == 200 and one.json() == [{"text": "a", "limit": 3}]
    assert repeated.status_code == 422 and repeated.json()["errors"][0]["field"] == "text"


async def test_a_query_with_more_names_than_the_limit_is_one_422_naming_it():
    query = "&".join(f"k{i}=" for i in range(MAX_QUERY_NAMES + 1))
    async with client(shop()) as http:
        flood = await http.get(f"/api/shop/search?{query}")
        posted = await http.post(f"/api/shop/search?{query}", json={})
        under = await http.get("/api/shop/search?" + "&".join(f"k{i}=" for i in range(MAX_QUERY_NAMES)))
    for refused in (flood, posted):
        assert refused.status_code == 422
        errors = refused.json()["errors"]
        assert len(errors) == 1 and errors[0]["field"] == "(query)"
        assert f"At most {MAX_QUERY_NAMES} query parameters" in errors[0]["detail"]
        assert f"has {MAX_QUERY_NAMES + 1}" in errors[0]["detail"]
    assert under.status_code == 422 and "(query)" not in under.text  # each unknown name judged as before


# -- 2. a flood of unknown argument keys ------------------------------------------------------------------

def _fields(action, arguments: dict) -> list[tuple[str, str]]:
    with pytest.raises(ValidationFailed) as caught:
        action.validate(arguments)
    return caught.value.fields


def test_a_flood_of_unknown_keys_is_never_explained_one_by_one(monkeypatch):
    action = shop().registry.tools["shop"].actions["search"]
    explained = []
    original = tool_module.Action._explain
    monkeypatch.setattr(tool_module.Action, "_explain",
                        lambda self, exc: explained.append(exc.error_count()) or original(self, exc))
    fields = _fields(action, {"limit": "x", **{str(i): 1 for i in range(100_000)}})
    assert explained == [1]  # the known key alone went through pydantic, not the 100,000 others
    assert fields[0][0] == "limit" and len(fields) == 21
    assert fields[-1][1].startswith("99981 more fields are not valid either")


@pytest.mark.parametrize("arguments", [
    {f"k{i}": 1 for i in range(30)},
    {"limit": "x", "text": 3, **{f"k{i}": 1 for i in range(25)}},
    {"limit": 2, **{f"k{i}": 1 for i in range(21)}, "text": "ok"},
])
def test_the_flood_answer_is_the_full_validation_answer(monkeypatch, arguments):
    action = shop().registry.tools["shop"].actions["search"]
    quick = _fields(action, arguments)
    monkeypatch.setattr(tool_module, "MAX_FIELDS_SHOWN", 10**9)  # never a flood: pydantic judges every key
    assert quick == _fields(action, arguments)


# -- 3. invalid calls count against the rate limit --------------------------------------------------------

async def test_invalid_calls_count_against_the_rate_limit_once_each():
    tester = ToolTester(shop([RateLimit(3, per=3600)]).registry)
    alice = {"sub": "alice"}
    results = [await tester.call("shop", "search", args, auth=alice)
               for args in ({}, {"bogus": 1}, {"limit": "x"}, {}, {"bogus": 1})]
    assert [r.error_code for r in results] == [None, "VALIDATION_ERROR", "VALIDATION_ERROR", "RATE_LIMITED",
                                               "RATE_LIMITED"]
    other = await tester.call("shop", "search", {}, auth={"sub": "bob"})
    assert other.error_code is None  # alice's invalid calls spent alice's allowance only


async def test_rest_answers_429_to_invalid_calls_past_the_limit():
    async with client(shop([RateLimit(2, per=3600)])) as http:
        codes = [(await http.post("/api/shop/search", json={"bogus": 1})).status_code for _ in range(3)]
        valid = await http.post("/api/shop/search", json={})
    assert codes == [422, 422, 429] and valid.status_code == 429 and "retry-after" in valid.headers


# -- 4. the request head of `mcpfusion serve` -------------------------------------------------------------

@contextmanager
def serving(fusion: MCPFusion) -> Iterator[int]:
    sock = free_socket()
    config = uvicorn.Config(fusion.build_app(), log_level="warning", lifespan="on",
                            **server.uvicorn_options(graceful_timeout=1))
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(instance.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not instance.started:
            threading.Event().wait(0.02)
        yield sock.getsockname()[1]
    finally:
        instance.should_exit = True
        thread.join(timeout=10)
        sock.close()


def exchange(port: int, request: bytes) -> bytes:
    """What the server answers to `request` before it closes the connection."""
    answer = b""
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.settimeout(30)
        try:
            conn.sendall(request)
            while chunk := conn.recv(65536):
                answer += chunk
        except ConnectionResetError:  # (closed with the rest of a huge head unread: the answer came first)
            pass
    return answer


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    with serving(shop()) as value:
        yield value


def test_a_request_head_over_the_limit_is_a_431(port):
    pad = b"a" * (server.DEFAULT_MAX_HEAD_BYTES * 3)
    for request in (b"GET /api/shop/search HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: " + pad + b"\r\n\r\n",
                    b"GET /api/shop/search?q=" + pad + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"):
        answer = exchange(port, request)
        assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
        assert b"exceed 65536 bytes" in answer


def test_heads_under_the_limit_and_large_bodies_pass(port):
    pad = b"a" * (server.DEFAULT_MAX_HEAD_BYTES - 1024)
    head = exchange(port, b"GET /api/shop/search HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: "
                    + pad + b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    body = b'{"text": "' + b"b" * 300_000 + b'"}'  # sent with its head: the body is no part of the head
    posted = exchange(port, b"POST /api/shop/search HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                      b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert posted.startswith(b"HTTP/1.1 200")
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:  # keep-alive: each head anew
        for _ in range(3):
            assert http.get("/api/shop/search", headers={"x-pad": "c" * 40_000}).status_code == 200


# -- 5. unknown JSON-RPC methods --------------------------------------------------------------------------

async def test_an_unknown_method_is_echoed_cut_short_on_both_wires():
    method = "x" * 10_000
    async with client(shop()) as http:
        modern = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": META}},
                                 headers={**MODERN, "mcp-method": method})
        init = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            headers={"accept": "application/json"})
        session = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": method}, headers={
            "accept": "application/json", "mcp-session-id": init.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25"})
    for answer in (modern, session):
        error = answer.json()["error"]
        assert error["code"] == -32601
        assert error["message"] == "Method not found: " + "x" * 117 + "..."
