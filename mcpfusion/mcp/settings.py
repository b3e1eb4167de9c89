"""Transport settings of the `/mcp` endpoint (one small class with a dataclass's behaviour, passed to `MCPFusion`)."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcpfusion.body import DEFAULT_MAX_BODY_BYTES
from mcpfusion.slots import FACTORY, Fields

from .sessions import SessionLimits

if TYPE_CHECKING:
    from .broker import Broker
    from .events import EventStore
    from .sessions import SessionStore

DEFAULT_MAX_LISTEN_URIS = 1000
"""The default `max_listen_uris`: ten times the URIs a listen honours by default (`max_subscriptions`), room for
some the caller may not read; a list this long is checked in a few tens of milliseconds."""

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1", "testserver")


def _env_list(name: str) -> list[str] | None:
    items = [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]
    return items or None


class TransportSettings(Fields):
    """How `/mcp` behaves. Defaults are safe for a server bound to localhost.

    - `allowed_hosts` / `allowed_origins`: DNS-rebinding protection. `None` means "localhost only"
      (Host must be a loopback name; an Origin, when sent, must be a loopback origin). `["*"]` disables
      the check (put a proxy that validates Host in front). Defaults: `MCPFUSION_ALLOWED_HOSTS` /
      `MCPFUSION_ALLOWED_ORIGINS` (comma-separated), else None.
    - `json_response`: answer POSTs with one JSON body instead of an SSE stream (SSE is still used when the
      client only accepts SSE, and always for `subscriptions/listen`).
    - `sse_hold_seconds`: an SSE reply to a POST waits up to this long for the call: one that finishes
      without sending anything first gets its priming event and result as one body; one still running then,
      or one that sends progress, logging or a request, streams live (the client has the priming event id
      to resume with).
    - `signing_key`: HMAC key of the 2026-07-28 `requestState`; replicas must share it (random per process
      when unset, or `MCPFUSION_SIGNING_KEY`).
    - `reply_store_timeout`: how long the reply that ends an SSE stream waits for an unreachable event store
      (Redis restarting) before it is sent unstored; the stream always ends with the result.
    - `max_sessions` / `max_sessions_per_principal` / `max_sessions_per_tenant`: live 2025-era sessions in
      all (503 beyond), per verified caller and per tenant (429 beyond); `max_subscriptions` and
      `max_uri_length` bound `resources/subscribe` per session.
    - `max_inflight_per_session`: requests of one 2025-era session running at once on a replica (429 beyond):
      a call waiting for the answer of a client that hung up waits `client_request_timeout`, holding its
      memory, and a client opening such calls without end would pile them up.
    - `max_listen_uris`: the most resource URIs one 2026-07-28 `subscriptions/listen` may name
      (`notifications.resourceSubscriptions`, duplicates counted; default 1000). Each is read as the caller
      before it is honoured, so a longer list is refused whole with -32602 naming this limit rather than
      checked URI by URI; of the URIs the caller may read, at most `max_subscriptions` are honoured.
    - `redis_url`: keep sessions, resumable streams and cross-replica messages in Redis (`mcpfusion.redis`)
      so that any replica serves any request (default `MCPFUSION_REDIS_URL`; unset = in-memory). Explicit
      `session_store` / `event_store` / `broker` still win.
    """

    __match_args__ = _fields = (
        "path", "allowed_hosts", "allowed_origins", "max_body_bytes", "json_response", "session_idle_timeout",
        "max_sessions", "max_sessions_per_principal", "max_sessions_per_tenant", "max_subscriptions",
        "max_uri_length", "sse_retry_ms", "sse_ping_seconds", "sse_hold_seconds", "event_store", "session_store",
        "broker", "signing_key", "request_state_ttl", "client_request_timeout", "reply_store_timeout", "principal",
        "cache_ttl_ms", "cache_scope", "redis_url", "max_inflight_per_session", "max_listen_uris")

    path: str
    allowed_hosts: list[str] | None
    allowed_origins: list[str] | None
    max_body_bytes: int
    json_response: bool
    session_idle_timeout: float
    max_sessions: int
    max_sessions_per_principal: int
    max_sessions_per_tenant: int
    max_subscriptions: int
    max_uri_length: int
    sse_retry_ms: int | None
    sse_ping_seconds: float
    sse_hold_seconds: float
    event_store: EventStore | None
    session_store: SessionStore | None
    broker: Broker | None
    signing_key: bytes | str | None
    request_state_ttl: float
    client_request_timeout: float
    reply_store_timeout: float
    principal: Callable[..., Any] | None
    cache_ttl_ms: int
    cache_scope: str
    redis_url: str | None
    max_inflight_per_session: int
    max_listen_uris: int

    def __init__(  # every setting a parameter with its default, as the dataclass's
        self, path: str = "/mcp", allowed_hosts: list[str] | None = FACTORY,
        allowed_origins: list[str] | None = FACTORY, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        json_response: bool = False, session_idle_timeout: float = 30 * 60.0, max_sessions: int = 10_000,
        max_sessions_per_principal: int = 100, max_sessions_per_tenant: int = 1_000, max_subscriptions: int = 100,
        max_uri_length: int = 2048, sse_retry_ms: int | None = 1000, sse_ping_seconds: float = 15.0,
        sse_hold_seconds: float = 0.5, event_store: EventStore | None = None,
        session_store: SessionStore | None = None, broker: Broker | None = None,
        signing_key: bytes | str | None = FACTORY, request_state_ttl: float = 600.0,
        client_request_timeout: float = 300.0, reply_store_timeout: float = 10.0,
        principal: Callable[..., Any] | None = None, cache_ttl_ms: int = 0, cache_scope: str = "private",
        redis_url: str | None = FACTORY, max_inflight_per_session: int = 100,
        max_listen_uris: int = DEFAULT_MAX_LISTEN_URIS,
    ) -> None:
        # The environment's defaults are read when the settings are made, as the dataclass's factories did.
        self.path = path
        self.allowed_hosts = _env_list("MCPFUSION_ALLOWED_HOSTS") if allowed_hosts is FACTORY else allowed_hosts
        self.allowed_origins = (_env_list("MCPFUSION_ALLOWED_ORIGINS") if allowed_origins is FACTORY
                                else allowed_origins)
        self.max_body_bytes = _checked_count("max_body_bytes", max_body_bytes)
        self.json_response = json_response
        self.session_idle_timeout = _checked_seconds("session_idle_timeout", session_idle_timeout)
        self.max_sessions = _checked_count("max_sessions", max_sessions)
        self.max_sessions_per_principal = _checked_count("max_sessions_per_principal", max_sessions_per_principal)
        self.max_sessions_per_tenant = _checked_count("max_sessions_per_tenant", max_sessions_per_tenant)
        self.max_subscriptions = _checked_count("max_subscriptions", max_subscriptions)
        self.max_uri_length = _checked_count("max_uri_length", max_uri_length)
        self.sse_retry_ms = None if sse_retry_ms is None else _checked_count("sse_retry_ms", sse_retry_ms, zero=True)
        self.sse_ping_seconds = _checked_seconds("sse_ping_seconds", sse_ping_seconds)
        self.sse_hold_seconds = _checked_seconds("sse_hold_seconds", sse_hold_seconds, zero=True)
        self.event_store = event_store
        self.session_store = session_store
        self.broker = broker
        self.signing_key = _env_signing_key() if signing_key is FACTORY else _checked_key(signing_key)
        self.request_state_ttl = _checked_seconds("request_state_ttl", request_state_ttl)
        self.client_request_timeout = _checked_seconds("client_request_timeout", client_request_timeout)
        self.reply_store_timeout = _checked_seconds("reply_store_timeout", reply_store_timeout)
        self.principal = principal
        self.cache_ttl_ms = _checked_count("cache_ttl_ms", cache_ttl_ms, zero=True)
        self.cache_scope = cache_scope
        self.redis_url = (os.environ.get("MCPFUSION_REDIS_URL") or None) if redis_url is FACTORY else redis_url
        self.max_inflight_per_session = _checked_count("max_inflight_per_session", max_inflight_per_session)
        self.max_listen_uris = _checked_count("max_listen_uris", max_listen_uris)

    def session_limits(self) -> SessionLimits:
        return SessionLimits(self.max_sessions, self.max_sessions_per_principal, self.max_sessions_per_tenant)


def _checked_count(name: str, value: int, *, zero: bool = False) -> int:
    """`value`, a whole number above 0 (a limit of 0 would refuse every request; `zero`: 0 and up), or
    ValueError naming the setting."""
    if value.__class__ is not int or value < (0 if zero else 1):
        raise ValueError(f"{name} must be a whole number {'of 0 or more' if zero else 'above 0'}, not {value!r}")
    return value


def _checked_seconds(name: str, value: float, *, zero: bool = False) -> float:
    """`value`, a finite number of seconds above 0 (`zero`: 0 and up), or ValueError naming the setting: a
    negative or NaN duration would expire everything at once, an infinite one never."""
    if value.__class__ not in (int, float) or not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        wanted = "0 or more" if zero else "above 0"
        raise ValueError(f"{name} must be a finite number of seconds {wanted}, not {value!r}")
    return value


def _checked_key(key: bytes | str | None) -> bytes | str | None:
    """A signing key given in code: None (a random key per process) or some bytes, never an empty one (an
    empty HMAC key is public: anyone could sign cursors, confirmations and requestState)."""
    if key is not None and not (key.strip() if isinstance(key, str) else key):
        raise ValueError("signing_key is empty: pass None for a random key per process, or a secret shared by "
                         "the replicas")
    return key


def _env_signing_key() -> str | None:
    """`MCPFUSION_SIGNING_KEY`; set but empty (a compose file's unset `${VAR}`) is unset, and said so."""
    key = os.environ.get("MCPFUSION_SIGNING_KEY")
    if key is not None and not key.strip():
        import logging

        logging.getLogger("mcpfusion").warning(
            "MCPFUSION_SIGNING_KEY is set but empty: ignored, this process signs with a random key of its own")
        return None
    return key
