"""Round 7, calls pending on the client: a session runs at most `max_inflight_per_session` requests at once on the
2025-11-25 wire (beyond: 429 + Retry-After, in memory and in Redis), and a graceful shutdown cancels the calls
whose client already left without a traceback each."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from mcpfusion import Context, Tool, server
from mcpfusion.app import MCPFusion
from mcpfusion.mcp.settings import TransportSettings

VERSION = "2025-11-25"
SSE = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}


def build(**settings: Any) -> MCPFusion:
    desk = Tool("desk", description="Asks the user", exposition="flat")

    @desk.action(readonly=True)
    async def ask(ctx: Context) -> str:
        """Ask the user something."""
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return str(answer.get("action"))

    @desk.action(readonly=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return MCPFusion("pending", "1", tools=[desk], **settings)


@contextlib.contextmanager
def serving(app: Any, graceful: float = 1.0, log_config: Any = None) -> Iterator[tuple[str, uvicorn.Server]]:
    """`app` under uvicorn, with `mcpfusion serve`'s protocol, in a thread on a free 127.0.0.1 port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_config=log_config, log_level="info",
                            **server.uvicorn_options(graceful_timeout=graceful))
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(srv.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not srv.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}", srv
    finally:
        srv.should_exit = True
        thread.join(30)
        sock.close()


async def session(client: httpx.AsyncClient, base: str) -> dict[str, str]:
    r = await client.post(f"{base}/mcp", headers=SSE, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}})
    assert r.status_code == 200, r.text
    headers = {"mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    r = await client.post(f"{base}/mcp", headers={**SSE, **headers},
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert r.status_code == 202
    return headers


def call(rid: int, name: str = "desk_ask", arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


@contextlib.asynccontextmanager
async def asking(client: httpx.AsyncClient, base: str, headers: dict[str, str], rid: int
                 ) -> AsyncIterator[tuple[str, httpx.Response]]:
    """A call of `ask` left waiting for the client's answer: (the server request's id, its open SSE response)."""
    async with client.stream("POST", f"{base}/mcp", headers={**SSE, **headers}, json=call(rid)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:") and "elicitation/create" in line:
                yield json.loads(line[5:])["id"], response
                return
        raise AssertionError("the call never asked")


async def too_many(client: httpx.AsyncClient, base: str, headers: dict[str, str], rid: int, accept: dict[str, str]
                   ) -> None:
    """A request past the limit: 429, Retry-After, the JSON-RPC error naming its id and the setting."""
    r = await client.post(f"{base}/mcp", headers={**accept, **headers}, json=call(rid, "desk_echo", {"text": "x"}))
    assert r.status_code == 429, r.text
    assert r.headers["retry-after"].isdigit()
    body = r.json()
    assert body["id"] == rid and body["error"]["code"] == -32600
    assert "max_inflight_per_session" in body["error"]["message"]


async def limit_scenario(fusion: MCPFusion) -> None:
    with serving(fusion.build_app()) as (base, _):
        async with httpx.AsyncClient(timeout=30) as client:
            headers = await session(client, base)
            async with asking(client, base, headers, 1) as (asked, _), asking(client, base, headers, 2):
                await too_many(client, base, headers, 3, SSE)       # SSE mode: refused before any stream starts
                await too_many(client, base, headers, 4, JSON_ONLY)  # JSON mode too
                other = await session(client, base)  # a bound per session: another one is not refused
                r = await client.post(f"{base}/mcp", headers={**JSON_ONLY, **other}, json=call(5, "desk_echo", {"text": "y"}))
                assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "y"
                # The first call answered: its slot is free again.
                r = await client.post(f"{base}/mcp", headers={**SSE, **headers}, json={
                    "jsonrpc": "2.0", "id": asked, "result": {"action": "decline"}})
                assert r.status_code == 202
                wire = fusion.transport.session_wire
                for _ in range(500):  # until the answered call has ended (bounded: never a hang)
                    if wire.running.get(headers["mcp-session-id"]) == 1:
                        break
                    await asyncio.sleep(0.01)
                r = await client.post(f"{base}/mcp", headers={**JSON_ONLY, **headers}, json=call(6, "desk_echo", {"text": "z"}))
                assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "z"


def test_a_session_runs_at_most_max_inflight_per_session_requests_at_once():
    fusion = build(max_inflight_per_session=2)
    asyncio.run(limit_scenario(fusion))
    wire = fusion.transport.session_wire
    assert wire.running == {} and wire.inflight == {}  # every slot given back (the waiting call ended at shutdown)


def test_the_bound_holds_with_the_redis_stores(redis_server):
    fusion = build(max_inflight_per_session=2, redis_url=redis_server.url, signing_key="k" * 32)
    asyncio.run(limit_scenario(fusion))
    assert fusion.transport.session_wire.running == {}


def test_max_inflight_per_session_has_a_sane_default_and_is_checked():
    assert TransportSettings().max_inflight_per_session == 100
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_inflight_per_session"):
            TransportSettings(max_inflight_per_session=bad)  # type: ignore[arg-type]


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_shutdown_cancels_calls_whose_client_left_without_a_traceback():
    """uvicorn calls `shutdown` only on connections still open: a call whose client had hung up was cancelled at
    the end of the graceful timeout and logged as "Exception in ASGI application" with its whole traceback."""
    records = Records()
    uvicorn_error = logging.getLogger("uvicorn.error")
    uvicorn_error.addHandler(records)
    try:
        with serving(build().build_app(), graceful=0.2) as (base, srv):
            async def hang_up() -> None:
                async with httpx.AsyncClient(timeout=30) as client:
                    headers = await session(client, base)
                    for rid in (1, 2):
                        async with asking(client, base, headers, rid):
                            pass  # read the server's question, then hang up
            asyncio.run(hang_up())
            for _ in range(1000):  # until the server has seen the clients go (bounded: never a hang)
                if not srv.server_state.connections:
                    break
                threading.Event().wait(0.01)
            assert not srv.server_state.connections and len(srv.server_state.tasks) == 2
    finally:
        uvicorn_error.removeHandler(records)
    said = [record.getMessage() for record in records.records]
    assert "Cancel 2 running task(s), timeout graceful shutdown exceeded" in said, said  # the one summary line
    assert not [r for r in records.records if r.exc_info or "Exception in ASGI" in r.getMessage()], said
