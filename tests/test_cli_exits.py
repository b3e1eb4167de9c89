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
@pytest.mark.parametrize(("module", "startup", "shutdown", "failed", "status"), [
    ("start_exit", "sys.exit(4)", "pass", "starting start_exit:app failed (its lifespan start-up raised)", 4),
    ("stop_exit", "pass", "sys.exit(5)", "stopping stop_exit:app failed (its lifespan shutdown raised)", 5),
])
def test_sys_exit_in_the_lifespan_is_one_error_line(tmp_path, command, module, startup, shutdown, failed, status):
    (tmp_path / f"{module}.py").write_text(LIFESPAN.replace("STARTUP", startup).replace("SHUTDOWN", shutdown))
    done = run(tmp_path, command, f"{module}:app")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == (f"mcpfusion: error: {failed}: it exited with status {status} (sys.exit "
                                            f"at {module}.py:{exit_line(tmp_path / f'{module}.py')})")
    assert "Traceback" not in done.stderr


# -- probe 7: what the exit or exception says, always one line, never driving the terminal -------------------

HOSTILE = "bad\x1b[2J\x1b]0;title\x07\u202eRTL\nmcpfusion: ok: forged"
ESCAPED = "bad\\u001b[2J\\u001b]0;title\\u0007\\u202eRTL\\u000amcpfusion: ok: forged"


def write(folder: Path, name: str, body: str) -> str:
    (folder / f"{name}.py").write_text(textwrap.dedent(body))
    return f"{name}:app"


def test_an_exit_object_whose_str_raises_is_named_by_its_type(tmp_path):
    app = write(tmp_path, "exit_str_raises", '''
        import sys
        class Bad:
            def __str__(self):
                raise RuntimeError("str failed")
            __repr__ = __str__
        sys.exit(Bad())
    ''')
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == ("mcpfusion: error: importing 'exit_str_raises' failed: it exited with a Bad "
                    f"(sys.exit at exit_str_raises.py:{exit_line(tmp_path / 'exit_str_raises.py')})")


@pytest.mark.parametrize("command", ["call", "stdio"])
def test_a_lifespan_exit_object_whose_str_raises_is_one_line(tmp_path, command):
    (tmp_path / "life_bad.py").write_text(LIFESPAN.replace("STARTUP", "sys.exit(Bad())").replace(
        "SHUTDOWN", "pass") + "\n\nclass Bad:\n    def __str__(self):\n        raise RuntimeError('no')\n\n"
                             "    __repr__ = __str__\n")
    done = run(tmp_path, command, "life_bad:app")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith("mcpfusion: error: starting life_bad:app failed (its lifespan "
                                                   "start-up raised): it exited with a Bad (sys.exit at life_bad.py:")
    assert "Traceback" not in done.stderr


def test_an_exit_message_is_escaped_onto_one_line(tmp_path):
    app = write(tmp_path, "exit_hostile", f"import sys\nsys.exit({HOSTILE!r})\n")
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == f"mcpfusion: error: importing 'exit_hostile' failed: it exited: {ESCAPED} (sys.exit at exit_hostile.py:2)"
    assert "\x1b" not in line and "\u202e" not in line


def test_an_exception_message_is_escaped_onto_one_line(tmp_path):
    app = write(tmp_path, "raise_hostile", f"raise RuntimeError({HOSTILE!r})\n")
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == f"mcpfusion: error: importing 'raise_hostile' failed: RuntimeError: {ESCAPED} (at raise_hostile.py:1)"


@pytest.mark.parametrize("command", ["call", "stdio"])
def test_a_lifespan_message_is_escaped_onto_one_line(tmp_path, command):
    (tmp_path / "life_hostile.py").write_text(LIFESPAN.replace("STARTUP", f"raise RuntimeError({HOSTILE!r})")
                                              .replace("SHUTDOWN", "pass"))
    done = run(tmp_path, command, "life_hostile:app")
    assert done.returncode == 2, done.stderr
    assert f"RuntimeError: {ESCAPED} (at life_hostile.py:" in done.stderr.splitlines()[-1]
    assert "\x1b" not in done.stderr and "forged" not in done.stderr.replace(ESCAPED, "")


def test_a_getattr_exit_message_is_escaped(tmp_path):
    (tmp_path / "lazy_hostile.py").write_text(f"import sys\n\n\ndef __getattr__(name):\n    sys.exit({HOSTILE!r})\n")
    line = one_error(cli(tmp_path, "inspect", "lazy_hostile:app"))
    assert line == f"mcpfusion: error: building lazy_hostile:app failed: it exited: {ESCAPED} (sys.exit at lazy_hostile.py:5)"


@pytest.mark.parametrize("code", ["0", "None", ""])
def test_a_clean_exit_before_the_app_was_built_says_so(tmp_path, code):
    app = write(tmp_path, "exit_clean", f"import sys\nsys.exit({code})\n")
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == ("mcpfusion: error: importing 'exit_clean' failed: it exited (status 0, no error) before the app "
                    "was built (sys.exit at exit_clean.py:2)")


