"""The billing domain as the agent perceives it: presenters (limit, rules, UI, suggestions, embeds),
Model profiles, status rules, structured and TOON answers, `_select` and the tool listing."""

from __future__ import annotations

import datetime as dt
import json

import pytest
import toon_format

from app.store import BillingStore
from app.tables import CustomerRecord
from tests.service_kit import asgi_client, confirm_token, in_process, rest

ADMIN = {"authorization": "Bearer demo-admin"}
LINE = {"description": "Audit", "quantity": 2, "unit_price_cents": 1500}



@pytest.fixture
def t(service_app):
    return in_process(service_app)


async def test_list_is_limited_with_table_chart_rules_and_suggestions(t):
    result = await t.call("billing", "list_invoices", {}, headers=ADMIN)
    assert len(result.data) == 20  # one page: the presenter's limit
    summary, table, chart = result.ui_blocks
    cursor = result.structured_content["next_cursor"]
    assert summary.content == ("📊 **Summary**: 20 shown; more results exist. Next page: call billing_read with action "
                               f'list_invoices with the same arguments and cursor="{cursor}".')
    assert table.type == "markdown" and table.content.startswith("| Number | Customer | Status | Total | Due |")
    assert chart.type == "echarts" and json.loads(chart.content.split("\n", 1)[1].rsplit("\n", 1)[0])["series"]
    assert any("CENTS" in rule for rule in result.system_rules)
    assert any(s.action == "billing.remind" for s in result.suggestions)
    assert "lines" not in result.data[0]  # rows, not full invoices


@pytest.mark.parametrize("status", ["draft", "sent", "paid", "void"])
async def test_status_filter(t, status):
    result = await t.call("billing", "list_invoices", {"status": status}, headers=ADMIN)
    assert result.data and {row["status"] for row in result.data} == {status}


async def test_overdue_and_customer_filters(t):
    overdue = (await t.call("billing", "list_invoices", {"status": "overdue"}, headers=ADMIN)).data
    assert overdue and all(row["overdue"] and row["status"] == "sent" for row in overdue)
    mine = (await t.call("billing", "list_invoices", {"customer_id": "cus_0002"}, headers=ADMIN)).data
    assert mine and {row["customer_id"] for row in mine} == {"cus_0002"}
    bad = await t.call("billing", "list_invoices", {"status": "late"}, headers=ADMIN)
    assert bad.error_code == "VALIDATION_ERROR" and 'You sent: "late"' in bad.text


async def test_overdue_invoice_suggests_remind_and_embeds_lines(t):
    result = await t.call("billing", "get_invoice", {"id": "inv_0001"}, headers=ADMIN)
    assert result.data["overdue"] is True
    assert [s.action for s in result.suggestions] == ["billing.remind", "billing.record_payment"]
    texts = result.raw.texts
    assert texts[-1].startswith("<action_suggestions>\n- billing.remind: ")
    # the data, the summary, the chart, then the line items' table (drawn by the invoice's UI), before the rules
    assert [t.split(">", 1)[0] for t in texts[1:4]] == ['<ui_passthrough type="markdown"',
                                                        '<ui_passthrough type="echarts" title="Paid vs outstanding" '
                                                        'width="half"', '<ui_passthrough type="markdown" title="Line '
                                                        'items"']
    assert texts[3].splitlines()[1:3] == ["| Description | Qty | Unit price | Amount |", "|---|---|---|---|"]
    assert "- A line's amount_cents is quantity x unit_price_cents, in CENTS." in texts[-2]  # child rules merged
    assert result.data["lines"][0]["amount_cents"] == result.data["lines"][0]["quantity"] * \
        result.data["lines"][0]["unit_price_cents"]
    draft = await t.call("billing", "get_invoice", {"id": "inv_0003"}, headers=ADMIN)
    assert [s.action for s in draft.suggestions] == ["billing.update_invoice_status"]


async def test_not_found_is_self_healing(t):
    result = await t.call("billing", "get_invoice", {"id": "inv_9"}, headers=ADMIN)
    assert result.error_code == "NOT_FOUND"
    assert result.text == ('<tool_error code="NOT_FOUND" severity="error">\n'
                           '<message>Invoice "inv_9" was not found.</message>\n'
                           "<recovery>Call billing.list_invoices first to find a valid id.</recovery>\n"
                           "<available_actions>\n  <action>billing.list_invoices</action>\n</available_actions>\n"
                           "</tool_error>")


