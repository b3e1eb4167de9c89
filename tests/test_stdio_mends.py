"""stdio mends: UTF-8 answers whatever stdout's encoding, SIGTERM as a graceful stop, lines over the body limit
refused unread, calls cut at the drain cap answered, a closed stdout stopping the server, the Host check
skipped, fd 1 kept off the protocol, `install` checking and hiding secrets, a non-string protocol version."""

from __future__ import annotations

import asyncio
import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcpfusion import MCPFusion, Tool
from mcpfusion.install import InstallError, install, redacted
from mcpfusion.mcp import stdio
from mcpfusion.mcp.stdio import Oversized, StdioBridge, _read_lines

ROOT = Path(__file__).resolve().parent.parent

APP_SOURCE = '''
import asyncio, os, subprocess, sys
from contextlib import asynccontextmanager
from mcpfusion import Context, MCPFusion, Tool

t = Tool("t", description="test tool")


@t.action(readonly=True)
async def uni() -> str:
    """Non-ASCII."""
    return "\\u20ac \\U0001F600"


@t.action(readonly=True)
async def slow() -> str:
    """Slow."""
    await asyncio.sleep(1000)
    return "done"


@t.action()
async def ask(ctx: Context) -> str:
    """Elicit, then answer with what came back."""
    answer = await ctx.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}})
    return f"answer {answer}"


@t.action(readonly=True)
async def noisy() -> str:
    """Write to fd 1 directly and through a child process."""
    os.write(1, b"os.write noise\\n")
    subprocess.run([sys.executable, "-c", "print('child noise')"], check=True)
    return "noisy done"


@asynccontextmanager
async def lifespan(app):
    yield
    with open(os.environ["MENDS_MARK"], "a") as mark:
        mark.write("shutdown ran\\n")


app = MCPFusion("mends", tools=[t], max_body_bytes=100_000).build_app(lifespan=lifespan)
'''

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def call(msg_id: int, action: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
            "params": {"name": "t", "arguments": {"action": action}}}


@pytest.fixture
def app_dir(tmp_path) -> Path:
    (tmp_path / "mendsapp.py").write_text(APP_SOURCE)
    return tmp_path


def _interruptible() -> None:
    # A shell running the suite in the background has its children ignore SIGINT; restore the default.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(app_dir: Path, **env: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion", "stdio", "mendsapp:app"], cwd=app_dir,
                            env={**os.environ, "MENDS_MARK": str(app_dir / "mark.txt"), **env},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_interruptible)  # noqa: PLW1509 (no threads started before exec)
    send(proc, INIT)
    assert read_message(proc)["id"] == 0
    send(proc, INITED)
    return proc


def send(proc: subprocess.Popen[bytes], message: dict | bytes) -> None:
    assert proc.stdin is not None
    proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def read_line(proc: subprocess.Popen[bytes], timeout: float = 20) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line from the stdio server in time"
    return proc.stdout.readline()


def read_message(proc: subprocess.Popen[bytes], timeout: float = 20) -> dict:
    line = read_line(proc, timeout)
    assert line, proc.stderr.read() if proc.stderr else ""
    return json.loads(line)


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def tool_app(**settings) -> object:
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return MCPFusion("mends", tools=[t], **settings).build_app()


# -- 1. stdout in another encoding --------------------------------------------------------------------

@pytest.mark.parametrize("encoding", ["cp1252", "ascii"])
def test_answers_are_utf8_whatever_stdouts_encoding(app_dir, encoding):
    proc = start(app_dir, PYTHONIOENCODING=encoding)
    try:
        send(proc, call(1, "uni"))  # (a JSON answer)
        assert read_message(proc)["result"]["content"][0]["text"] == "\u20ac \U0001F600"
        send(proc, call(2, "ask"))  # (an answer on the call's SSE stream, after an elicitation)
        asked = read_message(proc)
        assert asked["method"] == "elicitation/create"
        send(proc, {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"n": "\u00e9"}}})
        reply = read_message(proc)
        assert reply["id"] == 2 and "\u00e9" in reply["result"]["content"][0]["text"]
    finally:
        stop(proc)


