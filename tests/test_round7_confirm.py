"""Round 7, confirmations and timeouts: a confirmation covers every argument the action receives (an ordinary
`cursor` of an action that is not paginated, a `_select` its tool does not take), on every transport and on the
2026-07-28 wire's question; a plain `def` write under `Timeout` is never said to be stopped nor invited to be
retried (its thread goes on, and its write may land)."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest
from fastapi import FastAPI
from pydantic import BaseModel, Field

from mcpfusion import Flatten, MCPFusion, Timeout, Tool
from mcpfusion.auth import RequireBearer
from mcpfusion.confirm import CONFIRM_PARAM
from tests.governance_kit import MODERN_META, TRANSPORTS, Caller, authenticate
from tests.service_kit import confirm_token


class Position(BaseModel):
    cursor: str


class Item(BaseModel):
    id: str
    name: str


def events_app(ran: list[Any]) -> FastAPI:
    events = Tool("events", description="event log")

    @events.action(destructive=True, confirm="Delete every event before {cursor}?")
    async def purge(cursor: str) -> str:
        """Delete the events older than a position (an ordinary argument: the action is not paginated)."""
        ran.append(cursor)
        return f"purged before {cursor}"

    @events.action(destructive=True, confirm=True)
    async def rewind(position: Annotated[str, Field(alias="cursor")]) -> str:
        """Rewind the consumer (a parameter the agent sends as `cursor`)."""
        ran.append(position)
        return f"rewound to {position}"

    @events.action(destructive=True, confirm=True)
    async def seek(to: Annotated[Position, Flatten]) -> str:
        """Seek the consumer (a flattened model's field named `cursor`)."""
        ran.append(to.cursor)
        return f"sought {to.cursor}"

    @events.action(destructive=True, confirm=True,
                   input_schema={"type": "object", "properties": {"id": {"type": "string"}},
                                 "additionalProperties": True})
    async def wipe(id: str) -> str:
        """Wipe one stream (a hand-written schema that lets other arguments through)."""
        ran.append(id)
        return f"wiped {id}"

    app = MCPFusion("events", tools=[events]).build_app()
    app.add_middleware(RequireBearer, authenticate=authenticate, prefixes=("/mcp", "/api/"))
    return app


@pytest.mark.parametrize("action", ["purge", "rewind", "seek"])
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_confirmation_covers_an_ordinary_cursor_argument(transport, action):
    ran: list[Any] = []
    caller = Caller(events_app(ran), transport, "events")
    try:
        asked = await caller.call(action, {"cursor": "evt_0100"})
        assert asked.code == "CONFIRMATION_REQUIRED" and ran == []
        assert "evt_0100" in asked.text  # the question shows what runs
        token = confirm_token(asked.text)
        other = await caller.call(action, {"cursor": "evt_9999", CONFIRM_PARAM: token})
        assert other.code == "CONFIRMATION_REQUIRED" and ran == []  # another cursor: asked again
        assert "evt_9999" in other.text
        done = await caller.call(action, {"cursor": "evt_0100", CONFIRM_PARAM: token})
        assert done.code is None and ran == ["evt_0100"]
    finally:
        await caller.aclose()


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_confirmation_covers_a_select_its_tool_does_not_take(transport):
    ran: list[Any] = []
    caller = Caller(events_app(ran), transport, "events")
    try:
        asked = await caller.call("wipe", {"id": "s1", "_select": ["x"]})
        assert asked.code == "CONFIRMATION_REQUIRED" and ran == []
        token = confirm_token(asked.text)
        other = await caller.call("wipe", {"id": "s1", "_select": ["y"], CONFIRM_PARAM: token})
        assert other.code == "CONFIRMATION_REQUIRED" and ran == []
        done = await caller.call("wipe", {"id": "s1", "_select": ["x"], CONFIRM_PARAM: token})
        assert done.code is None and ran == ["s1"]
    finally:
        await caller.aclose()


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_the_select_of_a_selecting_tool_is_still_the_frameworks_own(transport):
    """`_select` of a tool with select=True shows the answer, not what runs: the token stands with or without it."""
    ran: list[str] = []
    shop = Tool("shop", select=True)

    @shop.action(destructive=True, confirm=True)
    async def drop(id: str) -> Item:
        """Drop an item."""
        ran.append(id)
        return Item(id=id, name="dropped")

    caller = Caller(MCPFusion("shop", tools=[shop]).build_app(), transport, "shop")
    try:
        asked = await caller.call("drop", {"id": "i1"})
        assert asked.code == "CONFIRMATION_REQUIRED"
        done = await caller.call("drop", {"id": "i1", "_select": ["id"], CONFIRM_PARAM: confirm_token(asked.text)})
        assert done.code is None and ran == ["i1"] and "dropped" not in done.text
    finally:
        await caller.aclose()


async def test_the_2026_question_is_bound_to_an_ordinary_cursor():
    """An answer given to "Delete every event before evt_0100?" does not run purge(cursor="evt_9999")."""
    ran: list[Any] = []
    caller = Caller(events_app(ran), "mcp-2026", "events")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "events", **caller.headers}

    async def rpc(cursor: str, responses: dict[str, Any] | None = None, state: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": "events", "arguments": {"action": "purge", "cursor": cursor}, "_meta": meta}
        if responses is not None:
            params["inputResponses"], params["requestState"] = responses, state
        r = await caller.client.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1,
                                                                     "method": "tools/call", "params": params})
        return r.json()["result"]

    try:
        first = await rpc("evt_0100")
        (key, request), = first["inputRequests"].items()
        assert request["params"]["message"] == 'Delete every event before "evt_0100"?'
        yes = {key: {"action": "accept", "content": {"confirm": True}}}
        other = await rpc("evt_9999", yes, first["requestState"])
        assert other["resultType"] == "input_required" and key not in other["inputRequests"] and ran == []
        done = await rpc("evt_0100", yes, first["requestState"])
        assert done["content"][0]["text"] == "purged before evt_0100" and ran == ["evt_0100"]
    finally:
        await caller.aclose()


