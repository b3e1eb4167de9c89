"""A server without a signing key says so once at start-up (/tmp/probe2 item 12): its key is made for the
process, so a restart refuses every cursor and confirmation token issued before it, which nothing said. The
warning goes to the library's logger ("mcpfusion"), once per start, and not at all with a key."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Page, Tool

shop = Tool("shop", description="Shop")


@shop.action(readonly=True)
async def echo(text: str) -> str:
    """Echo."""
    return text


@shop.action(readonly=True, paginate=10)
async def items(page: Page) -> list[dict]:
    """Items, a page at a time (its cursors are signed)."""
    return [{"n": n} for n in range(25)]


plain = Tool("plain", description="Nothing signed")


@plain.action(readonly=True)
async def ping() -> str:
    """Ping."""
    return "pong"


@pytest.mark.parametrize("signed", ["paginate", "confirm"])
def test_only_a_server_that_signs_cursors_or_confirmations_warns(monkeypatch, caplog, signed):
    monkeypatch.delenv("MCPFUSION_SIGNING_KEY", raising=False)
    risky = Tool("risky", description="Signs")

    if signed == "confirm":
        @risky.action(confirm=True)
        async def wipe() -> str:
            """Wipe."""
            return "done"
    else:
        @risky.action(readonly=True, paginate=5)
        async def rows(page: Page) -> list[dict]:
            """Rows."""
            return []

    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        with TestClient(MCPFusion("plain", tools=[plain]).build_app()):
            pass
        assert _warnings(caplog) == []  # (nothing it issues outlives a restart: a key of the process is fine)
        with TestClient(MCPFusion("risky", tools=[risky]).build_app()):
            pass
    assert len(_warnings(caplog)) == 1


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "MCPFUSION_SIGNING_KEY is not set" in r.getMessage()]


def test_a_server_without_a_signing_key_warns_once_at_start_up(monkeypatch, caplog):
    monkeypatch.delenv("MCPFUSION_SIGNING_KEY", raising=False)
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        app = MCPFusion("shop", tools=[shop]).build_app()
        assert _warnings(caplog) == []  # (building is not serving: said when the server starts)
        with TestClient(app) as client:
            assert client.get("/api/shop/echo?text=a").status_code == 200
            assert client.get("/api/shop/echo?text=b").status_code == 200
    (warning,) = _warnings(caplog)
    assert warning.name == "mcpfusion" and warning.levelno == logging.WARNING
    said = warning.getMessage()
    assert "server 'shop'" in said and "restart" in said and "cursor" in said and "_confirm" in said


@pytest.mark.parametrize("where", ["argument", "environment"])
def test_a_server_with_a_signing_key_says_nothing(monkeypatch, caplog, where):
    options = {}
    if where == "environment":
        monkeypatch.setenv("MCPFUSION_SIGNING_KEY", "shared-secret")
    else:
        monkeypatch.delenv("MCPFUSION_SIGNING_KEY", raising=False)
        options["signing_key"] = "shared-secret"
    with caplog.at_level(logging.WARNING, logger="mcpfusion"), TestClient(MCPFusion("shop", tools=[shop],
                                                                                    **options).build_app()):
        pass
    assert _warnings(caplog) == []
