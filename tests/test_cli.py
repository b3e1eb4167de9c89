"""The `mcpfusion` command against the reference service, each command in its own process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
APP = "app.main:app"


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "MCPFUSION_DB_PATH": str(tmp_path / "cli.sqlite3"), "PYTHONUNBUFFERED": "1"}


def cli(env, *args, stdin=None):
    return subprocess.run([sys.executable, "-m", "mcpfusion.cli", *args], cwd=ROOT, env=env, input=stdin,
                          capture_output=True, text=True, timeout=120)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "mcpfusion"
    assert script.is_file()
    out = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for command in ("serve", "dev", "stdio", "inspect", "call", "docs"):
        assert command in out.stdout


def test_inspect(env):
    out = cli(env, "inspect", APP)
    assert out.returncode == 0, out.stderr
    assert "== billing [profiles]" in out.stdout
    assert '-- billing_read {"readOnlyHint": true, "openWorldHint": false}' in out.stdout
    assert "\nlist_invoices(status?,customer_id?,cursor?): List invoices" in out.stdout  # the read group's rows
    assert "billing.void_invoice(id, reason) [destructive]" in out.stdout
    assert "presenters=invoice,invoice_support" in out.stdout
    listing = json.loads(cli(env, "inspect", APP, "--json").stdout)
    assert [t["name"] for t in listing] == ["billing_read", "billing_write", "billing_void_invoice", "customers"]


def test_call(env):
    out = cli(env, "call", APP, "billing", "get_invoice", "--json", '{"id": "inv_0001"}', "--token", "demo-support")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.split("\n\n")[0])
    assert data["id"] == "inv_0001" and data["customer"]["email"] == "[REDACTED]"
    assert "<domain_rules>" in out.stdout
    raw = json.loads(cli(env, "call", APP, "billing", "revenue_summary", "--token", "demo-admin", "--raw").stdout)
    assert raw["structuredContent"]["invoice_count"] == 24


def test_call_names_content_blocks(env):
    out = cli(env, "call", APP, "billing", "invoice_pdf", "--json", '{"id": "inv_0001"}', "--token", "demo-support")
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("[resource "))
    assert line.startswith("[resource application/pdf, ") and line.endswith(" bytes] invoice://inv_0001")
    raw = json.loads(cli(env, "call", APP, "billing", "invoice_pdf", "--json", '{"id": "inv_0001"}',
                         "--token", "demo-support", "--raw").stdout)
    assert raw["content"][0]["resource"]["blob"].startswith("JVBERi0")  # base64 of %PDF-


def test_call_writes_persist_between_processes(env):
    created = cli(env, "call", APP, "billing", "create_invoice", "--token", "demo-admin", "--json",
                  '{"customer_id": "cus_0001", "due_date": "2030-01-01", '
                  '"lines": [{"description": "x", "unit_price_cents": 100}]}')
    assert created.returncode == 0, created.stdout + created.stderr
    invoice_id = json.loads(created.stdout.split("\n\n")[0])["id"]
    again = cli(env, "call", APP, "billing", "get_invoice", "--token", "demo-admin", "--json",
                json.dumps({"id": invoice_id}))
    assert json.loads(again.stdout.split("\n\n")[0])["number"] == "ACME-0025"


def test_call_errors(env):
    no_token = cli(env, "call", APP, "billing", "list_invoices")
    assert no_token.returncode == 1 and 'code="UNAUTHORIZED"' in no_token.stdout
    unknown = cli(env, "call", APP, "billing", "refund", "--token", "demo-admin")
    assert unknown.returncode == 2 and 'code="UNKNOWN_ACTION"' in unknown.stdout
    bad_json = cli(env, "call", APP, "billing", "list_invoices", "--json", "{nope")
    assert bad_json.returncode == 2 and "--json is not valid JSON" in bad_json.stderr
    # Read as a request body is: a key given twice is refused (the last one would win silently), named.
    twice = cli(env, "call", APP, "billing", "get_invoice", "--token", "demo-admin", "--json",
                '{"id": "inv_0001", "id": "inv_0002"}')
    assert twice.returncode == 2 and 'it holds the key "id" twice' in twice.stderr and not twice.stdout
    invalid = cli(env, "call", APP, "billing", "get_invoice", "--token", "demo-admin", "--json", "{}")
    assert invalid.returncode == 1 and "<validation_error" in invalid.stdout


def test_bad_app_targets(env):
    assert "APP must look like" in cli(env, "inspect", "app.main").stderr
    assert "has no attribute 'nothing'" in cli(env, "inspect", "app.main:nothing").stderr
    assert "cannot import 'no_such_module'" in cli(env, "inspect", "no_such_module:app").stderr
    assert "not an MCPFusion object" in cli(env, "inspect", "app.settings:Settings").stderr


def test_docs_export(env, tmp_path):
    out = cli(env, "docs", APP, "--out", str(tmp_path / "site"))
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stderr
    manifest = json.loads((tmp_path / "site" / "tools.json").read_text())
    assert "billing" in json.dumps(manifest)
    assert (tmp_path / "site" / "index.html").is_file()


def wait_healthy(proc, url):
    """Poll until the server answers or the process dies (pytest's timeout bounds the wait)."""
    while proc.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.2)
    return False


