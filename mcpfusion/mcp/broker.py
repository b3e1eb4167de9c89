"""Publish/subscribe between the requests of one server: responses to server-initiated requests,
notifications for a session's GET stream, live events of a resumed stream, cancellations.

In-memory by default; issue 6 adds a Redis implementation so a message published on one replica
reaches a subscriber on another.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol


class Subscription(Protocol):
    async def get(self) -> Any: ...

    def __aiter__(self) -> AsyncIterator[Any]: ...


class Broker(Protocol):
    async def publish(self, topic: str, message: Any) -> int:
        """Deliver `message` to the current subscribers of `topic`; return how many got it."""
        ...

    def subscribe(self, *topics: str) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """Context manager yielding one subscription that receives what is published on any of
        `topics` from now on."""
        ...


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
    def __init__(self) -> None:
        self._topics: dict[str, list[QueueSubscription]] = {}

    async def publish(self, topic: str, message: Any) -> int:
        subs = self._topics.get(topic)
        if not subs:
            return 0
        for sub in subs:
            sub.queue.put_nowait(message)
        return len(subs)

    def has_subscribers(self, topic: str) -> bool:
        return bool(self._topics.get(topic))

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
