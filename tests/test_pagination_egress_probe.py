"""Probe X1 mends: pages cut by an `EgressLimit` (the cursor always named, every row once, a handler's `Paged`
without positions never cut silently, a page of fewer rows rather than a refusal), cursors (length padded,
set filters fingerprinted in one order in every process, sub-second expiry, ttl <= 0 refused), `_select` of
another audience's field, and the `Truncated` header in the OpenAPI document."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
from fastapi import Header

from mcpfusion import EgressLimit, MCPFusion, Page, Paged, Paging, Presenter, Tool, ui
from mcpfusion import pagination as pagination_module
from mcpfusion.testing import ToolTester
from tests.service_kit import asgi_client

ROWS = [{"id": f"p{i:02d}", "name": f"Name {i} " + "x" * 40} for i in range(1, 12)]
PERSON = Presenter("person").schema({"id": str, "name": str})


async def walk(tester: ToolTester, tool: str, action: str, args: dict[str, Any] | None = None) -> list[str]:
    """The ids of every page, following next_cursor (each page must be an answer, not an error)."""
    seen: list[str] = []
    cursor = None
    for _ in range(30):
        result = await tester.call(tool, action, {**(args or {}), **({"cursor": cursor} if cursor else {})})
        assert not result.is_error, result.text
        seen += [row["id"] for row in result.data]
        cursor = result.structured_content["next_cursor"]
        if cursor is None:
            return seen
        assert cursor in result.text  # the agent reads where to go on
    raise AssertionError("the pages never ended")


async def test_a_page_cut_by_its_ui_blocks_alone_still_names_the_next_cursor():
    table = PERSON.copy().collection_ui(lambda items: ui.table(["id", "name"], [[i["id"], i["name"]] for i in items]))
    people = Tool("people")

    @people.action(readonly=True, returns=table, paginate=4, middleware=[EgressLimit(bytes=900)])
    async def list_people() -> list[dict]:
        """Rows that fit once the table is left out."""
        return ROWS

    result = await ToolTester([people]).call("people", "list_people", {})
    assert not result.is_error and len(result.data) == 4 and "UI block(s) left out" in result.text
    cursor = result.structured_content["next_cursor"]
    assert cursor and f'send the same arguments with cursor="{cursor}"' in result.text
    assert await walk(ToolTester([people]), "people", "list_people") == [r["id"] for r in ROWS]


def bad_row_tool() -> Tool:
    rows = [{**row, "name": row["name"] + "y" * 110} for row in ROWS]  # about 170 bytes: a page of 4 is cut
    rows[1]["name"] = None  # stored data that does not fit the schema: the presenter leaves it out
    people = Tool("people")

    @people.action(readonly=True, returns=PERSON, paginate=4, middleware=[EgressLimit(bytes=800)])
    async def by_offset() -> list[dict]:
        """Offset."""
        return rows

    @people.action(readonly=True, returns=PERSON, paginate=4, middleware=[EgressLimit(bytes=800)])
    async def by_key(page: Page) -> list[dict]:
        """Keyset."""
        after = page.after[0] if page.after else ""
        return page.keyset([r for r in rows if r["id"] > after][: page.size + 1], key=lambda r: [r["id"]])

    return people


@pytest.mark.parametrize("action", ["by_offset", "by_key"])
async def test_a_cut_page_with_a_row_left_out_resumes_after_the_row_sent_last(action):
    tester = ToolTester([bad_row_tool()])
    first = await tester.call("people", action, {})
    assert first.raw.view.truncated is not None and "p02" not in [r["id"] for r in first.data]  # left out, cut
    seen = await walk(tester, "people", action)
    assert not [k for k, n in Counter(seen).items() if n > 1]
    assert seen == [r["id"] for r in ROWS if r["id"] != "p02"]


def paged_tool(positions: bool) -> Tool:
    people = Tool("people")

    @people.action(readonly=True, returns=PERSON, paginate=4, middleware=[EgressLimit(bytes=700)])
    async def own_pages(page: Page) -> list[dict]:
        """The handler's own `Paged` (offsets)."""
        start = page.after or 0
        end = start + page.size
        position = (lambda i: start + i + 1) if positions else None
        return Paged(ROWS[start:end], end if end < len(ROWS) else None, position=position)

    return people


