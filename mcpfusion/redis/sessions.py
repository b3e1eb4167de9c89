"""Handshake-era sessions in Redis: one JSON value per session whose TTL is the idle timeout, and a hash of
what requests change in it (log level, subscriptions, initialized), with the same TTL.

Every `get` refreshes the TTL (GET + HGETALL + PEXPIRE in a script shared by the reads of one event-loop
turn, see `coalesce`; the one round trip of a call in JSON mode), so a session lives
while it is used on any replica. Sorted sets of ids scored by expiry time enforce `max_sessions` and the
per-principal and per-tenant quotas across replicas: a create counts, checks and adds in one script, so
concurrent initializes (on any replicas) never get past a cap (an idle session may hold its slot up to a
quarter of the idle timeout longer; one evicted by Redis under `maxmemory` holds none: a full index is
checked id by id).

A session with a request in flight on this replica is not idle (`request_started` / `request_ended`): while
any runs, a timer renews its TTL (and index entries) every third of the idle timeout, and a request that ran
longer than a second renews it when it ends, so its idle clock restarts then. Nothing is stored for it: a
replica that dies stops renewing, and the session expires as any idle one.

A `save` writes only what changed since the session was read, field by field in the hash (HSET / HDEL, in a
script that first checks the session still exists): concurrent requests of one session, on any replicas, each
keep their change (ten `resources/subscribe` sent together keep ten subscriptions), where writing the whole
session back would keep the last writer's copy only.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from mcpfusion.mcp.sessions import Session, SessionLimitError, SessionLimits, quota_owner

from .client import UNAVAILABLE
from .coalesce import Coalescer
from .session_cache import SessionCache

logger = logging.getLogger("mcpfusion.redis")
_FIELDS = frozenset(Session._fields) - {"last_seen"}
_SNAPSHOT = "_mcpfusion_stored"  # a loaded session's changeable fields as read: what `save` compares with
_SUB = "sub:"  # hash field of one subscription (its value is "1")
RENEW_AT_END_AFTER = 1.0
"""Seconds since its TTL was last renewed after which a request's end renews it again (a shorter request
leaves the renewal of the read that started it: no extra round trip per call)."""


# GET + HGETALL + PEXPIRE of every session read in one event-loop turn (ARGV[1 + i]: the hash of KEYS[i]);
# `false` becomes a nil reply.
_TOUCH_ALL = """
local values = {}
for i, key in ipairs(KEYS) do
  local value = redis.call('GET', key)
  if value then
    local state = ARGV[1 + i]
    redis.call('PEXPIRE', key, ARGV[1])
    redis.call('PEXPIRE', state, ARGV[1])
    values[i] = {value, redis.call('HGETALL', state)}
  else
    values[i] = false
  end
end
return values
"""

# The changes of one save (ARGV[2..]: field, value pairs; an empty value deletes the field), applied only
# while the session exists: a session deleted or expired meanwhile stays gone.
_CHANGE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[2], ARGV[i])
  else
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1
"""


# A new session, created only if every index it counts in (KEYS[2..]: all, its owner's, its tenant's) holds
# fewer live ids (score > ARGV[1], now) than its cap (ARGV[5 + i]): counted, checked and added in one step, so
# concurrent creates cannot all see the same free slot. Returns 1, or the counts when a cap is reached.
# ARGV[2]: the expiry score, ARGV[3]: the TTL in ms, ARGV[4]: the session's id, ARGV[5]: its JSON, ARGV[6]: the
# prefix of session keys. An index at its cap is looked at id by id: a session evicted by Redis (maxmemory) or
# gone without its entries leaves them scored in the future, and must not hold a slot until then. The SET is the
# script's first write (those ids are dropped after it): Redis refuses a script's first write when out of memory,
# not the ones after it.
_CREATE = """
local dead = {}
local function live(index)
  local count = 0
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', index, '(' .. ARGV[1], '+inf')) do
    if redis.call('EXISTS', ARGV[6] .. id) == 1 then count = count + 1 else dead[#dead + 1] = {index, id} end
  end
  return count
end
local counts = {}
local full = false
for i = 2, #KEYS do
  local cap = tonumber(ARGV[5 + i])
  counts[i - 1] = redis.call('ZCOUNT', KEYS[i], '(' .. ARGV[1], '+inf')
  if counts[i - 1] >= cap then counts[i - 1] = live(KEYS[i]) end
  if counts[i - 1] >= cap then full = true end
end
if not full then
  redis.call('SET', KEYS[1], ARGV[5], 'PX', ARGV[3], 'NX')
  for i = 2, #KEYS do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', ARGV[1])
    redis.call('ZADD', KEYS[i], ARGV[2], ARGV[4])
  end
end
for _, entry in ipairs(dead) do redis.call('ZREM', entry[1], entry[2]) end
if full then return counts end
return 1
"""