def test_a_clean_exit_in_build_app_says_so(tmp_path):
    (tmp_path / "build_clean.py").write_text(TOOL + textwrap.dedent('''
        class Fusion(MCPFusion):
            def build_app(self, **kwargs):
                sys.exit(0)


        app = Fusion("notes", tools=[notes])
    '''))
    line = one_error(run(tmp_path, "inspect", "build_clean:app"))
    assert "failed: it exited (status 0, no error) before the app was built (sys.exit at build_clean.py:" in line


def test_a_clean_exit_in_the_lifespan_start_up_says_so(tmp_path):
    (tmp_path / "life_clean.py").write_text(LIFESPAN.replace("STARTUP", "sys.exit(0)").replace("SHUTDOWN", "pass"))
    done = run(tmp_path, "call", "life_clean:app")
    assert done.returncode == 2, done.stderr
    assert "raised): it exited (status 0, no error) before the app started (sys.exit at" in done.stderr


@pytest.mark.parametrize(("code", "status"), [("True", 1), ("False", 0), ("7", 7)])
def test_an_exit_status_is_the_number_the_process_would_exit_with(tmp_path, code, status):
    app = write(tmp_path, "exit_bool", f"import sys\nsys.exit({code})\n")
    line = one_error(cli(tmp_path, "inspect", app))
    said = f"it exited with status {status}" if status else "it exited (status 0, no error) before the app was built"
    assert line == f"mcpfusion: error: importing 'exit_bool' failed: {said} (sys.exit at exit_bool.py:2)"


@pytest.mark.parametrize(("code", "kind"), [("{'password': 'hunter2'}", "a dict"), ("['hunter2']", "a list"),
                                            ("object()", "an object"), ("2.5", "a float")])
def test_an_exit_object_is_named_by_its_type_only(tmp_path, code, kind):
    app = write(tmp_path, "exit_obj", f"import sys\nsys.exit({code})\n")
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == f"mcpfusion: error: importing 'exit_obj' failed: it exited with {kind} (sys.exit at exit_obj.py:2)"
    assert "hunter2" not in line


BASE = '''
    import asyncio


    class Weird(BaseException):
        pass
'''


@pytest.mark.parametrize(("raised", "named"), [("Weird('odd')", "exc_base.Weird: odd"),
                                               ("asyncio.CancelledError('gone')",
                                                "asyncio.exceptions.CancelledError: gone")])
def test_a_base_exception_at_import_is_one_error_line(tmp_path, raised, named):
    app = write(tmp_path, "exc_base", BASE + f"\n    raise {raised}\n")
    line = one_error(cli(tmp_path, "inspect", app))
    assert line == f"mcpfusion: error: importing 'exc_base' failed: {named} (at exc_base.py:{len(BASE.splitlines()) + 2})"


@pytest.mark.parametrize("raised", ["Weird('odd')", "asyncio.CancelledError('gone')"])
def test_a_base_exception_in_a_module_getattr_or_build_app_is_one_error_line(tmp_path, raised):
    (tmp_path / "lazy_base.py").write_text(textwrap.dedent(BASE) + f"\n\ndef __getattr__(name):\n    raise {raised}\n")
    line = one_error(cli(tmp_path, "inspect", "lazy_base:app"))
    assert line.startswith("mcpfusion: error: building lazy_base:app failed: ") and "(at lazy_base.py:" in line
    (tmp_path / "build_base.py").write_text(TOOL + textwrap.dedent(BASE) + textwrap.dedent(f'''
        class Fusion(MCPFusion):
            def build_app(self, **kwargs):
                raise {raised}


        app = Fusion("notes", tools=[notes])
    '''))
    line = one_error(run(tmp_path, "call", "build_base:app"))
    assert line.startswith("mcpfusion: error: building the app of build_base:app failed: ") and "(at build_base.py:" in line


@pytest.mark.parametrize("command", ["call", "stdio"])
@pytest.mark.parametrize("where", ["STARTUP", "SHUTDOWN"])
@pytest.mark.parametrize("raised", ["Weird('odd')", "asyncio.CancelledError('gone')"])
def test_a_base_exception_in_the_lifespan_is_one_error_line(tmp_path, command, where, raised):
    body = (LIFESPAN + textwrap.dedent(BASE)).replace(where, f"raise {raised}")
    (tmp_path / "life_base.py").write_text(body.replace("STARTUP", "pass").replace("SHUTDOWN", "pass"))
    done = run(tmp_path, command, "life_base:app")
    assert done.returncode == 2, (done.stdout, done.stderr)
    step = "starting life_base:app failed (its lifespan start-up" if where == "STARTUP" else \
        "stopping life_base:app failed (its lifespan shutdown"
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"mcpfusion: error: {step} raised): ") and "(at life_base.py:" in last, done.stderr
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr


def test_a_keyboard_interrupt_at_import_or_in_the_lifespan_still_interrupts(tmp_path):
    app = write(tmp_path, "kb_import", "raise KeyboardInterrupt\n")
    done = cli(tmp_path, "inspect", app)
    assert done.returncode == 130 and "error" not in done.stderr, done.stderr
    (tmp_path / "kb_life.py").write_text(LIFESPAN.replace("STARTUP", "raise KeyboardInterrupt").replace("SHUTDOWN", "pass"))
    done = run(tmp_path, "call", "kb_life:app")
    assert done.returncode == 130 and "error" not in done.stderr, done.stderr
