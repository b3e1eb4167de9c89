"""Operating `mcpfusion serve`: workers and `dev` whose app cannot start, a lifespan shutdown that raises, a port
that is taken and an app that fails while it is built are one masked error line; a graceful shutdown that
cancels calls is quiet and ends their streams cleanly; the access log and the event store keep no more than
they should."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from mcpfusion import server
from mcpfusion.mcp.events import InMemoryEventStore
from mcpfusion.mcp.streams import CANCELLED_AT_SHUTDOWN, Holds, PostStream

SECRET_URL = "postgresql://app:s3cret@db/billing"
MASKED_URL = "postgresql://app:***@db/billing"

FAILING_START = f'''
import sys
from contextlib import asynccontextmanager
from fastapi import FastAPI
from mcpfusion import MCPFusion


@asynccontextmanager
async def lifespan(app):
    raise ConnectionError("cannot reach {SECRET_URL}")
    yield


app = FastAPI(lifespan=lifespan)
MCPFusion("failing").mount(app)
'''

FAILING_STOP = f'''
import sys
from contextlib import asynccontextmanager
from fastapi import FastAPI
from mcpfusion import MCPFusion, Tool

t = Tool("t", description="Test tool")


@t.action(readonly=True)
async def echo(text: str) -> str:
    """Echo."""
    return text


@asynccontextmanager
async def lifespan(app):
    print("lifespan started", file=sys.stderr, flush=True)
    yield
    raise RuntimeError("closing the pool failed: {SECRET_URL}")


app = FastAPI(lifespan=lifespan)
MCPFusion("stopping", tools=[t]).mount(app)
'''

SLOW = '''
import asyncio
import sys
from contextlib import asynccontextmanager
from mcpfusion import Context, MCPFusion, Tool

ops = Tool("ops", description="Ops tool")


@ops.action(readonly=True)
async def wait(ctx: Context) -> dict:
    """Wait for long."""
    print("call running", file=sys.stderr, flush=True)
    await ctx.progress(1, 2, "waiting")
    await asyncio.sleep(600)
    return {}


@ops.action(readonly=True)
async def echo(text: str) -> dict:
    """Echo."""
    return {"text": text}


@asynccontextmanager
async def lifespan(app):
    print("lifespan started", file=sys.stderr, flush=True)
    yield


app = MCPFusion("slow", tools=[ops]).build_app(lifespan=lifespan)
'''

ACCEPT = "application/json, text/event-stream"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mcpfusion(tmp_path: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpfusion.cli", *args], cwd=tmp_path, input=stdin,
                          capture_output=True, text=True, timeout=120)


class Running:
    """`mcpfusion ARGS` in its own process group, its output (stdout and stderr) read line by line."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.proc = subprocess.Popen([sys.executable, "-m", "mcpfusion.cli", *args], cwd=tmp_path, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line.rstrip("\n"))
                self.changed.notify_all()
        with self.changed:
            self.lines.append("<end>")
            self.changed.notify_all()

    def wait_for(self, seen: Callable[[list[str]], bool]) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: seen(self.lines) or "<end>" in self.lines, timeout=60), self.lines
            assert seen(self.lines), "\n".join(self.lines)

    def stop(self, sig: int = signal.SIGTERM) -> str:
        """Signal `mcpfusion` (which stops its workers or reloaded process); its output."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):  # whatever it left running
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.reader.join(10)
        return "\n".join(self.lines)


WHERE = re.compile(r" \(at [^()]+\.py:\d+\)$")  # where in the app's own file a failure was raised


def errors(text: str) -> list[str]:
    """The error lines, each without the place it names (`located` checks that)."""
    return [WHERE.sub("", line) for line in text.splitlines() if line.startswith("mcpfusion: error:")]


def located(text: str, file: str) -> bool:
    """Whether every error line ends by naming where in `file` it was raised."""
    lines = [line for line in text.splitlines() if line.startswith("mcpfusion: error:")]
    return bool(lines) and all((m := WHERE.search(line)) and f"(at {file}:" in m.group() for line in lines)


# -- 1. `serve --workers N` and `dev` whose app cannot start ---------------------------------------------

def test_workers_whose_app_cannot_start_are_one_masked_line_and_exit_2(tmp_path):
    (tmp_path / "failing_app.py").write_text(FAILING_START)
    out = mcpfusion(tmp_path, "serve", "failing_app:app", "--workers", "2", "--port", str(free_port()))
    assert out.returncode == 2, out.stderr
    assert errors(out.stderr) == ["mcpfusion: error: starting failing_app:app failed (its lifespan start-up raised): "
                                  f"ConnectionError: cannot reach {MASKED_URL}"], out.stderr
    assert located(out.stderr, "failing_app.py"), out.stderr
    assert "s3cret" not in out.stderr + out.stdout and "Traceback" not in out.stderr
    assert "MCP http://" not in out.stderr  # no banner for workers that never served


def test_workers_say_where_they_serve_once_an_app_started(tmp_path):
    (tmp_path / "slow_app.py").write_text(SLOW)
    port = free_port()
    running = Running(tmp_path, "serve", "slow_app:app", "--workers", "2", "--port", str(port))
    try:
        running.wait_for(lambda lines: any(f"MCP http://127.0.0.1:{port}/mcp" in line for line in lines))
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    finally:
        output = running.stop()
    lines = output.splitlines()
    banner = next(i for i, line in enumerate(lines) if "MCP http://" in line)
    assert banner > lines.index("lifespan started"), output
    assert sum("MCP http://" in line for line in lines) == 1, output
    assert running.proc.returncode == 0, output


def test_dev_whose_app_cannot_start_is_one_masked_line(tmp_path):
    (tmp_path / "failing_app.py").write_text(FAILING_START)
    running = Running(tmp_path, "dev", "failing_app:app", "--port", str(free_port()))
    try:
        running.wait_for(lambda lines: any("Application startup failed" in line for line in lines))
    finally:
        output = running.stop(signal.SIGINT)
    assert errors(output) == ["mcpfusion: error: starting failing_app:app failed (its lifespan start-up raised): "
                              f"ConnectionError: cannot reach {MASKED_URL}"], output
    assert located(output, "failing_app.py"), output
    assert "s3cret" not in output and "Traceback" not in output


# -- 2. the event store counts what it holds ----------------------------------------------------------------

def test_the_event_store_holds_about_the_bytes_it_counts():
    """orjson's bytes of a small message keep the 4 KiB buffer they were written in: 10,000 stored events
    held 40 MB while `max_bytes` counted 2.7 MB."""
    store = InMemoryEventStore()

    async def fill() -> int:
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(10_000):
                await store.store_event(f"stream{i % 50}", {
                    "jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": f"step {i}: " + "x" * 200}})
            return int(tracemalloc.get_traced_memory()[0] - before)
        finally:
            tracemalloc.stop()

    held = asyncio.run(fill())
    assert store._bytes > 2_000_000
    assert held < 2 * store._bytes, (held, store._bytes)


# -- 3. calls a graceful shutdown cancels ---------------------------------------------------------------------

def test_a_started_stream_the_server_cancels_ends_with_the_requests_error():
    async def scenario() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []
        streaming = asyncio.Event()

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message.get("more_body"):
                streaming.set()

        async def receive() -> dict[str, Any]:
            await asyncio.Event().wait()
            return {}

        async def run() -> None:
            stream.open()  # (as a progress notification does)
            await asyncio.sleep(3600)

        holds = Holds(SimpleNamespace(sse_hold_seconds=60))  # type: ignore[arg-type]
        stream = PostStream(run, b"id: s~1#1\r\ndata: \r\n\r\n", "s", holds, 0, request_id=7)
        task = asyncio.create_task(stream({"type": "http"}, receive, send))
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return sent

    sent = asyncio.run(scenario())
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]
    last = sent[-1]
    assert last["more_body"] is False
    assert last["body"].startswith(b"event: message\r\ndata: ") and last["body"].endswith(b"\r\n\r\n")
    assert json.loads(last["body"].split(b"data: ", 1)[1]) == {
        "jsonrpc": "2.0", "id": 7, "error": {"code": -32603, "message": CANCELLED_AT_SHUTDOWN}}


def test_calls_the_graceful_timeout_cancels_end_quietly(tmp_path):
    """uvicorn cancels what still runs when `--graceful-timeout` passes: it logged each as an application error
    with its traceback, cut a started SSE stream (incomplete chunked read) and answered 500 to the others."""
    (tmp_path / "slow_app.py").write_text(SLOW)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    running = Running(tmp_path, "serve", "slow_app:app", "--port", str(port), "--graceful-timeout", "1")
    outcome: dict[str, Any] = {}
    sse: list[str] = []
    streaming = threading.Event()
    try:
        running.wait_for(lambda lines: any("Uvicorn running on" in line for line in lines))
        assert httpx.get(f"{base}/api/ops/echo?text=4111111111111111").status_code == 200
        headers = {"accept": ACCEPT, "content-type": "application/json", "mcp-protocol-version": "2025-11-25"}
        init = httpx.post(f"{base}/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        headers["mcp-session-id"] = init.headers["mcp-session-id"]
        httpx.post(f"{base}/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        def call_mcp() -> None:
            try:
                with httpx.stream("POST", f"{base}/mcp", headers=headers, timeout=60, json={
                        "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                            "name": "ops", "arguments": {"action": "wait"}, "_meta": {"progressToken": "p"}}}) as r:
                    for line in r.iter_lines():
                        sse.append(line)
                        if "notifications/progress" in line:
                            streaming.set()
                outcome["mcp"] = "complete"
            except httpx.HTTPError as exc:
                outcome["mcp"] = repr(exc)
            streaming.set()

        def call_rest() -> None:
            try:
                outcome["rest"] = httpx.post(f"{base}/api/ops/wait", json={}, timeout=60).status_code
            except httpx.RemoteProtocolError:
                outcome["rest"] = "closed"

        threads = [threading.Thread(target=call_mcp), threading.Thread(target=call_rest)]
        for thread in threads:
            thread.start()
        running.wait_for(lambda lines: lines.count("call running") == 2)
        assert streaming.wait(60)
    finally:
        output = running.stop()
    for thread in threads:
        thread.join(60)
    assert outcome == {"mcp": "complete", "rest": "closed"}, (outcome, output)
    replies = [json.loads(line[5:]) for line in sse if line.startswith("data:") and '"id":7' in line]
    assert all(reply["error"]["code"] == -32603 for reply in replies), replies  # (when the stream knows its id)
    assert "Traceback" not in output and "Exception in ASGI application" not in output, output
    assert "4111111111111111" not in output and "/api/ops/echo?text=REDACTED" in output, output


# -- 4. a lifespan shutdown that raises ------------------------------------------------------------------

@pytest.mark.parametrize("command", [["call", "stopping_app:app", "t", "echo", "--json", '{"text": "x"}'],
                                     ["stdio", "stopping_app:app"]])
def test_a_lifespan_shutdown_that_raises_is_one_masked_line_and_exit_2(tmp_path, command):
    (tmp_path / "stopping_app.py").write_text(FAILING_STOP)
    out = mcpfusion(tmp_path, *command, stdin='{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert out.returncode == 2, out.stderr
    assert errors(out.stderr) == ["mcpfusion: error: stopping stopping_app:app failed (its lifespan shutdown "
                                  f"raised): RuntimeError: closing the pool failed: {MASKED_URL}"], out.stderr
    assert located(out.stderr, "stopping_app.py"), out.stderr
    assert "s3cret" not in out.stderr and "Traceback" not in out.stderr


def test_serve_whose_lifespan_shutdown_raises_says_it_in_one_masked_line(tmp_path):
    (tmp_path / "stopping_app.py").write_text(FAILING_STOP)
    running = Running(tmp_path, "serve", "stopping_app:app", "--port", str(free_port()))
    try:
        running.wait_for(lambda lines: any("Uvicorn running on" in line for line in lines))
    finally:
        output = running.stop()
    assert errors(output) == ["mcpfusion: error: stopping stopping_app:app failed (its lifespan shutdown "
                              f"raised): RuntimeError: closing the pool failed: {MASKED_URL}"], output
    assert located(output, "stopping_app.py"), output
    assert "s3cret" not in output and "Traceback" not in output
    assert running.proc.returncode != 0


# -- 5. a port that cannot be listened on ------------------------------------------------------------------

def test_a_taken_port_is_one_line_and_no_banner(tmp_path):
    (tmp_path / "slow_app.py").write_text(SLOW)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = mcpfusion(tmp_path, "serve", "slow_app:app", "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [f"mcpfusion: error: cannot listen on 127.0.0.1:{port}: address already in use"]
    unknown = mcpfusion(tmp_path, "serve", "slow_app:app", "--host", "no-such-host.invalid", "--port", "8000")
    assert unknown.returncode == 2, unknown.stderr
    [line] = unknown.stderr.splitlines()
    assert line.startswith("mcpfusion: error: cannot listen on no-such-host.invalid:8000: "), line


# -- 6. an app that fails while it is built ------------------------------------------------------------------

def test_an_app_that_fails_while_built_is_one_line_saying_where(tmp_path):
    (tmp_path / "own_fault.py").write_text(
        "import os\n\n\ndef settings():\n"
        f"    raise ValueError('DATABASE_URL={SECRET_URL} has no port')\n\n\nsettings()\n")
    (tmp_path / "library_fault.py").write_text("import json\n\nconfig = json.loads('{not json')\n")
    own = mcpfusion(tmp_path, "inspect", "own_fault:app")
    assert own.returncode == 2
    assert own.stderr.splitlines() == [f"mcpfusion: error: importing 'own_fault' failed: ValueError: "
                                       f"DATABASE_URL={MASKED_URL} has no port (at own_fault.py:5)"]
    library = mcpfusion(tmp_path, "inspect", "library_fault:app")
    assert library.returncode == 2
    [line] = library.stderr.splitlines()
    assert line.startswith("mcpfusion: error: importing 'library_fault' failed: json.decoder.JSONDecodeError: ")
    assert line.endswith(" (raised in json, called from library_fault.py:3)"), line


# -- 7. the access log -------------------------------------------------------------------------------------------

def test_the_access_log_writes_query_values_redacted():
    assert server.log_config()["formatters"]["access"]["()"] == "mcpfusion.server.AccessFormatter"
    formatter = server.AccessFormatter('%(client_addr)s - "%(request_line)s" %(status_code)s', use_colors=False)

    def line(target: str) -> str:
        record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                                   ("127.0.0.1:5", "GET", target, "1.1", 200), None)
        return formatter.format(record)

    assert line("/api/customers/get?id=cus_1&email=alice%40example.com&4111111111111111&&token=") == \
        '127.0.0.1:5 - "GET /api/customers/get?id=REDACTED&email=REDACTED&REDACTED&REDACTED HTTP/1.1" 200 OK'
    assert line("/healthz") == '127.0.0.1:5 - "GET /healthz HTTP/1.1" 200 OK'