class SessionStoreUnavailable(SessionLimitError):
    """Redis cannot be reached; the transport answers 503 with Retry-After (never 404: the session may
    well exist, and a 404 would make the client re-initialize and lose its state)."""


class RedisSessionStore:
    """`SessionStore` on Redis. Unreachable Redis: every operation raises `SessionStoreUnavailable`."""

    def __init__(
        self, client: aioredis.Redis, *, prefix: str = "mcpf:", idle_timeout: float = 1800.0,
        max_sessions: int = 10_000, limits: SessionLimits | None = None, cache: SessionCache | None = None,
    ) -> None:
        self.client = client
        self.cache = cache  # recently read sessions, invalidated over the broker (`session_cache`)
        self.prefix = prefix
        self.index = f"{prefix}sessions"
        self.idle_timeout = idle_timeout
        self.limits = limits or SessionLimits(total=max_sessions)
        self.max_sessions = self.limits.total
        self._ttl_ms = max(1, int(idle_timeout * 1000))
        self._reads = Coalescer(client.register_script(_TOUCH_ALL), [self._ttl_ms], arity=1)
        self._change = client.register_script(_CHANGE)
        self._create = client.register_script(_CREATE)
        # session id -> when this process last renewed its index entry (bounded; see `get`)
        self._indexed: dict[str, float] = {}
        # session id -> [requests in flight here, the session, when its TTL was last renewed]
        self._held: dict[str, list[Any]] = {}
        self._timer: asyncio.TimerHandle | None = None  # the next renewal of the held sessions
        self._renewals: set[asyncio.Task[None]] = set()  # (strong references: the loop keeps weak ones)

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}session:{session_id}"

    def _state_key(self, session_id: str) -> str:
        # Not under `session:`, which any id a client sends is appended to: no id can name this hash.
        return f"{self.prefix}session-state:{session_id}"

    @staticmethod
    def _dump(session: Session) -> str:
        data = session.to_dict()
        data.pop("last_seen", None)  # a per-process monotonic clock; Redis's TTL is the idle clock
        return json.dumps(data, separators=(",", ":"))

    def _expiry(self) -> float:
        return time.time() + self.idle_timeout * 1.25

    def _remember(self, session_id: str, now: float) -> None:
        if len(self._indexed) >= 2 * self.max_sessions:
            self._indexed.clear()  # forgetting only costs one extra ZADD per session
        self._indexed[session_id] = now

    def _indexes(self, session: Session) -> list[str]:
        """The global index, then one per quota owner (principal, else peer address) and per tenant the session
        has (for the quotas)."""
        keys = [self.index]
        for kind, value in (quota_owner(session) or ("p", None), ("t", session.tenant)):
            if value:
                keys.append(f"{self.index}:{kind}:{_digest(value)}")
        return keys

    def request_started(self, session: Session) -> None:
        """A request of `session` runs here: its TTL is renewed while it runs (no round trip now: the read
        that found the session just renewed it)."""
        held = self._held.get(session.id)
        if held is not None:
            held[0] += 1
            return
        self._held[session.id] = [1, session, time.monotonic()]
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._renew_every(), self._renew_held)

    def request_ended(self, session: Session) -> None:
        """A request of `session` ended here; after the last one its idle clock restarts (renewed now if
        the last renewal is more than `RENEW_AT_END_AFTER` s old)."""
        held = self._held.get(session.id)
        if held is None:
            return
        held[0] -= 1
        if held[0] > 0:
            return
        del self._held[session.id]
        if not self._held and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if time.monotonic() - held[2] > RENEW_AT_END_AFTER:
            self._spawn_renewal([session])

    def _renew_every(self) -> float:
        return max(self.idle_timeout / 3, 0.05)

    def _renew_held(self) -> None:
        """The timer: renew every session with a request in flight, then wait for the next turn."""
        self._timer = None
        if not self._held:
            return
        now = time.monotonic()
        for held in self._held.values():
            held[2] = now
        self._spawn_renewal([held[1] for held in self._held.values()])
        self._timer = asyncio.get_running_loop().call_later(self._renew_every(), self._renew_held)

    def _spawn_renewal(self, sessions: list[Session]) -> None:
        task = asyncio.get_running_loop().create_task(self._renew(sessions), name="mcpfusion-session-renewal")
        self._renewals.add(task)
        task.add_done_callback(self._renewals.discard)

    async def _renew(self, sessions: list[Session]) -> None:
        """Push the TTL of `sessions` and their index entries; a session deleted or expired meanwhile stays
        gone (PEXPIRE and ZADD XX touch only what exists)."""
        expiry = self._expiry()
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for session in sessions:
                    pipe.pexpire(self._key(session.id), self._ttl_ms)
                    pipe.pexpire(self._state_key(session.id), self._ttl_ms)
                    for index in self._indexes(session):
                        pipe.zadd(index, {session.id: expiry}, xx=True)
                await pipe.execute()
        except UNAVAILABLE as exc:  # renewed at the next turn, or by the next read
            logger.warning("sessions with requests in flight not renewed: %s", exc)

    async def create(self, session: Session) -> None:
        indexes = self._indexes(session)
        owned, tenanted = bool(quota_owner(session)), bool(session.tenant)
        caps = [self.limits.total]  # in `_indexes` order
        caps += [self.limits.per_principal] if owned else []
        caps += [self.limits.per_tenant] if tenanted else []
        try:
            created = await self._create(
                keys=[self._key(session.id), *indexes],
                args=[time.time(), self._expiry(), self._ttl_ms, session.id, self._dump(session), self._key(""),
                      *caps])
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            raise SessionStoreUnavailable("the session store is unavailable") from None
        if isinstance(created, list):  # a cap is reached: the counts, in `_indexes` order
            counts = iter(int(count) for count in created)
            total = next(counts)
            principal = next(counts) if owned else 0
            tenant = next(counts) if tenanted else 0
            raise self.limits.refuse(total, principal, tenant) or SessionLimitError("too many sessions")
        self._remember(session.id, time.monotonic())
        _remember_stored(session)

    async def get(self, session_id: str) -> Session | None:
        cache = self.cache
        epoch = 0
        if cache is not None:
            cached = cache.get(session_id)
            if cached is not None:
                return cached
            epoch = cache.epoch
        try:
            raw = await self._reads.call(self._key(session_id), self._state_key(session_id))
            if raw is None:
                self._indexed.pop(session_id, None)
                return None
            session = self._load(raw[0], raw[1])
            # The hot path is the one GETEX above. The index entries (for the caps) are renewed at most every
            # quarter of the idle timeout per process; their score reaches a quarter past the key's expiry
            # to cover that lag, so a live session is never counted out.
            now = time.monotonic()
            if now - self._indexed.get(session_id, -self.idle_timeout) > self.idle_timeout / 4:
                await self._renew_index(session, now)
        except UNAVAILABLE as exc:
            logger.warning("session store unavailable: %s", exc)
            raise SessionStoreUnavailable("the session store is unavailable") from None
        if cache is not None:
            cache.put(session, epoch)
        return session

    async def _renew_index(self, session: Session, now: float) -> None:
        """Push the session's expiry in the indexes; a Redis that refuses it (full) leaves it for a later read,
        the session itself was read."""
        expiry = self._expiry()
        try:
            async with self.client.pipeline(transaction=False) as pipe:
                for index in self._indexes(session):
                    pipe.zadd(index, {session.id: expiry}, xx=True)
                await pipe.execute()
        except ResponseError as exc:
            logger.warning("session index not renewed: %s", exc)
            return
        self._remember(session.id, now)

    @staticmethod
    def _load(raw: str | bytes, state: list[str] | None = None) -> Session:
        data: dict[str, Any] = json.loads(raw)
        # Tolerate sessions written by another version of the server (rolling deploys): unknown fields
        # are dropped, missing ones take their defaults.
        session = Session.from_dict({k: v for k, v in data.items() if k in _FIELDS})
        fields = dict(zip(state[::2], state[1::2], strict=True)) if state else {}
        if "log_level" in fields:
            session.log_level = fields["log_level"]
        if "initialized" in fields:
            session.initialized = True
        subscriptions = sorted(f[len(_SUB):] for f in fields if f.startswith(_SUB))
        session.subscriptions = list(dict.fromkeys([*session.subscriptions, *subscriptions]))
        _remember_stored(session)
        return session

    async def save(self, session: Session) -> None:
        changes = _changes(session)
        if not changes:
            return
        try:
            await self._change(keys=[self._key(session.id), self._state_key(session.id)],
                               args=[self._ttl_ms, *changes])
        except UNAVAILABLE as exc:
            raise SessionStoreUnavailable("the session store is unavailable") from exc
        _remember_stored(session)  # this copy's later saves send only their own changes
        if self.cache is not None:
            await self.cache.changed(session.id)

    async def delete(self, session_id: str) -> bool:
        self._indexed.pop(session_id, None)
        try:
            raw = await self.client.get(self._key(session_id))
            indexes = self._indexes(self._load(raw)) if raw else [self.index]
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.delete(self._key(session_id), self._state_key(session_id))  # one DEL: both go at once
                for index in indexes:
                    pipe.zrem(index, session_id)
                deleted = (await pipe.execute())[0]
        except UNAVAILABLE as exc:
            raise SessionStoreUnavailable("the session store is unavailable") from exc
        if self.cache is not None:  # gone here at once, on the other replicas when they get the message
            await self.cache.changed(session_id)
        return bool(deleted)

    async def count(self) -> int:
        """Live sessions (after dropping expired ids from the index)."""
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.zremrangebyscore(self.index, "-inf", time.time())
            pipe.zcard(self.index)
            _, count = await pipe.execute()
        return int(count)