async def test_a_paged_page_is_cut_only_when_it_says_where_its_rows_end(caplog):
    refused = await ToolTester([paged_tool(positions=False)]).call("people", "own_pages", {})
    assert refused.error_code == "RESPONSE_TOO_LARGE" and "cannot be cut" in refused.text
    assert "without position=" in caplog.text  # the developer is told what to give
    assert await walk(ToolTester([paged_tool(positions=True)]), "people", "own_pages") == [r["id"] for r in ROWS]


async def test_the_cursor_length_does_not_tell_the_length_of_the_key():
    emails = {"p1": "a@x.io", "p2": "someone.with.a.very.long.address@example-company.example"}
    view = Presenter("contact").schema({"id": str, "email": str}).redact_pii(["email"])
    people = Tool("people")

    @people.action(readonly=True, returns=view, paginate=1)
    async def by_email(start: str, page: Page) -> list[dict]:
        """Keyset by email."""
        return page.keyset([{"id": start, "email": emails[start]}, {"id": "z", "email": "z"}], key=lambda r: [r["email"]])

    tester = ToolTester([people])
    lengths = set()
    for start in emails:
        result = await tester.call("people", "by_email", {"start": start})
        assert result.data[0]["email"] == "[REDACTED]"
        lengths.add(len(result.structured_content["next_cursor"]))
    assert len(lengths) == 1
    paging = Paging(b"k" * 32)  # beyond: 64-byte steps, however long the key
    steps = {len(paging.issue("t.a", "s", "f", ["x" * n])) for n in range(300)}
    assert len(steps) <= 5


def test_a_set_filter_has_one_fingerprint_in_every_process():
    code = ("from mcpfusion.pagination import fingerprint; "
            "print(fingerprint({'tags': {'alpha', 'beta', 'gamma', 'delta', 'epsilon'}, 'ids': frozenset({3, 1, 2})}))")
    prints = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(prints) == 1


async def test_a_cursor_of_a_set_filter_is_followed():
    t = Tool("t")

    @t.action(readonly=True, returns=Presenter("row").schema({"id": str}), paginate=2)
    async def items(tags: set[str] | None = None) -> list[dict]:
        """Rows."""
        return [{"id": f"r{i}"} for i in range(5)]

    assert await walk(ToolTester([t]), "t", "items", {"tags": ["b", "a", "c"]}) == [f"r{i}" for i in range(5)]


async def test_a_page_too_large_whole_is_cut_to_the_rows_that_fit():
    rows = [{"id": f"p{i:02d}", "name": f"Name {i}"} for i in range(1, 12)]

    def tool(limit: int | None, size: int) -> Tool:
        t = Tool("t")

        @t.action(readonly=True, returns=PERSON, paginate=size, middleware=[EgressLimit(bytes=limit)] if limit else [])
        async def items() -> list[dict]:
            """Rows."""
            return rows

        @t.action(readonly=True, returns=PERSON, middleware=[EgressLimit(bytes=20)])
        async def one() -> dict:
            """One row, larger than the limit."""
            return rows[0]

        return t

    two = await ToolTester([tool(None, 2)]).call("t", "items", {})  # a page of two rows and its page notice
    limited = ToolTester([tool(len(two.text.encode()) + 20, 4)])
    cut = await limited.call("t", "items", {})
    assert not cut.is_error and len(cut.data) == 2, cut.text
    too_large = await limited.call("t", "one", {})
    assert too_large.error_code == "RESPONSE_TOO_LARGE" and "_select" not in too_large.text  # (no _select here)