@pytest.mark.parametrize("command", ["serve", "dev", "uvicorn"])
def test_serve_and_dev(env, command):
    port = free_port()
    argv = ["-m", "uvicorn", APP] if command == "uvicorn" else ["-m", "mcpfusion.cli", command, APP]
    proc = subprocess.Popen([sys.executable, *argv, "--port", str(port)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert wait_healthy(proc, f"http://127.0.0.1:{port}/healthz"), proc.stderr.read()
        r = httpx.post(f"http://127.0.0.1:{port}/api/customers/list", json={},
                       headers={"authorization": "Bearer demo-admin"}, timeout=10)
        assert r.status_code == 200 and len(r.json()) == 5
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    if command == "uvicorn":  # `uvicorn app.main:app` from the repository root works too
        return
    assert f"MCP http://127.0.0.1:{port}/mcp" in err
    if command == "dev":
        assert "with reload" in err


def test_stdio(env):
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "customers", "arguments": {"action": "get", "id": "cus_0001"}}},
    ]
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion.cli", "stdio", APP, "--token", "demo-support"],
                            cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    replies = {}
    try:
        for message in messages:
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()
            if "id" in message:
                while message["id"] not in replies:
                    line = proc.stdout.readline()
                    assert line, proc.stderr.read()
                    reply = json.loads(line)
                    replies[reply.get("id")] = reply
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert replies[1]["result"]["serverInfo"]["name"] == "mcpfusion-billing"
    text = replies[2]["result"]["content"][0]["text"]
    assert json.loads(text)["email"] == "[REDACTED]"
    assert proc.returncode == 0


def test_an_app_that_fails_to_import_is_shown_in_its_own_files(tmp_path):
    import subprocess
    import sys

    (tmp_path / "broken_syntax.py").write_text("import os\nx = (\n")
    (tmp_path / "raises_at_import.py").write_text("def f():\n    raise RuntimeError('boom at import')\nf()\n")
    for module, says in (("broken_syntax", "SyntaxError"), ("raises_at_import", "RuntimeError: boom at import")):
        run = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "inspect", f"{module}:app"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 2 and says in run.stderr and f"{module}.py" in run.stderr
        assert "importlib" not in run.stderr and "cli.py" not in run.stderr
    bad_port = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "serve", "x:app", "--port", "99999"],
                              capture_output=True, text=True, timeout=60)
    assert bad_port.returncode == 2 and "99999 is not a TCP port" in bad_port.stderr
    unwritable = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "lock", "app.main:app", "--file",
                                 str(tmp_path / "no" / "such" / "dir.lock")], capture_output=True, text=True,
                                timeout=60)
    assert unwritable.returncode == 2 and "cannot write" in unwritable.stderr and "Traceback" not in unwritable.stderr


def test_call_enforces_the_callers_scopes(env):
    """`call --token` is one more transport: support (no billing:write) cannot create or pay, exactly as on
    MCP and stdio (the write is answered as an action billing does not have), and nothing is stored."""
    body = '{"customer_id": "cus_0002", "due_date": "2030-02-01", "lines": [{"description": "x", "unit_price_cents": 7}]}'
    refused = cli(env, "call", APP, "billing", "create_invoice", "--token", "demo-support", "--json", body)
    assert refused.returncode == 2 and 'code="UNKNOWN_ACTION"' in refused.stdout, refused.stdout
    assert "billing_write" not in refused.stdout  # (the MCP tool serving it: hidden too)
    paid = cli(env, "call", APP, "billing", "record_payment", "--token", "demo-support", "--json",
               '{"id": "inv_0001", "amount_cents": 1, "method": "card"}')
    assert paid.returncode == 2, paid.stdout
    listed = cli(env, "call", APP, "billing", "list_invoices", "--token", "demo-admin", "--raw", "--json",
                 '{"customer_id": "cus_0002"}')
    assert "ACME-0025" not in listed.stdout
    invoice = cli(env, "call", APP, "billing", "get_invoice", "--token", "demo-admin", "--json", '{"id": "inv_0001"}')
    assert '"paid_cents":0' in invoice.stdout


