"""Pagination as a library feature: declaration, offset fallback, page size against the presenter's limit,
notices for the flat exposition, the tester, cursors shared by replicas with one signing key."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import Depends, Header, Request

from mcpfusion import MCPFusion, Page, Presenter, Tool, listing
from mcpfusion.mcp.settings import TransportSettings
from mcpfusion.pagination import CURSOR_ADVERTISED
from mcpfusion.testing import ToolTester

ROWS = [{"id": n, "name": f"row {n:02d}"} for n in range(1, 12)]
rows_view = Presenter("row").schema({"id": int, "name": str}).limit(4)


def make_tool(exposition: str = "grouped") -> Tool:
    tool = Tool("rows", exposition=exposition)  # type: ignore[arg-type]

    @tool.action(readonly=True, returns=rows_view, paginate=10)  # capped at the presenter's limit of 4
    async def whole(prefix: str = "row") -> list[dict]:
        """A handler that returns everything: the framework slices it"""
        return [r for r in ROWS if r["name"].startswith(prefix)]

    @tool.action(readonly=True, paginate=3)
    async def seek(page: Page, minimum: int = 0) -> list[dict]:
        """A handler that seeks (keyset)"""
        after = page.after or 0
        return page.keyset([r for r in ROWS if r["id"] > max(after, minimum)][: page.size + 1], key=lambda r: r["id"])

    return tool


async def walk(tester: ToolTester, tool: str, action: str, args: dict, **kw) -> list[list[int]]:
    pages, cursor = [], None
    while True:
        result = await tester.call(tool, action, {**args, **({"cursor": cursor} if cursor else {})}, **kw)
        assert not result.is_error, result.text
        pages.append([r["id"] for r in result.data])
        cursor = result.structured_content["next_cursor"]
        if cursor is None:
            return pages


async def test_offset_fallback_and_keyset_through_the_tester():
    tester = ToolTester([make_tool()])
    assert await walk(tester, "rows", "whole", {}) == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11]]
    assert await walk(tester, "rows", "seek", {"minimum": 2}) == [[3, 4, 5], [6, 7, 8], [9, 10, 11]]
    first = await tester.call("rows", "whole", {})
    assert "Dataset truncated" not in first.text  # a page never exceeds the presenter's limit
    assert re.search(r'Next page: call rows with action whole with the same arguments and cursor="[^"]+"', first.text)


async def test_flat_exposition_names_its_tool_and_schemas_carry_cursor():
    tool = make_tool("flat")
    tester = ToolTester([tool])
    first = await tester.call("rows", "seek", {})
    assert 'Next page: call rows_seek with the same arguments and cursor="' in first.text
    entry = next(e for e in listing.tool_entries(tool) if e["name"] == "rows_seek")
    # advertised: a string to copy (null, the first page, is still accepted: same as leaving it out)
    assert entry["inputSchema"]["properties"]["cursor"] == CURSOR_ADVERTISED
    assert tool.actions["seek"].input_schema["properties"]["cursor"]["type"] == ["string", "null"]
    grouped = make_tool()
    assert grouped.grouped_input_schema()["properties"]["cursor"] == CURSOR_ADVERTISED
    rows = grouped.grouped_description().splitlines()[-2:]
    assert [r.split(":")[0] for r in rows] == ["whole(prefix?,cursor?)", "seek(minimum?,cursor?)"]


def test_declarations_that_cannot_work_are_refused():
    tool = Tool("bad")
    with pytest.raises(ValueError, match="paginate=N"):
        @tool.action()
        async def takes_page(page: Page) -> list:
            """Refused"""
            return []
    with pytest.raises(ValueError, match="limit"):
        @tool.action(paginate=True, returns=Presenter("x").schema({"id": int}))
        async def no_limit() -> list:
            """Refused"""
            return []
    with pytest.raises(ValueError, match="reserved"):
        @tool.action(paginate=5)
        async def own_cursor(cursor: str) -> list:
            """Refused"""
            return []
    with pytest.raises(ValueError, match="at least 1"):
        @tool.action(paginate=0)
        async def zero() -> list:
            """Refused"""
            return []


def tenant_of(x_tenant: str = Header("none")) -> str:
    return x_tenant


async def test_replicas_sharing_the_signing_key_accept_each_others_cursors():
    def replica(key: str) -> httpx.AsyncClient:
        fusion = MCPFusion("rows", tools=[make_tool()], settings=TransportSettings(signing_key=key),
                           cursor_scope=tenant_of)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()), base_url="http://127.0.0.1")

    async with replica("shared") as one, replica("shared") as two, replica("other") as stranger:
        first = await one.get("/api/rows/seek", headers={"x-tenant": "acme"})
        cursor = first.headers["next-cursor"]
        assert first.headers["link"] == f'</api/rows/seek?cursor={cursor}>; rel="next"'
        second = await two.get("/api/rows/seek", params={"cursor": cursor}, headers={"x-tenant": "acme"})
        assert [r["id"] for r in second.json()] == [4, 5, 6]
        assert (await stranger.get("/api/rows/seek", params={"cursor": cursor},
                                   headers={"x-tenant": "acme"})).json()["code"] == "INVALID_CURSOR"
        foreign = await two.get("/api/rows/seek", params={"cursor": cursor}, headers={"x-tenant": "globex"})
        assert foreign.status_code == 400 and foreign.json()["detail"] == "The cursor was issued to another caller."


async def test_the_cursor_scope_and_the_action_share_a_dependency_once_per_call():
    # The cursor scope is solved with the action's own dependencies: a dependency both need runs once per
    # call, as FastAPI caches it within a request, and its value binds the cursor.
    calls: list[str] = []

    async def caller(request: Request) -> str:
        calls.append(request.headers.get("x-caller", ""))
        return request.headers.get("x-caller", "")

    async def scope_of(who: str = Depends(caller)) -> str:
        return who

    tool = Tool("people")

    @tool.action(readonly=True, paginate=2)
    async def mine(page: Page, who: str = Depends(caller)) -> list[dict]:
        """The caller's rows"""
        rows = [{"owner": who, "n": n} for n in range(5)]
        after = page.after or 0
        return page.keyset(rows[after:after + page.size + 1], key=lambda r: r["n"] + 1)

    fusion = MCPFusion("people", tools=[tool], cursor_scope=scope_of)
    transport = httpx.ASGITransport(app=fusion.build_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        first = await client.get("/api/people/mine", headers={"x-caller": "ana"})
        assert first.status_code == 200 and [r["n"] for r in first.json()] == [0, 1]
        assert calls == ["ana"]
        cursor = first.headers["next-cursor"]
        second = await client.get("/api/people/mine", params={"cursor": cursor}, headers={"x-caller": "ana"})
        assert [r["n"] for r in second.json()] == [2, 3] and calls == ["ana", "ana"]
        foreign = await client.get("/api/people/mine", params={"cursor": cursor}, headers={"x-caller": "bob"})
        assert foreign.json()["detail"] == "The cursor was issued to another caller."
