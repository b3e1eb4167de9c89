"""Round 5x: stdio — a call running when a second `initialize` replaces its session is answered; SIGTERM while
the lifespan shutdown runs lets it finish (status 143, no traceback); output is written in chunks, so a client
that keeps reading is never dropped and its progress is seen; an id answered at shutdown stays answered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from mcpfusion import Context, MCPFusion, Tool
from mcpfusion.mcp import stdio
from mcpfusion.mcp.stdio import StdioBridge, _Output
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def call(msg_id: int, action: str, *, modern: bool = False) -> dict:
    params: dict = {"name": "t", "arguments": {"action": action}}
    if modern:
        params["_meta"] = META_2026
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


def make_app(started: asyncio.Event, release: asyncio.Event | None = None):
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def slow(ctx: Context) -> str:
        """Slow."""
        await ctx.info("started")
        started.set()
        await asyncio.sleep(1000)
        return "done"

    @t.action(readonly=True)
    async def ask(ctx: Context) -> str:
        """Waits for the client's answer."""
        started.set()
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"answer {answer['action']}"

    @t.action(readonly=True)
    async def stubborn() -> str:
        """Answers after its cancellation, once released."""
        started.set()
        try:
            await asyncio.sleep(1000)
        except asyncio.CancelledError:
            assert release is not None
            await release.wait()
            return "cleaned up"
        return "finished"

    return MCPFusion("r5x", tools=[t]).build_app()


async def started_bridge(app) -> tuple[StdioBridge, Lines]:
    lines = Lines()
    bridge = StdioBridge(app, lines.write, headers={})
    await bridge.startup()
    return bridge, lines


# -- 1. a second initialize while a call of the first session runs -------------------------------------

async def test_a_call_running_when_a_second_initialize_replaces_its_session_is_answered_once():
    started = asyncio.Event()
    bridge, lines = await started_bridge(make_app(started))
    try:
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        bridge.submit(json.dumps(call(1, "slow")))
        bridge.submit(json.dumps(call(2, "ask")))
        await asyncio.wait_for(started.wait(), WAIT)
        await lines.wait_for(lambda m: m.get("method") == "elicitation/create")
        await bridge.handle_line(json.dumps({**INIT, "id": 10}))
        assert lines.with_id(10)[0]["result"]["protocolVersion"]
        for msg_id in (1, 2):
            [answer] = lines.with_id(msg_id)
            assert answer["error"]["code"] == -32603
            assert "replaced by a new initialize" in answer["error"]["message"]
    finally:
        await bridge.close()
    assert len(lines.with_id(1)) == 1 and len(lines.with_id(2)) == 1


# -- 2. SIGTERM while the lifespan shutdown runs -------------------------------------------------------

LIFESPAN_APP = '''
import asyncio, os
from contextlib import asynccontextmanager
from pathlib import Path
from mcpfusion import MCPFusion, Tool

here = Path(__file__).parent


@asynccontextmanager
async def lifespan(app):
    yield
    (here / "stopping").write_text("")
    for _ in range(600):  # (a guard: the test releases it at once)
        if (here / "go").exists():
            break
        await asyncio.sleep(0.05)
    (here / "stopped").write_text("")


app = MCPFusion("life", tools=[Tool("t", description="x")]).build_app(lifespan=lifespan)
'''


def test_sigterm_during_the_lifespan_shutdown_lets_it_finish(tmp_path: Path):
    (tmp_path / "lifeapp.py").write_text(LIFESPAN_APP)
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion", "stdio", "lifeapp:app"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(INITED) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdin.close()  # as MCP hosts stop a server: close stdin, then SIGTERM
        deadline = time.monotonic() + WAIT
        while not (tmp_path / "stopping").exists():
            assert time.monotonic() < deadline, "the lifespan shutdown never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)  # (the signal is handled while the shutdown waits; not an assertion)
        (tmp_path / "go").write_text("")
        assert proc.wait(timeout=WAIT) == 143
        stderr = proc.stderr.read().decode()  # type: ignore[union-attr]
        assert "Traceback" not in stderr and "lifespan shutdown raised" not in stderr
        assert (tmp_path / "stopped").exists()
    finally:
        proc.kill()
        proc.wait()


# -- 3, 4. output written in chunks ---------------------------------------------------------------------

