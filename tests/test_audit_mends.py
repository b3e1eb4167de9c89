"""The audit trail, mended: a caller without a subject is a keyed digest (never a brute-forceable hash of its
credentials), raw tools are audited and rate-limited, events reach stderr under `stdio` and `serve
--log-level warning`, refused writes are audited, the request id cannot break a line, and an output-schema
mismatch logs no key the data chose."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from mcpfusion import Audit, MCPFusion, RateLimit, Tool
from mcpfusion.auth import RequireBearer
from mcpfusion.testing import ToolTester
from tests.governance_kit import MODERN_META, authenticate

ROOT = Path(__file__).resolve().parent.parent


def vault_app(events: list[dict[str, Any]] | None, *, rate: int = 1000, signing_key: str | None = None,
              scoped: bool = False) -> FastAPI:
    """A tool with a read and a write, a destructive and a read-only raw tool, under Audit + RateLimit."""
    vault = Tool("vault", exposition="flat")

    @vault.action(readonly=True)
    async def look(key: str) -> str:
        """A read."""
        return "looked"

    @vault.action(destructive=True, scopes=["vault:write"] if scoped else ())
    async def store(key: str, value: str) -> str:
        """A write."""
        return "stored"

    audit = Audit() if events is None else Audit(sink=events.append)  # None: the default sink, JSON log lines
    fusion = MCPFusion("vault", tools=[vault], middleware=[audit, RateLimit(rate, per=60)], signing_key=signing_key)

    @fusion.raw_tool("erase", annotations={"destructiveHint": True},
                     input_schema={"type": "object", "properties": {"confirm": {"type": "string"}}})
    async def erase(confirm: str = "") -> str:
        return "erased"

    @fusion.raw_tool("peek", annotations={"readOnlyHint": True})
    async def peek() -> str:
        return "peeked"

    return fusion.build_app()


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def mcp(c: httpx.AsyncClient, name: str, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    """One sessionless (2026-07-28) tools/call: its JSON-RPC reply."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": MODERN_META}}
    h = {"accept": "application/json", "content-type": "application/json", "mcp-protocol-version": "2026-07-28",
         "mcp-method": "tools/call", "mcp-name": name, **headers}
    return (await c.post("/mcp", json=body, headers=h)).json()


# -- 1. the principal of a caller without a subject ----------------------------------------------------------

async def test_a_caller_without_subject_is_audited_as_a_keyed_digest_stable_across_replicas():
    basic = "Basic " + base64.b64encode(b"alice:Summer2024!").decode()
    principals: dict[str, list[str]] = {}
    for replica, key in (("a", "shared-key"), ("b", "shared-key"), ("c", "other-key")):
        events: list[dict[str, Any]] = []
        async with client(vault_app(events, signing_key=key)) as c:
            await c.post("/api/vault/store", json={"key": "k", "value": "v"}, headers={"authorization": basic})
            respelled = "basic  " + basic.split()[1]  # the same credentials, the scheme spelled otherwise
            await mcp(c, "vault_store", {"key": "k", "value": "v"}, {"authorization": respelled})
        principals[replica] = [e["principal"] for e in events]
    unkeyed = "token:" + hashlib.sha256(("basic " + basic.split()[1]).encode()).hexdigest()[:32]
    assert unkeyed not in {p for found in principals.values() for p in found}  # no dictionary attack on the log
    assert principals["a"][0].startswith("token:") and len(set(principals["a"])) == 1  # same caller, same id
    assert principals["a"] == principals["b"]  # replicas sharing MCPFUSION_SIGNING_KEY agree
    assert principals["c"][0] != principals["a"][0]


async def test_rate_limits_stay_per_caller_with_the_keyed_digest():
    events: list[dict[str, Any]] = []
    async with client(vault_app(events, rate=1)) as c:
        codes = []
        for token in ("one", "one", "two"):
            r = await c.post("/api/vault/store", json={"key": "k", "value": "v"},
                             headers={"authorization": f"Bearer {token}"})
            codes.append(r.status_code)
    assert codes == [200, 429, 200]
    assert events[0]["principal"] == events[1]["principal"] != events[2]["principal"]


