"""Runtime guards around an action call: a timeout and a concurrency limit (bulkhead).

    @billing.action(middleware=[Timeout(10)])
    @billing.action(middleware=[Concurrency(2)])              # a third concurrent call: BUSY at once
    @billing.action(middleware=[Concurrency(2, wait=5)])      # or wait up to 5 s for a slot

Declared on a tool or the app, one guard covers all of its actions together (one bulkhead for all).

They guard the action's run, not the user: while a call waits for the user's confirmation (`confirm=`, the
2025-11-25 wire's elicitation) its timeout's clock stops and its concurrency slot is free for other calls.

Nor do they cut a write's commit: once the handler of a write (an action not `readonly`) returned, its yield
dependencies close (a session commits) with its timeout's clock stopped; the clock goes on after, and a
timeout then (a slow middleware or audit sink after `call_next`) answers that the action was done and not to
call it again (`details.completed`), never "nothing was returned, retry".

Nor can they stop a plain `def` handler: it runs in a thread that goes on after its timeout. A write's
timeout then says it may still complete and to check its effect before calling again
(`details.may_complete`), never that it was stopped.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from .errors import BUSY, TIMEOUT, ToolError
from .middleware import CLOSING_KEY, ActionCall, CallNext
from .pauses import pausable
from .response import ToolResponse


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _check_seconds(guard: str, name: str, value: Any, zero: bool = False) -> None:
    """Refuse a duration that is no number, not finite or not above 0 (`zero`: 0 allowed): NaN compares false
    with everything, so it would pass a plain `<= 0` check and time out every call."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{guard} {name} takes a number of seconds, not {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
        least = "0 or more" if zero else "above 0"
        raise ValueError(f"{guard} needs a positive number of seconds: {name} must be finite and {least}, "
                         f"not {value!r}")


class _Clock:
    """A `Timeout`'s deadline, stopped while the call waits for the user."""

    __slots__ = ("timer", "left")

    def __init__(self, timer: asyncio.Timeout) -> None:
        self.timer = timer
        self.left: float | None = None

    def stop(self) -> None:
        when = self.timer.when()
        if when is not None and not self.timer.expired():
            self.left = max(when - asyncio.get_running_loop().time(), 0.0)
            self.timer.reschedule(None)

    async def resume(self, answered: bool) -> None:
        if self.left is not None and not self.timer.expired():
            self.timer.reschedule(asyncio.get_running_loop().time() + self.left)
        self.left = None


class _Slot:
    """A `Concurrency` slot held by one call, free for others while the call waits for the user."""

    __slots__ = ("slots", "held")

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self.slots = slots
        self.held = True

    def stop(self) -> None:
        if self.held:
            self.held = False
            self.slots.release()

    async def resume(self, answered: bool) -> None:
        # The user agreed: the call runs once a slot is free (it had one before; it is not refused BUSY now
        # for having let others run while the user read). Cancelled while waiting, it holds none.
        if answered and not self.held:
            await self.slots.acquire()
            self.held = True


