"""An egress limit that cuts a page short: the next cursor goes on after the last row sent, so walking the
pages shows every row once (before, it pointed past the rows the cut left out: they were never seen)."""

from __future__ import annotations

import re

import pytest

from mcpfusion import EgressLimit, MCPFusion, Page, Tool
from mcpfusion.testing import ToolTester
from tests.service_kit import asgi_client

ROWS = [{"id": n, "text": f"row {n:02d} " + "x" * 150} for n in range(1, 31)]
LIMIT = EgressLimit(bytes=1_200)  # about four rows and the notices of a page of ten


def make_tool() -> Tool:
    tool = Tool("log", description="Log rows")

    @tool.action(readonly=True, paginate=10, middleware=[LIMIT])
    async def whole() -> list[dict]:
        """Every row: the framework slices the page (offset)."""
        return ROWS

    @tool.action(readonly=True, paginate=10, middleware=[LIMIT])
    async def seek(page: Page) -> list[dict]:
        """Rows after the page's key (keyset)."""
        after = page.after or 0
        return page.keyset([r for r in ROWS if r["id"] > after][: page.size + 1], key=lambda r: r["id"])

    return tool


@pytest.mark.parametrize("action", ["whole", "seek"])
async def test_walking_cut_pages_shows_every_row_once(action):
    tester = ToolTester([make_tool()])
    seen, cursor, calls = [], None, 0
    while True:
        result = await tester.call("log", action, {"cursor": cursor} if cursor else {})
        assert not result.is_error, result.text
        ids = [r["id"] for r in result.data]
        assert 0 < len(ids) < 10  # every page of ten is cut
        seen += ids
        cursor = result.structured_content["next_cursor"]
        calls += 1
        if cursor is None:
            break
        # The agent reads where to go on: the egress notice names the cursor that follows the last row sent.
        assert re.search(rf'send the same arguments with cursor="{re.escape(cursor)}"', result.text), result.text
        assert calls < 30
    assert seen == [r["id"] for r in ROWS]


async def test_rest_follows_the_cursor_of_a_cut_page_to_every_row():
    fusion = MCPFusion("p", tools=[make_tool()])
    async with asgi_client(fusion.build_app()) as client:
        seen, cursor, cut = [], None, 0
        for _ in range(30):
            r = await client.get("/api/log/seek", params={"cursor": cursor} if cursor else {})
            assert r.status_code == 200, r.text
            if "truncated" in r.headers:
                cut += 1
                assert r.headers["truncated"].startswith(f"shown={len(r.json())}, total=")
            seen += [row["id"] for row in r.json()]
            cursor = r.headers.get("next-cursor")
            if cursor is None:
                break
    assert seen == [row["id"] for row in ROWS] and cut >= 5
