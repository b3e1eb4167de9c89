"""Round 6n: `attach(..., data_block=False)` and the cuts of embedded lists.

- An `EgressLimit` measures and cuts what is sent as data when the data block is left out: structuredContent.
- REST leaves the data out on every page of a paginated `attach(..., data_block=False)`: the content alone,
  with the page's `Next-Cursor`.
- `Truncated-Embedded` is left out when an egress limit cut the parent rows it counted.
- An embedded key `_select` leaves out sends no cut header nor notice.
- An embedded key holding a dot is written in brackets (`["a.b"]`), never merged with a nested path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from mcpfusion import EgressLimit, MCPFusion, Presenter, Tool, attach, document
from mcpfusion.response import ToolResponse
from tests.wire_kit import ACCEPT

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
WIDE = [{"id": f"c{i}", "name": f"name{i}" + "n" * 150} for i in range(5)]
ROWS = [{"id": f"c{i}"} for i in range(5)]


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def call(http: httpx.AsyncClient, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A tools/call on the 2026 wire: its result."""
    sent = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                            "mcp-name": tool},
                           json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                 "params": {"name": tool, "arguments": arguments, "_meta": META_2026}})
    if sent.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in sent.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]  # type: ignore[no-any-return]
    return sent.json()["result"]  # type: ignore[no-any-return]


def sent_bytes(result: dict[str, Any]) -> int:
    """What an egress limit counts of an answer with no data block: its text blocks and structuredContent."""
    texts = sum(len(b["text"].encode()) for b in result["content"] if b["type"] == "text")
    structured = result.get("structuredContent")
    return texts + (len(json.dumps(structured, separators=(",", ":")).encode()) if structured else 0)


# -- 1. an egress limit and data_block=False ---------------------------------------------------------------------


def egress_app(output_schemas: bool = True, limit: int = 1000) -> Any:
    view = Presenter("cust").schema({"id": str, "name": str})
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"],
                middleware=[EgressLimit(bytes=limit)])
    async def paged() -> object:
        """A page of wide rows, the document alone."""
        return attach(WIDE, document("small doc", "text/csv", uri="crm://x.csv"), data_block=False)

    @crm.action(readonly=True, returns=view, content_types=["text/csv"], middleware=[EgressLimit(bytes=600)])
    async def whole() -> object:
        """Every wide row, the document alone."""
        return attach(WIDE, document("small doc", "text/csv", uri="crm://x.csv"), data_block=False)

    return MCPFusion("crm", tools=[crm], output_schemas=output_schemas).build_app()


async def test_an_egress_limit_cuts_structured_content_sent_without_a_data_block() -> None:
    async with client(egress_app()) as http:
        result = await call(http, "crm", {"action": "paged"})
        assert not result["isError"], result
        structured = result["structuredContent"]
        assert [r["id"] for r in structured["items"]] == ["c0"]  # 2 on the page: cut to the one that fits
        assert sent_bytes(result) <= 1000
        texts = [b["text"] for b in result["content"] if b["type"] == "text"]
        assert len(texts) == 1 and "1 of 2 rows shown" in texts[0]
        assert f'cursor="{structured["next_cursor"]}"' in texts[0]  # the page goes on after the row sent
        assert result["content"][-1]["resource"]["text"] == "small doc"
        following = await call(http, "crm", {"action": "paged", "cursor": structured["next_cursor"]})
        assert [r["id"] for r in following["structuredContent"]["items"]] == ["c1"]
        rest = await http.post("/api/crm/paged", json={})
        assert rest.status_code == 200 and rest.text == "small doc"  # the data left out on REST too
        assert rest.headers["next-cursor"]
        resumed = await call(http, "crm", {"action": "paged", "cursor": rest.headers["next-cursor"]})
        assert [r["id"] for r in resumed["structuredContent"]["items"]] == ["c1"]


