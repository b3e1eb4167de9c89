"""Handshake-era sessions (2025-06-18 / 2025-11-25) behind a small async store interface.

The in-memory store is the default; `mcpfusion.redis.RedisSessionStore` implements the same `SessionStore`
protocol so that any replica can serve any session.
"""

from __future__ import annotations

import math
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from copy import deepcopy
from typing import Any, Protocol

from pydantic_core import to_json

from mcpfusion.slots import FACTORY, Fields, Frozen

MAX_CLIENT_FIELD_BYTES = 16 * 1024
"""Largest `capabilities` / `clientInfo` (as JSON) a session keeps: both live as long as the session, in
every store. Real ones are a few hundred bytes (an inline icon a few KB); 64 KB each let 10,000 sessions hold
over a gigabyte, and one address holds 100 sessions at most."""
EVICT_AFTER = 60.0
"""Seconds a session must have been idle before a full pool (all sessions, a caller's, a tenant's) closes
it, least recently used first, to admit a new one; until then the new one is refused with that honest wait."""
SWEEP_BATCH = 1000
"""Most expired sessions one sweep drops (the rest go in the next): no request pays for a large backlog."""


class Session(Fields):
    """What the server remembers about one initialized client. A plain class with a dataclass's behaviour
    (`slots.Fields`: equality, repr, no hash); the decorator would compile its methods at import."""

    __match_args__ = _fields = ("id", "protocol_version", "client_info", "client_capabilities", "log_level",
                                "principal", "tenant", "subscriptions", "initialized", "created_at", "last_seen",
                                "peer")

    def __init__(self, id: str, protocol_version: str, client_info: dict[str, Any] = FACTORY,  # noqa: A002
                 client_capabilities: dict[str, Any] = FACTORY, log_level: str | None = None,
                 principal: str | None = None, tenant: str | None = None, subscriptions: list[str] = FACTORY,
                 initialized: bool = False, created_at: float = FACTORY, last_seen: float = FACTORY,
                 peer: str | None = None) -> None:
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
        self.peer = peer  # the client's address: the quota owner of a session without a principal

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


def quota_owner(session: Session) -> tuple[str, str] | None:
    """Whose per-caller quota the session counts against: its principal, else its peer address (so anonymous
    clients have one too), else no one's."""
    if session.principal:
        return ("p", session.principal)
    return ("a", session.peer) if session.peer else None


def new_session_id() -> str:
    """128 bits from the OS CSPRNG, visible ASCII only (the spec's requirement on the header value)."""
    return secrets.token_urlsafe(24)


