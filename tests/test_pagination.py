"""Cursor pagination of the reference service: every page of list_invoices over MCP (both wires) and REST
(POST and GET), each invoice exactly once, also while invoices are inserted; forged, foreign and expired
cursors refused with a self-healing error."""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any
from unittest.mock import patch

import httpx
import pytest

from app.store import BillingStore
from mcpfusion import pagination
from tests.service_kit import ACME_INVOICES, McpSession, asgi_client, auth, build, mcp, rest, sse_messages

Fetch = Callable[[str | None], Awaitable[tuple[list[dict[str, Any]], str | None]]]
NOTICE = re.compile(r'Next page: call billing_read with action list_invoices with the same arguments and cursor="([^"]+)"')


def _from_result(result: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """Rows and next cursor of an MCP tools/call result; the agent's notice carries the same cursor."""
    assert result["isError"] is False, result
    texts = [block["text"] for block in result["content"]]
    rows = json.loads(texts[0])
    structured = result["structuredContent"]
    assert structured["items"] == rows
    cursor = structured["next_cursor"]
    notices = [m.group(1) for t in texts for m in [NOTICE.search(t)] if m]
    assert notices == ([cursor] if cursor else [])
    return rows, cursor


def fetchers(client: httpx.AsyncClient, token: str, args: dict[str, Any]) -> dict[str, Fetch]:
    session = McpSession(client, token)

    async def over_rest(cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        r = await rest(client, "billing", "list_invoices", {**args, **({"cursor": cursor} if cursor else {})}, token)
        assert r.status_code == 200, r.text
        return r.json(), r.headers.get("next-cursor")

    async def over_sessionless(cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        r = await mcp(client, "billing", "list_invoices", {**args, **({"cursor": cursor} if cursor else {})}, token)
        return _from_result(r.json()["result"])

    async def over_session(cursor: str | None) -> tuple[list[dict[str, Any]], str | None]:
        if "mcp-session-id" not in session.headers:
            assert (await session.start()).status_code == 200
        reply = await session.call("billing", "list_invoices", {**args, **({"cursor": cursor} if cursor else {})})
        return _from_result(reply["result"])

    return {"rest": over_rest, "mcp-2026-07-28": over_sessionless, "mcp-2025-11-25": over_session}


async def walk(fetch: Fetch, between_pages: Callable[[], Awaitable[None]] | None = None) -> tuple[list[str], int]:
    ids: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        rows, cursor = await fetch(cursor)
        pages += 1
        ids += [row["id"] for row in rows]
        if cursor is None:
            return ids, pages
        assert pages < 50, "the walk does not end"
        if between_pages is not None:
            await between_pages()


async def create(client: httpx.AsyncClient, due: dt.date) -> str:
    # The store refuses a due date before the issue date: an invoice due in the past is issued on its due date.
    with patch.object(BillingStore, "today", staticmethod(lambda: min(due, dt.date.today()))):
        r = await rest(client, "billing", "create_invoice", {
            "customer_id": "cus_0002", "due_date": due.isoformat(),
            "lines": [{"description": "Paging test", "quantity": 1, "unit_price_cents": 100}],
        }, "demo-admin")
    assert r.status_code == 200, r.text
    return r.json()["id"]


@pytest.fixture
async def client(tmp_path):
    app = build(tmp_path)
    async with app.router.lifespan_context(app), asgi_client(app) as http:
        yield http


async def test_every_invoice_exactly_once_on_every_transport(client):
    today = dt.date.today()
    created = {await create(client, today + dt.timedelta(days=k)) for k in range(-70, 35, 5)}  # 21 more
    expected = ACME_INVOICES | created
    for name, fetch in fetchers(client, "demo-admin", {}).items():
        ids, pages = await walk(fetch)
        assert Counter(ids).most_common(1)[0][1] == 1, name
        assert set(ids) == expected and pages == 3, (name, pages)
    for name, fetch in fetchers(client, "demo-support", {"status": "sent"}).items():
        ids, _ = await walk(fetch)
        sent = [row["id"] for row in (await rest(client, "billing", "export_invoices", {"status": "sent"},
                                                 "demo-admin")).json()]
        assert sorted(ids) == sorted(sent) and len(set(ids)) == len(ids), name


async def test_get_follows_the_link_header(client):
    url: str | None = "/api/billing/list_invoices?status=sent"
    ids: list[str] = []
    while url:
        r = await client.get(url, headers=auth("demo-admin"))
        assert r.status_code == 200, r.text
        ids += [row["id"] for row in r.json()]
        link = r.headers.get("link")
        url = re.fullmatch(r'<([^>]+)>; rel="next"', link).group(1) if link else None
        assert url is None or "status=sent" in url
    everything = await rest(client, "billing", "export_invoices", {"status": "sent"}, "demo-admin")
    assert sorted(ids) == sorted(row["id"] for row in everything.json())


@pytest.mark.parametrize("transport", ["rest", "mcp-2026-07-28", "mcp-2025-11-25"])
async def test_concurrent_inserts_never_repeat_or_skip_an_existing_invoice(client, transport):
    today = dt.date.today()
    before = ACME_INVOICES | {await create(client, today + dt.timedelta(days=k)) for k in range(-70, 35, 5)}
    inserted: list[str] = []
    offsets = iter(range(0, 40))

    async def insert_a_few() -> None:
        # New rows land in the pages already walked (latest due dates come first), around the cursor and
        # in the pages still to come: with offsets, the first kind would shift rows and repeat one.
        for days in (90, -12, -90):
            inserted.append(await create(client, today + dt.timedelta(days=days + next(offsets))))

    ids, _ = await walk(fetchers(client, "demo-admin", {})[transport], insert_a_few)
    counts = Counter(ids)
    assert all(n == 1 for n in counts.values()), [i for i, n in counts.items() if n > 1]
    assert before <= set(ids)  # every invoice that existed when the walk started, exactly once
    assert set(ids) <= before | set(inserted) and inserted


def _tamper(cursor: str) -> str:
    """The cursor with one bit of its sealed body flipped."""
    sealed = bytearray(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    sealed[len(sealed) // 2] ^= 1
    return base64.urlsafe_b64encode(bytes(sealed)).decode().rstrip("=")


def test_a_cursor_is_sealed_its_position_unreadable():
    """A keyset position is the last row's key values (which a presenter may redact): the cursor carries it
    encrypted, and any change to it is refused."""
    paging = pagination.Paging("key")
    cursor = paging.issue("crm.list", "scope", "filters", ["ada@example.com", 7])
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    assert b"ada@example.com" not in raw and b"crm.list" not in raw
    # Nor base64 of the position at any alignment (a random ciphertext may well spell "ada" by chance).
    for skip in range(3):
        shifted = base64.urlsafe_b64encode(b"ada@example.com"[skip:]).decode()[2:14]
        assert shifted not in cursor
    restart = pagination.ToolError("INVALID_CURSOR", "")
    assert paging.read(cursor, "crm.list", "scope", "filters", restart=restart) == ["ada@example.com", 7]
    for forged in (_tamper(cursor), pagination.Paging("other key").issue("crm.list", "scope", "filters", [1])):
        with pytest.raises(pagination.ToolError):
            paging.read(forged, "crm.list", "scope", "filters", restart=restart)


async def _refusal(client: httpx.AsyncClient, token: str, args: dict[str, Any]) -> tuple[str, str]:
    """(REST problem code, MCP tool error code) for the same call; both say how to start again."""
    r = await rest(client, "billing", "list_invoices", args, token)
    assert r.headers["content-type"] == "application/problem+json", r.text
    problem = r.json()
    assert "no cursor" in problem["recovery"] and "/api/billing/list_invoices" in problem["recovery"]
    assert problem["available_actions"] == ["billing.list_invoices"]
    result = (await mcp(client, "billing", "list_invoices", args, token)).json()["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert "without cursor" in text and "Traceback" not in text
    return problem["code"], re.search(r'code="([A-Z_]+)"', text).group(1)


async def test_forged_foreign_and_expired_cursors_are_refused(client, monkeypatch):
    first = await rest(client, "billing", "list_invoices", {}, "demo-admin")
    cursor = first.headers["next-cursor"]
    good = await rest(client, "billing", "list_invoices", {"cursor": cursor}, "demo-admin")
    assert good.status_code == 200 and good.json()
    refused = {
        "forged payload": ("demo-admin", {"cursor": _tamper(cursor)}),
        "forged signature": ("demo-admin", {"cursor": cursor[:-2] + ("AA" if cursor[-2:] != "AA" else "BB")}),
        "garbage": ("demo-admin", {"cursor": "not-a-cursor"}),
        "other tenant": ("demo-globex-admin", {"cursor": cursor}),
        "other user": ("demo-support", {"cursor": cursor}),
        "other filters": ("demo-admin", {"cursor": cursor, "status": "sent"}),
    }
    for name, (token, args) in refused.items():
        assert await _refusal(client, token, args) == ("INVALID_CURSOR", "INVALID_CURSOR"), name
    r = await rest(client, "billing", "list_invoices", {"cursor": cursor}, "demo-globex-admin")
    assert r.status_code == 400 and "ACME" not in r.text
    bad_type = await rest(client, "billing", "list_invoices", {"cursor": 5}, "demo-admin")
    assert bad_type.status_code == 422 and bad_type.json()["errors"][0]["field"] == "cursor"
    # the listing advertises the cursor's type alone: an agent that sends one on its first call is told
    for wrong in ("", 5):
        result = (await mcp(client, "billing", "list_invoices", {"cursor": wrong}, "demo-admin")).json()["result"]
        assert result["isError"] is True and "or no cursor for the first page" in result["content"][0]["text"], wrong

    later = pagination.time.time() + 3601  # the cursor's lifetime is an hour
    monkeypatch.setattr(pagination.time, "time", lambda: later)
    assert await _refusal(client, "demo-admin", {"cursor": cursor}) == ("CURSOR_EXPIRED", "CURSOR_EXPIRED")


async def test_cursor_is_advertised_and_customers_list_pages_by_keyset(client):
    spec = (await client.get("/openapi.json")).json()
    get = spec["paths"]["/api/billing/list_invoices"]["get"]
    assert "cursor" in {p["name"] for p in get["parameters"]}
    assert set(get["responses"]["200"]["headers"]) == {"Next-Cursor", "Link"}
    assert "cursor" in spec["paths"]["/api/customers/list"]["post"]["requestBody"]["content"]["application/json"][
        "schema"]["properties"]
    result = (await mcp(client, "customers", "list", {}, "demo-admin")).json()["result"]
    rows, cursor = json.loads(result["content"][0]["text"]), result["structuredContent"]["next_cursor"]
    assert cursor is None and [r["name"] for r in rows] == sorted(r["name"] for r in rows) and len(rows) == 5


async def test_the_store_walks_customers_by_keyset(tmp_path):
    from app.auth import DEMO_TOKENS
    from app.store import BillingStore, customer_key

    app = build(tmp_path)
    async with app.router.lifespan_context(app):
        store = BillingStore(app.state.db, DEMO_TOKENS["demo-admin"])
        seen: list[str] = []
        after = None
        while True:
            rows = await store.list_customers(after=after, limit=3)
            page = rows[:2]
            seen += [r["id"] for r in page]
            if len(rows) <= 2:
                break
            after = customer_key(page[-1])
        everything = await store.list_customers()
    assert seen == [r["id"] for r in everything] and len(seen) == 5


async def test_next_cursor_is_in_the_advertised_output_schema(client):
    import jsonschema

    session = McpSession(client, "demo-support")
    assert (await session.start()).status_code == 200
    reply = await session.rpc("tools/list")
    messages = sse_messages(reply.text) if "event-stream" in reply.headers["content-type"] else [reply.json()]
    tools = next(m for m in messages if "result" in m)["result"]["tools"]
    schemas = {tool["name"]: tool["outputSchema"] for tool in tools}
    schemas["billing"] = schemas["billing_read"]  # billing's reads, list_invoices among them (profiles exposition)
    assert "next_cursor" in json.dumps(schemas["billing"]) and "next_cursor" in json.dumps(schemas["customers"])
    for tool, action in (("billing", "list_invoices"), ("customers", "list")):
        cursor, pages = None, 0
        while True:
            reply = await session.call(tool, action, {"cursor": cursor} if cursor else {})
            structured = reply["result"]["structuredContent"]
            jsonschema.validate(structured, schemas[tool])
            cursor, pages = structured["next_cursor"], pages + 1
            if cursor is None:
                break
        assert pages == (2 if tool == "billing" else 1)


def test_page_keeps_the_dataclass_behaviour():
    # A plain slotted class (slots.Fields) standing for the dataclass it was.
    import pickle

    from mcpfusion.pagination import Page

    page = Page(3, after="k")
    assert page == Page(size=3, after="k") != Page() and Page() == Page(0, None)
    assert repr(page) == "Page(size=3, after='k')" and pickle.loads(pickle.dumps(page)) == page
    assert not hasattr(page, "__dict__") and Page.__match_args__ == ("size", "after")
    with pytest.raises(TypeError):
        hash(page)
    page.size = 5
    assert page.size == 5


def test_a_position_too_large_for_a_cursor_is_refused_when_issued_not_after():
    """The server never issues a cursor the next call would refuse for its length: a keyset key that long is
    a self-healing error on the page that would have carried it."""
    paging = pagination.Paging("key")
    assert len(paging.issue("a.list", "s", "f", ["x" * 1500, 7])) <= pagination.MAX_CURSOR_LENGTH
    with pytest.raises(pagination.ToolError) as refused:
        paging.issue("a.list", "s", "f", ["x" * 7000, 7])
    assert refused.value.code == "INTERNAL_ERROR" and "too large to carry in a cursor" in refused.value.message
