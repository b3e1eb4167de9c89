"""Three uvicorn replicas sharing one real redis-server, the client choosing the replica per request
(no sticky sessions): the handshake-era wire with sessions, elicitation, cancellation and resumable GET
streams across replicas, the 2026-07-28 wire surviving a killed replica, and a Redis restart."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.redis_helpers import replicas, running_redis

VERSION = "2025-11-25"
MODERN = "2026-07-28"
SSE = "application/json, text/event-stream"
ALICE = {"authorization": "Bearer alice"}
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def cluster():
    """Replicas for the tests that leave Redis and every replica running (started once per module)."""
    with running_redis() as server, replicas(server.url) as started:
        yield started


@pytest.fixture
def fresh_cluster(redis_server):
    """Fresh replicas and Redis, for tests that kill a replica or restart Redis."""
    with replicas(redis_server.url) as started:
        yield started


@pytest.fixture
async def http():
    async with httpx.AsyncClient(timeout=httpx.Timeout(30.0)) as client:
        yield client


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """Parse an SSE body into `{"id": ..., "data": <json or None>}` events (comments/pings skipped)."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if not line:
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "id":
            event["id"] = value
        elif field == "data":
            event["data"] = json.loads(value) if value else None


def rpc(method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": next(_ids), "method": method, **extra}
    if params is not None:
        message["params"] = params
    return message


def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return rpc("tools/call", {"name": name, "arguments": arguments})


async def initialize(http: httpx.AsyncClient, url: str, headers: dict[str, str] | None = None) -> str:
    body = rpc("initialize", {"protocolVersion": VERSION, "capabilities": {"elicitation": {}},
                              "clientInfo": {"name": "scale-out-test", "version": "1"}})
    response = await http.post(url, json=body, headers={"accept": "application/json", **(headers or {})})
    assert response.status_code == 200, response.text
    sid = response.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    ack = await http.post(url, json=note, headers=session_headers(sid, headers))
    assert ack.status_code == 202
    return sid


def session_headers(sid: str, extra: dict[str, str] | None = None, accept: str = "application/json") -> dict[str, str]:
    return {"mcp-session-id": sid, "mcp-protocol-version": VERSION, "accept": accept, **(extra or {})}


async def post_json(http, url, sid, message, extra=None) -> httpx.Response:
    return await http.post(url, json=message, headers=session_headers(sid, extra))


def text_of(reply: dict[str, Any]) -> str:
    return reply["result"]["content"][0]["text"]


async def test_session_created_on_a_serves_b_and_elicitation_answered_through_c(cluster, http):
    a, b, c = cluster["A"].url, cluster["B"].url, cluster["C"].url
    sid = await initialize(http, a, ALICE)

    reply = await post_json(http, b, sid, call("desk_echo", {"text": "hi"}), ALICE)
    assert reply.status_code == 200 and text_of(reply.json()) == "hi from B"

    # The session belongs to alice: other credentials (or none) cannot use it on any replica.
    for url, creds in ((c, {"authorization": "Bearer mallory"}), (b, {})):
        stolen = await post_json(http, url, sid, call("desk_echo", {"text": "x"}), creds)
        assert stolen.status_code == 404 and stolen.json()["error"]["message"] == "Session not found"

    request = call("desk_confirm", {"item": "inv_1"})
    async with http.stream("POST", b, json=request, headers=session_headers(sid, ALICE, accept=SSE)) as stream:
        assert stream.status_code == 200
        events = sse_events(stream)
        seen: list[dict[str, Any]] = []
        async for event in events:
            if event.get("data") is None:  # priming event
                continue
            seen.append(event["data"])
            message = event["data"]
            if message.get("method") == "elicitation/create":
                assert message["params"]["message"] == "Delete inv_1?"
                answer = {"jsonrpc": "2.0", "id": message["id"],
                          "result": {"action": "accept", "content": {"ok": True}}}
                posted = await post_json(http, c, sid, answer, ALICE)
                assert posted.status_code == 202
            elif "result" in message or "error" in message:
                break
    assert [m.get("method") for m in seen] == ["elicitation/create", None]
    assert seen[-1]["id"] == request["id"] and text_of(seen[-1]) == "deleted inv_1 on B"


async def test_json_mode_call_on_c_asks_through_the_get_stream_on_b_answered_on_a(cluster, http):
    sid = await initialize(http, cluster["A"].url)
    async with http.stream("GET", cluster["B"].url, headers=session_headers(sid, accept="text/event-stream")) as get:
        events = sse_events(get)
        assert (await anext(events))["data"] is None  # B's GET stream listens
        request = call("desk_confirm", {"item": "inv_9"})
        pending = asyncio.ensure_future(post_json(http, cluster["C"].url, sid, request))  # JSON response mode
        asked = (await anext(events))["data"]
        assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Delete inv_9?"
        answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}}
        assert (await post_json(http, cluster["A"].url, sid, answer)).status_code == 202
        reply = await pending
    assert reply.headers["content-type"].startswith("application/json")
    assert reply.json()["id"] == request["id"] and text_of(reply.json()) == "deleted inv_9 on C"