async def test_an_egress_limit_cuts_a_whole_list_sent_without_a_data_block() -> None:
    async with client(egress_app()) as http:
        result = await call(http, "crm", {"action": "whole"})
        assert not result["isError"], result
        assert 0 < len(result["structuredContent"]["items"]) < len(WIDE)  # 896 bytes whole
        assert sent_bytes(result) <= 600
        texts = [b["text"] for b in result["content"] if b["type"] == "text"]
        assert len(texts) == 1 and "cut to fit the egress limit" in texts[0]
        rest = await http.post("/api/crm/whole", json={})
        assert rest.status_code == 200 and rest.text == "small doc"  # a notice is no data block


async def test_without_structured_content_nothing_of_the_data_is_counted() -> None:
    async with client(egress_app(output_schemas=False, limit=500)) as http:
        result = await call(http, "crm", {"action": "paged"})
        assert not result["isError"] and "structuredContent" not in result
        texts = [b["text"] for b in result["content"] if b["type"] == "text"]
        assert len(texts) == 1 and "2 shown; more results exist" in texts[0]  # the page's own notice, not cut


# -- 2. REST: data_block=False on every page ---------------------------------------------------------------------


def paged_app(output_schemas: bool) -> Any:
    view = Presenter("cust").schema({"id": str})
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"])
    async def one_doc() -> object:
        """The CSV alone."""
        return attach(ROWS, document("csv", "text/csv", uri="crm://all.csv"), data_block=False)

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"])
    async def two_docs() -> object:
        """Two documents alone."""
        return attach(ROWS, document("a", "text/csv", uri="crm://a.csv"), document("b", "text/csv", uri="crm://b.csv"),
                      data_block=False)

    return MCPFusion("crm", tools=[crm], output_schemas=output_schemas).build_app()


async def pages(http: httpx.AsyncClient, route: str, method: str = "POST") -> list[httpx.Response]:
    found, cursor = [], None
    while True:
        if method == "GET":
            page = await http.get(route, params={"cursor": cursor} if cursor else {})
        else:
            page = await http.post(route, json={"cursor": cursor} if cursor else {})
        assert page.status_code == 200, page.text
        found.append(page)
        cursor = page.headers.get("next-cursor")
        if not cursor:
            return found


@pytest.mark.parametrize("output_schemas", [False, True])
async def test_rest_leaves_the_data_out_on_every_page(output_schemas: bool) -> None:
    async with client(paged_app(output_schemas)) as http:
        sent = await pages(http, "/api/crm/one_doc")
        assert len(sent) == 3
        for page in sent:  # one shape on every page: the document itself
            assert page.headers["content-type"].startswith("text/csv") and page.text == "csv"
            assert page.headers["x-content-type-options"] == "nosniff"
        assert all("next-cursor" in page.headers for page in sent[:-1])
        linked = await http.get("/api/crm/one_doc")
        assert linked.text == "csv" and 'rel="next"' in linked.headers["link"]
        for page in await pages(http, "/api/crm/two_docs"):
            assert page.json().keys() == {"content"}  # never the rows the handler chose not to send
            assert [c["resource"]["text"] for c in page.json()["content"]] == ["a", "b"]


def test_a_response_says_when_its_data_block_was_left_out() -> None:
    doc = document("x", "text/plain", uri="a://b")
    assert ToolResponse([], content=(doc,)).data_left_out  # content alone
    assert not ToolResponse(["{}"], content=(doc,)).data_left_out
    flagged = ToolResponse(["a page's notice"], content=(doc,))
    flagged.view.data_left_out = True
    assert flagged.data_left_out


# -- 3 and 4. Truncated-Embedded under an egress cut and under _select --------------------------------------------


LINES = [{"sku": f"S{i}", "notes": [{"text": "a"}, {"text": "b"}, {"text": "c"}]} for i in range(7)]


