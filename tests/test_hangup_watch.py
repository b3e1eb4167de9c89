"""The 2026-07-28 wire's hang-up watch: one timer for every running call, a task only for a call still running
at two looks in a row."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpfusion.mcp import modern


class Channel:
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def cancel(self, reason: str) -> None:
        self.reasons.append(reason)


def hang_up_when(event: asyncio.Event) -> Any:
    async def receive() -> dict[str, Any]:
        await event.wait()
        return {"type": "http.disconnect"}
    return receive


async def test_a_call_answering_before_two_looks_costs_no_task_and_leaves_nothing(monkeypatch):
    monkeypatch.setattr(modern, "HANGUP_WATCH_AFTER", 0.02)
    watch = modern.HangupWatch()
    tasks_before = len(asyncio.all_tasks())
    hangups = [watch.watch(hang_up_when(asyncio.Event()), Channel(), asyncio.current_task()) for _ in range(50)]
    assert len(asyncio.all_tasks()) == tasks_before  # no task per call, one timer for all
    for hangup in hangups:
        hangup.stop()
    assert watch._young == {}
    await asyncio.sleep(0.05)  # the look finds nothing running: no timer armed again
    assert watch._timer is None and len(asyncio.all_tasks()) == tasks_before


async def test_a_long_call_is_cancelled_when_its_client_hangs_up(monkeypatch):
    monkeypatch.setattr(modern, "HANGUP_WATCH_AFTER", 0.01)
    watch = modern.HangupWatch()
    gone, channel = asyncio.Event(), Channel()

    async def handler() -> str:
        await asyncio.sleep(30)
        return "answered"

    task = asyncio.ensure_future(handler())
    hangup = watch.watch(hang_up_when(gone), channel, task)
    while hangup._watcher is None:  # the timer's looks, however late a busy machine runs them
        await asyncio.sleep(0.01)
    assert not task.done()
    gone.set()
    await asyncio.wait_for(asyncio.wait([task]), 10)
    assert task.cancelled() and channel.reasons == ["the client closed the connection"]
    hangup.stop()


async def test_a_call_is_watched_at_the_second_look_after_it_started():
    watch = modern.HangupWatch()
    first = watch.watch(hang_up_when(asyncio.Event()), Channel(), None)
    watch._timer.cancel()  # the looks are made by hand here, not by the clock
    watch._look()
    second = watch.watch(hang_up_when(asyncio.Event()), Channel(), None)
    assert first._watcher is None and second._watcher is None
    watch._look()  # `first` ran through a whole interval, `second` maybe not
    assert first._watcher is not None and second._watcher is None
    watch._look()
    assert second._watcher is not None and watch._young == {}
    first.stop()
    second.stop()
    await asyncio.sleep(0)
    assert first._watcher.cancelled() and second._watcher.cancelled()


def test_a_watch_served_on_another_loop_starts_again():
    watch = modern.HangupWatch()

    async def one() -> None:
        watch.watch(hang_up_when(asyncio.Event()), Channel(), None)  # never stopped: its loop ends first

    asyncio.run(one())
    asyncio.run(one())  # a new loop: the old loop's timer and calls are dropped, a timer armed on this one
    assert len(watch._young) == 1