async def test_create_uses_the_model_create_profile(t):
    ok = await t.call("billing", "create_invoice",
                      {"customer_id": "cus_0001", "due_date": "2030-01-31", "lines": [LINE, LINE]}, headers=ADMIN)
    assert ok.data["status"] == "draft" and ok.data["total_cents"] == 6000 and ok.data["number"] == "ACME-0025"
    guarded = await t.call("billing", "create_invoice",
                           {"customer_id": "cus_0001", "due_date": "2030-01-31", "lines": [LINE],
                            "total_cents": 1}, headers=ADMIN)
    assert guarded.error_code == "VALIDATION_ERROR"
    assert '<field name="total_cents">This field is guarded' in guarded.text
    computed = await t.call("billing", "create_invoice",
                            {"customer_id": "cus_0001", "due_date": "2030-01-31",
                             "lines": [{**LINE, "amount_cents": 1}]}, headers=ADMIN)
    assert computed.error_code == "VALIDATION_ERROR" and "lines[0].amount_cents" in computed.text
    negative = await t.call("billing", "create_invoice",
                            {"customer_id": "cus_0001", "due_date": "2030-01-31",
                             "lines": [{**LINE, "unit_price_cents": -2}]}, headers=ADMIN)
    assert "You sent: -2." in negative.text
    empty = await t.call("billing", "create_invoice",
                         {"customer_id": "cus_0001", "due_date": "2030-01-31", "lines": []}, headers=ADMIN)
    assert empty.error_code == "VALIDATION_ERROR"


@pytest.mark.parametrize(("due", "ok"), [
    ("1900-01-01", False), ("2028-02-28", False), ("2028-02-29", True), ("2038-02-28", True), ("2038-03-01", False),
    ("9999-12-31", False),
])
async def test_a_due_date_falls_between_the_issue_date_and_ten_years_after(service_app, t, monkeypatch, due, ok):
    monkeypatch.setattr(BillingStore, "today", staticmethod(lambda: dt.date(2028, 2, 29)))  # ten years: 2038-02-28
    result = await t.call("billing", "create_invoice", {"customer_id": "cus_0001", "due_date": due, "lines": [LINE]},
                          headers=ADMIN)
    if ok:
        assert result.data["due_date"] == due and result.data["issued_on"] == "2028-02-29"
        return
    assert result.error_code == "VALIDATION_ERROR" and f"due_date {due} is " in result.text
    assert "Send a due_date from 2028-02-29 to 2038-02-28 (YYYY-MM-DD)" in result.text
    assert result.raw.view.error.details == {"field": "due_date"}
    async with asgi_client(service_app) as client:
        body = {"customer_id": "cus_0001", "due_date": due, "lines": [LINE]}
        refused = await rest(client, "billing", "create_invoice", body, "demo-admin")
    assert refused.status_code == 422 and refused.json()["code"] == "VALIDATION_ERROR"
    listed = await t.call("billing", "list_invoices", {"customer_id": "cus_0001", "status": "draft"}, headers=ADMIN)
    assert due not in {row["due_date"] for row in listed.data}  # nothing was stored


async def test_status_transitions(t):
    assert (await t.call("billing", "update_invoice_status", {"id": "inv_0003", "status": "paid"},
                         headers=ADMIN)).error_code == "CONFLICT"
    to_void = await t.call("billing", "update_invoice_status", {"id": "inv_0003", "status": "void"}, headers=ADMIN)
    assert to_void.error_code == "CONFLICT" and "billing.void_invoice" in to_void.text
    sent = await t.call("billing", "update_invoice_status", {"id": "inv_0003", "status": "sent"}, headers=ADMIN)
    assert sent.data["status"] == "sent"
    again = await t.call("billing", "update_invoice_status", {"id": "inv_0003", "status": "sent"}, headers=ADMIN)
    assert again.data["status"] == "sent"  # idempotent
    missing = await t.call("billing", "update_invoice_status", {"id": "inv_0003"}, headers=ADMIN)
    assert missing.error_code == "VALIDATION_ERROR" and '<field name="status">Field required.' in missing.text