class SessionLimitError(Exception):
    """The store holds `max_sessions` live sessions already; `retry_after`: seconds until a slot frees."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


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
    """Async storage of sessions. `get` returns None for unknown, deleted or idle-expired ids.

    A store may also have `request_started(session)` and `request_ended(session)` (plain methods, called
    around each request the session wire runs): a session with a request in flight is not idle, and its idle
    clock restarts when the last one ends. Both built-in stores have them; a store without them sees only
    the reads of each request, so a call outliving its idle timeout outlives its session too."""

    async def create(self, session: Session) -> None: ...

    async def get(self, session_id: str) -> Session | None: ...

    async def save(self, session: Session) -> None: ...

    async def delete(self, session_id: str) -> bool: ...


class InMemorySessionStore:
    """Process-local sessions with an idle timeout and caps. Sessions are kept least recently used first, so
    expired ones are swept from the front (on every create, and on reads at most once a second) and a full
    pool closes its least recently used session once it has been idle `evict_after` seconds. A session with
    a request in flight is never idle: it neither expires nor is closed for a new one."""

    def __init__(self, idle_timeout: float = 1800.0, max_sessions: int = 10_000,
                 limits: SessionLimits | None = None, evict_after: float = EVICT_AFTER,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.idle_timeout = idle_timeout
        self.limits = limits or SessionLimits(total=max_sessions)
        self.max_sessions = self.limits.total
        self.evict_after = min(evict_after, idle_timeout)
        self._clock = clock
        self._swept = -math.inf
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        # live session ids per quota owner / tenant, least recently used first (an ordered set)
        self._owned: dict[tuple[str, str], OrderedDict[str, None]] = {}
        self._busy: dict[str, int] = {}  # session id -> its requests in flight

    def request_started(self, session: Session) -> None:
        """A request of `session` runs: the session is not idle until the last one ends."""
        self._busy[session.id] = self._busy.get(session.id, 0) + 1

    def request_ended(self, session: Session) -> None:
        """A request of `session` ended; after the last one, its idle clock starts again from now."""
        left = self._busy.get(session.id, 0) - 1
        if left > 0:
            self._busy[session.id] = left
            return
        self._busy.pop(session.id, None)
        current = self._sessions.get(session.id)
        if current is not None:  # (not deleted meanwhile)
            self._touch(current, self._clock())

    def _expired(self, session: Session, now: float) -> bool:
        return now - session.last_seen > self.idle_timeout and session.id not in self._busy

    def _touch(self, session: Session, now: float) -> None:
        """Mark `session` used now: the most recently used in every pool it is in."""
        session.last_seen = now
        self._sessions.move_to_end(session.id)
        for owner in self._owners(session):
            self._owned[owner].move_to_end(session.id)

    def _sweep(self, now: float) -> None:
        """Drop expired sessions from the least recently used end, at most `SWEEP_BATCH` of them."""
        self._swept = now
        for _ in range(SWEEP_BATCH):
            oldest = next(iter(self._sessions.values()), None)
            if oldest is None or now - oldest.last_seen <= self.idle_timeout:
                return
            if oldest.id in self._busy:  # in use all along: used now, behind the idle ones
                self._touch(oldest, now)
            else:
                self._drop(oldest.id)

    def _owners(self, session: Session) -> list[tuple[str, str]]:
        owner = quota_owner(session)
        return [*([owner] if owner else []), *([("t", session.tenant)] if session.tenant else [])]

    def _drop(self, session_id: str) -> Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            for owner in self._owners(session):
                ids = self._owned.get(owner)
                if ids is not None:
                    ids.pop(session_id, None)
                    if not ids:
                        del self._owned[owner]
        return session

    def _pools(self, session: Session) -> list[tuple[Any, int, str]]:
        """(ids least recently used first, cap, what the refusal says) of each pool the session joins."""
        owner = quota_owner(session)
        pools: list[tuple[Any, int, str]] = []
        if owner is not None:
            who = "principal" if owner[0] == "p" else "client address"
            pools.append((self._owned.get(owner, {}), self.limits.per_principal, who))
        if session.tenant:
            pools.append((self._owned.get(("t", session.tenant), {}), self.limits.per_tenant, "tenant"))
        # the whole store last: room made in the caller's own pools is room made in it too
        return [*pools, (self._sessions, self.limits.total, "")]

    def _make_room(self, session: Session, now: float) -> None:
        """Close the least recently used idle session of each full pool, if idle long enough; else refuse
        (sessions with a request in flight are not idle: none of them is closed)."""
        for ids, cap, who in self._pools(session):
            if len(ids) < cap:
                continue
            oldest_id = next((sid for sid in ids if sid not in self._busy), None)
            if oldest_id is None:  # a cap of 0, or every session busy: nothing to close
                raise _refusal(cap, who, math.ceil(self.evict_after) if ids else 5)
            wait = self.evict_after - (now - self._sessions[oldest_id].last_seen)
            if wait > 0:
                raise _refusal(cap, who, math.ceil(wait))
            self._drop(oldest_id)

    async def create(self, session: Session) -> None:
        now = self._clock()
        self._sweep(now)
        self._make_room(session, now)
        session.last_seen = now
        self._sessions[session.id] = session
        for owner in self._owners(session):
            self._owned.setdefault(owner, OrderedDict())[session.id] = None

    async def get(self, session_id: str) -> Session | None:
        now = self._clock()
        if now - self._swept >= 1.0:  # the timer: an idle crowd is reclaimed while anyone uses the server
            self._sweep(now)
        session = self._sessions.get(session_id)
        if session is None:
            return None
        if self._expired(session, now):
            self._drop(session_id)
            return None
        self._touch(session, now)
        return session

    async def save(self, session: Session) -> None:
        if session.id in self._sessions:
            self._sessions[session.id] = session

    async def delete(self, session_id: str) -> bool:
        return self._drop(session_id) is not None

    def __len__(self) -> int:
        return len(self._sessions)


def _refusal(cap: int, who: str, wait: int) -> SessionLimitError:
    """The refusal of a new session by a full pool whose least recently used session frees in `wait` s."""
    if not who:
        return SessionLimitError(f"too many sessions (max {cap}); one frees in {wait} s", wait)
    return SessionQuotaError(f"too many sessions for this {who} (max {cap}); close unused ones with DELETE, or "
                             f"retry in {wait} s, when the least recently used one is closed for the new one", wait)