def audience_tool() -> Tool:
    admin = Presenter("c_admin").schema({"id": str, "name": str, "margin": int})
    support = Presenter("c_support").schema({"id": str, "name": str})

    def audience(x_role: str = Header(default="support")) -> Presenter:
        return admin if x_role == "admin" else support

    crm = Tool("crm", select=True)

    @crm.action(readonly=True, returns=audience, presenters=[admin, support])
    async def get() -> dict:
        """Get."""
        return {"id": "c1", "name": "N1", "margin": 1234}

    @crm.action(readonly=True, returns=audience, presenters=[admin, support])
    async def lst() -> list[dict]:
        """List."""
        return [{"id": "c1", "name": "N1", "margin": 1234}, {"id": "c2", "name": "N2", "margin": 99}]

    return crm


@pytest.mark.parametrize("action", ["get", "lst"])
async def test_select_names_only_the_fields_of_the_callers_audience(action):
    async with asgi_client(MCPFusion("crm", tools=[audience_tool()]).build_app()) as client:
        refused = await client.post(f"/api/crm/{action}", json={"_select": ["margin"]})
        assert refused.status_code == 422, refused.text
        assert "Use a list of these field names of crm/" in refused.text and "id, name." in refused.text
        assert "margin" not in refused.text.split("You sent")[0]  # another audience's field is not named
        wrong = await client.post(f"/api/crm/{action}", json={"_select": ["salary"]})
        assert wrong.status_code == 422 and "id, name." in wrong.text
        chosen = await client.post(f"/api/crm/{action}", json={"_select": ["margin"]}, headers={"x-role": "admin"})
        assert chosen.status_code == 200 and "1234" in chosen.text and "N1" not in chosen.text
        names = await client.post(f"/api/crm/{action}", json={"_select": ["name"]})
        assert names.status_code == 200 and "N1" in names.text and "c1" not in names.text


def test_cursor_expiry_keeps_sub_second_precision(monkeypatch):
    paging = Paging(b"k" * 32, ttl=0.5)
    cursor = paging.issue("t.a", "s", "f", 2, now=1000.25)
    restart = paging_restart()
    monkeypatch.setattr(pagination_module.time, "time", lambda: 1000.7)
    assert paging.read(cursor, "t.a", "s", "f", restart=restart) == 2  # valid until 1000.75
    monkeypatch.setattr(pagination_module.time, "time", lambda: 1000.8)
    with pytest.raises(Exception, match="expired"):
        paging.read(cursor, "t.a", "s", "f", restart=restart)


def paging_restart() -> Any:
    from mcpfusion.errors import INVALID_CURSOR, ToolError

    return ToolError(INVALID_CURSOR, "", recovery="Start again.")


@pytest.mark.parametrize("ttl", [0, -5, float("nan"), float("inf"), True, "60"])
def test_a_cursor_ttl_that_is_not_a_positive_number_is_refused(ttl):
    with pytest.raises(ValueError, match="cursor_ttl"):
        MCPFusion("x", cursor_ttl=ttl)


async def test_the_openapi_documents_the_truncated_header_under_an_egress_limit():
    t = Tool("t")

    @t.action(readonly=True, returns=PERSON, paginate=4, middleware=[EgressLimit(bytes=1_000)])
    async def limited() -> list[dict]:
        """Rows of about 250 bytes."""
        return [{**row, "name": row["name"] * 5} for row in ROWS]

    @t.action(readonly=True, returns=PERSON)
    async def whole() -> dict:
        """One row."""
        return ROWS[0]

    async with asgi_client(MCPFusion("x", tools=[t]).build_app()) as client:
        sent = await client.post("/api/t/limited", json={})
        assert "truncated" in sent.headers
        paths = (await client.get("/openapi.json")).json()["paths"]
    documented = paths["/api/t/limited"]["post"]["responses"]["200"]["headers"]
    assert {"Truncated", "Next-Cursor"} <= set(documented)
    assert "headers" not in paths["/api/t/whole"]["post"]["responses"]["200"]