# -- 2. raw tools go through the app's middleware ------------------------------------------------------------

async def test_raw_tools_are_audited_and_rate_limited_like_actions():
    events: list[dict[str, Any]] = []
    headers = {"authorization": "Bearer alice"}
    async with client(vault_app(events, rate=2)) as c:
        first = await mcp(c, "erase", {"confirm": "yes"}, headers)
        invalid = await mcp(c, "erase", {"confirm": 5}, headers)
        limited = await mcp(c, "erase", {"confirm": "yes"}, headers)
    assert first["result"]["content"] == [{"type": "text", "text": "erased"}] and not first["result"]["isError"]
    assert invalid["result"]["isError"] and "confirm" in invalid["result"]["content"][0]["text"]
    assert limited["result"]["isError"] and 'code="RATE_LIMITED"' in limited["result"]["content"][0]["text"]
    assert [(e["action"], e["transport"], e["outcome"], e["error_code"]) for e in events] == [
        ("erase", "mcp", "ok", None), ("erase", "mcp", "error", "VALIDATION_ERROR"),
        ("erase", "mcp", "error", "RATE_LIMITED")]
    assert events[0]["arguments"]["fields"] == ["confirm"] and "yes" not in json.dumps(events)


async def test_a_read_only_raw_tool_is_not_audited_by_an_audit_of_mutations():
    events: list[dict[str, Any]] = []
    async with client(vault_app(events)) as c:
        reply = await mcp(c, "peek", {}, {"authorization": "Bearer alice"})
    assert reply["result"]["content"][0]["text"] == "peeked" and events == []


# -- 3. audit events reach stderr under stdio and serve --log-level warning ---------------------------------

APP_MODULE = """
from mcpfusion import Audit, MCPFusion, Tool

vault = Tool("vault")


@vault.action(destructive=True)
async def store(key: str) -> str:
    \"\"\"A write.\"\"\"
    return "stored"


app = MCPFusion("vault", tools=[vault], middleware=[Audit()]).build_app()
"""


def audit_lines(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith('{"event":"audit"')]


def test_stdio_writes_the_audit_trail_to_stderr(tmp_path):
    (tmp_path / "vault_app.py").write_text(textwrap.dedent(APP_MODULE))
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "vault", "arguments": {"action": "store", "key": "k"}, "_meta": MODERN_META}}
    done = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "stdio", "vault_app:app", "--token", "t"],
                          cwd=tmp_path, input=json.dumps(call) + "\n", capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["result"]["isError"] is False
    events = audit_lines(done.stderr)
    assert [(e["action"], e["transport"], e["outcome"]) for e in events] == [("vault.store", "stdio", "ok")]


