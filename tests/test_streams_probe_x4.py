"""Probe X4 mends: a client that does not read its stream is dropped, not buffered without limit (broker
subscriptions, the 2026 streamed answer); closing the connection cancels a 2026 call from its start."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from mcpfusion import Context, Tool
from mcpfusion.app import MCPFusion
from mcpfusion.mcp import broker as broker_module
from mcpfusion.mcp.broker import BoundedQueue, InMemoryBroker, SubscriptionDropped
from tests.mcp_app import serve

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}

# What the tools below saw, set from the server's thread.
seen: dict[str, threading.Event] = {}


def build() -> MCPFusion:
    probe = Tool("p", exposition="flat")

    @probe.action(readonly=True)
    async def spam(n: int, size: int, ctx: Context) -> dict:
        """n log messages of `size` bytes each."""
        pad = "x" * size
        try:
            for i in range(n):
                await ctx.info(f"{i} {pad}")
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            seen["spam_cancelled"].set()
            raise
        seen["spam_finished"].set()
        return {"n": n}

    @probe.action(readonly=True)
    async def wait(seconds: float) -> dict:
        """Sleep silently."""
        try:
            await asyncio.sleep(seconds)
        except asyncio.CancelledError:
            seen["wait_cancelled"].set()
            raise
        return {"slept": seconds}

    return MCPFusion("probe", tools=[probe])


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve(build().build_app()) as url:
        yield url


@pytest.fixture(autouse=True)
def fresh_events(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("spam_cancelled", "spam_finished", "wait_cancelled"):
        seen[name] = threading.Event()
    # Small bounds, so a test fills them in a moment (the server thread reads them at subscribe time).
    monkeypatch.setattr(broker_module, "MAX_QUEUED_BYTES", 1_000_000)


# -- the bounded queue -------------------------------------------------------------------------------------

async def test_a_queue_past_its_message_bound_drops_and_ends():
    queue = BoundedQueue(max_messages=3, max_bytes=10_000)
    for i in range(3):
        queue.put_nowait({"n": i})
    assert await queue.next() == {"n": 0} and queue.held == len(b'{"n":1}') * 2
    queue.put_nowait({"n": 3})
    queue.put_nowait({"n": 4})  # a fourth held: past the bound
    assert queue.dropped and queue.qsize() == 1
    assert await queue.next() is None  # the end, told as a session's end
    queue.put_nowait({"n": 5})  # ignored from now on
    with pytest.raises(SubscriptionDropped):
        await queue.next()


async def test_a_stalled_subscriber_is_dropped_by_bytes_and_others_go_on():
    broker = InMemoryBroker()
    async with broker.subscribe("t") as stalled, broker.subscribe("t") as reader:
        for i in range(100):
            await broker.publish("t", {"n": i, "pad": "x" * 50_000})  # 5 MB in all; 1 MB bound
            assert (await reader.get())["n"] == i
        assert stalled.queue.dropped and stalled.queue.held == 0
        assert await stalled.get() is None


# -- 2025-11-25: a session's GET stream never read ----------------------------------------------------------

def _raw(base: str, head: str, body: bytes = b"") -> socket.socket:
    """A connection with a tiny receive buffer that sent `head` (Host filled in) + `body`, reading nothing."""
    host, port = base.split("//")[1].split(":")
    head = head.replace("Host: x", f"Host: {host}:{port}")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(head.encode() + body)
    return sock


def _read_until_end(sock: socket.socket, seconds: float) -> bytes:
    """What the connection carries until its chunked body ends (or `seconds` pass)."""
    sock.settimeout(seconds)
    data = b""
    deadline = time.monotonic() + seconds
    while not data.endswith(b"0\r\n\r\n") and time.monotonic() < deadline:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


async def test_an_unread_get_stream_is_closed_not_buffered(base):
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        init = await http.post("/mcp", headers=ACCEPT, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        sid = init.headers["mcp-session-id"]
        headers = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                                                       "params": {"level": "debug"}})
        sock = _raw(base, f"GET /mcp HTTP/1.1\r\nHost: x\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\n"
                          "mcp-protocol-version: 2025-11-25\r\n\r\n")
        try:
            await asyncio.sleep(0.5)
            # JSON mode: the call's 4 MB of logs go to the GET stream, which reads nothing.
            reply = await http.post("/mcp", headers={**headers, "accept": "application/json"}, json={
                "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "p_spam", "arguments": {"n": 800, "size": 5000}}})
            assert reply.status_code == 200 and not reply.json()["result"].get("isError")
            # The stream was dropped: it ends (once what was written is read), the client would resume it.
            data = await asyncio.to_thread(_read_until_end, sock, 10)
        finally:
            sock.close()
    assert data.endswith(b"0\r\n\r\n")
    assert data.count(b"notifications/message") < 800


# -- 2026-07-28: a streamed answer never read; a connection closed before the answer ------------------------

def _modern_head(name: str, body: bytes) -> str:
    return (f"POST /mcp HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            f"accept: application/json, text/event-stream\r\nmcp-protocol-version: {MODERN}\r\n"
            f"mcp-method: tools/call\r\nmcp-name: {name}\r\ncontent-length: {len(body)}\r\n\r\n")


def _modern_body(name: str, arguments: dict, **meta: object) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {**META, **meta}}}


async def test_an_unread_modern_stream_is_dropped_and_its_call_cancelled(base):
    body = json.dumps(_modern_body("p_spam", {"n": 5000, "size": 5000},
                                   **{"io.modelcontextprotocol/logLevel": "debug"})).encode()
    sock = _raw(base, _modern_head("p_spam", body), body)
    try:
        # 25 MB of logs for a reader that reads nothing: the stream is dropped past 1 MB, the call cancelled.
        assert await asyncio.to_thread(seen["spam_cancelled"].wait, 10)
        assert not seen["spam_finished"].is_set()
    finally:
        sock.close()


@pytest.mark.parametrize("meta", [{}, {"progressToken": "p1"}], ids=["json", "streamable"])
async def test_closing_the_connection_cancels_a_modern_call_that_sent_nothing(base, meta):
    body = _modern_body("p_wait", {"seconds": 30}, **meta)
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "p_wait"}

    async def read() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http, \
                http.stream("POST", "/mcp", json=body, headers=headers) as response:
            async for _ in response.aiter_bytes():
                pass

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(read(), 0.5)  # closes the connection: the 2026 way to cancel
    assert await asyncio.to_thread(seen["wait_cancelled"].wait, 5)


async def test_a_modern_json_call_still_answers(base):
    body = _modern_body("p_wait", {"seconds": 0.05})
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "p_wait"}
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        replies = await asyncio.gather(*(http.post("/mcp", json=body, headers=headers) for _ in range(5)))
    assert all(r.status_code == 200 and not r.json()["result"].get("isError") for r in replies)
    assert not seen["wait_cancelled"].is_set()
