"""Publish/subscribe between the requests of one server: responses to server-initiated requests,
notifications for a session's GET stream, live events of a resumed stream, cancellations.

In-memory by default; `mcpfusion.redis.RedisBroker` makes a message published on one replica reach a
subscriber on another.

A broker whose subscriptions can miss messages (Redis pub/sub keeps nothing while a connection is re-made)
may also keep what must not be lost (a client's answer to a server request, a cancellation), optionally, in
boxes of a session that something waits on, and only those (a client cannot store what nobody asked for):

- `expect(entries, fresh=True)`: each `(session_id, box, seconds)` may receive a message for `seconds` (a server
  request awaits its answer, a call runs and may be cancelled); `fresh` drops what an earlier use left in it;
- `publish_kept(topic, message, session_id, box)`: publishes, and keeps the message under `box` if that is
  expected; returns `(receivers, KEPT | UNEXPECTED | REFUSED)` (refused: too large, too many, Redis full);
- `collect(entries, forget=False)`: takes what is kept under each `(session_id, box)` (`forget`: and stops
  expecting it);
- `drop_kept(session_id)`: forgets all of a session's boxes (it was deleted).

A subscription that sets `recovers` then gets `RESUBSCRIBED` each time the broker has subscribed again after a
lost connection, and collects what it may have missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from .. import serializer

if TYPE_CHECKING:
    from .events import EventStore

logger = logging.getLogger("mcpfusion.mcp")


KEPT = "kept"
"""`publish_kept`: the message is kept (or one is already, for a box answered twice)."""
UNEXPECTED = "unexpected"
"""`publish_kept`: nothing waits on the box (never asked, answered already, ended): published only."""
REFUSED = "refused"
"""`publish_kept`: the box is expected but the message was not kept (too large, too many, Redis refused)."""


class Resubscribed:
    """The type of `RESUBSCRIBED`."""

    def __repr__(self) -> str:
        return "RESUBSCRIBED"


RESUBSCRIBED = Resubscribed()
"""Queued to a subscription that `recovers` once its broker has subscribed again after a lost connection:
what was published meanwhile is lost, what was kept (`publish_kept`) can be collected."""


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


MAX_QUEUED_MESSAGES = 10_000
MAX_QUEUED_BYTES = 16 * 1024 * 1024
"""How far one subscriber may fall behind (messages, JSON bytes) before its subscription is dropped: a client
that stops reading its stream must not make the server buffer without limit."""


class SubscriptionDropped(RuntimeError):
    """The subscriber fell behind its bound and was told the end (None) already: it must stop reading."""


def message_size(message: Any) -> int:
    """The JSON size of `message` in bytes (what holding it costs, near enough)."""
    try:
        return len(serializer.json_bytes(message))
    except Exception:  # noqa: BLE001 - not JSON: counted by number only
        return 0


class BoundedQueue(asyncio.Queue[Any]):
    """A queue that holds at most `max_messages` items and `max_bytes` bytes for a slow reader; past either
    bound it drops everything held and ends (its reader gets None, then `SubscriptionDropped`) rather than
    buffer or block the publisher."""

    def __init__(self, max_messages: int | None = None, max_bytes: int | None = None,
                 on_drop: Callable[[], object] | None = None) -> None:
        super().__init__()
        self.on_drop = on_drop  # called once dropped: the reader may be stuck writing, not reading this
        self.max_messages = MAX_QUEUED_MESSAGES if max_messages is None else max_messages
        self.max_bytes = MAX_QUEUED_BYTES if max_bytes is None else max_bytes
        self.held = 0  # bytes of the items queued
        self.dropped = False

    def put_nowait(self, item: Any, size: int | None = None) -> None:
        """Queue `item` (`size`: its bytes, when the publisher knows them), or drop the queue past its bound."""
        if self.dropped:
            return
        if size is None:
            size = message_size(item)
        if self.qsize() >= self.max_messages or self.held + size > self.max_bytes:
            self._drop()
            return
        self.held += size
        super().put_nowait((size, item))

    def _drop(self) -> None:
        logger.warning("a stream reader fell behind by %d messages (%d bytes): its stream is closed (a session "
                       "stream resumes with Last-Event-ID)", self.qsize(), self.held)
        self.dropped = True
        while not self.empty():
            self.get_nowait()
        super().put_nowait((0, None))  # the end, as a session's end is told
        if self.on_drop is not None:
            self.on_drop()

    async def next(self) -> Any:
        """The next item; None once dropped, then `SubscriptionDropped` (a reader skipping None must not spin)."""
        if self.dropped and self.empty():
            raise SubscriptionDropped("the subscriber fell behind and was dropped")
        return await self.get()

    def _get(self) -> Any:  # asyncio.Queue's hook: `get` returns the item, its size no longer held
        size, item = super()._get()
        self.held -= size
        return item


class QueueSubscription:
    """A subscription delivering its topics' messages through a `BoundedQueue` (used by every broker)."""

    def __init__(self) -> None:
        self.queue = BoundedQueue()
        self.recovers = False  # set by a subscriber that collects kept messages: it is told `RESUBSCRIBED`

    async def get(self) -> Any:
        return await self.queue.next()

    async def __aiter__(self) -> AsyncIterator[Any]:
        while True:
            yield await self.queue.next()


class InMemoryBroker:
    distributed = False

    def __init__(self) -> None:
        self._topics: dict[str, list[QueueSubscription]] = {}

    async def publish(self, topic: str, message: Any) -> int:
        subs = self._topics.get(topic)
        if not subs:
            return 0
        size = message_size(message)  # once for every subscriber
        for sub in subs:
            sub.queue.put_nowait(message, size)
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
