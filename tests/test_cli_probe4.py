"""Probe 4's CLI findings: `install --config` into a missing folder, `sys.exit()` while importing the app,
lockfiles of a newer format or of the wrong shape, and control characters in `inspect`'s output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpfusion.docs import lock
from mcpfusion.install import install

NOTES = textwrap.dedent('''
    from mcpfusion import MCPFusion, Tool

    notes = Tool("notes", description=DESCRIPTION)


    @notes.action(readonly=True)
    async def search(text: str) -> list[dict]:
        """Search notes."""
        return []


    app = MCPFusion("notes", tools=[notes]).build_app()
''')


def write_app(folder: Path, name: str, description: str = "Notes") -> str:
    (folder / f"{name}.py").write_text(f"DESCRIPTION = {description!r}\n" + NOTES, encoding="utf-8")
    return f"{name}:app"


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(folder)}
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run([sys.executable, "-m", "mcpfusion", *args], cwd=folder, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcpfusion: error: "), done.stderr
    return lines[0]


def test_install_refuses_a_config_whose_folder_does_not_exist(tmp_path):
    app = write_app(tmp_path, "notes_p4_install")
    missing = tmp_path / "no" / "such" / "mcp.json"
    line = one_error(cli(tmp_path, "install", "cursor", app, "--config", str(missing)))
    assert str(missing) in line and "no folder" in line
    assert not (tmp_path / "no").exists()


def test_install_still_creates_the_clients_own_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    path, _ = install("cursor", "a:app", name="a", app_dir=tmp_path)
    assert path == tmp_path / ".cursor" / "mcp.json" and "a" in json.loads(path.read_text())["mcpServers"]


@pytest.mark.parametrize(("code", "said"), [("3", "exited with status 3"), ("", "exited (status 0, no error) before the app was built"),
                                            ("'no config'", "exited: no config")])
def test_sys_exit_while_importing_the_app_is_one_error_line(tmp_path, code, said):
    (tmp_path / "exits_p4.py").write_text(f"import sys\nsys.exit({code})\n")
    line = one_error(cli(tmp_path, "inspect", "exits_p4:app"))
    assert line == f"mcpfusion: error: importing 'exits_p4' failed: it {said} (sys.exit at exits_p4.py:2)"


def pinned(tmp_path: Path, app: str) -> dict:
    done = cli(tmp_path, "lock", app, "--file", "good.lock")
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "good.lock").read_text())


def test_lock_check_refuses_a_lockfile_of_a_newer_format(tmp_path):
    app = write_app(tmp_path, "notes_p4_newer")
    (tmp_path / "new.lock").write_text(json.dumps({**pinned(tmp_path, app), "mcpfusion_lock": 999}))
    line = one_error(cli(tmp_path, "lock", app, "--check", "--file", "new.lock"))
    assert "written by a newer mcpfusion (lockfile format 999" in line and "do not regenerate it" in line
    assert "->" not in line


def test_lock_check_refuses_tools_or_actions_that_are_no_object(tmp_path):
    app = write_app(tmp_path, "notes_p4_shape")
    good = pinned(tmp_path, app)
    listed = {**good["tools"]["notes"], "actions": ["search"]}
    for name, body in (("str", {**good, "tools": "x"}), ("list", {**good, "tools": ["notes"]}),
                       ("actions", {**good, "tools": {"notes": listed}}), ("none", {"mcpfusion_lock": 5})):
        (tmp_path / f"{name}.lock").write_text(json.dumps(body))
        line = one_error(cli(tmp_path, "lock", app, "--check", "--file", f"{name}.lock"))
        assert f"{name}.lock is not a valid mcpfusion.lock" in line, name


def test_lock_diff_does_not_iterate_a_string_of_tools():
    served = {"mcpfusion_lock": lock.FORMAT, "digest": "x", "tools": {}}
    with pytest.raises(ValueError):
        lock.diff({"mcpfusion_lock": lock.FORMAT, "tools": "x"}, served)
    assert lock.newer_format({"mcpfusion_lock": lock.FORMAT + 1}) == lock.FORMAT + 1
    assert lock.newer_format({"mcpfusion_lock": lock.FORMAT}) is None
    assert lock.newer_format({"mcpfusion_lock": True}) is None


def test_inspect_shows_control_and_bidi_characters_escaped(tmp_path):
    app = write_app(tmp_path, "notes_p4_inspect", "abc\u202eTXT.exe\u202c nul\x00 esc\x1b[31m\u2066x\u2069\nline 2")
    listing = cli(tmp_path, "inspect", app)
    assert listing.returncode == 0, listing.stderr
    assert "abc\\u202eTXT.exe\\u202c nul\\u0000 esc\\u001b[31m\\u2066x\\u2069\nline 2" in listing.stdout
    as_json = cli(tmp_path, "inspect", app, "--json")
    assert not any(c in as_json.stdout for c in "\u202e\u202c\x00\x1b\u2066\u2069")
    description = json.loads(as_json.stdout)[0]["description"]  # the same JSON: what tools/list advertises
    assert description.startswith("abc\u202eTXT.exe\u202c nul\x00 esc\x1b[31m\u2066x\u2069\nline 2")
