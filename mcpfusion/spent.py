"""Spent confirmations: a confirmation (a `_confirm` token, an answered question) runs its action once.

A run that fails with an error saying nothing was done and to make the same call again (BUSY, RATE_LIMITED,
a `retry_after`) gives its confirmation back (`release`): the retry it was told to make is not refused.

A store can forget what was spent: the in-memory one when its process restarts (while `MCPFUSION_SIGNING_KEY`
stays the same, so the confirmations it issued are still valid), Redis when it restarts without persistence or is
flushed. So each store has an epoch, an id that changes whenever it may have forgotten: a confirmation is bound
to the epoch it was issued in (signed into its token, or its requestState on 2026-07-28), and `spend` refuses
one of another epoch, checked in the same step as the spend. The user confirms again; a replay never runs.

In memory here (one process); `mcpfusion.redis.spent` keeps them in Redis, so that a replay sent to another
replica behind the balancer is refused too.

An app's own store (`fusion.registry.guards.spent = MyStore()`) implements `Spent`. One written before epochs
(no `epoch` method) still works, its `spend` called with two arguments, but nothing then refuses a confirmation
that it forgot: give it an `epoch`.
"""

from __future__ import annotations

import secrets
import time
from typing import Protocol

_MEMORY_KEYS = 10_000  # beyond this many live confirmations, the expired ones are dropped first


class SpentUnavailable(Exception):
    """The store of spent confirmations cannot be reached: the confirmation cannot be used (fail closed)."""


class Spent(Protocol):
    async def epoch(self) -> str:
        """The store's current epoch: a new one each time what it spent may have been forgotten (a new
        process, a Redis restarted or flushed), never one it had before (draw it at random); 1 to 32 ASCII
        letters and digits (it is written in `_confirm` tokens). `SpentUnavailable` when the store cannot be
        reached."""
        ...

    async def spend(self, key: str, expires: float, epoch: str | None = None) -> bool:
        """True the first time `key` is used, False for a replay before `expires` (epoch seconds), and for any
        key while the store's epoch is not `epoch` (checked with the spend, in one step: the store may have
        forgotten that it was spent). None checks no epoch. Raises `SpentUnavailable` when that cannot be
        known."""
        ...

    async def release(self, key: str, expires: float) -> None:
        """Un-spend `key`, spent with `expires` by the caller: only while it is still that spend (a key is
        spent again only once it expired, so a later spend's `expires` differs); `SpentUnavailable` when
        the store cannot be reached (the confirmation stays spent)."""
        ...


class MemorySpent:
    """Spent confirmations of one process. Its epoch is drawn when it is made: a confirmation issued by another
    process (a restart, another worker) names another epoch and is refused, as that process's spends are not
    known here."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.current = secrets.token_hex(8)

    async def epoch(self) -> str:
        return self.current

    async def spend(self, key: str, expires: float, epoch: str | None = None) -> bool:
        if epoch is not None and epoch != self.current:
            return False
        now = time.time()
        if len(self.spent) >= _MEMORY_KEYS:
            self.spent = {k: t for k, t in self.spent.items() if t > now}
        if self.spent.get(key, 0.0) > now:
            return False
        self.spent[key] = expires
        return True

    async def release(self, key: str, expires: float) -> None:
        if self.spent.get(key) == expires:
            del self.spent[key]
