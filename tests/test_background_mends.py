"""BackgroundTasks start only once the whole call succeeded (yield teardowns closed, middleware and egress guard
passed), on every transport; and a graceful shutdown (lifespan, SIGTERM, stdio EOF) waits for those still
running instead of dropping them."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import BackgroundTasks, Depends

from mcpfusion import EgressLimit, MCPFusion, Tool, ToolError
from mcpfusion.dependencies import drain_background
from mcpfusion.testing import ToolTester

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
ACCEPT = "application/json, text/event-stream"


class Shop:
    """Actions that queue an e-mail, then fail after their handler returned (or succeed: `ok`)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.tool = Tool("shop", description="Shop")

        async def send(to: str) -> None:
            self.sent.append(to)

        async def session():
            yield "session"
            raise RuntimeError("COMMIT failed: disk full")  # the order was never committed

        async def refuse_after(call: Any, call_next: Any) -> Any:
            await call_next(call)
            raise ToolError("FORBIDDEN", "policy refused the answer")

        @self.tool.action()
        async def commit_fails(sku: str, tasks: BackgroundTasks, s: str = Depends(session)) -> str:
            """Place an order; the commit in the teardown fails."""
            tasks.add_task(send, f"commit_fails:{sku}")
            return f"order {sku} placed"

        # `refused` and `too_large` are reads: a write's handler that returned did what it does, so its tasks
        # run although its answer failed (`details.completed`: tests/test_round6j.py).
        @self.tool.action(readonly=True, middleware=[refuse_after])
        async def refused(sku: str, tasks: BackgroundTasks) -> str:
            """Place an order; a middleware refuses the answer."""
            tasks.add_task(send, f"refused:{sku}")
            return f"order {sku} placed"

        @self.tool.action(readonly=True, middleware=[EgressLimit(bytes=20)])
        async def too_large(sku: str, tasks: BackgroundTasks) -> str:
            """Place an order; the answer is too large."""
            tasks.add_task(send, f"too_large:{sku}")
            return f"order {sku} placed " + "x" * 500

        @self.tool.action(middleware=[EgressLimit(bytes=2000)])
        async def ok(sku: str, tasks: BackgroundTasks) -> str:
            """Place an order that succeeds."""
            tasks.add_task(send, f"ok:{sku}")
            return f"order {sku} placed"


FAILING = {"commit_fails": "INTERNAL_ERROR", "refused": "FORBIDDEN", "too_large": "RESPONSE_TOO_LARGE"}


async def legacy_call(client: httpx.AsyncClient, action: str) -> dict[str, Any]:
    """initialize + tools/call on the session wire (2025-11-25), SSE or JSON."""
    init = await client.post("/mcp", headers={"accept": ACCEPT}, json={
        "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    headers = {"accept": ACCEPT, "mcp-protocol-version": "2025-11-25",
               "mcp-session-id": init.headers["mcp-session-id"]}
    await client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    response = await client.post("/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "shop", "arguments": {"action": action, "sku": "legacy"}}})
    return _result(response)


async def modern_call(client: httpx.AsyncClient, action: str) -> dict[str, Any]:
    """One stateless tools/call (2026-07-28)."""
    response = await client.post("/mcp", headers={
        "accept": ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "shop"},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "shop", "arguments": {"action": action, "sku": "modern"}, "_meta": META}})
    return _result(response)


def _result(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])["result"]  # type: ignore[no-any-return]
    return response.json()["result"]  # type: ignore[no-any-return]


