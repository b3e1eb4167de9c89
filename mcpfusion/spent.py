"""Spent confirmations: a confirmation (a `_confirm` token, an answered question) runs its action once.

A run that fails with an error saying nothing was done and to make the same call again (BUSY, RATE_LIMITED,
a `retry_after`) gives its confirmation back (`release`): the retry it was told to make is not refused.

In memory here (one process); `mcpfusion.redis.spent` keeps them in Redis, so that a replay sent to another
replica behind the balancer is refused too.
"""

from __future__ import annotations

import time
from typing import Protocol

_MEMORY_KEYS = 10_000  # beyond this many live confirmations, the expired ones are dropped first


class SpentUnavailable(Exception):
    """The store of spent confirmations cannot be reached: the confirmation cannot be used (fail closed)."""


class Spent(Protocol):
    async def spend(self, key: str, expires: float) -> bool:
        """True the first time `key` is used, False for a replay before `expires` (epoch seconds); raises
        `SpentUnavailable` when that cannot be known."""
        ...

    async def release(self, key: str, expires: float) -> None:
        """Un-spend `key`, spent with `expires` by the caller: only while it is still that spend (a key is
        spent again only once it expired, so a later spend's `expires` differs); `SpentUnavailable` when
        the store cannot be reached (the confirmation stays spent)."""
        ...


class MemorySpent:
    """Spent confirmations of one process."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    async def spend(self, key: str, expires: float) -> bool:
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
