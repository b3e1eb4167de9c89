"""Runtime guards around an action call: a timeout and a concurrency limit (bulkhead).

    @billing.action(middleware=[Timeout(10)])
    @billing.action(middleware=[Concurrency(2)])              # a third concurrent call: BUSY at once
    @billing.action(middleware=[Concurrency(2, wait=5)])      # or wait up to 5 s for a slot

Declared on a tool or the app, one guard covers all of its actions together (one bulkhead for all).
"""

from __future__ import annotations

import asyncio

from .errors import BUSY, TIMEOUT, ToolError
from .middleware import ActionCall, CallNext
from .response import ToolResponse


def _seconds(value: float) -> str:
    return f"{value:g} s"


class Timeout:
    """Cancel the call after `seconds`: the handler is cancelled, its yield dependencies are torn down, and
    the agent gets a self-healing `TIMEOUT` error. (A sync handler runs in a thread that cannot be
    interrupted: it is abandoned, not stopped.)"""

    def __init__(self, seconds: float) -> None:
        if seconds <= 0:
            raise ValueError("Timeout needs a positive number of seconds")
        self.seconds = seconds

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        try:
            async with asyncio.timeout(self.seconds):
                return await call_next(call)
        except TimeoutError:
            raise ToolError(
                TIMEOUT,
                f"{call.action.qualified_name} did not finish within {_seconds(self.seconds)} and was stopped.",
                recovery="Nothing was returned. Retry later, or narrow the request (filters, fewer items) so "
                         "it finishes in time.",
            ) from None

    def describe(self) -> str:
        return f"timeout: {_seconds(self.seconds)}"


class Concurrency:
    """At most `limit` calls at once. Beyond it the call waits up to `wait` seconds for a slot (0: not at
    all) and then gets a self-healing `BUSY` error with a retry hint of `retry_after` seconds."""

    def __init__(self, limit: int, *, wait: float = 0.0, retry_after: float = 1.0) -> None:
        if limit < 1:
            raise ValueError("Concurrency needs a limit of at least 1")
        self.limit = limit
        self.wait = wait
        self.retry_after = retry_after

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        slots = call.guards.semaphore(self, self.limit)
        if slots.locked():
            if self.wait <= 0:
                raise self._busy(call)
            try:
                async with asyncio.timeout(self.wait):
                    await slots.acquire()
            except TimeoutError:
                raise self._busy(call) from None
        else:
            await slots.acquire()
        try:
            return await call_next(call)
        finally:
            slots.release()

    def _busy(self, call: ActionCall) -> ToolError:
        return ToolError(
            BUSY,
            f"{call.action.qualified_name} is already running {self.limit} time(s) at once, its limit.",
            recovery=f"Wait {_seconds(self.retry_after)} and call it again; do not run it in parallel.",
            retry_after=self.retry_after,
        )

    def describe(self) -> str:
        waiting = f", waits up to {_seconds(self.wait)}" if self.wait > 0 else ""
        return f"concurrency: at most {self.limit} at once{waiting}, then BUSY"