# -- 2. SIGTERM ---------------------------------------------------------------------------------------

def test_sigterm_answers_the_running_call_runs_the_lifespan_shutdown_and_exits_143(app_dir):
    proc = start(app_dir)
    try:
        send(proc, call(1, "slow"))
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        reply = read_message(proc)
        assert reply["id"] == 1 and reply["error"]["code"] == -32603
        assert "SIGTERM" in reply["error"]["message"]
        assert proc.wait(timeout=10) == stdio.EXIT_SIGTERM == 143
        assert (app_dir / "mark.txt").read_text() == "shutdown ran\n"
        assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        stop(proc)


# -- 3. a line over the body limit --------------------------------------------------------------------

def test_a_line_over_the_limit_is_answered_before_it_ends_and_the_rest_is_skipped(app_dir):
    proc = start(app_dir)  # (the app's limit: 100 000 bytes)
    try:
        # No newline yet: the line is refused as soon as it passes the limit, with the id it starts with.
        send(proc, b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":[' + b"{}," * 200_000)
        reply = read_message(proc)
        assert reply == {"jsonrpc": "2.0", "id": 5, "error": {
            "code": -32600, "message": "Payload Too Large: the limit is 100000 bytes"}}
        send(proc, b"{}]}}\n")  # its end: skipped, not read as a line of its own
        send(proc, {"jsonrpc": "2.0", "id": 6, "method": "ping"})
        assert read_message(proc) == {"jsonrpc": "2.0", "id": 6, "result": {}}
    finally:
        stop(proc)


def test_the_reader_refuses_a_long_line_and_skips_its_rest():
    chunks = iter([b"ab", b"cdefgh", b"ij\nkl", b"\n", b"x" * 10, b"y" * 10, b"\nz"])
    delivered: list[object] = []
    _read_lines(lambda: next(chunks, b""), delivered.append, limit=8)
    # Refused once past 8 bytes, the rest up to the newline dropped unread; the lines after it still read.
    assert delivered == [Oversized(b"abcdefghij\n", 8), b"kl\n", Oversized(b"x" * 10, 8), b"z", None]


def test_leading_id():
    from mcpfusion.mcp.stdio import _leading_id

    assert _leading_id(b'{"jsonrpc": "2.0", "id": "a-1", "params": {"x": [1, 2') == "a-1"
    assert _leading_id(b'{"params": {"id": 3, "x": "yyy') is None  # (a nested id is not the request's)
    assert _leading_id(b'{"id": true}') is None and _leading_id(b"[1, 2") is None


# -- 4. the drain cap ---------------------------------------------------------------------------------

async def test_a_call_still_running_at_the_drain_cap_is_answered_and_the_status_says_so(monkeypatch, tmp_path):
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(1000)
        return "done"

    read_fd, write_fd = os.pipe()
    stdin = os.fdopen(read_fd, "rb")
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(stdio, "DRAIN_TIMEOUT", 0.5)
    out = io.StringIO()  # (no descriptor: written as text)
    server = asyncio.create_task(stdio.serve_stdio(MCPFusion("cap", tools=[t]).build_app(), headers={}, stdout=out))
    os.write(write_fd, (json.dumps(INIT) + "\n" + json.dumps(INITED) + "\n" + json.dumps(call(1, "slow")) + "\n")
             .encode())
    await asyncio.sleep(0.3)
    os.close(write_fd)
    assert await asyncio.wait_for(server, 10) == stdio.EXIT_UNANSWERED
    stdin.close()
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines())}
    assert answers[1]["error"]["code"] == -32603
    assert "stops 0.5 s after stdin closes" in answers[1]["error"]["message"]  # (the cap in force)


# -- 5. the client closes stdout ----------------------------------------------------------------------