def shop_app() -> Any:
    note = Presenter("note").schema({"text": str}).limit(1)
    line = Presenter("line").schema({"sku": str}).limit(1).embed("notes", note)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    shop = Tool("shop", select=True)

    @shop.action(readonly=True, returns=order)
    async def get_order() -> dict[str, Any]:
        """One order."""
        return {"id": "o1", "lines": LINES}

    @shop.action(readonly=True, returns=order, middleware=[EgressLimit(bytes=400)])
    async def egress_orders() -> list[dict[str, Any]]:
        """Orders under an egress limit."""
        return [{"id": f"o{i}" + "z" * 60, "lines": LINES} for i in range(10)]

    @shop.action(readonly=True, returns=order, middleware=[EgressLimit(bytes=100_000)])
    async def roomy_orders() -> list[dict[str, Any]]:
        """Orders under a limit they fit."""
        return [{"id": f"o{i}", "lines": LINES} for i in range(2)]

    return MCPFusion("shop", tools=[shop]).build_app()


async def test_an_egress_cut_of_the_rows_leaves_the_embedded_counts_out() -> None:
    async with client(shop_app()) as http:
        rest = await http.post("/api/shop/egress_orders", json={})
        assert rest.status_code == 200 and len(rest.json()) == 1
        assert rest.headers["truncated"] == "shown=1, total=10, unit=rows"
        assert "truncated-embedded" not in rest.headers  # counted over 10 orders: not said of the one sent
        roomy = await http.post("/api/shop/roomy_orders", json={})  # nothing cut: the counts stay
        assert roomy.headers["truncated-embedded"] == \
            '"lines"; limit=1; items=2; hidden=12, "lines.notes"; limit=1; items=2; hidden=4'


async def test_an_embedded_key_select_leaves_out_sends_no_cut() -> None:
    async with client(shop_app()) as http:
        rest = await http.get("/api/shop/get_order", params={"_select": "id"})
        assert rest.json() == {"id": "o1"} and "truncated-embedded" not in rest.headers
        result = await call(http, "shop", {"action": "get_order", "_select": ["id"]})
        assert [b["text"] for b in result["content"]] == ['{"id":"o1"}']
        kept = await http.get("/api/shop/get_order", params={"_select": "lines"})
        assert kept.headers["truncated-embedded"].startswith('"lines"; limit=1; items=1; hidden=6')
        result = await call(http, "shop", {"action": "get_order", "_select": ["lines"]})
        assert any("Embedded list truncated: 'lines'" in b["text"] for b in result["content"])


# -- 5. an embed key holding a dot -------------------------------------------------------------------------------


def dotted_app() -> Any:
    b = Presenter("b").schema({"v": int}).limit(1)
    a = Presenter("a").schema({"k": str}).embed("b", b)
    ab = Presenter("ab").schema({"w": int}).limit(3)
    root = Presenter("root").schema({"id": str}).embed("a", a).embed("a.b", ab)
    t = Tool("t")

    @t.action(readonly=True, returns=root)
    async def get() -> dict[str, Any]:
        """A nested path and a key holding a dot."""
        return {"id": "r", "a": {"k": "x", "b": [{"v": i} for i in range(5)]}, "a.b": [{"w": i} for i in range(10)]}

    return MCPFusion("t", tools=[t]).build_app()


async def test_a_key_holding_a_dot_is_not_a_nested_path() -> None:
    async with client(dotted_app()) as http:
        rest = await http.post("/api/t/get", json={})
        assert rest.headers["truncated-embedded"] == \
            '"a.b"; limit=1; items=1; hidden=4, "[\\"a.b\\"]"; limit=3; items=1; hidden=7'
        result = await call(http, "t", {"action": "get"})
        notices = [b["text"] for b in result["content"][1:]]
        assert len(notices) == 2
        assert "'a.b' shows at most 1 per a item (1 a item(s) cut, 4 entries" in notices[0]
        assert re.search(r"""'\["a\.b"\]' shows at most 3 per root item \(1 root item\(s\) cut, 7 entries""",
                         notices[1])


def test_a_key_path_is_written_as_redaction_paths_are() -> None:
    from mcpfusion.response import key_path  # (new in this round)

    assert key_path(("lines", "notes")) == "lines.notes"
    assert key_path(("a.b",)) == '["a.b"]'
    assert key_path(("order", "line items", "x")) == 'order["line items"].x'
    assert key_path(("@id",)) == '["@id"]'
