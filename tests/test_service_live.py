"""A real uvicorn server: every billing and customers action answers over MCP (the official SDK client, at
both wires) and over REST, with each demo token."""

from __future__ import annotations

import json

import httpx
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import ElicitResult

from tests.service_kit import ACME_PII, TOKENS, WRITES, build, confirm_token, mcp_target, rest, serve

IDS = {  # (overdue invoice, paid invoice, customer) of each token's tenant
    "demo-admin": ("inv_0001", "inv_0002", "cus_0001"),
    "demo-support": ("inv_0001", "inv_0002", "cus_0001"),
    "demo-globex-admin": ("inv_0025", "inv_0026", "cus_0101"),
}
LINE = {"description": "Workshop", "quantity": 1, "unit_price_cents": 90000}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    with serve(build(tmp_path_factory.mktemp("live"))) as url:
        yield url


def plan(token):
    """Every action with valid arguments; `{new}` / `{other}` are ids of invoices created in the run."""
    overdue, paid, customer = IDS[token]
    new = {"customer_id": customer, "due_date": "2031-01-31", "lines": [LINE]}
    return [
        ("billing", "list_invoices", {}),
        ("billing", "list_invoices", {"status": "overdue", "customer_id": customer}),
        ("billing", "get_invoice", {"id": paid}),
        ("billing", "revenue_summary", {}),
        ("billing", "export_invoices", {"status": "sent"}),
        ("billing", "create_invoice", new),
        ("billing", "create_invoice", new),
        ("billing", "update_invoice_status", {"id": "{new}", "status": "sent"}),
        ("billing", "remind", {"id": "{new}"}),  # (one of this run's: an invoice is reminded once an hour)
        ("billing", "record_payment", {"id": "{new}", "amount_cents": 100}),
        ("billing", "void_invoice", {"id": "{other}", "reason": "created twice"}),
        ("customers", "list", {}),
        ("customers", "get", {"id": customer, "_select": ["name", "email"]}),
    ]


async def run_plan(token, invoke, refused):
    """Every action of the plan; support's scopes allow no write, so each is `refused` instead."""
    created: list[str] = []
    texts = []
    for tool, action, args in plan(token):
        placeholders = {"{new}": created[:1] or ["inv_0001"], "{other}": created[1:2] or ["inv_0003"]}
        args = {k: placeholders[v][0] if isinstance(v, str) and v in placeholders else v for k, v in args.items()}
        if token == "demo-support" and action in WRITES:
            await refused(tool, action, args)
            continue
        is_error, data, text = await invoke(tool, action, args)
        if is_error and "CONFIRMATION_REQUIRED" in text:  # a client that cannot ask: the user agrees
            is_error, data, text = await invoke(tool, action, {**args, "_confirm": confirm_token(text)})
        assert not is_error, (token, tool, action, text)
        if action == "create_invoice":
            created.append(data["id"])
        texts.append(text)
    return "\n".join(texts)


@pytest.mark.parametrize("token", TOKENS)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_action_over_mcp_with_the_sdk_client(base, token, mode):
    http = create_mcp_http_client(headers={"authorization": f"Bearer {token}"})
    asked: list[str] = []

    async def confirm(context, params):  # the user agrees to void the invoice
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": True})

    async with Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode,
                      elicitation_callback=confirm) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        if token == "demo-support":  # its scopes allow reads only: no write is listed
            assert set(listed) == {"billing_read", "customers"}
        else:
            assert set(listed) == {"billing_read", "billing_write", "billing_void_invoice", "customers"}
            assert listed["billing_void_invoice"].annotations.destructive_hint is not False
        assert listed["billing_read"].annotations.read_only_hint is True

        async def invoke(tool, action, args):
            result = await client.call_tool(*mcp_target(tool, action, args))
            text = "\n".join(c.text for c in result.content)
            if result.structured_content is not None:
                text += json.dumps(result.structured_content)
            data = None if result.is_error or action != "create_invoice" else json.loads(result.content[0].text)
            return result.is_error, data, text

        async def refused(tool, action, args):  # answered like a tool that does not exist
            with pytest.raises(MCPError, match="Unknown tool"):
                await client.call_tool(*mcp_target(tool, action, args))

        seen = await run_plan(token, invoke, refused)
    assert len(asked) == (0 if token == "demo-support" else 1)  # void_invoice asked once (support cannot call it)
    assert all(a.startswith("Void invoice ") for a in asked)
    if token == "demo-support":
        assert not [v for v in ACME_PII if v in seen]
    else:
        assert "@" in seen  # admins see contact emails


@pytest.mark.parametrize("token", TOKENS)
async def test_every_action_over_rest(base, token):
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:

        async def invoke(tool, action, args):
            r = await rest(client, tool, action, args, token)
            return r.status_code != 200, r.json(), r.text

        async def refused(tool, action, args):  # 403 naming the scope to ask for
            r = await rest(client, tool, action, args, token)
            assert r.status_code == 403, r.text
            challenge = r.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge and "resource_metadata=" in challenge
            assert ("payments:write" if action == "record_payment" else "billing:write") in challenge

        seen = await run_plan(token, invoke, refused)
    if token == "demo-support":
        assert not [v for v in ACME_PII if v in seen]


async def test_health_docs_and_openapi_are_public(base):
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/openapi.json")).status_code == 200
        page = await client.get("/tools")
        assert page.status_code == 200 and "billing" in page.text
