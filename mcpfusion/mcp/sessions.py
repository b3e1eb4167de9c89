"""Handshake-era sessions (2025-06-18 / 2025-11-25) behind a small async store interface.

The in-memory store is the default; `mcpfusion.redis.RedisSessionStore` implements the same `SessionStore`
protocol so that any replica can serve any session.
"""

from __future__ import annotations

import secrets
import time
from copy import deepcopy
from typing import Any, Protocol

from pydantic_core import to_json

from mcpfusion.slots import FACTORY, Fields, Frozen

MAX_CLIENT_FIELD_BYTES = 64 * 1024
"""Largest `capabilities` / `clientInfo` (as JSON) a session keeps: both live as long as the session, in
every store, and real ones are a few hundred bytes."""


class Session(Fields):
    """What the server remembers about one initialized client. A plain class with a dataclass's behaviour
    (`slots.Fields`: equality, repr, no hash); the decorator would compile its methods at import."""

    __match_args__ = _fields = ("id", "protocol_version", "client_info", "client_capabilities", "log_level",
                                "principal", "tenant", "subscriptions", "initialized", "created_at", "last_seen")

    def __init__(self, id: str, protocol_version: str, client_info: dict[str, Any] = FACTORY,  # noqa: A002
                 client_capabilities: dict[str, Any] = FACTORY, log_level: str | None = None,
                 principal: str | None = None, tenant: str | None = None, subscriptions: list[str] = FACTORY,
                 initialized: bool = False, created_at: float = FACTORY, last_seen: float = FACTORY) -> None:
        self.id = id
        self.protocol_version = protocol_version
        self.client_info: dict[str, Any] = {} if client_info is FACTORY else client_info
        self.client_capabilities: dict[str, Any] = {} if client_capabilities is FACTORY else client_capabilities
        self.log_level = log_level
        self.principal = principal  # digest of the verified identity the session is bound to
        self.tenant = tenant
        self.subscriptions: list[str] = [] if subscriptions is FACTORY else subscriptions
        self.initialized = initialized
        self.created_at: float = time.time() if created_at is FACTORY else created_at
        self.last_seen: float = time.monotonic() if last_seen is FACTORY else last_seen

    def to_dict(self) -> dict[str, Any]:
        """The fields by name, values copied deeply (as `dataclasses.asdict`)."""
        return deepcopy(dict(zip(self._fields, self._values(), strict=True)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Session:
        return cls(**data)


def oversized_client_field(capabilities: Any, client_info: Any) -> str | None:
    """The name of the initialize param (`capabilities` or `clientInfo`) longer than
    `MAX_CLIENT_FIELD_BYTES` as JSON, or None when both fit."""
    for name, value in (("capabilities", capabilities), ("clientInfo", client_info)):
        if isinstance(value, dict) and len(to_json(value)) > MAX_CLIENT_FIELD_BYTES:
            return name
    return None


def new_session_id() -> str:
    """128 bits from the OS CSPRNG, visible ASCII only (the spec's requirement on the header value)."""
    return secrets.token_urlsafe(24)


class SessionLimitError(Exception):
    """The store holds `max_sessions` live sessions already."""


class SessionQuotaError(SessionLimitError):
    """The caller's principal or tenant holds its quota of live sessions already (answered 429)."""


class SessionLimits(Frozen):
    """Caps on live sessions: in all, per principal and per tenant (sessions without one are not counted).
    A plain class with a frozen dataclass's behaviour (`slots.Frozen`)."""

    __match_args__ = _fields = ("total", "per_principal", "per_tenant")
    total: int
    per_principal: int
    per_tenant: int

    def __init__(self, total: int = 10_000, per_principal: int = 100, per_tenant: int = 1_000) -> None:
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "per_principal", per_principal)
        object.__setattr__(self, "per_tenant", per_tenant)

    def refuse(self, total: int, principal: int, tenant: int) -> SessionLimitError | None:
        """The error for a new session given the live counts (None when it may be created)."""
        if total >= self.total:
            return SessionLimitError(f"too many sessions (max {self.total})")
        if principal >= self.per_principal:
            return SessionQuotaError(f"too many sessions for this principal (max {self.per_principal}); "
                                     "close unused ones with DELETE")
        if tenant >= self.per_tenant:
            return SessionQuotaError(f"too many sessions for this tenant (max {self.per_tenant})")
        return None


class SessionStore(Protocol):
    """Async storage of sessions. `get` returns None for unknown, deleted or idle-expired ids."""

    async def create(self, session: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(self, session: Session) -> None: ...

    async def delete(self, session_id: str) -> bool: ...


class InMemorySessionStore:
    """Process-local sessions with an idle timeout and caps; expiry is checked lazily on access."""

    def __init__(self, idle_timeout: float = 1800.0, max_sessions: int = 10_000,
                 limits: SessionLimits | None = None) -> None:
        self.idle_timeout = idle_timeout
        self.limits = limits or SessionLimits(total=max_sessions)
        self.max_sessions = self.limits.total
        self._sessions: dict[str, Session] = {}
        # live session ids per principal / tenant, for the quotas
        self._owned: dict[tuple[str, str], set[str]] = {}

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle_timeout

    def _sweep(self) -> None:
        now = time.monotonic()
        for sid in [sid for sid, s in self._sessions.items() if self._expired(s, now)]:
            self._drop(sid)

    def _owners(self, session: Session) -> list[tuple[str, str]]:
        return [(kind, value) for kind, value in (("p", session.principal), ("t", session.tenant)) if value]

    def _count(self, session: Session) -> tuple[int, int, int]:
        return (len(self._sessions), len(self._owned.get(("p", session.principal or ""), ())) if session.principal
                else 0, len(self._owned.get(("t", session.tenant or ""), ())) if session.tenant else 0)

    def _drop(self, session_id: str) -> Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for owner in self._owners(session):
                ids = self._owned.get(owner)
                if ids is not None:
                    ids.discard(session_id)
                    if not ids:
                        del self._owned[owner]
        return session

    async def create(self, session: Session) -> None:
        if self.limits.refuse(*self._count(session)) is not None:
            self._sweep()
            refusal = self.limits.refuse(*self._count(session))
            if refusal is not None:
                raise refusal
        self._sessions[session.id] = session
        for owner in self._owners(session):
            self._owned.setdefault(owner, set()).add(session.id)

    async def get(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = time.monotonic()
        if self._expired(session, now):
            self._drop(session_id)
            return None
        session.last_seen = now
        return session

    async def save(self, session: Session) -> None:
        if session.id in self._sessions:
            self._sessions[session.id] = session

    async def delete(self, session_id: str) -> bool:
        return self._drop(session_id) is not None

    def __len__(self) -> int:
        return len(self._sessions)
