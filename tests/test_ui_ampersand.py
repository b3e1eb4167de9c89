"""Table cells, summaries and list items show the text stored: `&` is escaped wherever `<` is (FINDINGS item 6),
and the egress guard still finds a redacted value holding `&` or `<` in the form those blocks write it."""

from __future__ import annotations

import datetime as dt
import html
import json

import pytest
from pydantic import BaseModel

from mcpfusion import Presenter, Tool, ui
from tests.firewall_kit import app_for, every_path
from tests.service_kit import build, call, in_process

STORED = ["<b>&amp;</b>", "&lt;x", "a & b", "&", "&&lt;<", "Q&A | <i>"]


def _cells(block: ui.UIBlock) -> list[str]:
    """The body cells of a one-column table, as a markdown renderer reads them (`\\|` a pipe, entities decoded)."""
    return [html.unescape(row[2:-2].replace("\\|", "|")) for row in block.content.splitlines()[2:]]


def test_the_reported_cell_shows_as_stored():
    assert ui.table(["Description"], [["<b>&amp;</b>"]]).content.splitlines()[2] == "| &lt;b>&amp;amp;&lt;/b> |"


@pytest.mark.parametrize("rows", [
    [[text] for text in STORED],  # every cell a string: the joined check
    [[text] for text in STORED] + [[1]],  # a number among them: the `%s` layout
    [[text] for text in STORED] * 3,  # more cells than are looked at one by one
    [[text + "\n"] for text in STORED],  # a line break: the cell by cell path
])
def test_every_table_path_escapes_the_ampersand(rows):
    shown = _cells(ui.table(["Text"], rows))
    assert shown == [str(r[0]).replace("\n", " ") for r in rows]


def test_summary_and_list_items_show_the_text_stored():
    for text in STORED:
        summary = ui.summary(text).content
        assert html.unescape(summary.removeprefix("📊 **Summary**: ")) == text
        assert html.unescape(ui.list([text]).content.removeprefix("- ")) == text
    assert ui.summary("&lt;x").content.endswith("&amp;lt;x")


def test_raw_markdown_keeps_its_own_entities():
    assert ui.markdown("a &amp; b").content == "a &amp; b"


# -- the egress guard --------------------------------------------------------------------------------------------

EMAIL = "ada&bob|<co>@example.com"  # written `ada&amp;bob\|&lt;co>` in a cell: no other block escapes `|`
TAIL = "bob"  # any part of it left after censoring would show as this


class Contact(BaseModel):
    id: str
    name: str
    email: str


def _crm() -> Tool:
    crm = Tool("crm", description="Contacts")
    view = (
        Presenter("contact")
        .schema(Contact)
        .redact_pii(["email"])
        .ui(lambda c: [
            ui.table(["Name", "Email", "Note"], [[c["name"], c["email"], f"Write to {c['email']} & <{c['email']}>"]]),
            ui.table(["Email", "N"], [[c["email"], 1]]),  # the `%s` layout
            ui.summary(f"{c['name']} <{c['email']}>"),
            ui.list([c["email"]]),
        ])
    )

    @crm.action(readonly=True, returns=view)
    async def get(id: str) -> dict:
        """One contact."""
        return {"id": id, "name": "Ada & Bob", "email": EMAIL}

    return crm


async def test_a_redacted_value_with_ampersand_is_censored_in_table_cells_on_every_path():
    answers = await every_path(app_for(_crm()), "crm", "get", {"id": "c1"})
    for path, answer in answers.items():
        assert answer.error is None, (path, answer.raw)
        for form in (EMAIL, ui.table_cell(EMAIL), ui.line(EMAIL), json.dumps(EMAIL)[1:-1], TAIL):
            assert form not in answer.raw, (path, form)
    for path in ("inproc", "mcp-2026", "mcp-2025"):
        table = answers[path].texts[1]
        # The name (not redacted) shows as stored; the email, in each cell, is the censor.
        assert "| Ada &amp; Bob | [REDACTED] | Write to [REDACTED] &amp; &lt;[REDACTED]> |" in table, path
        assert "| [REDACTED] | 1 |" in answers[path].texts[2], path
        assert "📊 **Summary**: Ada &amp; Bob &lt;[REDACTED]>" in answers[path].texts[3], path
    result = await in_process(app_for(_crm())).call("crm", "get", {"id": "c1"})
    view = repr(result.ui_blocks)
    assert TAIL not in view and "[REDACTED]" in view


# -- the reference service: the reported invoice ------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["inproc", "mcp"])
async def test_an_invoice_line_shows_as_stored_in_line_items(tmp_path, transport):
    app = build(tmp_path)
    due = (dt.date.today() + dt.timedelta(days=30)).isoformat()
    lines = [{"description": "<b>&amp;</b>", "unit_price_cents": 100}, {"description": "&lt;x", "unit_price_cents": 1}]
    made = await call("inproc", app, "billing", "create_invoice",
                      {"customer_id": "cus_0001", "due_date": due, "lines": lines}, "demo-admin")
    assert made.error_code is None, made
    got = await call(transport, app, "billing", "get_invoice", {"id": made.data["id"]}, "demo-admin")
    assert got.error_code is None, got
    raw = got.raw if transport == "inproc" else "".join(
        c["text"] for c in json.loads(got.raw)["result"]["content"])
    assert "| &lt;b>&amp;amp;&lt;/b> | 1 |" in raw and "| &amp;lt;x | 1 |" in raw
