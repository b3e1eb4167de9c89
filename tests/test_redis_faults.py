"""Fault injection on a real redis-server under 2025-11-25 SSE replies: Redis frozen (SIGSTOP) or restarted
between the priming event and the result. Every stream ends with its result and no call is lost; while
Redis is unreachable a live session is answered 503 + Retry-After, never 404."""

from __future__ import annotations

import asyncio
import signal
import time

import httpx
import pytest

from mcpfusion.mcp.events import InMemoryEventStore
from tests.mcp_app import build_fusion
from tests.redis_helpers import replicas
from tests.service_kit import sse_messages
from tests.test_redis_scale_out import (
    ALICE,
    SSE,
    call,
    initialize,
    post_json,
    rpc,
    session_headers,
    sse_events,
    text_of,
)

CALLS = 8


@pytest.fixture
def cluster(redis_server):
    with replicas(redis_server.url, names="AB") as started:
        yield started


async def streamed_call(http: httpx.AsyncClient, url: str, sid: str, text: str, primed: asyncio.Event,
                        counter: list[int]) -> list[dict]:
    """One SSE tools/call; sets `primed` once every call has its priming event. Returns its messages."""
    messages = []
    request = call("desk_echo", {"text": text, "pause": 1.5})
    async with http.stream("POST", url, json=request, headers=session_headers(sid, ALICE, accept=SSE)) as stream:
        assert stream.status_code == 200
        async for event in sse_events(stream):
            if event.get("data") is None and "id" in event:  # the priming event
                counter[0] += 1
                if counter[0] == CALLS:
                    primed.set()
                continue
            messages.append(event["data"])
    return messages


async def run_calls_through(fault, http, cluster) -> None:
    a, b = cluster["A"].url, cluster["B"].url
    sid = await initialize(http, a, ALICE)
    primed, counter = asyncio.Event(), [0]
    calls = [asyncio.create_task(streamed_call(http, (a, b)[i % 2], sid, f"call-{i}", primed, counter))
             for i in range(CALLS)]
    await asyncio.wait_for(primed.wait(), 60)
    await asyncio.to_thread(fault)  # while every handler is still pausing: the replies meet the fault
    # A hang guard, not a speed claim: a stream left open (pings only) would block here forever.
    results = await asyncio.wait_for(asyncio.gather(*calls), 120)
    for i, messages in enumerate(results):
        replies = [m for m in messages if "result" in m or "error" in m]
        assert len(replies) == 1, messages  # the stream ended with exactly one reply...
        assert text_of(replies[0]) == f"call-{i} from {'AB'[i % 2]}"  # ...the call's result: none lost


async def test_streams_end_with_their_result_when_redis_freezes(redis_server, cluster):
    def freeze() -> None:
        redis_server.process.send_signal(signal.SIGSTOP)
        try:
            # Longer than the client's socket timeout (5 s): the replies' first store attempts time out.
            time.sleep(6.0)
        finally:
            redis_server.process.send_signal(signal.SIGCONT)

    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
        await run_calls_through(freeze, http, cluster)
        # and the replicas still serve afterwards
        sid = await initialize(http, cluster["B"].url, ALICE)
        reply = await post_json(http, cluster["A"].url, sid, call("desk_echo", {"text": "after"}), ALICE)
        assert text_of(reply.json()) == "after from A"


async def test_streams_end_with_their_result_when_redis_restarts(redis_server, cluster):
    def restart() -> None:
        redis_server.stop()
        time.sleep(2.0)  # the handlers finish while Redis is down
        redis_server.start()

    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
        await run_calls_through(restart, http, cluster)
        # Right after the restart, a burst of initializes meets the pooled connections: none may fail.
        init = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "burst", "version": "1"}})
        bursts = await asyncio.gather(*(http.post(cluster["AB"[i % 2]].url, json=init,
                                                  headers={"accept": "application/json", **ALICE}) for i in range(16)))
        assert [r.status_code for r in bursts] == [200] * 16, [r.text for r in bursts if r.status_code != 200]


async def test_outage_answers_live_sessions_503_with_retry_after(redis_server, cluster):
    async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as http:
        sid = await initialize(http, cluster["A"].url, ALICE)
        redis_server.stop()
        try:
            for url in (cluster["A"].url, cluster["B"].url):
                r = await post_json(http, url, sid, call("desk_echo", {"text": "x"}), ALICE)
                assert r.status_code == 503, r.text
                assert int(r.headers["retry-after"]) > 0
                assert "Traceback" not in r.text
        finally:
            redis_server.start()
        # Redis came back empty (no persistence): now the session is known not to exist.
        r = await post_json(http, cluster["B"].url, sid, call("desk_echo", {"text": "x"}), ALICE)
        assert r.status_code == 404


class StoreThatLosesReplies(InMemoryEventStore):
    """An event store that takes the priming event, then is down (like Redis gone for good)."""

    async def store_event(self, stream_id, message):
        if message is not None:
            raise ConnectionError("event store unreachable")
        return await super().store_event(stream_id, message)


async def test_reply_goes_out_unstored_when_the_store_stays_down():
    app = build_fusion(reply_store_timeout=0.3, event_store=StoreThatLosesReplies()).build_app()
    headers = {"accept": SSE, "content-type": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        init = rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                  "clientInfo": {"name": "t", "version": "1"}})
        r = await client.post("/mcp", json=init, headers=headers)
        session = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        request = call("billing_get_invoice", {"id": "inv_1"})
        reply = await asyncio.wait_for(client.post("/mcp", json=request, headers=session), 60)  # hang guard
    messages = sse_messages(reply.text)
    assert [m["id"] for m in messages] == [request["id"]]  # the stream ended with its reply
    assert messages[0]["result"]["isError"] is False