def shop_app(release: threading.Event, finished: threading.Event, written: list[str]) -> FastAPI:
    shop = Tool("shop")

    @shop.action(middleware=[Timeout(0.05)])
    def place_order(item: str) -> str:
        """Place an order (a plain def: it runs in the thread pool)."""
        release.wait(30)  # the slow upstream: goes on after the timeout, until the test lets it
        written.append(item)
        finished.set()
        return f"ordered {item}"

    @shop.action(readonly=True, middleware=[Timeout(0.05)])
    def stock(item: str) -> str:
        """Read the stock (a plain def read)."""
        release.wait(30)
        finished.set()
        return "3"

    @shop.action(middleware=[Timeout(0.05)])
    async def cancel_order(item: str) -> str:
        """Cancel an order (async: cancelled for real)."""
        await asyncio.Event().wait()
        return "never"

    return MCPFusion("shop", tools=[shop]).build_app()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_sync_write_past_its_timeout_may_complete_and_is_not_retried(transport):
    release, finished, written = threading.Event(), threading.Event(), []
    caller = Caller(shop_app(release, finished, written), transport, "shop")
    try:
        answer = await caller.call("place_order", {"item": "book"})
        assert answer.code == "TIMEOUT" and written == []
        assert "stopped" not in answer.text.replace("could not be stopped", "")
        assert "may still be running" in answer.text and "check whether it took effect" in answer.text
        assert "Retry" not in answer.text and "Nothing was returned" not in answer.text
        if transport == "rest":
            assert answer.status == 504 and answer.problem["details"] == {"may_complete": True}
        else:
            assert '<detail key="may_complete">True</detail>' in answer.text
        release.set()  # the thread was abandoned, not stopped: its write lands, as the answer warned
        assert await asyncio.to_thread(finished.wait, 30) and written == ["book"]
    finally:
        release.set()
        await caller.aclose()


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_sync_read_past_its_timeout_is_not_said_stopped(transport):
    release, finished = threading.Event(), threading.Event()
    caller = Caller(shop_app(release, finished, []), transport, "shop")
    try:
        answer = await caller.call("stock", {"item": "book"})
        assert answer.code == "TIMEOUT" and "stopped" not in answer.text
        assert "Retry later" in answer.text and "may_complete" not in answer.text
    finally:
        release.set()
        await asyncio.to_thread(finished.wait, 30)
        await caller.aclose()


async def test_an_async_write_past_its_timeout_is_still_said_stopped():
    caller = Caller(shop_app(threading.Event(), threading.Event(), []), "tester", "shop")
    try:
        answer = await caller.call("cancel_order", {"item": "book"})
        assert answer.code == "TIMEOUT" and "was stopped" in answer.text and "may_complete" not in answer.text
    finally:
        await caller.aclose()
