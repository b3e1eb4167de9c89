"""An action the caller's scopes hide is answered like one its tool does not have when it is called by tool and
action (`ToolTester`, `mcpfusion call`), as MCP answers it for the tool the caller named: the same code and
words, naming only what the caller may see, never the MCP tool that serves the hidden action."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service_kit import auth, build, in_process

ROOT = Path(__file__).resolve().parents[1]
HIDDEN_FROM_SUPPORT = ["create_invoice", "update_invoice_status", "remind", "void_invoice", "record_payment"]


def _as_unknown(text: str, action: str) -> str:
    return text.replace(f'"{action}"', '"ACTION"')


@pytest.mark.parametrize("action", HIDDEN_FROM_SUPPORT)
async def test_a_hidden_action_reads_as_an_unknown_one(tmp_path, action):
    tester = in_process(build(tmp_path))
    hidden = await tester.call("billing", action, {"id": "inv_0001"}, headers=auth("demo-support"))
    unknown = await tester.call("billing", "no_such_action", {"id": "inv_0001"}, headers=auth("demo-support"))
    assert hidden.error_code == unknown.error_code == "UNKNOWN_ACTION"
    assert _as_unknown(hidden.text, action) == _as_unknown(unknown.text, "no_such_action")
    assert "billing_write" not in hidden.text and "billing_void_invoice" not in hidden.text
    # The admin, who has the scopes, reaches it (the hidden answer is about the caller, not the action).
    admin = await tester.call("billing", action, {"id": "nope"}, headers=auth("demo-admin"))
    assert admin.error_code != "UNKNOWN_ACTION", admin.text


def test_mcpfusion_call_answers_a_hidden_action_as_an_unknown_one(tmp_path):
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'cli.sqlite3'}", "PYTHONUNBUFFERED": "1"}
    outputs = {}
    for action in ("void_invoice", "no_such_action"):
        run = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "call", "app.main:app", "billing", action,
                              "--json", "{}", "--token", "demo-support"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 2, run.stdout + run.stderr
        outputs[action] = _as_unknown(run.stdout, action)
    assert outputs["void_invoice"] == outputs["no_such_action"]
    assert 'code="UNKNOWN_ACTION"' in outputs["void_invoice"]