def _digest(name: str) -> str:
    """A short digest of a name (a tenant, a principal). Surrogate-safe: claims decoded by `json.loads` (a JWT's)
    may hold lone surrogates, and "surrogatepass" encodes them one-to-one where plain UTF-8 raises."""
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _stored(session: Session) -> tuple[frozenset[str], str | None, bool]:
    """The changeable fields of `session` as this store last read or wrote them (a session it never read: none
    set)."""
    stored: tuple[frozenset[str], str | None, bool] = vars(session).get(_SNAPSHOT, (frozenset(), None, False))
    return stored


def _remember_stored(session: Session) -> None:
    vars(session)[_SNAPSHOT] = (frozenset(session.subscriptions), session.log_level, session.initialized)


def _changes(session: Session) -> list[str]:
    """The hash fields and values (empty: delete) that bring the stored session to `session`."""
    subscriptions, log_level, initialized = _stored(session)
    current = set(session.subscriptions)
    changes = [item for uri in sorted(current - subscriptions) for item in (_SUB + uri, "1")]
    changes += [item for uri in sorted(subscriptions - current) for item in (_SUB + uri, "")]
    if session.log_level != log_level and session.log_level is not None:
        changes += ["log_level", session.log_level]
    if session.initialized and not initialized:
        changes += ["initialized", "1"]
    return changes
