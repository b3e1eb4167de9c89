"""Packaging mends: the sdist and wheel carry the MIT LICENSE, publish no dev tooling as extras, describe the
library (not a clone of the repository) and take the version from mcpfusion/version.py; `mcpfusion --version`;
`install claude-code` writes no token into the project's `.mcp.json`; the decorators keep the function's type."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from mcpfusion.version import __version__
from tests.test_packaging import LIBRARY_FILES, copy_tree, run

SECRET = "prod-secret-token"
APP = '''
from mcpfusion import MCPFusion

app = MCPFusion("quick").build_app()
'''


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel) built from the library's files, as a release would be."""
    src = copy_tree(LIBRARY_FILES, tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", str(out), str(src)])
    (sdist,) = out.glob("mcpfusion-*.tar.gz")
    (wheel,) = out.glob("mcpfusion-*.whl")
    return sdist, wheel


def metadata(wheel: Path) -> str:
    return zipfile.ZipFile(wheel).read(f"mcpfusion-{__version__}.dist-info/METADATA").decode()


@pytest.mark.timeout(900)
def test_both_distributions_carry_the_license_and_the_sdist_no_tests(dists):
    sdist, wheel = dists
    license_text = (Path(__file__).resolve().parents[1] / "LICENSE").read_text()
    assert license_text.startswith("MIT License") and "Copyright (c) 2026 the mcpfusion authors" in license_text
    assert zipfile.ZipFile(wheel).read(f"mcpfusion-{__version__}.dist-info/licenses/LICENSE").decode() == license_text
    with tarfile.open(sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
        assert tar.extractfile(f"mcpfusion-{__version__}/LICENSE").read().decode() == license_text
    assert not [n for n in names if n.startswith("tests")], "the tests need the reference service: not shipped"
    assert "License-Expression: MIT" in metadata(wheel) and "License-File: LICENSE" in metadata(wheel)


@pytest.mark.timeout(900)
def test_metadata_is_the_librarys_with_no_dev_extras(dists):
    _, wheel = dists
    text = metadata(wheel)
    header, _, description = text.partition("\n\n")
    extras = {line.split(": ", 1)[1] for line in header.splitlines() if line.startswith("Provides-Extra:")}
    assert extras == {"redis", "auth", "tokens", "telemetry", "all"}
    for tool in ("playwright", "mkdocs", "schemathesis", "mypy", "ruff", "fastmcp", "pytest"):
        assert not [line for line in header.splitlines() if line.startswith("Requires-Dist:") and tool in line], tool
    assert f"Version: {__version__}" in header
    assert "Author: the mcpfusion authors" in header and "Classifier: Typing :: Typed" in header
    assert "make run" not in description and ".venv/bin" not in description   # a clone's commands
    assert "](" not in description   # no links relative to the repository (broken on PyPI)
    assert "pip install mcpfusion" in description


def test_version_flag():
    for flag in ("--version", "-V"):
        done = subprocess.run([sys.executable, "-m", "mcpfusion", flag], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout == f"mcpfusion {__version__}\n", done


def install(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "quick.py").write_text(APP)
    return subprocess.run([sys.executable, "-m", "mcpfusion", "install", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("url", [None, "http://127.0.0.1:23420/mcp"])
def test_claude_code_project_file_references_the_token(tmp_path, url):
    done = install(tmp_path, "claude-code", "quick:app", "--token", SECRET, *(["--url", url] if url else []))
    assert done.returncode == 0, done.stderr
    text = (tmp_path / ".mcp.json").read_text()
    assert SECRET not in text + done.stdout + done.stderr
    entry = json.loads(text)["mcpServers"]["quick"]
    held = entry["headers"]["Authorization"] if url else entry["env"]["MCPFUSION_AUTHORIZATION"]
    assert held == "Bearer ${MCPFUSION_TOKEN}"     # Claude Code expands it from its environment
    assert "export MCPFUSION_TOKEN=" in done.stderr and "Bearer ${MCPFUSION_TOKEN}" in done.stdout


def test_user_scoped_files_keep_the_token_privately(tmp_path):
    config = tmp_path / "cursor.json"
    done = install(tmp_path, "cursor", "quick:app", "--token", SECRET, "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert json.loads(config.read_text())["mcpServers"]["quick"]["env"] == {"MCPFUSION_AUTHORIZATION": f"Bearer {SECRET}"}
    assert config.stat().st_mode & 0o077 == 0 and "MCPFUSION_TOKEN" not in done.stderr


USER_MODULE = '''
from __future__ import annotations

from mcpfusion import MCPFusion, Tool

fusion = MCPFusion("kb", tools=[Tool("kb", description="KB")])


@fusion.resource("kb://about", mime_type="text/plain")
def about() -> str:
    """About."""
    return "kb"


@fusion.resource_template("kb://{id}")
def entry(id: str) -> str:
    return id


@fusion.prompt()
def summarize(topic: str) -> str:
    return f"Summarize {topic}"


@fusion.raw_tool()
async def raw(x: int) -> str:
    return str(x)


@fusion.completion(argument="topic", prompt="summarize")
def topics(value: str) -> list[str]:
    return [value]


@fusion.readiness_check("db")
async def db_ready() -> bool:
    return True


def banner() -> str:
    return about() + entry("1") + summarize("x") + topics("a")[0]   # Any would fail warn_return_any


async def ready() -> bool:
    return await db_ready() and bool(await raw(1))


summarize(42)   # the signature is kept: mypy sees the wrong argument
'''


@pytest.mark.timeout(300)
def test_decorators_keep_the_decorated_functions_type(tmp_path):
    (tmp_path / "user_module.py").write_text(textwrap.dedent(USER_MODULE))
    done = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", "user_module.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=280)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 1 and 'Argument 1 to "summarize" has incompatible type "int"' in errors[0], done.stdout


def test_docs_samples_import_only_what_the_base_install_has():
    """`httpx` comes with the `auth` extra only: the samples use `httpx2`, which the MCP SDK itself brings."""
    from tests.test_docs_site import SAMPLES

    importing = [name for name, code in SAMPLES if re.search(r"^\s*(import httpx\b(?!2)|from httpx\b(?!2))", code, re.M)]
    assert not importing, importing
    assert "httpx2" in subprocess.run([sys.executable, "-m", "pip", "show", "mcp"], capture_output=True,
                                      text=True).stdout.split("Requires:", 1)[1].splitlines()[0]