def free_port() -> int:
    """A free port (the system's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_at_warning_level_keeps_the_audit_trail(tmp_path):
    (tmp_path / "vault_app.py").write_text(textwrap.dedent(APP_MODULE))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mcpfusion.cli", "serve", "vault_app:app", "--port", str(port),
                             "--log-level", "warning"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        status = None
        while proc.poll() is None and status != 200:
            with contextlib.suppress(httpx.TransportError):
                status = httpx.post(f"http://127.0.0.1:{port}/api/vault/store", json={"key": "k"},
                                    timeout=2).status_code
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.2)
        assert status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert [(e["action"], e["outcome"]) for e in audit_lines(err)] == [("vault.store", "ok")], err
    assert "INFO" not in err  # the level still quietens everything else (uvicorn's access log)


# -- 4. refused writes are audited -----------------------------------------------------------------------------

def scoped_app(events: list[dict[str, Any]], rate: int = 1000) -> FastAPI:
    app = vault_app(events, rate=rate, scoped=True)
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


async def test_a_write_refused_for_lack_of_scope_is_audited_on_rest_and_mcp():
    events: list[dict[str, Any]] = []
    headers = {"authorization": "Bearer bob"}  # granted no scope: `store` is hidden from bob
    async with client(scoped_app(events)) as c:
        r = await c.post("/api/vault/store", json={"key": "k", "value": "v"}, headers=headers)
        reply = await mcp(c, "vault_store", {"key": "k", "value": "v"}, headers)
        read = await c.post("/api/vault/look", json={"key": "k"}, headers=headers)
    assert r.status_code == 403 and reply["error"]["code"] == -32602 and read.status_code == 200
    assert [(e["principal"], e["tenant"], e["action"], e["transport"], e["outcome"], e["error_code"])
            for e in events] == [("bob", "acme", "vault.store", "rest", "error", "FORBIDDEN"),
                                 ("bob", "acme", "vault.store", "mcp", "error", "FORBIDDEN")]
    assert events[0]["arguments"]["fields"] == ["key", "value"]


async def test_a_refused_write_of_a_grouped_tool_is_audited():
    events: list[dict[str, Any]] = []
    vault = Tool("vault")

    @vault.action(destructive=True, scopes=["vault:write"])
    async def store(key: str) -> str:
        """A write."""
        return "stored"

    app = MCPFusion("vault", tools=[vault], middleware=[Audit(sink=events.append)]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    async with client(app) as c:
        reply = await mcp(c, "vault", {"action": "store", "key": "k"}, {"authorization": "Bearer bob"})
        unknown = await mcp(c, "vault", {"action": "nothing", "key": "k"}, {"authorization": "Bearer bob"})
    assert "error" in reply and "error" in unknown
    assert [(e["action"], e["error_code"], e["arguments"]["fields"]) for e in events] == [
        ("vault.store", "FORBIDDEN", ["key"])]  # an action that does not exist is nobody's write


async def test_an_invalid_write_refused_by_the_rate_limit_is_audited():
    events: list[dict[str, Any]] = []
    headers = {"authorization": "Bearer alice"}
    async with client(vault_app(events, rate=1)) as c:
        ok = await c.post("/api/vault/store", json={"key": "k", "value": "v"}, headers=headers)
        invalid = await c.post("/api/vault/store", json={"key": 5}, headers=headers)
    assert (ok.status_code, invalid.status_code) == (200, 429)
    assert [(e["outcome"], e["error_code"]) for e in events] == [("ok", None), ("error", "RATE_LIMITED")]


# -- 5. the request id -----------------------------------------------------------------------------------------

async def test_the_request_id_cannot_split_or_bloat_the_audit_line(caplog):
    caplog.set_level(logging.INFO, logger="mcpfusion.audit")
    sent = ["req-42", "req-1\x85INFO forged: admin deleted everything", "R" * 60_000, "two words"]
    async with client(vault_app(None)) as c:
        for request_id in sent:
            await c.post("/api/vault/store", json={"key": "k", "value": "v\u2028é"},
                         headers={"x-request-id": request_id.encode("latin-1")})
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpfusion.audit"]
    assert len(lines) == 4 and all(len(line.splitlines()) == 1 and line.isascii() for line in lines)
    ids = [json.loads(line)["request_id"] for line in lines]
    assert ids[0] == "req-42"  # a well-formed one is kept: it correlates with the caller's logs
    assert all(len(i) == 32 and i.isalnum() for i in ids[1:])  # the others are replaced by a fresh id


# -- 6. an output-schema mismatch logs no key the data chose --------------------------------------------------

async def test_an_output_schema_mismatch_logs_the_path_with_data_keys_masked(caplog):
    stats = Tool("stats")

    @stats.action(readonly=True, output_schema={"type": "object", "properties": {
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}}}})
    async def tally(label: str) -> dict[str, Any]:
        """Counts by label; one count is not a number."""
        return {"counts": {label: "many"}}

    evil = "jane.doe@example.com\n\x1b[2J\x1b[31mCRITICAL root: disk wiped\x1b[0m"
    result = await ToolTester(MCPFusion("stats", tools=[stats]).registry).call("stats", "tally", {"label": evil})
    assert result.error_code == "INVALID_OUTPUT"
    logged = [r.getMessage() for r in caplog.records if "output schema" in r.getMessage()]
    assert logged == ["stats/tally: structured result does not match its output schema at $.counts[*] (type)"]
