"""Handshake-era sessions (2025-06-18 / 2025-11-25) behind a small async store interface.

The in-memory store is the default; `mcpfusion.redis.RedisSessionStore` implements the same `SessionStore`
protocol so that any replica can serve any session.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass
class Session:
    """What the server remembers about one initialized client."""

    id: str
    protocol_version: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None
    principal: str | None = None
    subscriptions: list[str] = field(default_factory=list)
    initialized: bool = False
    created_at: float = field(default_factory=time.time)
    last_seen: float = field(default_factory=time.monotonic)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        return cls(**data)


def new_session_id() -> str:
    """128 bits from the OS CSPRNG, visible ASCII only (the spec's requirement on the header value)."""
    return secrets.token_urlsafe(24)


class SessionLimitError(Exception):
    """The store holds `max_sessions` live sessions already."""


class SessionStore(Protocol):
    """Async storage of sessions. `get` returns None for unknown, deleted or idle-expired ids."""

    async def create(self, session: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(self, session: Session) -> None: ...

    async def delete(self, session_id: str) -> bool: ...


class InMemorySessionStore:
    """Process-local sessions with an idle timeout and a cap; expiry is checked lazily on access."""

    def __init__(self, idle_timeout: float = 1800.0, max_sessions: int = 10_000) -> None:
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._sessions: dict[str, Session] = {}

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle_timeout

    def _sweep(self) -> None:
        now = time.monotonic()
        for sid in [sid for sid, s in self._sessions.items() if self._expired(s, now)]:
            del self._sessions[sid]

    async def create(self, session: Session) -> None:
        if len(self._sessions) >= self.max_sessions:
            self._sweep()
            if len(self._sessions) >= self.max_sessions:
                raise SessionLimitError(f"too many sessions (max {self.max_sessions})")
        self._sessions[session.id] = session

    async def get(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if self._expired(session, now):
            del self._sessions[session_id]
            return None
        session.last_seen = now
        return session

    async def save(self, session: Session) -> None:
        if session.id in self._sessions:
            self._sessions[session.id] = session

    async def delete(self, session_id: str) -> bool:
        return self._sessions.pop(session_id, None) is not None

    def __len__(self) -> int:
        return len(self._sessions)
