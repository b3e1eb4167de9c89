"""The /tools page takes its examples from the schema (`examples`, the description's "e.g.", enums), shows a
neutral token placeholder, and lists `_select` savings only for tools where `_select` is enabled."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi.testclient import TestClient
from pydantic import Field

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs.manifest import build_manifest

wide = Presenter("row").schema({"id": str, "name": str, "email": str, "notes": str})
billing = Tool("billing")
crm = Tool("crm", select=True)


@billing.action(readonly=True, returns=wide)
async def get_invoice(
    id: Annotated[str, Field(description="Invoice id, e.g. inv_0001 (see list_invoices).")],
    status: Literal["overdue", "paid"],
    amount_cents: Annotated[int, Field(description="Amount in cents, e.g. 1250")],
    customer: Annotated[str | None, Field(description="Customer id, for example cus_0042.")],
    code: Annotated[str, Field(description="A code, e.g. X1", examples=["EX-9"])],
) -> dict:
    return {}


@crm.action(readonly=True, returns=wide)
async def get(id: str) -> dict:
    return {}


def actions() -> dict[str, dict]:
    manifest = build_manifest(ToolRegistry([billing, crm]))
    return {a["qualified_name"]: a for t in manifest["tools"] for a in t["actions"]}


def test_examples_come_from_the_schema():
    found = actions()
    assert found["billing.get_invoice"]["example_arguments"] == {
        "id": "inv_0001", "status": "overdue", "amount_cents": 1250, "customer": "cus_0042", "code": "EX-9"}
    assert found["billing.get_invoice"]["examples"]["mcp"]["params"]["arguments"]["id"] == "inv_0001"
    assert '"id": "inv_0001"' in found["billing.get_invoice"]["examples"]["curl"]
    assert found["crm.get"]["example_arguments"] == {"id": "id_1"}  # nothing documented: a generated value


def test_select_savings_only_where_select_is_enabled():
    found = actions()
    assert found["billing.get_invoice"]["tokens"] is None or found["billing.get_invoice"]["tokens"]["select"] is None
    assert found["crm.get"]["tokens"]["select"]["keys"] == ["id", "name"]


def test_page_has_a_neutral_token_placeholder_and_no_disabled_select_rows():
    page = TestClient(MCPFusion("docs", tools=[billing, crm]).build_app()).get("/tools").text
    assert "demo-admin" not in page and "not enabled" not in page
    assert 'placeholder="your token, without Bearer"' in page
    assert page.count("<code>_select</code> =") == 1  # the crm tool's row only
    assert "inv_0001" in page
