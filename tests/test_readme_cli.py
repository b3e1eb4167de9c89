"""Every `.venv/bin/mcpfusion ...` line of the README's shell blocks runs as written from the clone's root."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def shell_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.startswith(".venv/bin/mcpfusion")]


def test_readme_cli_lines_run_as_written(tmp_path):
    lines = shell_lines()
    assert {line.split()[1] for line in lines} >= {"call", "install"}, lines
    assert (ROOT / ".venv" / "bin" / "mcpfusion").is_file(), "run `make install` first"
    env = {**os.environ, "HOME": str(tmp_path), "MCPFUSION_DB_PATH": str(tmp_path / "readme.sqlite3")}
    env.pop("XDG_CONFIG_HOME", None)
    for line in lines:
        done = subprocess.run(["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        if " call " in line:
            rows = json.loads(done.stdout.split("\n\n")[0])
            assert rows and all(row["overdue"] for row in rows)
    config = json.loads((tmp_path / ".config" / "Claude" / "claude_desktop_config.json").read_text())
    entry = config["mcpServers"]["mcpfusion-billing"]
    assert entry["args"] == ["stdio", "app.main:app", "--app-dir", str(ROOT)]
    assert entry["env"] == {"MCPFUSION_AUTHORIZATION": "Bearer demo-admin"}


def test_cli_refusals_name_the_fix(tmp_path):
    env = {**os.environ, "MCPFUSION_DB_PATH": str(tmp_path / "readme.sqlite3")}
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "mcpfusion"), "call", "app.main:app", "billing",
                           "list_invoices"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and 'code="UNAUTHORIZED"' in done.stdout
    assert "&lt;" not in done.stdout and "Authorization: Bearer TOKEN" in done.stdout
