"""What stops while a call waits for its user: the guards around an action asking for confirmation
(`confirm=`, the 2025-11-25 wire's elicitation) register here, and the confirmation stops them for the wait.

Its own small module: the confirmation is on every server's path, the guards only on those that use them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from .middleware import ActionCall, CallNext
from .response import ToolResponse

# `call.state` key: the guards around a call that asks for confirmation, outermost first.
_PAUSES = "mcpfusion.guards.pauses"


class Pause(Protocol):
    def stop(self) -> None: ...

    async def resume(self, answered: bool) -> None: ...


@asynccontextmanager
async def waiting_for_the_user(call: ActionCall) -> AsyncIterator[None]:
    """Around the wait for the user's answer: the guards around `call` stop (innermost first: a timeout's
    clock, a concurrency slot lent out) and resume after it (outermost first, so taking the slot back counts
    against an outer timeout). A wait that failed takes no slot back: the call ends without running."""
    pauses: list[Pause] | None = call.state.get(_PAUSES)
    if not pauses:
        yield
        return
    for pause in reversed(pauses):
        pause.stop()
    answered = False
    try:
        yield
        answered = True
    finally:
        for pause in list(pauses):
            await pause.resume(answered)


async def pausable(call: ActionCall, call_next: CallNext, pause: Pause) -> ToolResponse:
    """`call_next(call)` with `pause` stopped while the call waits for the user (an action with `confirm`)."""
    pauses = call.state.setdefault(_PAUSES, [])
    pauses.append(pause)
    try:
        return await call_next(call)
    finally:
        pauses.remove(pause)
