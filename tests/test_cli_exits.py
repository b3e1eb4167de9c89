"""A `sys.exit()` in the app's code past its import (a module `__getattr__` the APP lookup calls, a `build_app()`
override, a lifespan) is one `mcpfusion: error:` line and exit 2 for every command that loads the app, as at
import: not the app's own status, silently, nor a traceback. A KeyboardInterrupt still interrupts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_cli_probe4 import one_error

TOOL = textwrap.dedent('''
    import sys
    from contextlib import asynccontextmanager

    from fastapi import FastAPI

    from mcpfusion import MCPFusion, Tool

    notes = Tool("notes", description="Notes")


    @notes.action(readonly=True)
    async def search(text: str) -> list[dict]:
        """Search notes."""
        return []
''')


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(folder)}
    env.pop("XDG_CONFIG_HOME", None)
    return subprocess.run([sys.executable, "-m", "mcpfusion", *args], cwd=folder, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=120, input="")


#: Each command that loads APP, with the arguments it needs besides it.
COMMANDS = {"inspect": (), "call": ("notes", "search", "--json", '{"text": "a"}'), "lock": ("--file", "x.lock"),
            "docs": ("--out", "site"), "install": ("--config", "mcp.json"), "stdio": ()}


def exit_line(path: Path) -> int:
    """The line of the `sys.exit(` call in the module written at `path`."""
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if "sys.exit(" in line)


def run(folder: Path, command: str, app: str) -> subprocess.CompletedProcess[str]:
    if command == "install":
        return cli(folder, "install", "cursor", app, *COMMANDS[command])
    return cli(folder, command, app, *COMMANDS[command])


@pytest.mark.parametrize("command", list(COMMANDS))
def test_sys_exit_in_a_module_getattr_is_one_error_line(tmp_path, command):
    (tmp_path / "lazy_exit.py").write_text("import sys\n\n\ndef __getattr__(name):\n    sys.exit(3)\n")
    line = one_error(run(tmp_path, command, "lazy_exit:app"))
    assert line == "mcpfusion: error: building lazy_exit:app failed: it exited with status 3 (sys.exit at lazy_exit.py:5)"
    assert not (tmp_path / "x.lock").exists() and not (tmp_path / "mcp.json").exists()


@pytest.mark.parametrize("command", ["inspect", "call", "stdio"])
def test_sys_exit_in_build_app_is_one_error_line(tmp_path, command):
    (tmp_path / "build_exit.py").write_text(TOOL + textwrap.dedent('''
        class Fusion(MCPFusion):
            def build_app(self, **kwargs):
                sys.exit("no config")


        app = Fusion("notes", tools=[notes])
    '''))
    line = one_error(run(tmp_path, command, "build_exit:app"))
    assert line == ("mcpfusion: error: building the app of build_exit:app failed: it exited: no config "
                    f"(sys.exit at build_exit.py:{exit_line(tmp_path / 'build_exit.py')})")


def test_a_keyboard_interrupt_in_a_module_getattr_still_interrupts(tmp_path):
    (tmp_path / "lazy_interrupt.py").write_text("def __getattr__(name):\n    raise KeyboardInterrupt\n")
    done = cli(tmp_path, "inspect", "lazy_interrupt:app")
    assert done.returncode == 130 and "error" not in done.stderr, done.stderr


LIFESPAN = TOOL + textwrap.dedent('''
    @asynccontextmanager
    async def lifespan(app):
        STARTUP
        yield
        SHUTDOWN


    app = MCPFusion("notes", tools=[notes]).mount(FastAPI(lifespan=lifespan))
''')


@pytest.mark.parametrize("command", ["call", "stdio"])
def test_sys_exit_in_the_lifespan_start_up_is_one_error_line(tmp_path, command):
    (tmp_path / "start_exit.py").write_text(LIFESPAN.replace("STARTUP", "sys.exit(4)").replace("SHUTDOWN", "pass"))
    done = run(tmp_path, command, "start_exit:app")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == ("mcpfusion: error: starting start_exit:app failed (its lifespan "
                                            "start-up raised): it exited with status 4 (sys.exit at start_exit.py:"
                                            f"{exit_line(tmp_path / 'start_exit.py')})")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("command", ["call", "stdio"])
def test_sys_exit_in_the_lifespan_shutdown_is_one_error_line(tmp_path, command):
    (tmp_path / "stop_exit.py").write_text(LIFESPAN.replace("STARTUP", "pass").replace("SHUTDOWN", "sys.exit(5)"))
    done = run(tmp_path, command, "stop_exit:app")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == ("mcpfusion: error: stopping stop_exit:app failed (its lifespan "
                                            "shutdown raised): it exited with status 5 (sys.exit at stop_exit.py:"
                                            f"{exit_line(tmp_path / 'stop_exit.py')})")
    assert "Traceback" not in done.stderr
