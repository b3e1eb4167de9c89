"""Round 6i: a handler's `attach` and what presenters tell REST.

- A handler's `attach(data, fn)` callable sees the data as presented before `_select` (as a presenter's own
  `attach` does): one reading a field the agent did not select no longer fails the call.
- An embedded child's `limit` cut reaches REST end to end: the `Truncated-Embedded` header.
- A paginated action returning `attach(rows, doc)` is paged like a plain list (the content kept); a document
  built from every row never carries a redacted value of a row left off the page; `data_block=False` keeps
  the data out of structuredContent on a page too.
- The README's `tools/list` token figures for the reference service are the measured ones.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types
from pydantic import BaseModel

from mcpfusion import MCPFusion, Page, Presenter, Tool, attach, document, tokens
from mcpfusion.content import Attached
from mcpfusion.pagination import PageCall, Paging
from mcpfusion.response import assemble
from tests.wire_kit import every_wire

ROOT = Path(__file__).resolve().parents[1]
SECRET = re.compile(r"person\d+@secret\.example")






# -- 1. a handler's attach callable and _select -------------------------------------------------------------


class Customer(BaseModel):
    id: str
    name: str
    email: str


def card(c: dict[str, Any]) -> Any:
    """A document drawn from fields the agent did not select (name, email)."""
    return document(f"card of {c['name']} <{c['email']}>", "text/plain", uri=f"crm://cards/{c['id']}")


def select_app() -> Any:
    view = Presenter("cust").schema(Customer).redact_pii(["email"])
    crm = Tool("crm", select=True)

    @crm.action(readonly=True, returns=view, content_types=["text/plain"])
    async def get(id: str) -> object:  # noqa: A002
        """One customer (presented) with a card."""
        return attach({"id": id, "name": "Ada", "email": "person1@secret.example"}, card)

    @crm.action(readonly=True, returns=Customer, content_types=["text/plain"])
    async def typed(id: str) -> object:  # noqa: A002
        """One customer (an output model: its firewall) with a card."""
        return attach(Customer(id=id, name="Ada", email="ada@example.com"), card)

    return MCPFusion("crm", tools=[crm]).build_app()


async def test_a_handler_attach_callable_sees_the_fields_the_agent_did_not_select() -> None:
    rest, modern, legacy = await every_wire(select_app(), "crm", "get", {"id": "c1", "_select": ["id"]})
    assert rest.status_code == 200, rest.text
    assert rest.json()["data"] == {"id": "c1"}
    expected = "card of Ada <[REDACTED]>"  # drawn from the presented data: redacted, never the real value
    assert rest.json()["content"][0]["resource"]["text"] == expected
    for result in (modern, legacy):
        assert not result["isError"], result
        assert result["structuredContent"] == {"id": "c1"}
        assert result["content"][0]["text"] == '{"id":"c1"}'
        assert result["content"][-1]["resource"]["text"] == expected
        assert not SECRET.findall(json.dumps(result))


async def test_an_output_models_firewall_gives_the_attach_callable_every_field_too() -> None:
    rest, modern, _ = await every_wire(select_app(), "crm", "typed", {"id": "c2", "_select": ["id"]})
    assert rest.status_code == 200, rest.text
    assert rest.json()["data"] == {"id": "c2"}
    assert rest.json()["content"][0]["resource"]["text"] == "card of Ada <ada@example.com>"
    assert modern["structuredContent"] == {"id": "c2"} and not modern["isError"]


def test_without_select_the_view_keeps_no_second_copy() -> None:
    view = Presenter("cust").schema(Customer).redact_pii(["email"])
    row = {"id": "c1", "name": "Ada", "email": "person1@secret.example"}
    assert view.present(row).view.presented is None
    selected = view.present(row, select=["id"]).view
    assert selected.data == {"id": "c1"}
    assert selected.presented == {"id": "c1", "name": "Ada", "email": "[REDACTED]"}


# -- 2. an embedded child's limit cut on REST -----------------------------------------------------------------


def shop_app() -> Any:
    note = Presenter("note").schema({"text": str}).limit(1)
    line = Presenter("line").schema({"sku": str}).limit(1).embed("notes", note)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    shop = Tool("shop")

    @shop.action(readonly=True, returns=order)
    async def get_order(id: str) -> dict[str, Any]:  # noqa: A002
        """One order."""
        return {"id": id, "lines": [{"sku": "A", "notes": [{"text": "x"}, {"text": "y"}]},
                                    {"sku": "B"}, {"sku": "C"}]}

    @shop.action(readonly=True, returns=order)
    async def list_orders() -> list[dict[str, Any]]:
        """Orders."""
        return [{"id": f"o{i}", "lines": [{"sku": "A"}, {"sku": "B"}]} for i in range(3)]

    @shop.action(readonly=True, returns=order)
    async def small_order() -> dict[str, Any]:
        """An order whose list fits."""
        return {"id": "o9", "lines": [{"sku": "A"}]}

    return MCPFusion("shop", tools=[shop]).build_app()


async def test_an_embedded_limit_cut_is_said_on_rest_end_to_end() -> None:
    rest, modern, _ = await every_wire(shop_app(), "shop", "get_order", {"id": "o1"})
    assert rest.status_code == 200, rest.text
    assert rest.json() == {"id": "o1", "lines": [{"sku": "A", "notes": [{"text": "x"}]}]}
    assert rest.headers["truncated-embedded"] == \
        '"lines"; limit=1; items=1; hidden=2, "lines.notes"; limit=1; items=1; hidden=1'
    assert "truncated" not in rest.headers  # the order itself was not cut
    assert "Embedded list truncated: 'lines'" in modern["content"][1]["text"]  # the agent's notice, as before


async def test_an_embedded_cut_over_a_list_counts_every_parent_item() -> None:
    rest, _, _ = await every_wire(shop_app(), "shop", "list_orders", {})
    assert rest.headers["truncated-embedded"] == '"lines"; limit=1; items=3; hidden=3'


async def test_no_embedded_cut_no_header_and_no_counts_built() -> None:
    rest, _, _ = await every_wire(shop_app(), "shop", "small_order", {})
    assert rest.status_code == 200 and "truncated-embedded" not in rest.headers
    line = Presenter("line").schema({"sku": str}).limit(1)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    assert order.present({"id": "o", "lines": [{"sku": "A"}]}).view.embedded_truncated is None
    assert assemble({"id": "o"}, False, [], [], [], [], []).view.embedded_truncated is None


# -- 3. a paginated attach ------------------------------------------------------------------------------------

ROWS = [{"id": f"c{i}", "email": f"person{i}@secret.example"} for i in range(6)]
CSV = "".join(f"{r['id']},{r['email']}\n" for r in ROWS)


def paged_app(output_schemas: bool = True) -> Any:
    view = Presenter("cust").schema({"id": str, "email": str}).redact_pii(["email"])
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"])
    async def export() -> object:
        """Every customer as a CSV, the rows a page at a time."""
        return attach(ROWS, document(CSV, "text/csv", uri="crm://all.csv"))

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"])
    async def export_only() -> object:
        """The CSV alone."""
        return attach(ROWS, document(CSV, "text/csv", uri="crm://all.csv"), data_block=False)

    @crm.action(readonly=True, returns=view, paginate=2, content_types=["text/csv"])
    async def keyset(page: Page) -> object:
        """A keyset page with a document of its rows."""
        start = page.after or 0
        rows = page.keyset(ROWS[start:start + page.size + 1], key=lambda r: int(r["id"][1:]) + 1)
        return attach(rows, lambda shown: document(",".join(r["id"] for r in shown), "text/csv", uri="crm://p"))

    return MCPFusion("crm", tools=[crm], output_schemas=output_schemas).build_app()


async def test_a_paginated_attach_sends_one_page_and_censors_the_rows_off_it() -> None:
    app = paged_app()
    rest, modern, legacy = await every_wire(app, "crm", "export", {})
    assert rest.status_code == 200, rest.text
    assert [r["id"] for r in rest.json()["data"]] == ["c0", "c1"]  # the page size, not all six rows
    for result in (modern, legacy):
        assert [r["id"] for r in result["structuredContent"]["items"]] == ["c0", "c1"]
        assert result["structuredContent"]["next_cursor"]
        csv = result["content"][-1]["resource"]["text"]
        assert csv.count("[REDACTED]") == len(ROWS) and "c5,[REDACTED]" in csv  # rows off the page censored too
        assert not SECRET.findall(json.dumps(result))
    assert not SECRET.findall(rest.text)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        seen, cursor = [], rest.headers["next-cursor"]
        while cursor:
            page = await http.post("/api/crm/export", json={"cursor": cursor})
            assert page.status_code == 200, page.text
            assert not SECRET.findall(page.text)
            seen += [r["id"] for r in page.json()["data"]]
            cursor = page.headers.get("next-cursor")
    assert seen == ["c2", "c3", "c4", "c5"]


async def test_a_keyset_page_attached_is_paged_as_it_is() -> None:
    rest, modern, _ = await every_wire(paged_app(), "crm", "keyset", {})
    assert [r["id"] for r in rest.json()["data"]] == ["c0", "c1"]
    assert rest.json()["content"][0]["resource"]["text"] == "c0,c1"
    assert modern["structuredContent"]["next_cursor"] and rest.headers["next-cursor"]


@pytest.mark.parametrize("output_schemas", [False, True])
async def test_a_page_attached_without_its_data_block(output_schemas: bool) -> None:
    _, modern, legacy = await every_wire(paged_app(output_schemas), "crm", "export_only", {})
    for result in (modern, legacy):
        assert not result["isError"], result
        texts = [b["text"] for b in result["content"] if b["type"] == "text"]
        assert len(texts) == 1 and 'cursor="' in texts[0]  # the next page's notice, no data block
        assert result["content"][-1]["resource"]["uri"] == "crm://all.csv"
        if output_schemas:  # advertised: structuredContent is required, with the page's cursor
            assert result["structuredContent"]["next_cursor"]
            assert len(result["structuredContent"]["items"]) == 2
        else:
            assert "structuredContent" not in result  # left out, as the handler asked


def test_take_slices_an_attached_list_and_keeps_every_row() -> None:
    call = PageCall(Paging(b"k"), "crm.export", "crm with action export", "f", Page())
    call.open(None, "", 2)
    doc = document("x", "text/plain", uri="a://b")
    page, next_key = call.take(attach(ROWS, doc))
    assert isinstance(page, Attached) and page.data == ROWS[:2] and page.content == (doc,)
    assert next_key == 2 and call.given is ROWS
    other = PageCall(Paging(b"k"), "crm.export", "crm with action export", "f", Page())
    single = attach({"id": "c0"}, doc)
    assert other.take(single) == (single, None) and other.given is None  # not a list: untouched


# -- 4. the README's token figures -----------------------------------------------------------------------------


def test_the_readme_token_figures_are_the_measured_ones(tmp_path: Path) -> None:
    from app.main import create_fusion
    from tests.service_kit import settings_for

    listing = create_fusion(settings_for(tmp_path)).registry.mcp_tools()
    wire = [types.Tool.model_validate(e).model_dump(mode="json", by_alias=True, exclude_none=True) for e in listing]
    without = tokens.count_json([{k: v for k, v in e.items() if k != "outputSchema"} for e in wire])
    with_schemas = tokens.count_json(wire)
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"reference service: (\d+) -> (\d+) tokens of `tools/list`", readme)
    assert said is not None
    assert (int(said[1]), int(said[2])) == (without, with_schemas)
