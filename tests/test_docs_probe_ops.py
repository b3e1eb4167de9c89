"""Operations mends (docs/mount.md, docs/cli.md, docs/deployment.md): a second `MCPFusion` mounted on one app
adds its readiness checks to the app's `/readyz` and never has a route silently shadowed; a plain `def`
readiness check runs off the event loop; `serve` of an app whose lifespan fails is one `mcpfusion: error:` line
(no banner, no traceback, no password) and exit status 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.cli import without_credentials


def two_tools() -> tuple[Tool, Tool]:
    billing, crm = Tool("billing"), Tool("crm")

    @billing.action(readonly=True)
    async def get_invoice(id: str) -> str:
        """Get invoice."""
        return id

    @crm.action(readonly=True)
    async def get_customer(id: str) -> str:
        """Get customer."""
        return id

    return billing, crm


# -- 1. two fusions on one app -----------------------------------------------------------------------

def test_readyz_runs_the_checks_of_every_mounted_fusion():
    billing, crm = two_tools()
    app = FastAPI()
    first = MCPFusion("billing", tools=[billing])
    second = MCPFusion("crm", tools=[crm], path="/mcp-crm")
    crm_up = False

    @first.readiness_check("database")
    async def billing_db() -> bool:
        return True

    @second.readiness_check("database")  # the same name in another fusion: reported under the fusion's name
    async def crm_db() -> bool:
        if not crm_up:
            raise ConnectionError("postgresql://crm:s3cret@db/crm down")
        return True

    first.mount(app)
    second.mount(app, docs="/crm-tools")
    client = TestClient(app)
    down = client.get("/readyz")
    assert down.status_code == 503, down.text
    assert down.json()["checks"] == {"database": "ok", "crm/database": "unavailable (ConnectionError)"}
    assert "s3cret" not in down.text
    crm_up = True
    assert client.get("/readyz").json() == {"status": "ready", "checks": {"database": "ok", "crm/database": "ok"}}
    assert client.head("/readyz").status_code == 200
    # one /healthz and one /readyz operation each, in the routes and the OpenAPI document
    assert [getattr(r, "path", "") for r in app.routes].count("/readyz") == 2  # (GET, and HEAD undocumented)
    assert list(client.get("/openapi.json").json()["paths"]["/readyz"]) == ["get"]
    # each fusion's tools in its own docs
    assert "get_customer" in client.get("/crm-tools.json").text
    assert "get_invoice" in client.get("/tools.json").text and "get_customer" not in client.get("/tools.json").text


def test_a_second_fusion_whose_docs_the_first_would_shadow_is_refused():
    billing, crm = two_tools()
    app = FastAPI()
    MCPFusion("billing", tools=[billing]).mount(app)
    routes = len(app.routes)
    with pytest.raises(ValueError) as refused:
        MCPFusion("crm", tools=[crm], path="/mcp-crm").mount(app)
    message = str(refused.value)
    assert "tool docs at /tools" in message and "'billing'" in message and "docs='/crm-tools'" in message
    assert len(app.routes) == routes  # refused before anything was added
    MCPFusion("crm", tools=[crm], path="/mcp-crm").mount(app, docs=None)  # the fix the message gives


def test_a_second_fusion_whose_rest_routes_the_first_would_shadow_is_refused():
    billing, _ = two_tools()
    twin, _ = two_tools()
    app = FastAPI()
    MCPFusion("billing", tools=[billing]).mount(app)
    with pytest.raises(ValueError, match=r"REST route\(s\) /api/billing/get_invoice .*rest=False"):
        MCPFusion("billing-eu", tools=[twin], path="/mcp-eu").mount(app, docs="/eu-tools")
    MCPFusion("billing-eu", tools=[twin], path="/mcp-eu").mount(app, docs="/eu-tools", rest=False)


# -- 2. plain `def` readiness checks -----------------------------------------------------------------

def test_a_plain_def_readiness_check_runs_in_a_thread():
    fusion = MCPFusion("svc")
    state: dict[str, object] = {"up": True}

    @fusion.readiness_check("database")
    def database() -> bool:
        state["thread"] = threading.current_thread()
        if state["up"] == "raise":
            raise ConnectionError("postgresql://u:s3cret@h/db")
        return bool(state["up"])

    client = TestClient(fusion.build_app())
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "checks": {"database": "ok"}}
    assert state["thread"] is not threading.main_thread() and state["thread"].name == "mcpfusion-readiness"
    state["up"] = False
    assert client.get("/readyz").json()["checks"] == {"database": "unavailable"}
    state["up"] = "raise"
    down = client.get("/readyz")
    assert down.status_code == 503 and down.json()["checks"] == {"database": "unavailable (ConnectionError)"}
    assert "s3cret" not in down.text


def test_a_hanging_plain_def_check_times_out_and_holds_one_thread():
    fusion = MCPFusion("svc")
    fusion.readiness.timeout = 0.2
    release, calls = threading.Event(), []

    @fusion.readiness_check("database")
    def database() -> bool:
        calls.append(1)
        release.wait(60)
        return True

    client = TestClient(fusion.build_app())
    try:
        for _ in range(3):  # each probe is answered at the timeout; they share the one run still hanging
            hung = client.get("/readyz")
            assert hung.status_code == 503 and hung.json()["checks"] == {"database": "timeout"}
        assert len(calls) == 1
    finally:
        release.set()


# -- 3. serve / call / stdio of an app whose lifespan fails -------------------------------------------

FAILING_APP = '''
from contextlib import asynccontextmanager
from fastapi import FastAPI
from mcpfusion import MCPFusion, Tool

@asynccontextmanager
async def lifespan(app):
    raise RuntimeError("db down: postgresql://u:s3cret@h/db password=hunter2")
    yield

t = Tool("t")

@t.action(readonly=True)
async def a() -> str:
    """A."""
    return "a"

app = FastAPI(lifespan=lifespan)
MCPFusion("t", tools=[t]).mount(app)
'''


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mcpfusion(tmp_path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "failing_app.py").write_text(FAILING_APP)
    return subprocess.run([sys.executable, "-m", "mcpfusion", *args, "--app-dir", str(tmp_path)], input=stdin,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.parametrize("command", [
    ["serve", "failing_app:app", "--host", "127.0.0.1"],
    ["call", "failing_app:app", "t", "a"],
    ["stdio", "failing_app:app"],
])
def test_a_failing_lifespan_is_one_error_line_without_its_secrets(tmp_path, command):
    if command[0] == "serve":
        command = [*command, "--port", str(free_port())]
    out = mcpfusion(tmp_path, *command, stdin="")
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("mcpfusion: error:")]
    assert len(errors) == 1, out.stderr
    # (where it was raised in the app's own file ends the line, as for a failed import)
    assert errors[0].startswith("mcpfusion: error: starting failing_app:app failed (its lifespan start-up raised): "
                                "RuntimeError: db down: postgresql://u:***@h/db password=*** (at "), out.stderr
    assert errors[0].endswith("failing_app.py:8)"), out.stderr
    assert "Traceback" not in out.stderr and "s3cret" not in out.stderr and "hunter2" not in out.stderr
    assert "MCP http://" not in out.stderr  # no serving banner for a server that never served
    assert out.stdout == ""


def test_serve_prints_its_banner_once_the_app_started(tmp_path):
    (tmp_path / "slow_app.py").write_text(textwrap.dedent('''
        import sys
        from contextlib import asynccontextmanager
        from fastapi import FastAPI
        from mcpfusion import MCPFusion

        @asynccontextmanager
        async def lifespan(app):
            print("lifespan started", file=sys.stderr, flush=True)
            yield

        app = FastAPI(lifespan=lifespan)
        MCPFusion("slow").mount(app)
    '''))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion", "serve", "slow_app:app", "--app-dir", str(tmp_path),
                             "--host", "127.0.0.1", "--port", str(port)], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True)
    try:
        lines: list[str] = []
        while not any("Uvicorn running on" in line for line in lines):  # (pytest's timeout bounds the wait)
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)
    banner = next(i for i, line in enumerate(lines) if f"MCP http://127.0.0.1:{port}/mcp" in line)
    assert banner > next(i for i, line in enumerate(lines) if "lifespan started" in line), "".join(lines)


def test_credentials_are_masked_in_start_up_errors():
    assert without_credentials("postgresql://u:s3cret@h/db") == "postgresql://u:***@h/db"
    assert without_credentials("redis://:pw@h:6379/0 and https://tok@git.example/x") == \
        "redis://:***@h:6379/0 and https://***@git.example/x"
    assert without_credentials("host=h db_password=abc port=5 PASSWORD = 'a b'") == \
        "host=h db_password=*** port=5 PASSWORD = ***"
    assert without_credentials("mailto:a@b user@example.com") == "mailto:a@b user@example.com"