def test_a_closed_stdout_stops_the_server_with_one_line(app_dir):
    proc = start(app_dir)
    try:
        proc.stdout.close()  # type: ignore[union-attr]
        with pytest.raises(BrokenPipeError):  # the server goes away after the first answer it cannot write
            for msg_id in range(1, 20):
                send(proc, {"jsonrpc": "2.0", "id": msg_id, "method": "ping"})
                time.sleep(0.2)
        assert proc.wait(timeout=10) == stdio.EXIT_UNANSWERED
        err = proc.stderr.read().decode()  # type: ignore[union-attr]
        assert "Traceback" not in err and err.count("stdout was closed by the client") == 1
        assert (app_dir / "mark.txt").read_text() == "shutdown ran\n"
    finally:
        proc.stdin = None  # (closed under us)
        stop(proc)


# -- 6. allowed hosts ---------------------------------------------------------------------------------

async def test_allowed_hosts_do_not_apply_to_stdio():
    lines: list[dict] = []
    bridge = StdioBridge(tool_app(allowed_hosts=["billing.example.com"]), lambda text: lines.append(json.loads(text)),
                         headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(INIT))
    await bridge.close()
    assert lines[0]["result"]["serverInfo"]["name"] == "mends"


# -- 7. fd 1 ------------------------------------------------------------------------------------------

def test_output_of_handlers_child_processes_stays_off_the_protocol(app_dir):
    proc = start(app_dir)
    try:
        send(proc, call(1, "noisy"))
        assert read_message(proc)["result"]["content"][0]["text"] == "noisy done"
        proc.stdin.close()  # type: ignore[union-attr]
        assert proc.wait(timeout=10) == 0
        assert proc.stdout.read() == b""  # type: ignore[union-attr]
        err = proc.stderr.read()  # type: ignore[union-attr]
        assert b"os.write noise" in err and b"child noise" in err
    finally:
        stop(proc)


# -- 8. install ---------------------------------------------------------------------------------------

def test_install_refuses_settings_the_server_would_refuse(tmp_path):
    config = tmp_path / "mcp.json"
    with pytest.raises(InstallError, match="--token"):
        install("cursor", "app:app", name="x", app_dir=tmp_path, config=config, token="abc\ndef")
    with pytest.raises(InstallError, match="--env MCPFUSION_STDIO_HEADERS"):
        install("cursor", "app:app", name="x", app_dir=tmp_path, config=config,
                env={"MCPFUSION_STDIO_HEADERS": '{"X A": "1"}'})
    with pytest.raises(InstallError, match="--token"):
        install("cursor", "app:app", name="x", app_dir=tmp_path, config=config, url="http://h/mcp", token="t\u20ac")
    assert not config.exists()


def test_install_prints_the_entry_with_its_secrets_hidden(tmp_path):
    config = tmp_path / "mcp.json"
    env = {**os.environ, "MCPFUSION_DB_PATH": str(tmp_path / "db.sqlite3"), "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "mcpfusion", "install", "claude-desktop", "app.main:app",
                           "--token", "s3cret", "--env", "PAYMENT_KEY=pk_live_xyz", "--config", str(config)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout + done.stderr and "pk_live_xyz" not in done.stdout + done.stderr
    assert json.loads(done.stdout)["env"] == {"PAYMENT_KEY": "***", "MCPFUSION_AUTHORIZATION": "Bearer ***"}
    written = json.loads(config.read_text())["mcpServers"]["mcpfusion-billing"]["env"]
    assert written == {"PAYMENT_KEY": "pk_live_xyz", "MCPFUSION_AUTHORIZATION": "Bearer s3cret"}
    assert redacted({"url": "u", "headers": {"Authorization": "Bearer t"}}) == {
        "url": "u", "headers": {"Authorization": "Bearer ***"}}


# -- 9. a protocol version that is no string ----------------------------------------------------------

@pytest.mark.parametrize("version", [20260728, None])
async def test_a_protocol_version_that_is_no_string_is_invalid_params(version):
    lines: list[dict] = []
    bridge = StdioBridge(tool_app(), lambda text: lines.append(json.loads(text)), headers={})
    await bridge.startup()
    meta = {"io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {}}
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}))
    await bridge.close()
    assert lines == [{"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32602, "message": "Invalid params: the protocol-version envelope value must be a string"}}]
