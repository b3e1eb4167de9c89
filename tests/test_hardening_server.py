"""`mcpfusion serve`'s uvicorn settings: idle and slowloris connections are closed, real requests pass."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from mcpfusion import server
from mcpfusion.cli import parser
from tests.service_kit import build, free_socket


class QuickHeaderTimeout(server.HeaderTimeoutProtocol):
    header_timeout = 0.5


@contextmanager
def serving(app, **options) -> Iterator[int]:
    sock = free_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on",
                            **{**server.uvicorn_options(keep_alive_timeout=0.5, graceful_timeout=1),
                               "http": QuickHeaderTimeout, **options})
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(instance.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not instance.started:
            threading.Event().wait(0.02)
        yield port
    finally:
        instance.should_exit = True
        thread.join(timeout=10)
        sock.close()


def closed_by_server(conn: socket.socket, dribble: bytes = b"") -> bool:
    """True when the server closes `conn` (recv gives EOF) before the 20 s safety net; `dribble` is sent a
    byte at a time meanwhile, like a slowloris client."""
    conn.settimeout(0.2)
    for _ in range(100):
        if dribble:
            try:
                conn.sendall(dribble[:1])
            except OSError:
                return True
            dribble = dribble[1:]
        try:
            if conn.recv(1024) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:
            return True
    return False


@pytest.fixture(scope="module")
def port(tmp_path_factory) -> Iterator[int]:
    with serving(build(tmp_path_factory.mktemp("srv"))) as value:
        yield value


def test_silent_connection_is_closed(port):
    with socket.create_connection(("127.0.0.1", port)) as conn:
        assert closed_by_server(conn)


def test_slowloris_headers_are_cut(port):
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 200
    with socket.create_connection(("127.0.0.1", port)) as conn:
        assert closed_by_server(conn, dribble=head)


def test_idle_keep_alive_connection_is_closed_and_requests_work(port):
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        conn.settimeout(10)
        assert b"200 OK" in conn.recv(4096)
        assert closed_by_server(conn)  # then idle: keep-alive timeout


def test_streams_longer_than_the_header_timeout_are_not_cut(port):
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        for _ in range(3):  # one connection, requests spaced below the keep-alive timeout
            assert client.get("/healthz").status_code == 200
        slow = client.post("/api/billing/list_invoices", json={}, headers={"authorization": "Bearer demo-admin"})
        assert slow.status_code == 200


def test_serve_passes_the_timeouts_to_uvicorn(monkeypatch):
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: seen.update(options, app=app))
    monkeypatch.setattr(server.HeaderTimeoutProtocol, "header_timeout", server.HeaderTimeoutProtocol.header_timeout)
    monkeypatch.setenv("MCPFUSION_HEADER_TIMEOUT", "10")  # restored (unset) after the test
    args = parser().parse_args(["serve", "app.main:app", "--header-timeout", "3", "--keep-alive-timeout", "4"])
    from mcpfusion.cli import cmd_serve

    cmd_serve(args)
    assert seen["http"] == "mcpfusion.server:HeaderTimeoutProtocol"
    assert seen["timeout_keep_alive"] == 4.0
    assert server.HeaderTimeoutProtocol.header_timeout == 3.0
    defaults = parser().parse_args(["serve", "app.main:app"])
    assert defaults.keep_alive_timeout == server.DEFAULT_KEEP_ALIVE_TIMEOUT


def test_serve_cancels_a_call_still_waiting_when_shutdown_runs_out_of_patience(tmp_path):
    """A call waiting for an answer that will not come (here: forever) does not hold `mcpfusion serve`'s exit
    past `--graceful-timeout` (uvicorn on its own would wait for it)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "stuck_app.py").write_text(
        "import asyncio\n"
        "from mcpfusion import MCPFusion, Tool\n"
        "stuck = Tool('stuck', description='x', exposition='flat')\n"
        "@stuck.action(readonly=True)\n"
        "async def wait() -> str:\n"
        "    '''Wait'''\n"
        "    await asyncio.sleep(3600)\n"
        "    return 'late'\n"
        "fusion = MCPFusion('stuck', tools=[stuck], json_response=True)\n"
        "app = fusion.build_app()\n")
    sock = free_socket()
    port = sock.getsockname()[1]
    sock.close()
    served = subprocess.Popen(
        [sys.executable, "-m", "mcpfusion.cli", "serve", "stuck_app:app", "--port", str(port), "--app-dir",
         str(tmp_path), "--graceful-timeout", "1", "--log-level", "warning"],
        env={**os.environ, "PYTHONPATH": os.getcwd()}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(200):
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.05)
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
        hanging = threading.Thread(target=lambda: httpx.post(f"{base}/mcp", timeout=60, headers={
            "accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
            "mcp-name": "stuck_wait"}, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                             "params": {"name": "stuck_wait", "arguments": {}, "_meta": meta}}),
                                   daemon=True)
        hanging.start()
        time.sleep(0.5)  # the call is running
        served.send_signal(signal.SIGTERM)
        # uvicorn re-raises the SIGTERM it handled once shut down: -15 is its clean exit.
        assert served.wait(timeout=20) in (0, -signal.SIGTERM)  # without the timeout: the hour
    finally:
        if served.poll() is None:
            served.kill()
            served.wait()


def read_all(conn: socket.socket) -> bytes:
    """Everything the server writes until it closes the connection or goes quiet for a second."""
    conn.settimeout(1.0)
    chunks = []
    for _ in range(50):
        try:
            chunk = conn.recv(65536)
        except (TimeoutError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("size", [300_000, 3_000_000])
def test_a_request_answered_before_its_body_gets_one_answer(port, size):
    """A 401 sent before the body arrived: the rest of the body is that request's, never a new head (it was
    answered with a second, unrequested 431)."""
    body = b"[" + b" " * size + b"]"
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(head)
        with contextlib.suppress(OSError):  # closed once past the bound of what is dropped: still one answer
            conn.sendall(body)
        seen = read_all(conn)
    assert seen.count(b"HTTP/1.1 ") == 1, seen[:300]
    assert seen.startswith(b"HTTP/1.1 401") and b"431" not in seen


@pytest.mark.parametrize("size", [1_000, 30_000, 100_000])  # (read with the head, or drained once answered)
def test_a_small_body_answered_early_still_leaves_the_connection_usable(port, size):
    body = b"[" + b" " * size + b"]"
    request = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    health = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(request + health)
        seen = read_all(conn)
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", seen) == [b"401", b"200"]
