"""Coalesced calls: the session reads (or event appends) that concurrent requests make in one event-loop
turn travel to Redis as one script call instead of one command each.

Under load most of the cost of a Redis command is on the client (redis-py's command machinery, one
write and one read wake-up per command), not in Redis; sharing one call between the requests ready at the
same time divides it. A lone request waits one loop turn (`call_soon`), no timer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.commands.core import AsyncScript


class Coalescer:
    """`await call(key, *item_args)` runs `script(keys=[every key of this turn], args=[*shared_args,
    *every item's args])`; the script reads item i's args at `ARGV[#shared + (i-1)*arity + 1..]` and
    returns one value per key, in order. Items of one turn are applied in call order."""

    def __init__(self, script: AsyncScript, shared_args: list[Any], arity: int = 0) -> None:
        self.script = script
        self.shared_args = shared_args
        self.arity = arity
        self._pending: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def call(self, key: str, *item_args: Any) -> Any:
        assert len(item_args) == self.arity
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)
        self._pending.append((key, item_args, future))
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        task = asyncio.ensure_future(self._run(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]]) -> None:
        args = list(self.shared_args)
        for _, item_args, _ in batch:
            args.extend(item_args)
        try:
            values = await self.script(keys=[key for key, _, _ in batch], args=args)
        except Exception as exc:  # every waiter gets the error its own command would have raised
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), value in zip(batch, values, strict=True):
            if not future.done():
                future.set_result(value)