async def test_remind_void_and_payments(t):
    assert (await t.call("billing", "remind", {"id": "inv_0003"}, headers=ADMIN)).error_code == "CONFLICT"
    reminded = await t.call("billing", "remind", {"id": "inv_0001"}, headers=ADMIN)
    assert reminded.data["reminders_sent"] == 1
    void = {"id": "inv_0003", "reason": "sent by mistake"}
    asked = await t.call("billing", "void_invoice", void, headers=ADMIN)
    assert asked.error_code == "CONFIRMATION_REQUIRED" and 'Void invoice "inv_0003"' in asked.text
    voided = await t.call("billing", "void_invoice", {**void, "_confirm": confirm_token(asked.text)}, headers=ADMIN)
    assert voided.data["status"] == "void" and voided.data["void_reason"] == "sent by mistake"
    total = reminded.data["total_cents"]
    too_much = await t.call("billing", "record_payment", {"id": "inv_0001", "amount_cents": total + 1}, headers=ADMIN)
    assert too_much.error_code == "CONFLICT" and f"at most {total}" in too_much.text
    paid = await t.call("billing", "record_payment", {"id": "inv_0001", "amount_cents": total}, headers=ADMIN)
    assert paid.data["status"] == "paid" and paid.data["payments"][-1]["amount_cents"] == total
    assert set(paid.data["payments"][-1]) == {"id", "invoice_id", "amount_cents", "method", "received_on"}


@pytest.mark.parametrize(("invoice_id", "code", "says"), [
    ("inv_9999", "NOT_FOUND", 'Invoice "inv_9999" was not found.'),
    ("inv_0002", "CONFLICT", 'Invoice "inv_0002" is paid and cannot be voided.'),
])
async def test_a_void_that_cannot_happen_is_refused_before_asking_the_user(t, invoice_id, code, says):
    refused = await t.call("billing", "void_invoice", {"id": invoice_id, "reason": "mistake"}, headers=ADMIN)
    assert refused.error_code == code and says in refused.text
    assert "Ask the user" not in refused.text and "confirm_token" not in refused.text


async def test_a_payment_after_the_confirmation_still_stops_the_void(t):
    void = {"id": "inv_0001", "reason": "customer left"}  # sent, nothing paid
    asked = await t.call("billing", "void_invoice", void, headers=ADMIN)
    assert asked.error_code == "CONFIRMATION_REQUIRED"
    paid = await t.call("billing", "record_payment", {"id": "inv_0001", "amount_cents": 100}, headers=ADMIN)
    assert paid.data["paid_cents"] == 100
    late = await t.call("billing", "void_invoice", {**void, "_confirm": confirm_token(asked.text)}, headers=ADMIN)
    assert late.error_code == "CONFLICT" and "is sent with 100 cents paid and cannot be voided" in late.text


async def test_a_payment_refused_says_what_fits_the_invoice_status(t):
    draft = await t.call("billing", "record_payment", {"id": "inv_0003", "amount_cents": 100}, headers=ADMIN)
    assert draft.error_code == "CONFLICT" and "Send the invoice first (update_invoice_status status=sent)" in draft.text
    assert draft.raw.view.error.available_actions == ["billing.update_invoice_status"]
    void = {"id": "inv_0003", "reason": "duplicate"}
    asked = await t.call("billing", "void_invoice", void, headers=ADMIN)
    await t.call("billing", "void_invoice", {**void, "_confirm": confirm_token(asked.text)}, headers=ADMIN)
    for invoice_id, status, why in (("inv_0002", "paid", "it is fully paid"), ("inv_0003", "void", "it was voided")):
        final = await t.call("billing", "record_payment", {"id": invoice_id, "amount_cents": 100}, headers=ADMIN)
        assert final.error_code == "CONFLICT", final.text
        assert f"is {status}; {why}, so nothing is owed on it." in final.text
        assert f"a {status} invoice is final" in final.text and "Send the invoice first" not in final.text
        assert final.raw.view.error.available_actions == ["billing.get_invoice"]


async def test_revenue_summary_is_structured(service_app, t):
    result = await t.call("billing", "revenue_summary", {}, headers=ADMIN)
    assert result.structured_content == json.loads(result.text)
    assert result.structured_content["count_by_status"] == {"draft": 4, "sent": 10, "paid": 7, "void": 3}
    action = service_app.state.mcpfusion.registry.find("billing", "revenue_summary")
    schema = action.output_schema
    assert set(schema["required"]) == set(result.structured_content)
    import jsonschema

    jsonschema.validate(result.structured_content, schema)


async def test_export_is_toon(t):
    result = await t.call("billing", "export_invoices", {"status": "sent"}, headers=ADMIN)
    assert result.text.startswith("[10|]{id|number|customer|status|total_cents|due_date|overdue}:")
    assert toon_format.decode(result.text, strict=True) == result.data


