"""Round 5j: only the exact cursor string the server issued serves a page; a tenant's rate-limit bucket is
never a caller's; `resources/subscribe` is charged to the app's rate limits as `resources/read` is."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, RateLimit, Tool
from mcpfusion.testing import ToolTester
from tests.test_round5f import CALL, Wire, limited, refused_call, shop

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _notes() -> TestClient:
    notes = Tool("notes")

    @notes.action(readonly=True, paginate=2)
    async def list_all() -> list[dict[str, str]]:
        """All notes."""
        return [{"id": f"n{i}"} for i in range(1, 6)]

    return TestClient(MCPFusion("notes", tools=[notes]).build_app())


def _same_bytes_last_char(cursor: str) -> list[str]:
    """`cursor` with its last character changed in the bits base64 leaves unused: a lenient decoder reads the
    same bytes."""
    unused = {2: 0b1111, 3: 0b11}.get(len(cursor) % 4, 0)  # a last group of 1 or 2 bytes: 4 or 2 bits spare
    index = _ALPHABET.index(cursor[-1])
    return [cursor[:-1] + _ALPHABET[(index & ~unused) | bits] for bits in range(unused + 1)
            if (index & ~unused) | bits != index]


def test_an_altered_spelling_of_a_cursor_is_invalid():
    client = _notes()
    cursor = client.post("/api/notes/list_all", json={}).headers["next-cursor"]
    altered = [
        cursor[:10] + "!!@@" + cursor[10:],  # characters outside the alphabet, dropped by a lenient decoder
        cursor + "====",  # padding
        cursor + "=",
        cursor.replace("-", "+").replace("_", "/"),  # the standard alphabet for the URL-safe one
        cursor[:20] + "\n" + cursor[20:],
        *_same_bytes_last_char(cursor),
    ]
    assert cursor.replace("-", "+").replace("_", "/") != cursor  # (the test would prove nothing otherwise)
    assert _same_bytes_last_char(cursor)
    for text in altered:
        r = client.post("/api/notes/list_all", json={"cursor": text})
        assert r.status_code == 400 and r.json()["code"] == "INVALID_CURSOR", (text, r.text)
    good = client.post("/api/notes/list_all", json={"cursor": cursor})  # the exact string still serves
    assert good.status_code == 200 and [row["id"] for row in good.json()] == ["n3", "n4"]


async def test_an_altered_cursor_is_invalid_over_mcp_too():
    notes = Tool("notes")

    @notes.action(readonly=True, paginate=2)
    async def list_all() -> list[dict[str, str]]:
        """All notes."""
        return [{"id": f"n{i}"} for i in range(1, 6)]

    tester = ToolTester([notes])
    cursor = (await tester.call("notes", "list_all", {})).structured_content["next_cursor"]
    for text in (cursor + "==", cursor[:5] + "." + cursor[5:], *_same_bytes_last_char(cursor)):
        result = await tester.call("notes", "list_all", {"cursor": text})
        assert result.error_code == "INVALID_CURSOR", text
    assert (await tester.call("notes", "list_all", {"cursor": cursor})).error_code is None


async def test_a_tenant_named_like_a_caller_key_has_a_bucket_of_its_own():
    tool = Tool("t", description="x")

    @tool.action(readonly=True)
    async def ping() -> str:
        """Ping"""
        return "pong"

    limit = RateLimit(1, per=60, key="tenant")
    tester = ToolTester(MCPFusion("limits", tools=[tool], middleware=[limit]).registry)
    bob = {"sub": "bob"}  # no tenant: his own bucket, keyed by his caller key '[null,null,"bob"]'
    posing = {"sub": "carol", "tenant": '[null,null,"bob"]'}
    assert (await tester.call("t", "ping", {}, auth=bob)).error_code is None
    assert (await tester.call("t", "ping", {}, auth=posing)).error_code is None  # not bob's spent bucket
    assert (await tester.call("t", "ping", {}, auth=bob)).error_code == "RATE_LIMITED"
    # A tenant still shares one bucket among its principals.
    same_tenant = {"sub": "dave", "tenant": '[null,null,"bob"]'}
    assert (await tester.call("t", "ping", {}, auth=same_tenant)).error_code == "RATE_LIMITED"
    acme = [{"sub": "erin", "tenant": "acme"}, {"sub": "frank", "tenant": "acme"}]
    assert [(await tester.call("t", "ping", {}, auth=a)).error_code for a in acme] == [None, "RATE_LIMITED"]


async def test_subscribe_takes_from_the_callers_bucket_on_the_2025_wire():
    uri = "invoice://inv_1"
    app = shop([RateLimit(3, per=60)])
    alice, bob = Wire(app, "mcp-2025"), Wire(app, "mcp-2025", token="bob")
    try:
        for _ in range(3):
            status, message = await alice.rpc("resources/subscribe", {"uri": uri})
            assert status == 200 and message.get("result") == {}, message
        status, message = await alice.rpc("resources/subscribe", {"uri": uri})
        assert status == 200 and limited(message, "resources/subscribe"), message
        assert refused_call((await alice.rpc(*CALL))[1])  # the bucket of her action calls
        status, message = await bob.rpc("resources/subscribe", {"uri": uri})  # another caller's bucket
        assert status == 200 and message.get("result") == {}, message
    finally:
        await alice.aclose()
        await bob.aclose()


async def test_a_caller_limited_on_its_actions_cannot_subscribe_around_the_limit():
    app = shop([RateLimit(3, per=60)])
    alice = Wire(app, "mcp-2025")
    try:
        answers = [(await alice.rpc(*CALL))[1] for _ in range(4)]
        assert [refused_call(m) for m in answers] == [False, False, False, True]
        status, message = await alice.rpc("resources/subscribe", {"uri": "invoice://inv_1"})
        assert limited(message, "resources/subscribe"), message
    finally:
        await alice.aclose()


def test_an_altered_spelling_of_a_request_state_is_invalid():
    from mcpfusion.mcp.jsonrpc import McpError
    from mcpfusion.mcp.state import RequestStateSigner

    states = RequestStateSigner(b"k" * 32)
    token = states.sign("tools/call", "billing.void", {"q": {"action": "accept"}}, state={"n": 1}, caller="c")
    assert states.verify(token, "tools/call", "billing.void", caller="c")[1] == {"n": 1}
    payload, mac = token.split(".")
    for altered in (f"{payload}=.{mac}", f"{payload}.{mac}==", f"{payload[:4]}!{payload[4:]}.{mac}",
                    f"{payload}.{mac[:-2]}\n{mac[-2:]}", token.replace("-", "+").replace("_", "/")):
        if altered == token:
            continue
        with pytest.raises(McpError):
            states.verify(altered, "tools/call", "billing.void", caller="c")
