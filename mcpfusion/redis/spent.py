"""Spent confirmations in Redis (`mcpfusion.spent` shared by every replica); chosen by `MCPFusion` when the
app runs with `MCPFUSION_REDIS_URL`."""

from __future__ import annotations

import hashlib
import logging
import math
import secrets
from typing import Any

from ..spent import SpentUnavailable
from .client import UNAVAILABLE

logger = logging.getLogger("mcpfusion.confirm")

# The epoch: a key made by the first replica that needs one (ARGV[1], drawn by it), read with what tells that
# Redis may have forgotten spends since without losing that key: its process (`run_id`: a restart, even one that
# loaded a snapshot older than the last spends, or a failover to a replica) and its evictions (`evicted_keys`: a
# spent key has an expiry, so `volatile-*` policies may drop it and keep the epoch's). The three as one digest.
# No expiry: the key goes only with what Redis forgets (a restart without persistence, a FLUSHALL).
_CURRENT = """
local function current(key, fresh)
  local stored = redis.call('GET', key)
  if not stored then
    if not fresh then return false end
    redis.call('SET', key, fresh)
    stored = fresh
  end
  local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
  local evicted = string.match(redis.call('INFO', 'stats'), 'evicted_keys:(%d+)') or ''
  return string.sub(redis.sha1hex(stored .. '|' .. run .. '|' .. evicted), 1, 24)
end
"""

_EPOCH = _CURRENT + "return current(KEYS[1], ARGV[1])"

# Spend while the epoch is still the confirmation's, in one step: were the check a round trip of its own, a
# flush between the two would let a forgotten spend happen again. A missing epoch is a mismatch: `_EPOCH`
# makes a new one for the next confirmation issued.
_SPEND = _CURRENT + """
if current(KEYS[1], false) ~= ARGV[1] then return 0 end
if redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PXAT', ARGV[2]) then return 1 end
return 0
"""

# Compare-and-delete: the key goes only while it still holds the spend being given back (its expiry).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class RedisSpent:
    """One key per spent confirmation (`SET NX` with the confirmation's expiry): the first replica to use it
    wins, every later use on any replica is a replay. When Redis cannot be reached the confirmation is not
    used (fail closed): a destructive action waits for the store rather than risk running twice.

    The epoch is one more key (`<prefix>epoch`) with the Redis process's id and its count of evicted keys,
    checked by the spend's own script: no extra round trip. A Redis that lost its keys lost the epoch with
    them; one restarted (from a snapshot too) has another process id; one that evicted keys may have evicted a
    spent one: a confirmation issued before is then refused (the user confirms again) instead of running again.

    The key's value is its expiry in milliseconds: `release` deletes it only while it still holds that value,
    never a later spend of the same confirmation (made once this one expired, so with a later expiry)."""

    def __init__(self, client: Any, prefix: str = "mcpf:spent:") -> None:
        self.client = client
        self.prefix = prefix
        self.epoch_key = prefix + "epoch"  # (never a spent key's name: those are hex digests)
        self.epoch_script = client.register_script(_EPOCH)
        self.spend_script = client.register_script(_SPEND)
        self.release_script = client.register_script(_RELEASE)

    def _name(self, key: str) -> str:
        # The key is a digest: a confirmation is a bearer secret, never written to Redis as it is.
        return self.prefix + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    async def epoch(self) -> str:
        try:
            found = await self.epoch_script(keys=[self.epoch_key], args=[secrets.token_hex(8)])
        except UNAVAILABLE:
            logger.warning("a confirmation was not issued: Redis is unreachable")
            raise SpentUnavailable from None
        return found.decode() if isinstance(found, bytes) else str(found)  # (a client may not decode)

    async def spend(self, key: str, expires: float, epoch: str | None = None) -> bool:
        at = math.ceil(expires * 1000)
        try:
            if epoch is None:
                return bool(await self.client.set(self._name(key), str(at), nx=True, pxat=at))
            return bool(await self.spend_script(keys=[self.epoch_key, self._name(key)], args=[epoch, str(at)]))
        except UNAVAILABLE:
            logger.warning("a confirmation was not used: Redis is unreachable")
            raise SpentUnavailable from None

    async def release(self, key: str, expires: float) -> None:
        try:
            await self.release_script(keys=[self._name(key)], args=[str(math.ceil(expires * 1000))])
        except UNAVAILABLE:
            logger.warning("a confirmation was not given back after a retryable failure: Redis is unreachable")
            raise SpentUnavailable from None
