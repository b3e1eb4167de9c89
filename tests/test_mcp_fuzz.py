"""A hypothesis JSON-RPC fuzzer on `/mcp` of the reference service, both wires: whatever the body, the
answer is a 4xx or a JSON-RPC reply, never a 5xx, never a hang and never traceback text."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.service_kit import META, asgi_client, build

EXAMPLES = 150
REPLY_GUARD = 30  # seconds: a hang guard only (an in-process reply takes milliseconds)

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/templates/list",
           "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
           "completion/complete", "logging/setLevel", "server/discover", "notifications/initialized",
           "notifications/cancelled"]
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | \
    st.text(max_size=12)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                          max_size=4), max_leaves=10)
ACTIONS = st.sampled_from(["list_invoices", "get_invoice", "create_invoice", "record_payment", "list", "get", "nope"])
ARGUMENTS = st.fixed_dictionaries({}, optional={
    "action": ACTIONS | JSON, "id": st.sampled_from(["inv_0001", "cus_0001"]) | JSON, "amount_cents": JSON,
    "status": JSON, "_select": JSON, "limit": JSON, "lines": JSON,
}) | JSON
PARAMS = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["billing", "customers", "missing"]) | JSON, "arguments": ARGUMENTS,
    "uri": st.text(max_size=30) | JSON, "level": st.sampled_from(["info", "debug"]) | JSON, "cursor": JSON,
    "ref": JSON, "argument": JSON, "protocolVersion": st.sampled_from(["2025-11-25", "2026-07-28"]) | JSON,
    "capabilities": JSON, "clientInfo": JSON, "requestId": JSON, "requestState": JSON, "inputResponses": JSON,
    "_meta": JSON,
}) | JSON
MESSAGES = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | JSON, "method": st.sampled_from(METHODS) | st.text(max_size=16) | JSON},
    optional={"id": st.integers() | st.text(max_size=8) | JSON, "params": PARAMS},
) | st.lists(JSON, max_size=3) | JSON
BODIES = MESSAGES.map(lambda m: json.dumps(m).encode()) | st.binary(max_size=64)


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return build(tmp_path_factory.mktemp("fuzz"))


async def post(client: httpx.AsyncClient, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await asyncio.wait_for(client.post("/mcp", content=body, headers=headers), REPLY_GUARD)


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert "Traceback" not in response.text and 'File "' not in response.text, response.text[:500]
    # -32603 means the server crashed on the input (bad input must get its own code, e.g. -32602)
    assert '"code":-32603' not in response.text.replace(" ", ""), response.text[:500]


def sendable(value: str | None) -> bool:
    return value is not None and value.isascii() and value.isprintable()


def with_modern_meta(body: bytes) -> tuple[bytes, str | None, str | None]:
    """Most 2026 bodies carry the `_meta` envelope (else every call stops at the first check)."""
    try:
        message = json.loads(body)
    except ValueError:
        return body, None, None
    if not isinstance(message, dict):
        return body, None, None
    params = message.get("params")
    if isinstance(params, dict) and not isinstance(params.get("_meta"), dict):
        message["params"] = {**params, "_meta": META}
    method = message.get("method")
    name = params.get("name", params.get("uri")) if isinstance(params, dict) else None
    return json.dumps(message).encode(), method if isinstance(method, str) else None, \
        name if isinstance(name, str) else None


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=BODIES, sse=st.booleans())
@example(body=b'{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":{}}}', sse=False)  # attack run
@example(body=b'{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"x:/"}}', sse=True)
async def test_session_wire_fuzz(app, body, sse):
    async with asgi_client(app) as client:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}
        headers = {"authorization": "Bearer demo-admin", "content-type": "application/json",
                   "accept": "application/json, text/event-stream" if sse else "application/json"}
        r = await post(client, json.dumps(init).encode(), headers)
        assert r.status_code == 200
        session = {**headers, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
        try:
            check(await post(client, body, session))
            check(await post(client, body, headers))  # and without a session
            assert (await post(client, b'{"jsonrpc":"2.0","id":9,"method":"ping"}', session)).status_code == 200
        finally:  # (the session quota would refuse the 101st)
            await client.delete("/mcp", headers=session)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=BODIES, routed=st.booleans())
async def test_sessionless_wire_fuzz(app, body, routed):
    body, method, name = with_modern_meta(body)
    headers = {"authorization": "Bearer demo-admin", "content-type": "application/json",
               "accept": "application/json", "mcp-protocol-version": "2026-07-28"}
    if routed and sendable(method):  # headers that match the body, so calls get past the header checks
        headers["mcp-method"] = method
        if sendable(name):
            headers["mcp-name"] = name
    async with asgi_client(app) as client:
        check(await post(client, body, headers))
