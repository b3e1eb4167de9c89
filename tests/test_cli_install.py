"""`mcpfusion install CLIENT APP` writes the client's MCP configuration (stdio or HTTP) into temporary config
files; the stdio entry it writes starts a working server from another folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from mcpfusion.install import default_config_path

ROOT = Path(__file__).resolve().parent.parent
APP = "app.main:app"


def install(tmp_path, *args, home=None):
    env = {**os.environ, "MCPFUSION_DB_PATH": str(tmp_path / "install.sqlite3"), "HOME": str(home or tmp_path)}
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run([sys.executable, "-m", "mcpfusion", "install", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("client", ["claude-desktop", "claude-code", "cursor"])
def test_stdio_entry_keeps_other_servers(tmp_path, client):
    config = tmp_path / "cfg" / "mcp.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"mcpServers": {"other": {"command": "x"}}, "theme": "dark"}))
    done = install(tmp_path, client, APP, "--token", "demo-admin", "--config", str(config))
    assert done.returncode == 0, done.stderr
    written = json.loads(config.read_text())
    assert written["theme"] == "dark" and written["mcpServers"]["other"] == {"command": "x"}
    entry = written["mcpServers"]["mcpfusion-billing"]
    assert entry["command"] == str(Path(sys.executable).with_name("mcpfusion"))
    assert entry["args"] == ["stdio", APP, "--app-dir", str(ROOT)]
    # the token is not an argument; .mcp.json (project-scoped, shared) holds a reference to it
    bearer = "Bearer ${MCPFUSION_TOKEN}" if client == "claude-code" else "Bearer demo-admin"
    assert entry["env"] == {"MCPFUSION_AUTHORIZATION": bearer}
    assert f"wrote server 'mcpfusion-billing' (stdio) to {config}" in done.stderr


def test_default_paths_per_client(tmp_path):
    home = tmp_path / "home"
    assert default_config_path("claude-desktop", home=home, platform="linux", environ={}) == \
        home / ".config" / "Claude" / "claude_desktop_config.json"
    assert default_config_path("claude-desktop", home=home, platform="darwin", environ={}) == \
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    assert default_config_path("claude-desktop", home=home, platform="win32", environ={"APPDATA": "C:/AD"}) == \
        Path("C:/AD") / "Claude" / "claude_desktop_config.json"
    assert default_config_path("cursor", home=home) == home / ".cursor" / "mcp.json"
    assert default_config_path("claude-code", cwd=tmp_path) == tmp_path / ".mcp.json"
    done = install(tmp_path, "cursor", APP, "--name", "bills", home=home)   # no --config: the default file
    assert done.returncode == 0, done.stderr
    assert "bills" in json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]


@pytest.mark.parametrize(("client", "expected"), [
    ("claude-code", {"type": "http", "url": "http://127.0.0.1:8000/mcp",
                     "headers": {"Authorization": "Bearer ${MCPFUSION_TOKEN}"}}),
    ("cursor", {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer demo-admin"}}),
    # (the token from env, as mcp-remote reads it: never in the arguments a process listing shows)
    ("claude-desktop", {"command": "npx", "args": ["-y", "mcp-remote", "http://127.0.0.1:8000/mcp",
                                                   "--header", "Authorization:${MCPFUSION_AUTHORIZATION}"],
                        "env": {"MCPFUSION_AUTHORIZATION": "Bearer demo-admin"}}),
])
def test_http_entries(tmp_path, client, expected):
    config = tmp_path / "mcp.json"
    done = install(tmp_path, client, APP, "--url", "http://127.0.0.1:8000/mcp", "--token", "demo-admin",
                   "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text())["mcpServers"]["mcpfusion-billing"] == expected


def test_an_url_that_is_no_http_endpoint_is_refused(tmp_path):
    done = install(tmp_path, "cursor", APP, "--url", "ftp://x", "--config", str(tmp_path / "c.json"))
    assert done.returncode == 2 and "--url must be the server's http(s) MCP endpoint" in done.stderr
    assert not (tmp_path / "c.json").exists()


def test_clear_errors(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    done = install(tmp_path, "cursor", APP, "--config", str(broken))
    assert done.returncode == 2 and "is not valid JSON" in done.stderr and broken.read_text() == "{not json"
    done = install(tmp_path, "cursor", "nope.module:app", "--config", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "cannot import 'nope.module'" in done.stderr
    done = install(tmp_path, "cursor", APP, "--env", "NOEQUALS", "--config", str(tmp_path / "x.json"))
    assert done.returncode == 2 and "--env takes KEY=VALUE" in done.stderr


async def test_the_written_stdio_entry_serves_from_another_folder(tmp_path):
    config = tmp_path / "claude_desktop_config.json"
    done = install(tmp_path, "claude-desktop", APP, "--token", "demo-support", "--config", str(config),
                   "--env", f"MCPFUSION_DB_PATH={tmp_path / 'stdio.sqlite3'}")
    assert done.returncode == 0, done.stderr
    entry = json.loads(config.read_text())["mcpServers"]["mcpfusion-billing"]
    params = StdioServerParameters(command=entry["command"], args=entry["args"], cwd=str(tmp_path),
                                   env={"PATH": os.environ["PATH"], **entry["env"]})
    async with Client(params) as client:
        result = await client.call_tool("billing_read", {"action": "get_invoice", "id": "inv_0001"})
    text = result.content[0].text
    assert not result.is_error and json.loads(text)["id"] == "inv_0001"
    assert json.loads(text)["customer"]["email"] == "[REDACTED]"     # the support token's view
