"""Publish/subscribe between the requests of one server: responses to server-initiated requests,
notifications for a session's GET stream, live events of a resumed stream, cancellations.

In-memory by default; `mcpfusion.redis.RedisBroker` makes a message published on one replica reach a
subscriber on another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .events import EventStore

logger = logging.getLogger("mcpfusion.mcp")


class Subscription(Protocol):
    async def get(self) -> Any: ...

    def __aiter__(self) -> AsyncIterator[Any]: ...


class Broker(Protocol):
    distributed: bool
    """True when other processes publish on the same topics (the transport then follows the "cancel"
    topic, so a cancellation posted to another replica reaches the requests running here)."""

    async def publish(self, topic: str, message: Any) -> int:
        """Deliver `message` to the current subscribers of `topic`; return how many got it."""
        ...

    def subscribe(self, *topics: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Context manager yielding one subscription that receives what is published on any of
        `topics` from now on."""
        ...

    async def publish_event(
        self, events: EventStore, stream_id: str, topic: str, message: dict[str, Any]
    ) -> tuple[str, int]:
        """Store `message` in `events` under `stream_id`, then publish `(event_id, message)` on `topic`;
        return `(event_id, receivers)`. A broker that can do both in one step (Redis) keeps a stream's
        events in id order for every subscriber."""
        ...


async def publish_best_effort(broker: Broker, topic: str, message: Any) -> int:
    """`broker.publish`, or 0 receivers and one log line when the broker cannot take the message now: for
    what is advisory (a server notification, a cancellation's echo), sent by a caller whose work is done and
    must not fail with it (a client would send a write again)."""
    try:
        return await broker.publish(topic, message)
    except Exception as exc:  # noqa: BLE001 - any broker failure (Redis down, full, frozen)
        # The topic's kind only: the rest may be a session id, a bearer secret.
        logger.warning("could not publish a %s message (%r); dropped", topic.partition(":")[0], exc)
        return 0


class QueueSubscription:
    """A subscription delivering its topics' messages through an asyncio queue (used by every broker)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()

    async def get(self) -> Any:
        return await self.queue.get()

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            yield await self.queue.get()


class InMemoryBroker:
    distributed = False

    def __init__(self) -> None:
        self._topics: dict[str, list[QueueSubscription]] = {}

    async def publish(self, topic: str, message: Any) -> int:
        subs = self._topics.get(topic)
        if not subs:
            return 0
        for sub in subs:
            sub.queue.put_nowait(message)
        return len(subs)

    async def publish_event(
        self, events: EventStore, stream_id: str, topic: str, message: dict[str, Any]
    ) -> tuple[str, int]:
        event_id = await events.store_event(stream_id, message)
        return event_id, await self.publish(topic, (event_id, message))

    @contextlib.asynccontextmanager
    async def subscribe(self, *topics: str) -> AsyncIterator[QueueSubscription]:
        sub = QueueSubscription()
        for topic in topics:
            self._topics.setdefault(topic, []).append(sub)
        try:
            yield sub
        finally:
            for topic in topics:
                subs = self._topics.get(topic, [])
                if sub in subs:
                    subs.remove(sub)
                if not subs:
                    self._topics.pop(topic, None)