async def test_cancellation_posted_to_c_stops_the_handler_on_b(cluster, http):
    sid = await initialize(http, cluster["A"].url)
    request = call("desk_wait", {})
    async with http.stream("POST", cluster["B"].url, json=request,
                           headers=session_headers(sid, accept=SSE)) as stream:
        messages = []
        async for event in sse_events(stream):
            if event.get("data") is None and not messages:
                # Primed: the handler runs on B. Cancel it through C.
                note = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": request["id"], "reason": "user gave up"}}
                assert (await post_json(http, cluster["C"].url, sid, note)).status_code == 202
                messages.append("primed")
            elif event.get("data") is not None:
                messages.append(event["data"])
    # The handler on B saw the cancellation (it answers "timeout" otherwise, after 60 s): the stream ends
    # without a response, or with the handler's own "cancelled" if it returned before the task was cancelled.
    assert messages[0] == "primed"
    assert [text_of(m) for m in messages[1:]] in ([], ["cancelled"])
    reply = await post_json(http, cluster["A"].url, sid, call("desk_echo", {"text": "still"}))
    assert text_of(reply.json()) == "still from A"


async def test_delete_on_c_ends_the_session_and_its_calls_everywhere(cluster, http):
    sid = await initialize(http, cluster["A"].url)
    request = call("desk_wait", {})
    messages: list[Any] = []
    async with http.stream("POST", cluster["B"].url, json=request, headers=session_headers(sid, accept=SSE)) as stream:
        async for event in sse_events(stream):
            if event.get("data") is None and not messages:
                messages.append("primed")  # the handler waits on B; the session is deleted through C
                deleted = await http.delete(cluster["C"].url, headers=session_headers(sid))
                assert deleted.status_code == 200
            elif event.get("data") is not None:
                messages.append(event["data"])
    assert messages[0] == "primed" and [text_of(m) for m in messages[1:]] in ([], ["cancelled"])
    for replica in cluster.values():
        gone = await post_json(http, replica.url, sid, call("desk_echo", {"text": "x"}))
        assert gone.status_code == 404


async def announce(http, url, sid, start, count) -> None:
    """Notifications sent by a JSON-mode call: they travel on the session's GET stream."""
    reply = await post_json(http, url, sid, call("desk_announce", {"start": start, "count": count}))
    assert reply.status_code == 200 and text_of(reply.json()).startswith(f"announced {count}")


def numbered(event: dict[str, Any]) -> int:
    message = event["data"]
    assert message["method"] == "notifications/message"
    return message["params"]["data"]["n"]


async def test_get_stream_cut_on_b_resumes_on_c_without_loss_or_repeat(cluster, http):
    a, b, c = (cluster[n].url for n in "ABC")
    sid = await initialize(http, a)
    get_headers = session_headers(sid, accept="text/event-stream")
    received: list[int] = []
    async with http.stream("GET", b, headers=get_headers) as stream:
        assert stream.status_code == 200
        events = sse_events(stream)
        priming = await anext(events)
        assert priming["data"] is None and priming["id"].startswith(sid)  # B listens from here on
        await announce(http, a, sid, 0, 5)
        last_id = None
        for _ in range(5):
            event = await anext(events)
            received.append(numbered(event))
            last_id = event["id"]
    # The connection to B is cut. Notifications sent meanwhile are kept in Redis for the session.
    await announce(http, c, sid, 5, 3)
    async with http.stream("GET", c, headers={**get_headers, "last-event-id": last_id}) as stream:
        assert stream.status_code == 200
        events = sse_events(stream)
        ids = []
        while len(received) < 8:
            event = await anext(events)
            if event.get("data") is None:
                continue  # C's priming event
            received.append(numbered(event))
            ids.append(event["id"])
        await announce(http, b, sid, 8, 2)  # produced on B, delivered live on C
        while len(received) < 10:
            event = await anext(events)
            if event.get("data") is not None:
                received.append(numbered(event))
                ids.append(event["id"])
    assert received == list(range(10))
    assert len(set(ids)) == len(ids) and last_id not in ids
    # An id that was never issued for this session is refused, on any replica.
    async with http.stream("GET", a, headers={**get_headers, "last-event-id": "other~get#1"}) as stream:
        assert stream.status_code == 400  # (not 404: the session itself is alive)


