"""Round 5p: stdio output never blocks the loop (a client that stops reading still lets signals and the end of
stdin stop the server, and is dropped past a bound), one answer per id at shutdown, a re-initialize followed,
duplicate 2026-07-28 ids refused, and requests before `initialize` answered for stdio."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp import stdio
from mcpfusion.mcp.stdio import StdioBridge, _Output, _Unread
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}

APP_SOURCE = '''
import asyncio
from mcpfusion import MCPFusion, Tool

t = Tool("t", description="test tool")


@t.action(readonly=True)
async def big() -> str:
    """An answer larger than a pipe holds."""
    return "x" * 300_000


app = MCPFusion("full", tools=[t]).build_app()
'''


def call(msg_id: int, action: str, *, modern: bool = False) -> dict:
    params: dict = {"name": "t", "arguments": {"action": action}}
    if modern:
        params["_meta"] = META_2026
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


def make_app(started: asyncio.Event | None = None):
    t = Tool("t", description="x")
    fusion = MCPFusion("r5p", tools=[t])

    @t.action(readonly=True)
    async def slow(ctx: Context) -> str:
        """Slow (its SSE stream started: the session wire answers it itself when cancelled)."""
        await ctx.info("started")
        if started is not None:
            started.set()
        await asyncio.sleep(1000)
        return "done"

    @t.action(readonly=True)
    async def quick() -> str:
        """Quick."""
        return "quick"

    @t.action(readonly=True)
    async def touch() -> str:
        """Notify the subscribers of item 1."""
        await fusion.notify_resource_updated("r5p://items/1")
        return "touched"

    @fusion.resource_template("r5p://items/{id}", mime_type="application/json")
    async def item(id: str) -> dict:
        """One item."""
        return {"id": id}

    return fusion.build_app()


async def started_bridge(app) -> tuple[StdioBridge, Lines]:
    lines = Lines()
    bridge = StdioBridge(app, lines.write, headers={})
    await bridge.startup()
    return bridge, lines


def answers(lines: Lines, msg_id: object) -> list[dict]:
    return lines.with_id(msg_id)


# -- 1. a client that stops reading stdout --------------------------------------------------------------

def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _pipe_full(proc: subprocess.Popen[bytes]) -> None:
    """Wait (guarded) until the server is writing an answer (300 KB) to a stdout pipe that cannot hold it."""
    assert proc.stdout is not None
    deadline = time.monotonic() + WAIT
    buf = bytearray(4)
    while time.monotonic() < deadline:
        fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, buf)
        if int.from_bytes(buf, sys.byteorder) > 32768:
            return
        time.sleep(0.05)
    raise AssertionError("the server's stdout never filled")


def _start_unread(tmp_path: Path) -> subprocess.Popen[bytes]:
    (tmp_path / "fullapp.py").write_text(APP_SOURCE)
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion", "stdio", "fullapp:app"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            preexec_fn=_interruptible)  # noqa: PLW1509 (no threads started before exec)
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(INITED) + "\n").encode())
    proc.stdin.write("".join(json.dumps(call(i, "big")) + "\n" for i in range(1, 4)).encode())
    proc.stdin.flush()
    _pipe_full(proc)  # never read: the rest of the answers wait
    return proc


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signals_stop_a_server_whose_client_stopped_reading(tmp_path, sig, status):
    proc = _start_unread(tmp_path)
    try:
        proc.send_signal(sig)
        assert proc.wait(timeout=WAIT) == status
    finally:
        proc.kill()
        proc.wait()


def test_the_end_of_stdin_stops_a_server_whose_client_stopped_reading(tmp_path):
    proc = _start_unread(tmp_path)
    try:
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=WAIT) == stdio.EXIT_UNANSWERED  # (answers left unread: not delivered)
    finally:
        proc.kill()
        proc.wait()


def test_output_left_unread_past_the_bound_drops_the_client(monkeypatch):
    monkeypatch.setattr(stdio, "OUTPUT_LIMIT", 100_000)
    monkeypatch.setattr(stdio, "OUTPUT_STALL", -1)  # (the client took nothing "for long": no clock involved)
    read_fd, write_fd = os.pipe()
    output = _Output(write_fd)
    try:
        output("x" * 50_000)
        output("y" * 40_000)  # 90 000 bytes: at most a pipe's worth (65 536) written, the rest waits
        with pytest.raises(_Unread):  # whatever the thread wrote, over 100 000 bytes would wait
            output("z" * 80_000)
        assert output.close(0.05) is False
    finally:
        os.close(read_fd)
        os.close(write_fd)

    gone: list[bool] = []

    def unread(text: str) -> None:
        raise _Unread("the client left 64 MiB of answers unread on stdout")

    bridge = StdioBridge(make_app(), unread, headers={})
    bridge.on_gone = lambda: gone.append(True)
    bridge._emit({"jsonrpc": "2.0", "id": 1, "result": {}})
    bridge._emit({"jsonrpc": "2.0", "id": 2, "result": {}})
    assert bridge.gone and gone == [True]


def test_output_writes_every_line_in_order():
    read_fd, write_fd = os.pipe()
    output = _Output(write_fd)
    for i in range(100):
        output(f"{i}\n")
    assert output.close(WAIT) is True
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as read:
        assert read.read().decode().split() == [str(i) for i in range(100)]


# -- 2. one answer per id when the server stops ---------------------------------------------------------

async def test_a_running_session_call_is_answered_once_at_shutdown():
    started = asyncio.Event()
    bridge, lines = await started_bridge(make_app(started))
    try:
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        bridge.submit(json.dumps(call(1, "slow")))
        await asyncio.wait_for(started.wait(), WAIT)
        await lines.wait_for(lambda m: m.get("method") == "notifications/message")  # (the stream is open)
    finally:
        await bridge.close("the server was stopped (SIGTERM)")
    assert len(answers(lines, 1)) == 1
    assert answers(lines, 1)[0]["error"]["code"] == -32603


# -- 3. a second initialize -----------------------------------------------------------------------------

async def test_a_second_initialize_follows_the_new_session_and_ends_the_old():
    bridge, lines = await started_bridge(make_app())
    try:
        await bridge.handle_line(json.dumps(INIT))
        first = bridge.session_id
        await bridge.handle_line(json.dumps({**INIT, "id": 1}))
        await bridge.handle_line(json.dumps(INITED))
        assert bridge.session_id not in (None, first)
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe",
                                             "params": {"uri": "r5p://items/1"}}))
        # (touched until the notification comes: the GET stream attaches after `initialize` returns)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        msg_id = 3
        while not [m for m in lines.items if m.get("method") == "notifications/resources/updated"]:
            assert loop.time() < deadline, "the new session's notification never arrived"
            await bridge.handle_line(json.dumps(call(msg_id, "touch")))
            msg_id += 1
            await asyncio.sleep(0.05)
        # The old session is gone: a request naming it is refused.
        headers = stdio._encode_headers({"content-type": "application/json", "accept": "application/json",
                                         "mcp-session-id": first or "", "mcp-protocol-version": "2025-11-25"})
        status, _, _ = await bridge._request("POST", headers, json.dumps({"jsonrpc": "2.0", "id": 9,
                                                                           "method": "ping"}).encode())
        assert status == 404
    finally:
        await bridge.close()


# -- 4. a duplicate 2026-07-28 id -----------------------------------------------------------------------

async def test_a_2026_request_whose_id_is_running_is_refused():
    started = asyncio.Event()
    bridge, lines = await started_bridge(make_app(started))
    try:
        bridge.submit(json.dumps(call(42, "slow", modern=True)))
        await asyncio.wait_for(started.wait(), WAIT)
        await bridge.handle_line(json.dumps(call(42, "quick", modern=True)))
        assert answers(lines, 42) == [{"jsonrpc": "2.0", "id": 42, "error": {
            "code": -32600, "message": "A request with this id is already running: use a new id for each request"}}]
        # The cancel still names the first one, which ends unanswered.
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                             "params": {"requestId": 42}}))
        await asyncio.wait_for(asyncio.gather(*bridge.tasks), WAIT)
        assert len(answers(lines, 42)) == 1
    finally:
        await bridge.close()


# -- 5. before initialize -------------------------------------------------------------------------------

async def test_requests_before_initialize_are_answered_for_stdio():
    bridge, lines = await started_bridge(make_app())
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        await bridge.handle_line(json.dumps(call(2, "quick")))
        assert answers(lines, 1) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
        refused = answers(lines, 2)[0]["error"]
        assert refused["code"] == -32600 and "send initialize first" in refused["message"]
        assert "header" not in refused["message"].lower()
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        await bridge.handle_line(json.dumps(call(3, "quick")))
        assert answers(lines, 3)[0]["result"]["content"][0]["text"] == "quick"
    finally:
        await bridge.close()