def test_call_confirms_with_yes(env):
    """A confirm=True action asks in one process and runs with --yes (the token it issued is used at once)."""
    asked = cli(env, "call", APP, "billing", "void_invoice", "--token", "demo-admin", "--json",
                '{"id": "inv_0003", "reason": "duplicate"}')
    assert asked.returncode == 1 and 'code="CONFIRMATION_REQUIRED"' in asked.stdout
    assert "--yes" in asked.stderr
    done = cli(env, "call", APP, "billing", "void_invoice", "--token", "demo-admin", "--yes", "--json",
               '{"id": "inv_0003", "reason": "duplicate"}')
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"status":"void"' in done.stdout


def test_bad_arguments_files_and_settings_are_one_clean_error(env, tmp_path):
    (tmp_path / "config.json").mkdir()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for args, extra, says in (
        (["serve", APP, "--log-level", "bogus"], {}, "invalid choice: 'bogus'"),
        (["serve", APP, "--graceful-timeout", "-1"], {}, "'-1' is not a number of seconds above 0"),
        (["serve", APP, "--port", "0"], {"MCPFUSION_HEADER_TIMEOUT": "abc"}, "MCPFUSION_HEADER_TIMEOUT='abc'"),
        (["docs", APP, "--out", str(a_file)], {}, "cannot write the site to"),
        (["install", "cursor", APP, "--config", str(tmp_path / "config.json")], {},
         "cannot write the client configuration"),
    ):
        out = cli({**env, **extra}, *args)
        assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)


def test_an_app_that_fails_while_being_built_is_a_clean_error_naming_the_setting(env):
    out = cli({**env, "MCPFUSION_RATE_LIMIT": "abc"}, "inspect", APP)
    assert out.returncode == 2 and "building app.main:app failed" in out.stderr
    assert "MCPFUSION_RATE_LIMIT='abc' is not a whole number" in out.stderr


FUSION_MODULE = '''
from mcpfusion import MCPFusion, Tool

things = Tool("things", description="Things")


@things.action(readonly=True)
async def ping() -> dict:
    """Answer pong."""
    return {"pong": True}


fusion = MCPFusion("things", tools=[things])
'''


@pytest.mark.parametrize("extra", [[], ["--workers", "2"]])
def test_serve_an_mcpfusion_object(tmp_path, env, extra):
    """docs/cli.md: APP may name an MCPFusion object; `serve` serves the app it builds (each worker its own),
    where it answered 500 to every request ('MCPFusion' object is not callable)."""
    (tmp_path / "things_app.py").write_text(FUSION_MODULE)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion.cli", "serve", "things_app:fusion", "--app-dir",
                             str(tmp_path), "--port", str(port), *extra], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_healthy(proc, f"http://127.0.0.1:{port}/healthz"), proc.stderr.read()
        r = httpx.post(f"http://127.0.0.1:{port}/api/things/ping", json={}, timeout=10)
        assert (r.status_code, r.json()) == (200, {"pong": True})
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)


def test_a_server_name_is_printed_escaped_never_as_a_line_of_its_own(env, tmp_path):
    (tmp_path / "oddname.py").write_text(
        "from mcpfusion import MCPFusion, Tool\n"
        "t = Tool('t', description='T')\n"
        "@t.action(readonly=True)\n"
        "async def ping() -> str:\n"
        "    '''Ping.'''\n"
        "    return 'pong'\n"
        "app = MCPFusion('x\\nmcpfusion: error: fake\\x1b[31m', tools=[t])\n")
    inspected = cli(env, "inspect", "oddname:app", "--app-dir", str(tmp_path))
    exported = cli(env, "docs", "oddname:app", "--app-dir", str(tmp_path), "--out", str(tmp_path / "site"))
    assert inspected.returncode == 0 and exported.returncode == 0, inspected.stderr + exported.stderr
    for text in (inspected.stdout, exported.stderr):
        assert "\nmcpfusion: error: fake" not in text and "\x1b" not in text
        assert "x\\u000amcpfusion: error: fake\\u001b[31m" in text, text


def test_docs_export_refuses_a_folders_own_page_unless_forced(env, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text("<h1>my own page</h1>")
    out = cli(env, "docs", APP, "--out", str(site))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert "no docs export wrote (index.html)" in out.stderr and "--force" in out.stderr
    assert (site / "index.html").read_text() == "<h1>my own page</h1>"
    forced = cli(env, "docs", APP, "--out", str(site), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "Generated by mcpfusion" in (site / "index.html").read_text()
    again = cli(env, "docs", APP, "--out", str(site))  # its own export now: replaced without --force
    assert again.returncode == 0, again.stderr