class Timeout:
    """Cancel the call after `seconds`: the handler is cancelled, its yield dependencies are torn down, and
    the agent gets a self-healing `TIMEOUT` error. A sync handler runs in a thread that cannot be
    interrupted: it is abandoned, not stopped, so a sync write's error says it may still complete and to
    check before calling again (`details.may_complete`). The wait for the user's confirmation is not
    counted, nor the closing of a write's yield dependencies once its handler returned (its commit is never
    cut halfway); a write done whose answer is late is answered as done (`call.done`:
    `dispatch.completed_error`)."""

    def __init__(self, seconds: float) -> None:
        _check_seconds("Timeout", "seconds", seconds)
        self.seconds = seconds

    async def __call__(self, call: ActionCall, call_next: CallNext) -> ToolResponse:
        action = call.action
        try:
            async with asyncio.timeout(self.seconds) as timer:
                if not action.readonly:
                    return await _closing_uncut(call, call_next, _Clock(timer))
                if not action.confirm:
                    return await call_next(call)
                return await pausable(call, call_next, _Clock(timer))
        except TimeoutError:
            if call.done:  # (said "done, do not call it again" by the chain: `dispatch._failure_of`)
                raise ToolError(TIMEOUT, f"{action.qualified_name} did not answer within "
                                         f"{_seconds(self.seconds)}.") from None
            # A sync handler's thread is abandoned, not stopped (a raw tool's stand-in has no `is_async`: its
            # function runs on the loop). A read's retry is harmless; a write's could do it twice.
            threaded = not getattr(action, "is_async", True)
            if threaded and not action.readonly:
                raise self._may_complete(action.qualified_name) from None
            stopped = "" if threaded else " and was stopped"
            raise ToolError(
                TIMEOUT,
                f"{action.qualified_name} did not finish within {_seconds(self.seconds)}{stopped}.",
                recovery="Nothing was returned. Retry later, or narrow the request (filters, fewer items) so it "
                         "finishes in time.",
            ) from None

    def _may_complete(self, name: str) -> ToolError:
        """A sync write's timeout: its thread cannot be stopped and goes on, so a retry could do it twice."""
        return ToolError(
            TIMEOUT,
            f"{name} did not answer within {_seconds(self.seconds)} and could not be stopped: it may still be "
            "running, and what it does may complete.",
            recovery=f"Do not call {name} again yet: that could do it twice. Wait, then check whether it took "
                     "effect (read the result with another action) before calling it again.",
            details={"may_complete": True},
        )

    def describe(self) -> str:
        return f"timeout: {_seconds(self.seconds)}"


async def _closing_uncut(call: ActionCall, call_next: CallNext, clock: _Clock) -> ToolResponse:
    """`call_next(call)` of a write, `clock` stopped while its yield dependencies close once its handler
    returned (`CLOSING_KEY`, see `ToolRegistry._run`), and while it waits for the user (`confirm=`)."""
    held = call.state.setdefault(CLOSING_KEY, [])
    held.append(clock)
    try:
        return await (pausable(call, call_next, clock) if call.action.confirm else call_next(call))
    finally:
        held.remove(clock)


class Concurrency:
    """At most `limit` calls at once. Beyond it the call waits up to `wait` seconds for a slot (0: not at
    all) and then gets a self-healing `BUSY` error with a retry hint of `retry_after` seconds. A call waiting for
    the user's confirmation leaves its slot free meanwhile."""

    def __init__(self, limit: int, *, wait: float = 0.0, retry_after: float = 1.0) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"Concurrency limit takes a whole number of calls, not {limit!r}")
        if limit < 1:
            raise ValueError("Concurrency needs a limit of at least 1")
        _check_seconds("Concurrency", "wait", wait, zero=True)
        _check_seconds("Concurrency", "retry_after", retry_after)
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
        if not call.action.confirm:
            try:
                return await call_next(call)
            finally:
                slots.release()
        slot = _Slot(slots)
        try:
            return await pausable(call, call_next, slot)
        finally:
            slot.stop()

    def _busy(self, call: ActionCall) -> ToolError:
        action = call.action
        if any(mw is self for mw in action.middleware):
            message = f"{action.qualified_name} is already running {self.limit} time(s) at once, its limit."
        else:  # one bulkhead for a tool's or the app's actions: the call refused is not the one running
            whose = f"the actions of {action.tool.name}" if any(mw is self for mw in action.tool.middleware) \
                else "this server's actions"
            message = (f"{action.qualified_name} cannot run now: {whose} are already running {self.limit} "
                       "call(s) at once, the limit they share.")
        return ToolError(
            BUSY,
            message,
            recovery=f"Wait {_seconds(self.retry_after)} and call it again; do not run it in parallel.",
            retry_after=self.retry_after,
        )

    def describe(self) -> str:
        waiting = f", waits up to {_seconds(self.wait)}" if self.wait > 0 else ""
        return f"concurrency: at most {self.limit} at once{waiting}, then BUSY"