async def test_server_notification_on_a_reaches_get_stream_on_b_and_listen_stream_on_c(cluster, http):
    sid = await initialize(http, cluster["A"].url)
    listen = {"jsonrpc": "2.0", "id": next(_ids), "method": "subscriptions/listen",
              "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    listen_headers = {"accept": SSE, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    async with http.stream("GET", cluster["B"].url, headers=session_headers(sid, accept="text/event-stream")) as get, \
            http.stream("POST", cluster["C"].url, json=listen, headers=listen_headers) as modern:
        get_events, modern_events = sse_events(get), sse_events(modern)
        assert (await anext(get_events))["data"] is None  # B's GET stream is subscribed
        ack = (await anext(modern_events))["data"]
        assert ack["method"] == "notifications/subscriptions/acknowledged"  # C's listen stream too
        reply = await post_json(http, cluster["A"].url, sid, call("desk_redeploy", {}))
        assert text_of(reply.json()) == "notified from A"
        on_b = (await anext(get_events))["data"]
        on_c = (await anext(modern_events))["data"]
    assert on_b["method"] == on_c["method"] == "notifications/tools/list_changed"
    assert on_c["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen["id"]


async def test_post_stream_closed_on_b_is_resumed_on_c_and_the_call_finishes_there(cluster, http):
    a, b, c = (cluster[n].url for n in "ABC")
    sid = await initialize(http, a)
    request = call("desk_handoff", {"item": "doc_7"})
    first: list[dict[str, Any]] = []
    async with http.stream("POST", b, json=request, headers=session_headers(sid, accept=SSE)) as stream:
        async for event in sse_events(stream):  # ends when the handler closes the stream
            first.append(event)
    assert first[0]["data"] is None  # priming
    assert [e["data"]["params"]["data"] for e in first[1:]] == [{"step": "started", "on": "B"}]
    last_id = first[-1]["id"]

    resumed: list[dict[str, Any]] = []
    async with http.stream("GET", c, headers={**session_headers(sid, accept="text/event-stream"),
                                              "last-event-id": last_id}) as stream:
        assert stream.status_code == 200
        async for event in sse_events(stream):
            message = event.get("data")
            if message is None:
                continue
            resumed.append(event)
            if message.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "accept", "content": {}}}
                assert (await post_json(http, a, sid, answer)).status_code == 202
    # C replayed the elicitation B sent after the cut, then relayed B's response live; nothing twice.
    assert [e["data"].get("method") for e in resumed] == ["elicitation/create", None]
    assert resumed[-1]["data"]["id"] == request["id"] and text_of(resumed[-1]["data"]) == "accept doc_7 on B"
    ids = [e["id"] for e in first + resumed if "id" in e]
    assert len(ids) == len(set(ids))


# -- 2026-07-28: sessionless, any replica continues any round ------------------------------------------


