"""Done-when of issue #9: the official SDK client (`mcp.Client`) calls every action of the reference service
on both wires, as both roles, and validates each structured result against the advertised outputSchema (the
client itself raises on a mismatch; the test validates again and checks that nothing is untyped)."""

from __future__ import annotations

import json

import jsonschema
import pytest
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import ElicitResult, TextContent

from tests.service_kit import ACME_PII, build, mcp_target, serve

LINES = [{"description": "Audit", "quantity": 2, "unit_price_cents": 1500}]


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    with serve(build(tmp_path_factory.mktemp("sdk"))) as base:
        yield base + "/mcp"


async def confirm(context, params) -> ElicitResult:
    """The user agrees when void_invoice asks (it is declared confirm=...)."""
    return ElicitResult(action="accept", content={"confirm": True})


def client(url: str, mode: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=confirm)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


@pytest.mark.parametrize("token", ["demo-admin", "demo-support"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_reference_action_is_typed_and_validated_by_the_sdk_client(url, mode, token):
    async with client(url, mode, token) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = {t.name: t for t in (await c.list_tools()).tools}
        writer = token != "demo-support"  # support's scopes allow no write: none is listed
        assert set(tools) == ({"billing_read", "billing_write", "billing_void_invoice", "customers"} if writer
                              else {"billing_read", "customers"})
        called: set[tuple[str, str]] = set()

        async def call(tool: str, action: str, **args):
            name, arguments = mcp_target(tool, action, args)
            result = await c.call_tool(name, arguments)  # the SDK validates structuredContent
            assert result.is_error is False, text_of(result)
            assert result.structured_content is not None, f"{tool}.{action} is untyped"
            jsonschema.validate(result.structured_content, tools[name].output_schema)
            if token == "demo-support":
                blob = text_of(result) + json.dumps(result.structured_content)
                assert not [v for v in ACME_PII if v in blob], f"PII in {tool}.{action}"
            called.add((tool, action))
            return result.structured_content

        rows = (await call("billing", "list_invoices"))["items"]
        await call("billing", "list_invoices", status="overdue")
        await call("billing", "get_invoice", id=rows[0]["id"])
        await call("billing", "invoice_pdf", id=rows[0]["id"])  # the PDF as content, the invoice as structured data
        if writer:
            created = await call("billing", "create_invoice", customer_id="cus_0001", due_date="2031-01-31",
                                 lines=LINES, internal_note="n" * 500)
            await call("billing", "update_invoice_status", id=created["id"], status="sent")
            await call("billing", "remind", id=created["id"], message="Friendly nudge")
            await call("billing", "record_payment", id=created["id"], amount_cents=1000, method="card")
            draft = await call("billing", "create_invoice", customer_id="cus_0002", due_date="2031-02-28",
                               lines=LINES)
            await call("billing", "void_invoice", id=draft["id"], reason="r" * 200)
        summary = await call("billing", "revenue_summary")
        assert summary["invoice_count"] >= 24
        export = await call("billing", "export_invoices")
        assert len(export["items"]) == summary["invoice_count"]
        customers = (await call("customers", "list"))["items"]
        await call("customers", "get", id=customers[0]["id"])
        selected = await call("customers", "get", id=customers[0]["id"], _select=["name"])
        assert list(selected) == ["name"]
        actions = {(name.split("_")[0], a) for name, t in tools.items()
                   for a in (t.input_schema["properties"]["action"]["enum"] if "action" in t.input_schema["properties"]
                             else [name.split("_", 1)[1]])}
        assert called == actions  # every action of the service, none forgotten


async def test_docs_page_shows_every_action_output_schema_and_its_token_cost(tmp_path):
    from tests.service_kit import asgi_client

    app = build(tmp_path)
    async with asgi_client(app) as http:
        manifest = (await http.get("/tools.json")).json()
        page = (await http.get("/tools")).text
    actions = [a for t in manifest["tools"] for a in t["actions"]]
    assert len(actions) == 12 and all(a["output_schema"] for a in actions)
    assert page.count("Output schema (<code>outputSchema</code>)") == len(actions)
    for tool in manifest["tools"]:
        assert 0 < tool["tokens"]["output_schemas"] < tool["tokens"]["advertised"]
        assert "of which <code>outputSchema</code>" in page


async def test_stdio_support_view_is_typed_and_guarded(tmp_path):
    import sys
    from pathlib import Path

    from mcp import StdioServerParameters

    root = Path(__file__).parent.parent
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcpfusion.mcp.stdio", "app.main:app"], cwd=str(root),
        env={"PYTHONPATH": str(root), "MCPFUSION_DB_PATH": str(tmp_path / "stdio.sqlite3"),
             "MCPFUSION_AUTHORIZATION": "Bearer demo-support"},
    )
    async with Client(params, mode="legacy") as c:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) == {"billing_read", "customers"}  # support's scopes: no write over stdio either
        for tool, args in (("billing_read", {"action": "get_invoice", "id": "inv_0001"}),
                           ("customers", {"action": "list"})):
            result = await c.call_tool(tool, args)  # validated against outputSchema by the client
            assert result.is_error is False and result.structured_content is not None
            jsonschema.validate(result.structured_content, tools[tool].output_schema)
            blob = text_of(result) + json.dumps(result.structured_content)
            assert "[REDACTED]" in blob and not [v for v in ACME_PII if v in blob]
