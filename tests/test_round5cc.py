"""Round 5cc: stdio stops — a call cancelled (a second initialize, a signal) is answered at once, so a signal
cutting the wait short leaves no id unanswered or answered twice; a second signal reports the shutdown cut
short (no app failure, no broken-pipe warning, status 143/130); the lifespan shutdown runs while a stubborn
call winds down; a client reading a few KiB at a time shows progress."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp import stdio
from mcpfusion.mcp.stdio import StdioBridge, _Output
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(msg_id: int, action: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
            "params": {"name": "t", "arguments": {"action": action}}}


def make_app(cancelled: asyncio.Event, release: asyncio.Event, lifespan=None):
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(1000)
        return "done"

    @t.action(readonly=True)
    async def stubborn() -> str:
        """Winds down once released."""
        try:
            await asyncio.sleep(1000)
        except asyncio.CancelledError:
            cancelled.set()
            await release.wait()
            return "cleaned up"
        return "finished"

    return MCPFusion("r5cc", tools=[t]).build_app(lifespan=lifespan)


# -- 1. a stop while a second initialize cancels the old session's calls --------------------------------

async def test_a_stop_during_a_second_initialize_answers_each_old_call_exactly_once():
    cancelled, release = asyncio.Event(), asyncio.Event()
    lines = Lines()
    bridge = StdioBridge(make_app(cancelled, release), lines.write, headers={})
    await bridge.startup()
    try:
        await bridge.handle_line(json.dumps(INIT))
        await bridge.handle_line(json.dumps(INITED))
        bridge.submit(json.dumps(call(1, "stubborn")))
        bridge.submit(json.dumps(call(2, "slow")))
        while len(bridge._requests) < 2:  # both calls running
            await asyncio.sleep(0.01)
        bridge.submit(json.dumps({**INIT, "id": 10}))
        await asyncio.wait_for(cancelled.wait(), WAIT)  # the initialize is winding the old calls down
        await bridge.close("the server was stopped (SIGTERM)")  # cancels that initialize mid-wait
    finally:
        release.set()
        await asyncio.gather(*bridge.tasks, return_exceptions=True)
    for msg_id in (1, 2):
        [answer] = lines.with_id(msg_id)
        assert "replaced by a new initialize" in answer["error"]["message"]
    assert len(lines.with_id(10)) == 1


# -- 2. a second signal while the first one's shutdown winds the calls down -----------------------------

SIGNAL_APP = '''
import asyncio
from pathlib import Path
from mcpfusion import MCPFusion, Tool

here = Path(__file__).parent
t = Tool("t", description="x")


@t.action(readonly=True)
async def stubborn() -> str:
    """Takes long to wind down."""
    try:
        await asyncio.sleep(1000)
    except asyncio.CancelledError:
        (here / "cancelled").write_text("")
        await asyncio.sleep(1000)
    return "finished"


app = MCPFusion("sig", tools=[t]).build_app()
'''


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_signal_still_answers_the_calls_and_reports_the_shutdown_cut_short(tmp_path: Path, sig, code):
    (tmp_path / "sigapp.py").write_text(SIGNAL_APP)
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion", "stdio", "sigapp:app"], cwd=tmp_path,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write((json.dumps(INIT) + "\n" + json.dumps(INITED) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdin.write((json.dumps(call(1, "stubborn")) + "\n").encode())
        proc.stdin.flush()
        time.sleep(0.3)  # (the call starts; not an assertion)
        proc.send_signal(sig)
        deadline = time.monotonic() + WAIT
        while not (tmp_path / "cancelled").exists():
            assert time.monotonic() < deadline, "the call was never cancelled"
            time.sleep(0.02)
        proc.send_signal(sig)  # while the shutdown waits for the call to wind down
        out, err = proc.communicate(timeout=WAIT)
        assert proc.returncode == code
        answers = [m for m in map(json.loads, out.decode().splitlines()) if m.get("id") == 1]
        assert len(answers) == 1 and answers[0]["error"]["code"] == -32603
        stderr = err.decode()
        assert "cut the shutdown short" in stderr
        assert "failed" not in stderr and "closed by the client" not in stderr and "Traceback" not in stderr
    finally:
        proc.kill()
        proc.wait()


# -- 3. the lifespan shutdown is not held back by a stubborn call ----------------------------------------

async def test_the_lifespan_shutdown_runs_while_a_stubborn_cancelled_call_winds_down():
    from contextlib import asynccontextmanager

    cancelled, release = asyncio.Event(), asyncio.Event()
    seen: list[str] = []

    @asynccontextmanager
    async def lifespan(app):
        yield
        seen.append("winding down" if not release.is_set() else "wound down")
        release.set()  # (the call ends once the shutdown began)

    lines = Lines()
    bridge = StdioBridge(make_app(cancelled, release, lifespan), lines.write, headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    bridge.submit(json.dumps(call(1, "stubborn")))
    while not bridge._requests:
        await asyncio.sleep(0.01)
    try:
        assert await bridge.close("the server was stopped (SIGTERM)") == 1
    finally:
        release.set()
        await asyncio.gather(*bridge.tasks, return_exceptions=True)
    assert seen == ["winding down"]
    [answer] = lines.with_id(1)
    assert answer["error"]["code"] == -32603
    # MCP hosts send SIGKILL 2 s after SIGTERM: the wait before the shutdown leaves it time to run.
    assert stdio.CANCEL_GRACE < 1


# -- 4. progress per few KiB --------------------------------------------------------------------------

def test_a_client_reading_a_few_kib_at_a_time_lets_each_write_complete():
    read_fd, write_fd = os.pipe()
    output = _Output(write_fd)
    try:
        output("x" * (1 << 20))
        deadline = time.monotonic() + WAIT
        while output.written < (1 << 16):  # the pipe is full
            assert time.monotonic() < deadline, "the pipe never filled"
            time.sleep(0.01)
        time.sleep(0.1)  # (the thread is blocked in its next write; not an assertion)
        before = output.written
        os.read(read_fd, 4096)  # a slow client takes one page
        while output.written == before:  # (a 64 KiB write would wait for 60 KiB more)
            assert time.monotonic() < deadline, "no progress after the client read 4 KiB"
            time.sleep(0.01)
    finally:
        output.broken = True
        os.close(read_fd)
        os.close(write_fd)
