"""`MCPFUSION_REDIS_URL` switches the transport to the Redis stores; unset, the in-memory ones stay."""

from __future__ import annotations

import inspect

import pytest

from mcpfusion import Tool
from mcpfusion.app import MCPFusion
from mcpfusion.mcp.broker import InMemoryBroker
from mcpfusion.mcp.events import InMemoryEventStore
from mcpfusion.mcp.sessions import InMemorySessionStore
from mcpfusion.mcp.settings import TransportSettings
from mcpfusion.redis import RedisBroker, RedisEventStore, RedisSessionStore


def fusion(**kwargs) -> MCPFusion:
    return MCPFusion("settings-test", tools=[Tool("noop", description="nothing")], **kwargs)


def test_in_memory_is_the_default(monkeypatch):
    monkeypatch.delenv("MCPFUSION_REDIS_URL", raising=False)
    transport = fusion().transport
    assert TransportSettings().redis_url is None
    assert isinstance(transport.sessions, InMemorySessionStore)
    assert isinstance(transport.events, InMemoryEventStore)
    assert isinstance(transport.broker, InMemoryBroker)


def test_environment_switches_every_store_to_redis(monkeypatch):
    monkeypatch.setenv("MCPFUSION_REDIS_URL", "redis://127.0.0.1:1/3")
    monkeypatch.setenv("MCPFUSION_SIGNING_KEY", "shared")
    transport = fusion(session_idle_timeout=120, max_sessions=7).transport
    assert isinstance(transport.sessions, RedisSessionStore)
    assert isinstance(transport.events, RedisEventStore)
    assert isinstance(transport.broker, RedisBroker)
    assert (transport.sessions.idle_timeout, transport.sessions.max_sessions) == (120, 7)
    assert transport.sessions.client is transport.events.client is transport.broker.client  # one pool
    assert transport.sessions.client.connection_pool.connection_kwargs["db"] == 3


def test_explicit_stores_win_over_the_url(monkeypatch):
    monkeypatch.delenv("MCPFUSION_REDIS_URL", raising=False)
    memory = InMemoryBroker()
    transport = fusion(redis_url="redis://127.0.0.1:1/0", broker=memory).transport
    assert transport.broker is memory and isinstance(transport.sessions, RedisSessionStore)


def test_empty_variable_means_in_memory(monkeypatch):
    monkeypatch.setenv("MCPFUSION_REDIS_URL", "")
    assert isinstance(fusion().transport.sessions, InMemorySessionStore)


def test_transport_settings_keep_the_dataclass_behaviour(monkeypatch):
    # A plain class (slots.Fields) standing for the dataclass it was: every setting a parameter, positional or
    # keyword, the environment's defaults read when the settings are made; equality, repr, no hash.
    monkeypatch.setenv("MCPFUSION_ALLOWED_HOSTS", "a.example, b.example")
    monkeypatch.setenv("MCPFUSION_SIGNING_KEY", "k")
    settings = TransportSettings()
    assert settings.allowed_hosts == ["a.example", "b.example"] and settings.signing_key == "k"
    assert TransportSettings("/x", None).allowed_hosts is None and TransportSettings("/x").path == "/x"
    assert settings == TransportSettings() != TransportSettings(json_response=True)
    with pytest.raises(TypeError):
        hash(settings)
    names = list(inspect.signature(TransportSettings).parameters)
    assert names == list(TransportSettings.__match_args__) and len(names) == 27
    assert repr(settings) == "TransportSettings(" + ", ".join(
        f"{name}={getattr(settings, name)!r}" for name in names) + ")"
    assert str(inspect.signature(TransportSettings).parameters["redis_url"]) == "redis_url: 'str | None' = <factory>"
