"""A request's cancellation, as its channel and the handler's `Context` see it: the event to wait on is made
only when something waits, and says the same whether the cancel came before or after."""

from __future__ import annotations

import asyncio

import pytest

from mcpfusion.context import Context
from mcpfusion.mcp.channel import Channel, InputResponsesChannel


def test_a_channel_nobody_waits_on_makes_no_event() -> None:
    channel = InputResponsesChannel(progress_token=None)
    assert channel.is_cancelled is False
    channel.cancel("gone")
    assert channel.is_cancelled is True
    assert channel.cancel_reason == "gone"
    assert channel._cancelled is None  # nobody waited: no Event was made


async def test_cancelled_before_the_wait_is_seen_at_once() -> None:
    channel = Channel()
    context = Context(channel)
    channel.cancel("client closed")
    assert context.cancelled is True
    await asyncio.wait_for(context.wait_cancelled(), 1)  # the late event starts set
    with pytest.raises(asyncio.CancelledError, match="client closed"):
        context.raise_if_cancelled()


async def test_a_waiter_wakes_when_the_request_is_cancelled() -> None:
    channel = InputResponsesChannel()
    context = Context(channel)
    waiter = asyncio.ensure_future(context.wait_cancelled())
    await asyncio.sleep(0)
    assert not waiter.done() and context.cancelled is False
    channel.cancel()
    await asyncio.wait_for(waiter, 1)
    assert context.cancelled is True
    context2 = Context(Channel())
    assert context2.cancelled is False
    context2.raise_if_cancelled()  # not cancelled: nothing raised


def test_channels_do_not_share_their_state() -> None:
    first, second = Channel(), Channel()
    first.cancel("one")
    assert second.is_cancelled is False and second.cancel_reason is None and second.failure is None
    assert first.cancelled is not second.cancelled
    assert first.cancelled.is_set() and not second.cancelled.is_set()