async def settle() -> None:
    """Give tasks that were (wrongly) started the time to run."""
    for _ in range(10):
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("action", sorted(FAILING))
async def test_background_tasks_of_a_call_failing_after_its_handler_never_run(action, caplog):
    caplog.set_level(logging.CRITICAL, logger="mcpfusion")
    shop = Shop()
    app = MCPFusion("shop", tools=[shop.tool]).build_app()
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for call in (legacy_call, modern_call):
            result = await call(client, action)
            assert result["isError"] is True and FAILING[action] in result["content"][0]["text"]
        response = await client.post(f"/api/shop/{action}", json={"sku": "rest"})
        assert response.json()["code"] == FAILING[action]
        tested = await ToolTester(app).call("shop", action, {"sku": "tester"})
        assert tested.error_code == FAILING[action]
        await settle()
        assert shop.sent == []
        # The same call that succeeds sends its e-mail, on every transport.
        assert (await legacy_call(client, "ok"))["isError"] is False
        assert (await modern_call(client, "ok"))["isError"] is False
        assert (await client.post("/api/shop/ok", json={"sku": "rest"})).status_code == 200
        assert not (await ToolTester(app).call("shop", "ok", {"sku": "tester"})).is_error
        await settle()
        assert sorted(shop.sent) == ["ok:legacy", "ok:modern", "ok:rest", "ok:tester"]


async def test_a_nested_call_s_tasks_wait_for_the_outer_call():
    """An action calling another one: the inner call's tasks run only if the outer call succeeds as well."""
    shop = Shop()
    outer = Tool("outer", description="Outer")
    registry_of: dict[str, Any] = {}

    # (It fails in its handler: a write whose handler returned was done, and its tasks run whatever fails after.)
    @outer.action()
    async def wrap(tasks: BackgroundTasks) -> str:
        """Calls shop.ok, then is refused."""
        registry = registry_of["r"]
        inner = await registry.call_action(registry.find("shop", "ok"), {"sku": "inner"}, registry_of["req"])
        assert not inner.is_error
        raise ToolError("FORBIDDEN", "refused")

    tester = ToolTester([shop.tool, outer])
    registry_of["r"] = tester.registry
    from mcpfusion.testing import make_request

    registry_of["req"] = make_request(tester.app)
    assert (await tester.call("outer", "wrap")).error_code == "FORBIDDEN"
    await settle()
    assert shop.sent == []


async def test_a_retried_call_runs_only_the_tasks_of_its_successful_attempt(caplog):
    caplog.set_level(logging.CRITICAL, logger="mcpfusion")
    sent: list[str] = []
    attempts: list[int] = []
    tool = Tool("retry", description="Retry")

    async def again_on_error(call: Any, call_next: Any) -> Any:
        response = await call_next(call)
        return await call_next(call) if response.is_error else response

    async def send(to: str) -> None:
        sent.append(to)

    @tool.action(middleware=[again_on_error])
    async def place(tasks: BackgroundTasks) -> str:
        """Fails on its first attempt, after queueing an e-mail."""
        attempts.append(len(attempts) + 1)
        tasks.add_task(send, f"attempt {attempts[-1]}")
        if len(attempts) == 1:
            raise RuntimeError("deadlock, try again")
        return "placed"

    assert (await ToolTester([tool]).call("retry", "place")).data == "placed"
    assert attempts == [1, 2] and sent == ["attempt 2"]


async def test_lifespan_shutdown_waits_for_running_background_tasks():
    done: list[str] = []
    tool = Tool("mail", description="Mail")

    async def slow_send(to: str) -> None:
        await asyncio.sleep(0.3)
        done.append(to)

    @tool.action()
    async def place(sku: str, tasks: BackgroundTasks) -> str:
        """Place an order; its e-mail takes a while."""
        tasks.add_task(slow_send, sku)
        return "placed"

    app = MCPFusion("mail", tools=[tool]).build_app()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (await client.post("/api/mail/place", json={"sku": "lamp"})).status_code == 200
        assert done == []  # answered before the task ends
    assert done == ["lamp"]  # the shutdown waited for it


