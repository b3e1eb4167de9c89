"""Round 7, stdio and several servers on one app: `mcpfusion stdio` bridges to the fusion's own `path=` (it
always posted to /mcp: a fusion at /agents/mcp answered 404 to everything), and an app serving several
`MCPFusion` servers is reachable in-process, each fusion through the real app (its overrides), by `stdio
--server`, `call` (the fusion serving the tool) and `ToolTester(app)`, never by a silent pick of the last one
mounted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi import FastAPI

from mcpfusion import MCPFusion, Tool, cli
from mcpfusion.testing import ToolTester

ROOT = Path(__file__).resolve().parent.parent
SERVER_ENV = "MCPFUSION_STDIO_SERVER"  # what `install --server` writes into a stdio entry's environment

ONE_AT_A_PATH = '''
from fastapi import FastAPI
from mcpfusion import MCPFusion, Tool

crm = Tool("crm")


@crm.action(readonly=True)
async def get_customer(id: str) -> str:
    """Get customer."""
    return f"customer {id}"


app = FastAPI()
fusion = MCPFusion("crm", tools=[crm], path="/agents/mcp")
fusion.mount(app)
'''

# Two fusions on one app, the real dependencies replaced by the app's overrides (as a test config would).
TWO_ON_ONE_APP = '''
from fastapi import Depends, FastAPI
from mcpfusion import MCPFusion, Tool


def get_db():
    raise RuntimeError("real db unavailable")


billing, crm = Tool("billing"), Tool("crm")


@billing.action(readonly=True)
async def get_invoice(id: str, db: dict = Depends(get_db)) -> dict:
    """Get invoice."""
    return db[id]


@crm.action(readonly=True)
async def get_customer(id: str, db: dict = Depends(get_db)) -> dict:
    """Get customer."""
    return db[id]


app = FastAPI()
first = MCPFusion("billing", tools=[billing])
second = MCPFusion("crm", tools=[crm], path="/mcp-crm")
first.mount(app)
second.mount(app, docs="/crm-tools")
app.dependency_overrides[get_db] = lambda: {"inv_1": {"id": "inv_1"}, "c1": {"id": "c1", "name": "Ada"}}
'''

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _calls(tool: str, action: str, arguments: dict) -> str:
    """initialize, then the same call on the session wire (2025-11-25) and on the 2026-07-28 envelope."""
    params = {"name": tool, "arguments": {"action": action, **arguments}}
    messages = [INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params},
                {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {**params, "_meta": MODERN}}]
    return "".join(json.dumps(m) + "\n" for m in messages)


def _stdio(folder: Path, *args: str, stdin: str, env: dict[str, str] | None = None,
           module: bool = False) -> subprocess.CompletedProcess[str]:
    command = (["-m", "mcpfusion.mcp.stdio", *args] if module else
               ["-m", "mcpfusion.cli", "stdio", *args, "--app-dir", str(folder)])
    return subprocess.run([sys.executable, *command], cwd=folder, input=stdin, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def _answers(out: subprocess.CompletedProcess[str]) -> dict[int, dict]:
    assert out.returncode == 0, out.stderr
    return {m["id"]: m for m in map(json.loads, out.stdout.splitlines()) if "id" in m}


def _texts(answers: dict[int, dict]) -> list[str]:
    return [answers[i]["result"]["content"][0]["text"] for i in (2, 3)]


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """The two sample apps as modules of `tmp_path` (importable in this process too, afresh per test)."""
    (tmp_path / "r7_one.py").write_text(ONE_AT_A_PATH)
    (tmp_path / "r7_two.py").write_text(TWO_ON_ONE_APP)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("r7_one", "r7_two"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delenv(SERVER_ENV, raising=False)
    return tmp_path


# -- defect 1: a fusion served at a path= of its own -------------------------------------------------------

@pytest.mark.parametrize("target", ["r7_one:app", "r7_one:fusion"])
def test_stdio_bridges_to_the_fusions_own_path_on_both_envelopes(modules, target):
    answers = _answers(_stdio(modules, target, stdin=_calls("crm", "get_customer", {"id": "c1"})))
    assert answers[1]["result"]["serverInfo"]["name"] == "crm"
    assert _texts(answers) == ["customer c1", "customer c1"]


def test_the_stdio_module_bridges_to_the_fusions_own_path(modules):
    """`python -m mcpfusion.mcp.stdio` (the ASGI-only entry point) too; it ran into a NameError at the end
    of stdin (a helper defined below its `__main__` block)."""
    answers = _answers(_stdio(modules, "r7_one:app", stdin=_calls("crm", "get_customer", {"id": "c1"}), module=True))
    assert _texts(answers) == ["customer c1", "customer c1"]


def test_the_bridge_posts_to_the_path_of_the_fusion_the_app_serves():
    from mcpfusion.mcp.stdio import StdioBridge

    app = MCPFusion("crm", path="/agents/mcp").build_app()
    assert StdioBridge(app, print, headers={}).path == "/agents/mcp"
    assert StdioBridge(app, print, path="/other", headers={}).path == "/other"
    assert StdioBridge(FastAPI(), print, headers={}).path == "/mcp"  # (an app without a fusion: as before)


# -- defect 2: several fusions on one app ----------------------------------------------------------------

def test_mount_records_every_fusion_in_mount_order():
    app = FastAPI()
    first, second = MCPFusion("a"), MCPFusion("b", path="/mcp-b")
    first.mount(app)
    assert app.state.mcpfusions == [first] and app.state.mcpfusion is first
    second.mount(app, docs=None)
    assert app.state.mcpfusions == [first, second] and app.state.mcpfusion is second
    built = MCPFusion("c").build_app()
    assert built.state.mcpfusions == [built.state.mcpfusion]


@pytest.mark.parametrize("args", [["r7_two:app", "--server", "crm"], ["r7_two:app", "--server", "/mcp-crm"],
                                  ["r7_two:second"]])
def test_stdio_serves_the_fusion_named_through_the_real_app(modules, args):
    answers = _answers(_stdio(modules, *args, stdin=_calls("crm", "get_customer", {"id": "c1"})))
    assert answers[1]["result"]["serverInfo"]["name"] == "crm"
    assert [json.loads(text) for text in _texts(answers)] == [{"id": "c1", "name": "Ada"}] * 2  # the overrides


def test_stdio_takes_the_server_from_the_environment_an_installed_entry_sets(modules):
    answers = _answers(_stdio(modules, "r7_two:app", stdin=_calls("crm", "get_customer", {"id": "c1"}),
                              env={SERVER_ENV: "crm"}))
    assert answers[1]["result"]["serverInfo"]["name"] == "crm"


@pytest.mark.parametrize("module", [False, True])
def test_stdio_refuses_an_app_of_several_fusions_without_server_naming_them(modules, module):
    out = _stdio(modules, "r7_two:app", stdin=_calls("crm", "get_customer", {"id": "c1"}), module=module)
    assert out.returncode != 0 and out.stdout == ""
    assert "several MCPFusion servers ('billing' at /mcp, 'crm' at /mcp-crm)" in out.stderr
    assert "--server NAME" in out.stderr and "Traceback" not in out.stderr


def test_stdio_refuses_an_unknown_server(modules):
    out = _stdio(modules, "r7_two:app", "--server", "nope", stdin="")
    assert out.returncode == 2 and "no MCPFusion named 'nope': the app serves 'billing' at /mcp" in out.stderr
    out = _stdio(modules, "r7_two:first", "--server", "crm", stdin="")
    assert out.returncode == 2 and "r7_two:first is the MCPFusion 'billing'" in out.stderr


@pytest.mark.parametrize(("target", "tool", "action", "args", "data"), [
    ("r7_two:app", "billing", "get_invoice", {"id": "inv_1"}, {"id": "inv_1"}),
    ("r7_two:app", "crm", "get_customer", {"id": "c1"}, {"id": "c1", "name": "Ada"}),
    ("r7_two:first", "billing", "get_invoice", {"id": "inv_1"}, {"id": "inv_1"}),  # the real app's overrides
])
def test_call_reaches_each_fusion_with_the_apps_overrides(modules, capsys, target, tool, action, args, data):
    assert cli.main(["call", target, tool, action, "--json", json.dumps(args), "--app-dir", str(modules)]) == 0
    assert json.loads(capsys.readouterr().out.split("\n\n")[0]) == data


def test_call_of_a_tool_no_fusion_serves_names_them(modules, capsys):
    assert cli.main(["call", "r7_two:app", "nope", "x", "--app-dir", str(modules)]) == 2
    err = capsys.readouterr().err
    assert "several MCPFusion servers ('billing' at /mcp, 'crm' at /mcp-crm), none of them serving a tool 'nope'" in err


def test_inspect_of_an_app_of_several_fusions_takes_server(modules, capsys):
    assert cli.main(["inspect", "r7_two:app", "--app-dir", str(modules)]) == 2
    assert "choose one with --server NAME" in capsys.readouterr().err
    assert cli.main(["inspect", "r7_two:app", "--server", "crm", "--app-dir", str(modules)]) == 0
    assert capsys.readouterr().out.startswith("crm 0.1.0: 1 tools")


def test_install_passes_the_server_on_and_refuses_to_guess(modules, capsys):
    config = modules / "mcp.json"
    base = ["install", "cursor", "r7_two:app", "--app-dir", str(modules), "--config", str(config)]
    assert cli.main(base) == 2
    assert "choose one with --server NAME" in capsys.readouterr().err and not config.exists()
    assert cli.main([*base, "--server", "crm"]) == 0
    entry = json.loads(config.read_text())["mcpServers"]["crm"]
    assert entry["env"] == {SERVER_ENV: "crm"} and entry["args"][-3:] == ["r7_two:app", "--app-dir", str(modules)]


def test_dev_banner_names_every_fusion_and_its_path(modules, monkeypatch, capsys):
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda *args, **options: None)
    monkeypatch.setattr(os, "environ", os.environ.copy())  # (what `dev` sets for its reloaded process)
    assert cli.main(["dev", "r7_two:app", "--app-dir", str(modules), "--port", "0"]) == 0
    err = capsys.readouterr().err
    assert "serving billing, crm (2 tools) from r7_two:app" in err
    assert "MCP http://127.0.0.1:" in err and "/mcp, http://127.0.0.1:" in err and "/mcp-crm | REST" in err


def _two_fusions() -> tuple[FastAPI, MCPFusion, MCPFusion]:
    billing, crm = Tool("billing"), Tool("crm")

    def get_db() -> dict:
        raise RuntimeError("real db unavailable")

    from fastapi import Depends

    @billing.action(readonly=True)
    async def get_invoice(id: str, db: dict = Depends(get_db)) -> str:
        """Get invoice."""
        return db[id]

    @crm.action(readonly=True)
    async def get_customer(id: str, db: dict = Depends(get_db)) -> str:
        """Get customer."""
        return db[id]

    app = FastAPI()
    first, second = MCPFusion("billing", tools=[billing]), MCPFusion("crm", tools=[crm], path="/mcp-crm")
    first.mount(app)
    second.mount(app, docs="/crm-tools")
    app.dependency_overrides[get_db] = lambda: {"inv_1": "invoice", "c1": "customer"}
    return app, first, second


def test_tool_tester_of_an_app_reaches_every_fusion():
    app, first, second = _two_fusions()
    tester = ToolTester(app)
    assert asyncio.run(tester.call("billing", "get_invoice", {"id": "inv_1"})).data == "invoice"
    assert asyncio.run(tester.call("crm", "get_customer", {"id": "c1"})).data == "customer"
    assert asyncio.run(tester.call("nope", "x")).error_code == "UNKNOWN_TOOL"
    with pytest.raises(ValueError, match=r"several MCPFusion servers \('billing' at /mcp, 'crm' at /mcp-crm\)"):
        tester.registry  # noqa: B018 - which one is ambiguous
    named = ToolTester(app, server="crm")
    assert named.registry is second.registry
    assert asyncio.run(named.call("crm", "get_customer", {"id": "c1"})).data == "customer"
    assert asyncio.run(named.call("billing", "get_invoice", {"id": "inv_1"})).error_code == "UNKNOWN_TOOL"
    assert ToolTester(app, server="/mcp").registry is first.registry
    with pytest.raises(ValueError, match="no MCPFusion named 'zz'"):
        ToolTester(app, server="zz")


def test_tool_tester_of_tools_served_by_the_second_fusion_uses_its_registry_and_path():
    app, _, second = _two_fusions()
    tester = ToolTester(list(second.registry.tools.values()), app=app)
    assert tester.registry is second.registry and tester._path == "/mcp-crm"
    assert ToolTester(second.registry, app=app)._path == "/mcp-crm"
