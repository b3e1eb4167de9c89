"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, and every ```python sample in it
runs as written, each one self-contained and asserting what it shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def samples() -> list[tuple[str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for match in FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{page.relative_to(DOCS)}:{line}", match.group(1)))
    return found


SAMPLES = samples()


def test_every_page_has_samples_and_the_tutorial_is_covered():
    pages = {name.split(":")[0] for name, _ in SAMPLES}
    expected = {"index.md", "tools.md", "dependencies.md", "presenters.md", "models.md", "ui.md", "select.md",
                "toon.md", "structured-output.md", "errors.md", "resources.md", "prompts.md", "completions.md",
                "context.md", "raw-tools.md", "mount.md", "cli.md", "deployment.md", "testing.md"}
    assert expected <= pages, expected - pages
    assert all("assert" in code for _, code in SAMPLES), [n for n, c in SAMPLES if "assert" not in c]


@pytest.mark.parametrize(("name", "code"), SAMPLES, ids=[n for n, _ in SAMPLES])
def test_sample_runs(name, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType(f"docs_sample_{abs(hash(name))}")
    module.__file__ = str(tmp_path / "sample.py")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a sample teaches: no undocumented action in it
        exec(compile(code, f"docs/{name}", "exec"), module.__dict__)


@pytest.mark.timeout(300)
def test_site_builds_strictly(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # the theme's end-of-support banner (May 2027)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING -" not in done.stderr and "Documentation built" in done.stderr, done.stderr
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "MCPFusion" in reference and "mount" in reference and "ToolTester" in reference
