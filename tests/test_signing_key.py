"""An empty signing key is never used: it would be a public HMAC key (anyone could sign confirmation tokens,
cursors and requestState)."""

from __future__ import annotations

import logging

import pytest

from mcpfusion import MCPFusion
from mcpfusion.mcp.settings import TransportSettings


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_signing_key_in_the_environment_is_unset_and_said(monkeypatch, caplog, value):
    monkeypatch.setenv("MCPFUSION_SIGNING_KEY", value)
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        settings = TransportSettings()
    assert settings.signing_key is None  # a random key per process, as when unset
    assert "MCPFUSION_SIGNING_KEY is set but empty" in caplog.text
    fusion = MCPFusion("p")
    assert fusion.registry.guards.signing_key not in (b"", b"   ")


def test_a_set_signing_key_is_used(monkeypatch):
    monkeypatch.setenv("MCPFUSION_SIGNING_KEY", "shared-secret")
    assert TransportSettings().signing_key == "shared-secret"


@pytest.mark.parametrize("value", ["", b"", "  "])
def test_an_empty_signing_key_in_code_is_refused(value):
    with pytest.raises(ValueError, match="signing_key is empty"):
        TransportSettings(signing_key=value)