async def test_shutdown_cancels_and_logs_background_tasks_past_the_limit(caplog):
    caplog.set_level(logging.INFO, logger="mcpfusion")
    cancelled: list[bool] = []
    tool = Tool("mail", description="Mail")

    async def stuck_send(to: str) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    @tool.action()
    async def place(sku: str, tasks: BackgroundTasks) -> str:
        """Place an order; its e-mail never ends."""
        tasks.add_task(stuck_send, sku)
        return "placed"

    fusion = MCPFusion("mail", tools=[tool])
    app = fusion.build_app()
    fusion.registry.background.timeout = 0.2
    async with app.router.lifespan_context(app):
        # Over REST: the tester would wait for the task, which never ends.
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (await client.post("/api/mail/place", json={"sku": "x"})).status_code == 200
    assert cancelled == [True]
    assert fusion.registry.background.running == set()
    message = next(r.getMessage() for r in caplog.records if "were cancelled" in r.getMessage())
    assert "1 background task(s) still running after 0.2 s" in message and "stuck_send" in message


async def test_drain_background_waits_for_the_app_s_tasks():
    """What a transport without a lifespan shutdown of its own (stdio at EOF) awaits before it exits."""
    done: list[str] = []
    tool = Tool("mail", description="Mail")

    async def slow_send(to: str) -> None:
        await asyncio.sleep(0.2)
        done.append(to)

    @tool.action()
    async def place(sku: str, tasks: BackgroundTasks) -> str:
        """Place an order."""
        tasks.add_task(slow_send, sku)
        return "placed"

    app = MCPFusion("mail", tools=[tool]).build_app()
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        assert (await client.post("/api/mail/place", json={"sku": "desk"})).status_code == 200
    assert done == []
    await drain_background(app)
    assert done == ["desk"]
    await drain_background(object())  # an app serving no MCPFusion: nothing to wait for


# -- real servers ---------------------------------------------------------------------------------------------

APP_SOURCE = """
import asyncio
from fastapi import BackgroundTasks
from mcpfusion import MCPFusion, Tool

SENT = {sent!r}
shop = Tool("shop", description="Shop")

async def send(to):
    await asyncio.sleep({delay})
    with open(SENT, "a") as f:
        f.write(to + "\\n")

@shop.action()
async def place(sku: str, bt: BackgroundTasks) -> str:
    \"\"\"Place an order; the confirmation e-mail takes a while to send.\"\"\"
    bt.add_task(send, "confirmation " + sku)
    return "order " + sku + " placed"

app = MCPFusion("shop", tools=[shop]).build_app()
"""


def _port() -> int:
    """A free port (the system's choice)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(params=[1])
def shop_app(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path]:
    """An app whose action queues a confirmation e-mail taking `request.param` seconds to send."""
    sent = tmp_path / "sent.txt"
    (tmp_path / "bgshop.py").write_text(textwrap.dedent(APP_SOURCE.format(sent=str(sent), delay=request.param)))
    return tmp_path, sent


def test_sigterm_delivers_pending_background_tasks(shop_app):
    folder, sent = shop_app
    port = _port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion.cli", "serve", "bgshop:app", "--app-dir", str(folder),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for _ in range(100):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        r = httpx.post(f"http://127.0.0.1:{port}/api/shop/place", json={"sku": "lamp"}, timeout=10)
        assert r.json() == "order lamp placed"
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)
    assert sent.read_text() == "confirmation lamp\n", err


@pytest.mark.parametrize("shop_app", [1, 6], indirect=True)  # 6 s: longer than the bridge's own shutdown wait
def test_stdio_eof_delivers_pending_background_tasks(shop_app):
    folder, sent = shop_app
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "shop", "arguments": {"action": "place", "sku": "lamp"}}},
    ]
    out = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "stdio", "--app-dir", str(folder), "bgshop:app"],
                         input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True, text=True,
                         timeout=60)
    replies = [json.loads(line) for line in out.stdout.splitlines()]
    assert replies[-1]["result"]["isError"] is False, out.stderr
    assert sent.read_text() == "confirmation lamp\n", out.stderr
