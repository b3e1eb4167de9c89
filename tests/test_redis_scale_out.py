"""Three uvicorn replicas sharing one real redis-server, the client choosing the replica per request
(no sticky sessions): the handshake-era wire with sessions, elicitation, cancellation and resumable GET
streams across replicas, the 2026-07-28 wire surviving a killed replica, and a Redis restart."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis_helpers import (
    redis_server,  # noqa: F401 - fixture
    replicas,
)

VERSION = "2025-11-25"
MODERN = "2026-07-28"
SSE = "application/json, text/event-stream"
ALICE = {"authorization": "Bearer alice"}
_ids = itertools.count(1)


@pytest.fixture
def cluster(redis_server):  # noqa: F811
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