async def test_customers_select(service_app, t):
    result = await t.call("customers", "list", {"_select": ["name", "open_balance_cents"]}, headers=ADMIN)
    assert all(set(row) == {"name", "open_balance_cents"} for row in result.data)
    assert result.ui_blocks[0].content.startswith("| Customer | Country | Open balance |")  # UI sees all fields
    bad = await t.call("customers", "get", {"id": "cus_0001", "_select": ["password"]}, headers=ADMIN)
    assert bad.error_code == "VALIDATION_ERROR"
    listing = {entry["name"]: entry for entry in service_app.state.mcpfusion.registry.mcp_tools()}
    select = listing["customers"]["inputSchema"]["properties"]["_select"]
    assert "email" in select["items"]["enum"] and "tenant" not in select["items"]["enum"]


async def test_tool_listing(service_app):
    listing = {entry["name"]: entry for entry in service_app.state.mcpfusion.registry.mcp_tools()}
    # billing is exposed by annotation profile: reads, non-destructive writes, the one destructive action
    assert list(listing) == ["billing_read", "billing_write", "billing_void_invoice", "customers"]
    rows = {}
    for name in ("billing_read", "billing_write"):
        entry = listing[name]
        head, *lines = entry["description"].split("\n")
        assert head == "Invoices and payments of your organisation (amounts in cents)"
        rows[name] = [line.split("(", 1)[0] for line in lines]  # one line per action: name(params): desc
        assert rows[name] == entry["inputSchema"]["properties"]["action"]["enum"]
    assert rows["billing_read"] == ["list_invoices", "get_invoice", "revenue_summary", "export_invoices", "invoice_pdf"]
    assert rows["billing_write"] == ["create_invoice", "update_invoice_status", "remind", "record_payment"]
    assert "\ncreate_invoice(customer_id,due_date,lines,internal_note?,idempotency_key?): Create a draft invoice" in (
        listing["billing_write"]["description"])
    assert listing["billing_read"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert listing["billing_write"]["annotations"] == {"destructiveHint": False}  # open-world: remind, payments
    assert listing["billing_void_invoice"]["annotations"] == {"openWorldHint": False}  # destructive (MCP default)
    assert listing["billing_void_invoice"]["inputSchema"]["required"] == ["id", "reason"]
    assert "action" not in listing["billing_void_invoice"]["inputSchema"]["properties"]
    assert listing["customers"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    for name in ("billing_read", "billing_write", "billing_void_invoice"):
        properties = listing[name]["inputSchema"]["properties"]
        for guarded in ("total_cents", "number", "tenant", "processor_token", "margin_cents"):
            assert guarded not in properties


async def test_list_invoices_is_advertised_read_only_over_mcp(service_app):
    """What an MCP client reads in tools/list, and the calls it makes with those names."""
    from tests.service_kit import META, auth

    headers = {"accept": "application/json", "content-type": "application/json",
               "mcp-protocol-version": "2026-07-28", **auth("demo-admin")}

    async def rpc(client, method, params):
        reply = await client.post("/mcp", headers={**headers, "mcp-method": method, "mcp-name": params.get("name", "")},
                                  json={"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}})
        assert reply.status_code == 200, reply.text
        return reply.json()["result"]

    async with asgi_client(service_app) as client:
        tools = {t["name"]: t for t in (await rpc(client, "tools/list", {}))["tools"]}
        [holder] = [t for t in tools.values()
                    if "list_invoices" in t["inputSchema"]["properties"].get("action", {}).get("enum", [])]
        assert holder["name"] == "billing_read" and holder["annotations"]["readOnlyHint"] is True
        listed = await rpc(client, "tools/call", {"name": "billing_read", "arguments": {"action": "list_invoices"}})
        assert not listed.get("isError") and "inv_" in listed["content"][0]["text"]
        # a write through the read-only tool is refused, and the error names the tool that serves it
        refused = await rpc(client, "tools/call", {"name": "billing_read",
                                                   "arguments": {"action": "void_invoice", "id": "inv_0001"}})
        assert refused["isError"] and "served by the tool billing_void_invoice" in refused["content"][0]["text"]
        voided = await rpc(client, "tools/call", {"name": "billing_void_invoice",
                                                  "arguments": {"id": "inv_0003", "reason": "sent twice"}})
        # reached without a discriminator: the action answers (here it first asks the user to confirm)
        assert not voided.get("isError") or "CONFIRMATION_REQUIRED" in voided["content"][0]["text"], voided


async def test_rest_openapi_documents_actions(service_app):
    async with asgi_client(service_app) as client:
        spec = (await client.get("/openapi.json")).json()
        assert "/api/billing/void_invoice" in spec["paths"] and "/api/customers/get" in spec["paths"]
        assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
        assert spec["paths"]["/api/billing/get_invoice"]["post"]["security"] == [{"bearer": ["billing:read"]}]
        assert "security" not in spec["paths"]["/healthz"]["get"]
        r = await rest(client, "billing", "create_invoice", {"customer_id": "cus_0001"}, "demo-admin")
        assert r.status_code == 422 and r.json()["code"] == "VALIDATION_ERROR"
        r = await rest(client, "billing", "get_invoice", {"id": "nope"}, "demo-admin")
        assert r.status_code == 404


async def test_customer_search_and_balance(t):
    by_name = (await t.call("customers", "list", {"search": "NORTH"}, headers=ADMIN)).data
    assert [c["name"] for c in by_name] == ["Northwind Traders"]
    by_country = (await t.call("customers", "list", {"search": "nl"}, headers=ADMIN)).data
    assert [c["country"] for c in by_country] == ["NL"]
    tricky = (await t.call("customers", "list", {"search": "%' OR 1=1 --"}, headers=ADMIN)).data
    assert tricky == []  # a bound parameter, never SQL text
    one = await t.call("customers", "get", {"id": "cus_0001"}, headers=ADMIN)
    owed = sum(r["total_cents"] - r["paid_cents"] for r in
               (await t.call("billing", "list_invoices", {"customer_id": "cus_0001", "status": "sent"},
                             headers=ADMIN)).data)
    assert one.data["open_balance_cents"] == owed > 0
    assert [s.action for s in one.suggestions] == ["billing.list_invoices"]


async def test_customer_search_is_a_literal_substring(service_app, t):
    db = service_app.state.db
    await db.ready()
    async with db.writes() as session:
        session.add(CustomerRecord(id="cus_0009", tenant="acme", name="100% Organic_Foods A/B", email="a@b.example",
                                   phone=None, country="PT", created_on=dt.date(2025, 1, 1)))
        await session.commit()
    for wildcard in ("%", "_", "/", "0% o", "c_f", "a/b"):  # LIKE's wildcards and the escape character, as typed
        found = (await t.call("customers", "list", {"search": wildcard}, headers=ADMIN)).data
        assert [c["id"] for c in found] == ["cus_0009"], wildcard
    for absent in ("1_0", "n%d", "a_b", "a%b"):
        assert (await t.call("customers", "list", {"search": absent}, headers=ADMIN)).data == [], absent
    assert [c["id"] for c in (await t.call("customers", "list", {"search": "ORGANIC_f"}, headers=ADMIN)).data] == [
        "cus_0009"]


@pytest.mark.parametrize(("cents", "currency", "text"), [
    (0, "EUR", "0.00 EUR"), (None, "", "0.00"), (5, "", "0.05"), (-5, "EUR", "-0.05 EUR"), (79600, "EUR", "796.00 EUR"),
    (809700, "EUR", "8,097.00 EUR"), (-123456789, "USD", "-1,234,567.89 USD"), (12345, "EUR ", "123.45 EUR"),
    (2**60 + 1, "", "11,529,215,046,068,469.77"),  # exact where a float of it would not be
    (1250.0, "", "12.50"),
])
def test_money_writes_cents_as_units_with_two_decimals(cents, currency, text):
    from presenters.money import money

    assert money(cents, currency) == text


async def test_two_payments_of_the_same_amount_are_two_charges(t, monkeypatch):
    """Each captured payment carries its own processor reference: a second payment of the same amount (or
    a retry) is never booked under the first one's charge."""
    references: list[str] = []
    record = BillingStore.record_payment

    async def spy(self, invoice_id, amount_cents, method, processor_ref, idempotency_key=None):
        assert idempotency_key is None  # (none sent: two payments, as a caller without keys makes them)
        references.append(processor_ref)
        return await record(self, invoice_id, amount_cents, method, processor_ref, idempotency_key)

    monkeypatch.setattr(BillingStore, "record_payment", spy)
    for _ in range(2):
        paid = await t.call("billing", "record_payment", {"id": "inv_0001", "amount_cents": 300}, headers=ADMIN)
        assert paid.data["paid_cents"] == 300 * len(references)
    assert len(references) == 2 and references[0] != references[1]
    assert all(r.startswith("ch_") for r in references)