def _reader(fd: int, got: list[int], stop: threading.Event) -> threading.Thread:
    def run() -> None:
        while not stop.is_set():
            data = os.read(fd, 1 << 16)
            if not data:
                return
            got.append(len(data))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_client_that_keeps_reading_is_never_dropped_whatever_the_answer_size(monkeypatch):
    monkeypatch.setattr(stdio, "OUTPUT_LIMIT", 100_000)
    monkeypatch.setattr(stdio, "OUTPUT_STALL", WAIT, raising=False)
    read_fd, write_fd = os.pipe()
    got: list[int] = []
    stop = threading.Event()
    reader = _reader(read_fd, got, stop)
    output = _Output(write_fd)
    try:
        output("x" * 300_000 + "\n")  # larger than the bound, one line
        output("y" * 300_000 + "\n")  # and another while the first is being read
        assert output.close(WAIT) is True
    finally:
        os.close(write_fd)
        reader.join(WAIT)
        os.close(read_fd)
    assert sum(got) == 600_002


def test_progress_is_counted_per_chunk_while_a_large_line_is_read():
    read_fd, write_fd = os.pipe()
    output = _Output(write_fd)
    try:
        output("x" * (1 << 20))  # blocks the thread: the pipe holds 64 KiB
        deadline = time.monotonic() + WAIT
        while output.size > (1 << 20) - 200_000:  # what the client took shows before the line is written
            assert time.monotonic() < deadline, "no progress seen while the client reads"
            os.read(read_fd, 1 << 16)
        assert output.size > 0  # (counted as a whole, the line showed no progress until all but a pipeful)
    finally:
        output.broken = True
        os.close(read_fd)  # (the thread's write fails: it ends)
        os.close(write_fd)


# -- 5. an id answered at shutdown stays answered -------------------------------------------------------

async def test_a_2026_call_answered_at_shutdown_is_not_answered_again_when_it_ends():
    started, release = asyncio.Event(), asyncio.Event()
    bridge, lines = await started_bridge(make_app(started, release))
    bridge.submit(json.dumps(call(1, "stubborn", modern=True)))
    await asyncio.wait_for(started.wait(), WAIT)
    running = set(bridge.tasks)
    await bridge.close("the server was stopped (SIGTERM)")  # the call winds down past the 2 s it gets
    [answer] = lines.with_id(1)
    assert answer["error"]["code"] == -32603
    release.set()
    await asyncio.wait_for(asyncio.gather(*running, return_exceptions=True), WAIT)
    assert lines.with_id(1) == [answer]


# -- 6. output written to descriptor 1 while the app is imported ----------------------------------------

NOISY_APP = '''
import os
from mcpfusion import MCPFusion, Tool

os.write(1, b"WRITTEN-TO-FD1-AT-IMPORT\\n")
app = MCPFusion("noisy", tools=[Tool("t", description="x")]).build_app()
'''


def test_a_write_to_descriptor_1_at_import_does_not_reach_the_protocol(tmp_path: Path):
    (tmp_path / "noisyapp.py").write_text(NOISY_APP)
    done = subprocess.run([sys.executable, "-m", "mcpfusion", "stdio", "noisyapp:app"], cwd=tmp_path,
                          input=(json.dumps(INIT) + "\n").encode(), capture_output=True, timeout=WAIT)
    assert [json.loads(line)["id"] for line in done.stdout.decode().splitlines()] == [0]
    assert "WRITTEN-TO-FD1-AT-IMPORT" in done.stderr.decode()


# -- 7. the same id on both wires -----------------------------------------------------------------------

async def test_an_id_running_on_one_wire_is_refused_on_the_other():
    started = asyncio.Event()
    bridge, lines = await started_bridge(make_app(started))
    try:
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        bridge.submit(json.dumps(call(7, "slow")))
        await asyncio.wait_for(started.wait(), WAIT)
        await bridge.handle_line(json.dumps(call(7, "slow", modern=True)))
        [refused] = lines.with_id(7)
        assert refused["error"]["code"] == -32600 and "already running" in refused["error"]["message"]
    finally:
        await bridge.close()
    assert len(lines.with_id(7)) == 2  # the refusal, and the running call's answer at shutdown


# -- 8. ping before initialize ---------------------------------------------------------------------------

async def test_a_malformed_ping_before_initialize_is_refused_as_after():
    bridge, lines = await started_bridge(make_app(asyncio.Event()))
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}))
        await bridge.handle_line(json.dumps({"jsonrpc": "1.0", "id": 2, "method": "ping"}))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        assert lines.with_id(1)[0]["error"] == {"code": -32600, "message": "'params' must be an object"}
        assert lines.with_id(2)[0]["error"]["code"] == -32600
        assert lines.with_id(3) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
    finally:
        await bridge.close()
