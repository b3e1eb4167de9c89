"""File-based discovery: every Tool in a folder is served; adding a file adds a tool; duplicates fail at
start-up naming both files."""

from __future__ import annotations

import sys
import textwrap

import pytest

from app.main import create_app
from mcpfusion.discovery import DiscoveryError, discover_tools
from tests.service_kit import asgi_client, auth, mcp, settings_for

TOOL_FILE = '''
from mcpfusion import Tool

{var} = Tool("{name}", description="{name} tool")


@{var}.action(readonly=True)
async def {action}(text: str) -> str:
    """Echo the text"""
    return text
'''


def write(folder, filename, name, action="echo", var="tool"):
    path = folder / filename
    path.write_text(textwrap.dedent(TOOL_FILE.format(var=var, name=name, action=action)))
    return path


def test_reference_routers_are_discovered():
    tools = discover_tools("routers")
    assert [t.name for t in tools] == ["billing", "customers"]
    assert tools[0].source.endswith("routers/billing.py")
    import routers.billing

    assert tools[0] is routers.billing.billing  # a package is imported under its real names


def test_a_new_file_adds_a_tool(tmp_path):
    write(tmp_path, "alpha.py", "alpha")
    assert [t.name for t in discover_tools(tmp_path)] == ["alpha"]
    write(tmp_path, "beta.py", "beta")
    (tmp_path / "_private.py").write_text("raise RuntimeError('never imported')\n")
    (tmp_path / "notes.txt").write_text("not python")
    sub = tmp_path / "more"
    sub.mkdir()
    write(sub, "gamma.py", "gamma")
    tools = discover_tools(tmp_path)
    assert [t.name for t in tools] == ["alpha", "beta", "gamma"]
    assert tools[2].source == str(sub / "gamma.py")


def test_duplicate_tool_names_fail_naming_both_files(tmp_path):
    first = write(tmp_path, "a_billing.py", "billing")
    second = write(tmp_path, "b_billing.py", "billing")
    with pytest.raises(DiscoveryError) as info:
        discover_tools(tmp_path)
    message = str(info.value)
    assert "duplicate tool name 'billing'" in message
    assert str(first) in message and str(second) in message


def test_duplicate_action_names_fail_naming_both_files(tmp_path):
    package = tmp_path / "dupe_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    first = write(package, "a_base.py", "notes", action="add")
    second = package / "b_extra.py"
    second.write_text(textwrap.dedent('''
        from dupe_tools.a_base import tool


        @tool.action(name="add")
        async def add_again(text: str) -> str:
            return text
    '''))
    sys.path.insert(0, str(tmp_path))
    try:
        with pytest.raises(DiscoveryError) as info:
            discover_tools(package)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("dupe_tools")]:
            del sys.modules[name]
    message = str(info.value)
    assert "duplicate action notes.add" in message
    assert str(first) in message and str(second) in message


def test_a_broken_module_is_named(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("import not_a_module_anywhere\n")
    with pytest.raises(DiscoveryError, match="broken.py: import failed: ModuleNotFoundError"):
        discover_tools(tmp_path)
    with pytest.raises(DiscoveryError, match="not a folder"):
        discover_tools(tmp_path / "missing")


async def test_the_app_serves_what_discovery_finds(tmp_path):
    routers = tmp_path / "routers"
    routers.mkdir()
    write(routers, "echo.py", "echo", action="say")
    app = create_app(settings_for(tmp_path), routers=routers)
    async with asgi_client(app) as client:
        listing = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                  "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                       "io.modelcontextprotocol/clientCapabilities": {}}}},
            headers={"accept": "application/json", "mcp-protocol-version": "2026-07-28",
                     "mcp-method": "tools/list", **auth("demo-admin")},
        )
        assert [t["name"] for t in listing.json()["result"]["tools"]] == ["echo"]
        reply = await mcp(client, "echo", "say", {"text": "hi"}, "demo-admin")
        assert reply.json()["result"]["content"][0]["text"] == "hi"
        rest = await client.post("/api/echo/say", json={"text": "hi"}, headers=auth("demo-admin"))
        assert rest.json() == "hi"


def test_duplicates_fail_at_app_start_up(tmp_path):
    routers = tmp_path / "routers"
    routers.mkdir()
    write(routers, "one.py", "same")
    write(routers, "two.py", "same")
    with pytest.raises(DiscoveryError, match="one.py and in .*two.py"):
        create_app(settings_for(tmp_path), routers=routers)


def test_a_tool_imported_elsewhere_keeps_its_home_file(tmp_path):
    package = tmp_path / "home_tools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a_reexport.py").write_text("from home_tools.b_home import tool  # noqa: F401\n")
    home = write(package, "b_home.py", "homed")
    sys.path.insert(0, str(tmp_path))
    try:
        tools = discover_tools(package)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("home_tools")]:
            del sys.modules[name]
    assert [t.name for t in tools] == ["homed"]
    assert tools[0].source == str(home)