class RoundRobin:
    """A client-side load balancer without stickiness that retries a failed request on the next replica."""

    def __init__(self, http: httpx.AsyncClient, urls: list[str]) -> None:
        self.http = http
        self.urls = urls
        self.turn = itertools.count()
        self.retries = 0

    async def modern_call(self, name: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
        params = {"name": name, "arguments": arguments, "_meta": META, **extra}
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": "tools/call", "params": params}
        headers = {"accept": SSE, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}
        for _ in range(10):
            url = self.urls[next(self.turn) % len(self.urls)]
            try:
                response = await self.http.post(url, json=body, headers=headers)
            except httpx.TransportError:  # refused, reset or cut mid-response: the replica is gone
                self.retries += 1
                continue
            assert response.status_code == 200, response.text
            return response.json()["result"]
        raise AssertionError(f"no replica answered {name}")


async def confirm_flow(balancer: RoundRobin, item: str) -> str:
    """Two rounds of an input-required call; the rounds usually land on different replicas."""
    first = await balancer.modern_call("desk_confirm", {"item": item})
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["confirm"]["params"]["message"] == f"Delete {item}?"
    answer = {"confirm": {"action": "accept", "content": {"ok": True}}}
    done = await balancer.modern_call("desk_confirm", {"item": item}, inputResponses=answer,
                                      requestState=first["requestState"])
    return done["content"][0]["text"]


async def test_modern_wire_loses_no_call_when_a_replica_is_killed_mid_load(fresh_cluster, http):
    balancer = RoundRobin(http, [r.url for r in fresh_cluster.values()])
    total, workers = 90, 9
    jobs: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        jobs.put_nowait(i)
    results: dict[int, str] = {}
    killed = asyncio.Event()

    async def worker() -> None:
        while not jobs.empty():
            i = jobs.get_nowait()
            if i % 3 == 0:
                results[i] = await confirm_flow(balancer, f"item{i}")
            else:
                reply = await balancer.modern_call("desk_echo", {"text": f"call{i}", "pause": 0.05})
                results[i] = reply["content"][0]["text"]
            if len(results) == total // 3 and not killed.is_set():
                killed.set()
                fresh_cluster["B"].kill()  # in-flight requests on B die with it

    await asyncio.gather(*(worker() for _ in range(workers)))
    assert killed.is_set() and fresh_cluster["B"].process.returncode == -9
    assert sorted(results) == list(range(total))
    for i, text in results.items():
        expected = f"deleted item{i} on " if i % 3 == 0 else f"call{i} from "
        assert text.startswith(expected) and text[-1] in "ABC", text
    # B was hit after its death (round robin), and those requests were retried elsewhere.
    assert balancer.retries > 0
    late = [text for i, text in results.items() if i > total // 2]
    assert late and not any(text.endswith(" B") for text in late[-10:])


# -- Redis restarted: sessions are gone, the client re-initializes, nothing hangs or fails with a 5xx --


async def test_redis_outage_gives_503_then_404_after_restart_and_reinitialize_works_everywhere(
        redis_server, fresh_cluster, http):
    a, b, c = (fresh_cluster[n].url for n in "ABC")
    sid = await initialize(http, a, ALICE)
    assert text_of((await post_json(http, b, sid, call("desk_echo", {"text": "before"}), ALICE)).json()) \
        == "before from B"

    # Redis down: answers stay fast and clear. The session may exist: 503, retry later (never 404)...
    redis_server.stop()
    unavailable = await post_json(http, b, sid, call("desk_echo", {"text": "x"}), ALICE)
    assert unavailable.status_code == 503 and unavailable.headers["retry-after"]
    body = rpc("initialize", {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    refused = await http.post(c, json=body, headers={"accept": "application/json"})
    assert refused.status_code == 503 and "retry later" in refused.text  # ...and initialize says retry later

    # Redis back, empty (no persistence): every session, stream and subscription is gone.
    redis_server.start()
    for url in (a, b, c):
        lost = await post_json(http, url, sid, call("desk_echo", {"text": "after"}), ALICE)
        assert lost.status_code == 404 and lost.json()["error"]["message"] == "Session not found"
        async with http.stream("GET", url, headers=session_headers(sid, ALICE, accept="text/event-stream")) as get:
            assert get.status_code == 404

    sid = await initialize(http, c, ALICE)
    assert text_of((await post_json(http, a, sid, call("desk_echo", {"text": "again"}), ALICE)).json()) \
        == "again from A"
    # Pub/sub came back too: an elicitation on B answered through A.
    request = call("desk_confirm", {"item": "inv_2"})
    replies = []
    async with http.stream("POST", b, json=request, headers=session_headers(sid, ALICE, accept=SSE)) as stream:
        async for event in sse_events(stream):
            message = event.get("data")
            if message and message.get("method") == "elicitation/create":
                answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"action": "decline"}}
                assert (await post_json(http, a, sid, answer, ALICE)).status_code == 202
            elif message and "result" in message:
                replies.append(text_of(message))
    assert replies == ["kept inv_2 on B"]
