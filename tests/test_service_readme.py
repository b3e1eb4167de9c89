"""The README stays true: its first example runs, and the files, tokens and commands it names exist."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from app.auth import DEMO_TOKENS
from mcpfusion.cli import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


async def test_first_example_runs():
    code = re.search(r"## A first example\n\n```python\n(.*?)```", README, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    app = namespace["app"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        r = await client.post("/api/billing/get_invoice", json={"id": "inv_1"})
    assert r.json() == {"id": "inv_1", "customer_email": "[REDACTED]", "amount_cents": 1250, "status": "overdue"}


def test_named_things_exist():
    for path in re.findall(r"\*\*`([\w/.]+)`\*\*", README):
        assert (ROOT / path).exists(), path
    tokens = re.findall(r"^\| `(demo-[\w-]+)` \|", README, re.M)
    assert sorted(tokens) == sorted(DEMO_TOKENS)
    for command in re.findall(r"^mcpfusion (\w+)", README, re.M):
        assert command in COMMANDS
    assert "make run" in README and "make test" in README
    makefile = (ROOT / "Makefile").read_text()
    assert "mcpfusion.cli serve app.main:app" in makefile
