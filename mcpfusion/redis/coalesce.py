"""Coalesced reads: the session lookups that concurrent requests make in one event-loop turn travel to
Redis as one script call instead of one command each.

Under load most of the cost of a Redis command is on the client (redis-py's command machinery, one
write and one read wake-up per command), not in Redis; sharing one call between the requests ready at the
same time divides it. A lone request waits one loop turn (`call_soon`), no timer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.commands.core import AsyncScript


class Coalescer:
    """`await get(key)` runs `script(keys=[...every key of this turn], args=args)`, which must return one
    value per key, in order."""

    def __init__(self, script: AsyncScript, args: list[Any]) -> None:
        self.script = script
        self.args = args
        self._pending: list[tuple[str, asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def get(self, key: str) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((key, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.ensure_future(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[str, asyncio.Future[Any]]]) -> None:
        try:
            values = await self.script(keys=[key for key, _ in batch], args=self.args)
        except Exception as exc:  # every waiter gets the error its own command would have raised
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), value in zip(batch, values, strict=True):
            if not future.done():
                future.set_result(value)
