"""Engine hardening found by black-box testing: cancellations that name no request, replies JSON cannot carry,
resumed streams that have ended, the subscriptions/listen cap under concurrency, GET/DELETE with an unsupported
version, missing client capabilities, the revisions negotiated, and a session store that is down or refuses
writes. Each test fails without its fix."""

from __future__ import annotations

import asyncio
import gc
import json
import re
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from starlette.responses import Response

from mcpfusion import Context, Tool
from mcpfusion.app import MCPFusion
from mcpfusion.mcp import jsonrpc
from mcpfusion.mcp.sessions import InMemorySessionStore, Session, SessionLimitError
from mcpfusion.mcp.wire import Releasing
from tests.mcp_app import build_fusion, serve

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}
VERSION = "2025-11-25"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def probe_tool() -> Tool:
    probe = Tool("probe", description="Probes", exposition="flat")

    @probe.action()
    async def sleepy(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return "slept"

    # A read: a write's answer no wire can carry is refused inside the run, as done (tests/test_round6j.py).
    @probe.action(readonly=True)
    async def file_name() -> str:
        """A file name as os.listdir gives it for bytes that are not UTF-8."""
        return "report_\udcff.txt"

    @probe.action()
    async def ask_twice(ctx: Context) -> str:
        """Ask the client for a form and its roots at once."""
        await ctx.ask({"form": ctx.elicitation("Sure?"), "roots": ctx.roots()})
        return "asked"

    return probe


def fusion_with_probes(**settings: Any) -> MCPFusion:
    fusion = build_fusion(**settings)
    fusion.add_tool(probe_tool())
    return fusion


def app_with_probes(**settings: Any) -> Any:
    return fusion_with_probes(**settings).build_app()


@pytest.fixture(scope="module")
def base():
    with serve(app_with_probes(sse_ping_seconds=0.5)) as url:
        yield url


@pytest.fixture
async def client(base):
    async with httpx.AsyncClient(base_url=base, timeout=20) as c:
        yield c


def rpc(id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:  # noqa: A002
    return {"jsonrpc": "2.0", "id": id, "method": method, **({"params": params} if params is not None else {})}


def tool_call(id: Any, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:  # noqa: A002
    return rpc(id, "tools/call", {"name": name, "arguments": arguments or {}})


def cancelled(params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


async def initialize(client: httpx.AsyncClient, capabilities: dict[str, Any] | None = None,
                     version: str = VERSION) -> dict[str, str]:
    body = rpc(1, "initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                 "clientInfo": {"name": "t", "version": "1"}})
    r = await client.post("/mcp", json=body, headers=JSON_ONLY)
    assert r.status_code == 200, r.text
    return {**ACCEPT, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": VERSION}


def modern_call(name: str, arguments: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    body = rpc(1, "tools/call", {"name": name, "arguments": arguments or {}, "_meta": META})
    return body, {**JSON_ONLY, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": name}


def sse_data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


async def sleepy_calls(client: httpx.AsyncClient, headers: dict[str, str], cancel: dict[str, Any]) -> list[Any]:
    """Two JSON-mode calls sleeping 1.5 s, and `cancel` sent while they run: what each answered."""
    json_headers = {**headers, "accept": "application/json"}

    async def one(rid: str) -> Any:
        r = await client.post("/mcp", json=tool_call(rid, "probe_sleepy", {"seconds": 1.5}), headers=json_headers)
        return r.json()["result"]["content"][0]["text"] if r.status_code == 200 else r.status_code

    calls = [asyncio.create_task(one(rid)) for rid in ("a", "b")]
    await asyncio.sleep(0.5)
    r = await client.post("/mcp", json=cancelled(cancel), headers=json_headers)
    assert r.status_code == 202, r.text
    return await asyncio.gather(*calls)


# -- 1, 2: notifications/cancelled that names no request ----------------------------------------------------


@pytest.mark.parametrize("cancel", [{}, {"requestId": None, "reason": "x"}])
async def test_cancel_without_request_id_cancels_nothing_with_redis(redis_server, cancel):
    with serve(app_with_probes(redis_url=redis_server.url, json_response=True)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            headers = await initialize(c)
            assert await sleepy_calls(c, headers, cancel) == ["slept", "slept"]
            # A cancellation that names one of them still stops that one only.
            json_headers = {**headers, "accept": "application/json"}
            slow = asyncio.create_task(c.post("/mcp", json=tool_call("c", "probe_sleepy", {"seconds": 5}),
                                              headers=json_headers))
            await asyncio.sleep(0.5)
            await c.post("/mcp", json=cancelled({"requestId": "c"}), headers=json_headers)
            assert (await slow).status_code == 204


@pytest.mark.parametrize("rid", [{"x": 1}, [1, 2], True, 1.5])
async def test_cancel_with_a_request_id_of_no_id_type_is_ignored(client, rid):
    headers = await initialize(client)
    json_headers = {**headers, "accept": "application/json"}
    running = asyncio.create_task(client.post("/mcp", json=tool_call(1, "probe_sleepy", {"seconds": 1}),
                                              headers=json_headers))
    await asyncio.sleep(0.3)
    r = await client.post("/mcp", json=cancelled({"requestId": rid}), headers=json_headers)
    assert r.status_code == 202
    # `true` is not the request whose id is 1 (a dict lookup would say it is).
    assert (await running).json()["result"]["content"][0]["text"] == "slept"


# -- 3: a reply JSON cannot carry ---------------------------------------------------------------------------


def test_unwritable_reply_is_encoded_as_an_internal_error():
    reply = jsonrpc.result(4, {"content": [{"type": "text", "text": "\ud800"}]})
    assert jsonrpc.encode(reply) == (b'{"jsonrpc":"2.0","id":4,"error":{"code":-32603,"message":"Internal error: '
                                     b'the result holds a value JSON cannot carry (e.g. text that is not valid '
                                     b'Unicode)"}}')
    assert jsonrpc.dumps(reply) == jsonrpc.encode(reply).decode()
    with pytest.raises(Exception, match="surrogates not allowed"):  # a notification: its sender fails
        jsonrpc.encode(jsonrpc.notification("notifications/message", {"data": "\ud800"}))


async def test_lone_surrogate_in_a_result_is_an_internal_error_on_every_wire(client):
    headers = await initialize(client)
    for accept in ("application/json", "application/json, text/event-stream"):
        r = await client.post("/mcp", json=tool_call(7, "probe_file_name"), headers={**headers, "accept": accept})
        assert r.status_code == 200
        replies = sse_data(r.text) if r.headers["content-type"].startswith("text/event-stream") else [r.json()]
        assert replies[-1]["id"] == 7 and replies[-1]["error"]["code"] == -32603
    body, modern_headers = modern_call("probe_file_name")
    r = await client.post("/mcp", json=body, headers=modern_headers)
    assert r.status_code == 200 and r.json()["error"]["code"] == -32603


# -- 4: resuming a stream that has ended ---------------------------------------------------------------------


async def test_resuming_a_finished_stream_ends_at_once(client):
    headers = await initialize(client)
    r = await client.post("/mcp", json=rpc(5, "ping"), headers=headers)
    ids = re.findall(r"^id: (\S+)", r.text, re.M)
    assert len(ids) == 2  # the priming event, then the response
    for last in ids:  # after the priming event: the response; after the response: nothing more
        # A resumed stream left open would never end by itself (it pings every 0.5 s): 10 s bounds a hang.
        resumed = await asyncio.wait_for(
            client.get("/mcp", headers={**headers, "accept": "text/event-stream", "last-event-id": last}), 10)
        assert resumed.status_code == 200
        assert [m["id"] for m in sse_data(resumed.text)] == ([5] if last == ids[0] else [])


async def test_resuming_a_cancelled_stream_ends_at_once(client):
    headers = await initialize(client)
    async with client.stream("POST", "/mcp", json=tool_call("s1", "probe_sleepy", {"seconds": 5}),
                             headers=headers) as stream:
        text = ""
        async for chunk in stream.aiter_text():
            text += chunk
            if "id: " in text:  # primed: cancel it
                r = await client.post("/mcp", json=cancelled({"requestId": "s1"}), headers=headers)
                assert r.status_code == 202
    last = re.findall(r"^id: (\S+)", text, re.M)[-1]
    resumed = await asyncio.wait_for(
        client.get("/mcp", headers={**headers, "accept": "text/event-stream", "last-event-id": last}), 3)
    assert resumed.status_code == 200 and sse_data(resumed.text) == []


async def test_resumed_stream_ends_when_the_session_is_deleted(client):
    headers = await initialize(client)
    async with client.stream("POST", "/mcp", json=tool_call("s2", "probe_sleepy", {"seconds": 30}),
                             headers=headers) as stream:
        async for chunk in stream.aiter_text():
            if "id: " in chunk:
                last = re.findall(r"^id: (\S+)", chunk, re.M)[-1]
                break
    resume = asyncio.create_task(
        client.get("/mcp", headers={**headers, "accept": "text/event-stream", "last-event-id": last}))
    await asyncio.sleep(0.5)
    assert not resume.done()  # the request still runs: the resumed stream waits for it
    assert (await client.delete("/mcp", headers=headers)).status_code == 200
    resumed = await asyncio.wait_for(resume, 3)
    assert resumed.status_code == 200


# -- 5: the subscriptions/listen cap under concurrency -------------------------------------------------------


async def test_listen_cap_holds_for_requests_sent_together():
    fusion = fusion_with_probes(max_sessions_per_principal=3)
    app = fusion.build_app()
    listening = fusion.transport.modern_wire.listening
    listen = rpc(1, "subscriptions/listen", {"notifications": {"toolsListChanged": True}, "_meta": META})
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    with serve(app) as url:
        limits = httpx.Limits(max_connections=50)
        async with httpx.AsyncClient(base_url=url, timeout=10, limits=limits) as c:
            statuses: list[int] = []
            gate = asyncio.Event()

            async def one() -> None:
                async with c.stream("POST", "/mcp", json=listen, headers=headers) as r:
                    statuses.append(r.status_code)
                    await gate.wait()

            tasks = [asyncio.create_task(one()) for _ in range(20)]
            while len(statuses) < 20:
                await asyncio.sleep(0.05)
            assert sorted(statuses) == [200] * 3 + [429] * 17
            gate.set()
            await asyncio.gather(*tasks)
            for _ in range(50):  # every slot comes back once its stream has ended
                if not listening:
                    break
                await asyncio.sleep(0.05)
            assert listening == {}


async def test_listen_slot_comes_back_once_whether_the_response_is_sent_or_dropped():
    released: list[str] = []
    dropped = Releasing(Response(b""), lambda: released.append("dropped"))
    del dropped
    gc.collect()
    sent = Releasing(Response(b"ok"), lambda: released.append("sent"))

    async def send(message: Any) -> None:
        pass

    await sent({"type": "http", "method": "GET", "headers": []}, None, send)  # type: ignore[arg-type]
    del sent
    gc.collect()
    assert released == ["dropped", "sent"]


# -- 6: GET and DELETE with an unsupported MCP-Protocol-Version ---------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_get_and_delete_with_an_unsupported_version_are_400(client, method):
    headers = await initialize(client)
    r = await client.request(method, "/mcp", headers={**headers, "mcp-protocol-version": "1999-01-01"})
    assert r.status_code == 400
    assert r.json()["error"] == {"code": -32600, "message": "Unsupported MCP-Protocol-Version: 1999-01-01"}
    # The 2026 revision has no GET or DELETE: still a 405 naming POST.
    r = await client.request(method, "/mcp", headers={**headers, "mcp-protocol-version": MODERN})
    assert r.status_code == 405 and r.headers["allow"] == "POST"


# -- 7: what the client lacks, said to the client -----------------------------------------------------------


@pytest.mark.parametrize(("tool", "capability"), [("billing_confirm_delete", "elicitation"),
                                                  ("billing_summarize", "sampling"), ("billing_roots", "roots")])
async def test_missing_client_capability_is_32021_on_both_wires(client, tool, capability):
    arguments = {"id": "inv_1"} if tool == "billing_confirm_delete" else {"text": "x"} if "summ" in tool else {}
    expected = {"code": -32021, "message": f"This request needs the client capability {capability!r}",
                "data": {"requiredCapabilities": {capability: {}}}}
    body, modern_headers = modern_call(tool, arguments)
    r = await client.post("/mcp", json=body, headers=modern_headers)
    assert r.status_code == 400 and r.json()["error"] == expected
    headers = await initialize(client)
    r = await client.post("/mcp", json=tool_call(3, tool, arguments), headers={**headers, "accept": "application/json"})
    assert r.json()["error"] == expected


async def test_every_missing_capability_is_named_at_once(client):
    headers = await initialize(client, {"elicitation": {}})
    r = await client.post("/mcp", json=tool_call(3, "probe_ask_twice"), headers={**headers, "accept": "application/json"})
    assert r.json()["error"]["data"] == {"requiredCapabilities": {"roots": {}}}


async def test_no_back_channel_is_a_tool_error_telling_the_client_what_to_change(client):
    headers = await initialize(client, {"elicitation": {}})
    r = await client.post("/mcp", json=tool_call(3, "billing_confirm_delete", {"id": "inv_1"}),
                          headers={**headers, "accept": "application/json"})
    result = r.json()["result"]
    text = result["content"][0]["text"]
    assert result["isError"] is True
    assert 'code="NO_BACK_CHANNEL"' in text and "elicitation/create" in text
    assert "open the session's GET stream" in text and "INTERNAL_ERROR" not in text


# -- 8: revisions negotiated and advertised -----------------------------------------------------------------


@pytest.mark.parametrize("old", ["2025-03-26", "2024-11-05"])
async def test_revisions_that_require_batches_are_not_negotiated(client, old):
    body = rpc(1, "initialize", {"protocolVersion": old, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
    r = await client.post("/mcp", json=body, headers=JSON_ONLY)
    assert r.json()["result"]["protocolVersion"] == VERSION
    discover = rpc(2, "server/discover", {"_meta": META})
    r = await client.post("/mcp", json=discover, headers={**JSON_ONLY, "mcp-protocol-version": MODERN,
                                                           "mcp-method": "server/discover"})
    assert r.json()["result"]["supportedVersions"] == ["2025-06-18", VERSION, MODERN]


# -- 9, 10: a session store that is down or refuses writes --------------------------------------------------


class DownStore(InMemorySessionStore):
    async def create(self, session: Session) -> None:
        raise SessionLimitError("the session store is unavailable")


async def test_initialize_refused_by_a_down_store_keeps_its_id():
    with serve(app_with_probes(session_store=DownStore())) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            body = rpc(7, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}})
            r = await c.post("/mcp", json=body, headers=JSON_ONLY)
    assert r.status_code == 503 and r.headers["retry-after"]
    assert r.json()["id"] == 7 and r.json()["error"]["code"] == -32603


async def test_redis_refusing_writes_is_503_and_not_ready(redis_server):
    app = app_with_probes(redis_url=redis_server.url)
    admin = aioredis.Redis.from_url(redis_server.url)
    with serve(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as c:
            assert (await c.get("/readyz")).status_code == 200
            await admin.config_set("maxmemory-policy", "noeviction")
            await admin.config_set("maxmemory", "1")
            try:
                body = rpc(7, "initialize", {"protocolVersion": VERSION, "capabilities": {},
                                             "clientInfo": {"name": "t", "version": "1"}})
                r = await c.post("/mcp", json=body, headers=JSON_ONLY)
                ready = await c.get("/readyz")
            finally:
                await admin.config_set("maxmemory", "0")
                await admin.aclose()
    assert r.status_code == 503 and r.json()["id"] == 7 and r.json()["error"]["code"] == -32603
    assert ready.status_code == 503


async def test_redis_database_it_does_not_have_is_unavailable(redis_server):
    from mcpfusion.redis import SessionStoreUnavailable, from_url

    stores = from_url(redis_server.url.rsplit("/", 1)[0] + "/99999")
    try:
        with pytest.raises(SessionStoreUnavailable):
            await stores.sessions.create(Session(id="s", protocol_version=VERSION))
    finally:
        await stores.aclose()


async def test_a_json_rpc_message_in_another_charset_than_utf8_is_415():
    """JSON is read as UTF-8 (RFC 8259): a body declared in another charset is refused for what it is, not
    answered as a parse error of its bytes; charset=utf-8 is read."""
    import httpx

    from mcpfusion import MCPFusion

    app = MCPFusion("charsets").build_app()
    body = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":' \
           '"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":' \
           '{"name":"t","version":"1"}}}}'
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for charset, encoded, status in (("utf-16", body.encode("utf-16"), 415), ("latin-1", body.encode(), 415),
                                         ("UTF-8", body.encode(), 200)):
            r = await http.post("/mcp", content=encoded,
                                headers={**headers, "content-type": f"application/json; charset={charset}"})
            assert r.status_code == status, (charset, r.text)
            if status == 415:
                assert "UTF-8" in r.json()["error"]["message"]
