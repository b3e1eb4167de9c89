"""The compact exposition changes what is advertised, never what validates.

- the server's verdict on every input of the corpus is the one recorded before the compact exposition
  (tests/data/validation_verdicts.json, reference service + tricky declarations);
- every call the server accepts (in its strict JSON form, an optional `null` left out) is accepted by the
  advertised schemas, grouped and flat: no valid call is blocked by what a client reads;
- what the advertised schema lets through and the action refuses still gets the self-healing error.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import toon_format
from jsonschema import Draft202012Validator, FormatChecker

from mcpfusion import Tool
from mcpfusion.dispatch import _pop_select
from mcpfusion.exposition import (
    MCP_DEFAULT_HINTS,
    compact_annotations,
    merge_parameter,
    narrowed,
    optional_form,
    output_schema,
)
from mcpfusion.listing import tool_entries
from mcpfusion.pagination import CURSOR_PARAM
from mcpfusion.testing import ToolTester
from tests import signatures
from tests import validation_corpus as vc
from tests.tricky_tools import TOOLS, shapes

REGISTRIES = vc.registries()
RECORDED = json.loads(vc.FIXTURE.read_text())
CHECKER = FormatChecker()


def _action_params():
    for label, registry in REGISTRIES.items():
        for action in registry.actions():
            yield pytest.param(label, action, id=f"{label}:{action.qualified_name}")


ACTIONS = list(_action_params())


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return Draft202012Validator(schema, format_checker=CHECKER).is_valid(value)


def _normal(action, args: dict[str, Any]) -> dict[str, Any]:
    """The same call without the `null`s an omitted optional parameter means anyway."""
    fields = action.args_model.model_fields
    return {k: v for k, v in args.items()
            if not (v is None and k in fields and not fields[k].is_required() and fields[k].default is None)}


def _kwargs(action, args: dict[str, Any]) -> dict[str, Any]:
    args = dict(args)
    select = _pop_select(action, args)
    return {**action.validate(args), "_select": select}


def _found(action) -> tuple[dict[str, Any], bool]:
    """The advertised entry holding `action`, and whether it takes the `action` discriminator."""
    for entry in tool_entries(action.tool):
        enum = entry["inputSchema"]["properties"].get("action", {}).get("enum")
        if entry["name"] == f"{action.tool.name}_{action.name}" and enum is None:
            return entry, False
        if enum and action.name in enum:
            return entry, True
    raise AssertionError(f"{action.label} is not advertised")


def test_every_recorded_action_still_exists():
    now = {f"{label}:{a.qualified_name}" for label, r in REGISTRIES.items() for a in r.actions()}
    missing = sorted(set(RECORDED) - now)
    assert not missing, f"actions gone since the verdicts were recorded: {missing} (see tests/validation_corpus.py)"


@pytest.mark.parametrize(("label", "action"), ACTIONS)
def test_server_verdicts_are_the_recorded_ones(label, action):
    recorded = RECORDED.get(f"{label}:{action.qualified_name}")
    assert recorded, f"no recorded verdicts for {action.label}: run tests/validation_corpus.py --write"
    changed = [(e["args"], e, vc.verdict(action, e["args"])) for e in recorded
               if {k: v for k, v in e.items() if k != "args"} != vc.verdict(action, e["args"])]
    assert not changed, (
        f"{action.label} now decides differently on {len(changed)} input(s), e.g. {changed[0]}; if its contract "
        "changed on purpose, re-record with `python tests/validation_corpus.py --write`"
    )
    assert any(e["ok"] for e in recorded) and not all(e["ok"] for e in recorded)


@pytest.mark.parametrize(("label", "action"), ACTIONS)
def test_advertised_schemas_accept_every_call_the_server_accepts(label, action):
    entry, grouped = _found(action)
    full = action.input_schema  # the action's exact pydantic schema (what validates)
    accepted = 0
    for args in vc.corpus(action):
        if not vc.verdict(action, args)["ok"] or not _valid(full, args):
            continue  # refused, or only accepted through pydantic's lax coercion ("5" for 5)
        call = _normal(action, args)
        assert vc.verdict(action, call)["ok"] and _kwargs(action, call) == _kwargs(action, args)
        advertised = {"action": action.name, **call} if grouped else call
        assert _valid(entry["inputSchema"], advertised), (action.label, advertised, entry["inputSchema"])
        accepted += 1
    assert accepted >= 1


def _walk(node: Any):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


@pytest.mark.parametrize("registry", REGISTRIES.values(), ids=list(REGISTRIES))
def test_compact_shape(registry):
    for entry in registry.mcp_tools():
        schema = entry["inputSchema"]
        for node in _walk(schema["properties"]):
            for branch in node.get("anyOf", []):
                assert "anyOf" not in branch, (entry["name"], node)
        for name, prop in schema["properties"].items():
            assert prop.get("default", 0) is not None, (entry["name"], name)
        hints = entry.get("annotations", {})
        for key, value in hints.items():
            assert MCP_DEFAULT_HINTS[key] != value, (entry["name"], key)
        assert "The operation to run" not in json.dumps(schema)


def test_shared_parameters_merge_into_one_schema_that_accepts_each():
    [entry] = tool_entries(shapes)
    props = entry["inputSchema"]["properties"]
    # b requires status, the others may send it (the description's table says which): one enum unites them,
    # without the "type" the enum already says
    assert props["status"] == {"enum": ["x", "y", "z", "w"]}
    # int for a and e (differing bounds and defaults dropped), str for b: a flat anyOf, no nesting
    assert props["n"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["text"] == {"type": "string", "description": "a: Short text. b: Longer text."}
    # a null limit means something else than the default 10: the null branch stays
    assert props["limit"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 10}
    assert props["day"] == {"format": "date", "type": "string"}
    # b requires note and accepts null: null stays
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert props["customer"] == {"type": "string"}
    assert props["shape"]["anyOf"][0]["properties"]["kind"] == {"const": "circle", "type": "string"}
    assert "$defs" in entry["inputSchema"] and set(entry["inputSchema"]["$defs"]) == {"Item", "Tree"}
    for guarded_or_hidden in ("id", "total_cents", "secret"):
        assert guarded_or_hidden not in props
    assert "annotations" not in entry  # every hint at the MCP default (destructive d, open-world e)
    # which action takes which parameter, and whether it must: once per action, in the description, with what
    # the merged schema leaves out of its own: the values of the united `status` it takes (listed, or the fewer
    # it does not take), its type of `n`, its bounds of `text` and `n`, its defaults
    table = toon_format.decode(entry["description"].split("\n\n", 1)[1], strict=True)
    assert {r["action"]: r["required"] for r in table} == {
        "a": 'status?:x|y,n?:type=integer default=0,text?:maxLength=10 default="",limit?,day?',
        "b": "status:y|z,n:type=string,text:minLength=2 maxLength=20,note,flag?", "c": "item,items?,ratio?",
        "d": "tree,shape,mapping?,only?", "e": "customer,note?,n?:type=integer minimum=0 maximum=5 default=1",
        "f": "note?,status?:not y default=x"}
    assert "Optional for" not in json.dumps(entry) and "Required for" not in json.dumps(entry)


def _grouped_entries():
    """Every grouped entry of the reference service and the tricky declarations, each tool grouped whole and
    by annotation profile."""
    for label, registry in REGISTRIES.items():
        for tool in registry.tools.values():
            for kind in ("grouped", "profiles"):
                view = copy.copy(tool)
                view.exposition = kind
                for entry in tool_entries(view):
                    if "action" in entry["inputSchema"]["properties"]:
                        yield pytest.param(view, entry, id=f"{label}:{kind}:{entry['name']}")


def _sentence(text: str | None) -> str | None:
    return text if not text or text[-1] in ".!?" else text + "."


@pytest.mark.parametrize(("tool", "entry"), list(_grouped_entries()))
def test_each_action_reads_its_own_description_of_a_shared_parameter(tool, entry):
    """What an agent reads of a merged parameter for one action (the description, or the parts naming the
    action) is what that action alone advertises (its flat entry): never another action's description."""
    for name, prop in entry["inputSchema"]["properties"].items():
        takers = [a for a in entry["inputSchema"]["properties"]["action"]["enum"]
                  if name in tool.actions[a].input_schema.get("properties", {})]
        reads = signatures.described(prop.get("description"), takers)
        for action in takers:
            flat = tool.actions[action].advertised_input_schema()["properties"]
            if name == "_select" and name not in flat:
                continue  # an action without declared fields has no `_select` of its own
            own = flat[name].get("description")
            assert reads[action] == _sentence(own), (entry["name"], name, action, prop.get("description"))


def test_a_description_some_sharing_actions_declare_names_them():
    billing = copy.copy(REGISTRIES["reference"].tools["billing"])
    billing.exposition = "grouped"
    [entry] = tool_entries(billing)
    props = entry["inputSchema"]["properties"]
    # a filter of the reads, not the new status update_invoice_status takes nor create_invoice's customer
    assert props["status"]["description"] == (
        "list_invoices,export_invoices: Only invoices with this status (or overdue).")
    assert props["customer_id"]["description"] == "list_invoices: Only this customer's invoices."
    assert props["id"]["description"] == "Invoice id, e.g. inv_0001 (see list_invoices)."  # all say it


def _scalar(schema: dict[str, Any]) -> bool:
    """A parameter of scalar values (no object nor list in any branch)."""
    text = json.dumps(schema)
    return not any(k in text for k in ('"properties"', '"items"', '"$ref"', '"object"', '"array"', '"additionalProp'))


def _candidates(action, name: str, merged: dict[str, Any]) -> list[Any]:
    full = action.input_schema
    values = [*vc.WRONG, *vc._edges(full["properties"][name], full), *merged.get("enum", ())]
    return [v for i, v in enumerate(values) if v is not None and v not in values[:i]]


@pytest.mark.parametrize(("label", "action"), ACTIONS)
def test_each_action_line_says_what_the_server_accepts_of_a_shared_parameter(label, action):
    """The schema an agent reads for this action (the merged parameter, narrowed by the action's line: values,
    type, bounds, format) accepts exactly the scalar values the server accepts, `null` aside: tried on its
    accepted corpus calls with the corpus's wrong values, edges and the merged enum's values."""
    entry, grouped = _found(action)
    if not grouped:
        return
    props = entry["inputSchema"]["properties"]
    strict = action.input_schema
    accepted = [args for args in vc.corpus(action) if vc.verdict(action, args)["ok"]][:3]
    eligible = checked = 0
    for name, found in signatures.lines(entry)[action.name].items():
        if name == CURSOR_PARAM or not _scalar(props[name]) or not _scalar(strict["properties"][name]):
            continue  # the cursor is opaque: the server checks its signature
        eligible += 1
        reads = signatures.told(props[name], found)
        for args in accepted:
            for value in _candidates(action, name, props[name]):
                call = {**args, name: value}
                ok = vc.verdict(action, call)["ok"]
                if _valid(reads, value):
                    assert ok, (action.label, name, value, reads)
                elif ok:
                    assert not _valid(strict, call), (action.label, name, value, reads)  # only lax coercion
                checked += 1
    assert checked or not accepted or not eligible


def test_narrowed_values_units():
    wide = {"enum": ["in progress", "done", "new"]}
    # the fewer values left out, quoted where they are not one word; nothing for the action taking them all
    assert narrowed([{"properties": {"s": {"enum": ["in progress", "done"]}}, "required": ["s"]},
                     {"properties": {"s": wide}}], {"properties": {"s": wide}}) == [{"s": "not new"}, {}]
    assert narrowed([{"properties": {"s": {"enum": ["in progress"]}}}, {"properties": {"s": wide}}],
                    {"properties": {"s": wide}}) == [{"s": '"in progress"'}, {}]
    # an enum next to any integer (the merged schema lists no values): the enum's values; a parameter of one
    # action, or without listed values, says nothing
    assert narrowed([{"properties": {"n": {"enum": [1, 2]}, "only": {"enum": ["a"]}}},
                     {"properties": {"n": {"type": "integer"}}}],
                    {"properties": {"n": {"type": "integer"}, "only": {"enum": ["a"]}}}) == [{"n": "1|2"}, {}]
    # through a definition, and an optional parameter's null (its default) is no value of its own
    defs = {"S": {"enum": ["x", "y"], "type": "string"}}
    assert narrowed([{"properties": {"s": {"anyOf": [{"$ref": "#/$defs/S"}, {"type": "null"}], "default": None}},
                      "$defs": defs}, {"properties": {"s": {"enum": ["x", "y", "z"]}}, "required": ["s"]}],
                    {"properties": {"s": {"enum": ["x", "y", "z"]}}}) == [{"s": "not z"}, {}]


def test_plain_grouped_tool_lists_each_actions_parameters_and_keeps_select():
    entry = REGISTRIES["tricky"].mcp_tools()[1]
    props = entry["inputSchema"]["properties"]
    assert props["q"] == {"type": "string"}
    assert props["page"] == {"type": "integer"}
    # their bounds and defaults of `q` and `page`, which the merged schemas leave out (they disagree)
    assert entry["description"].endswith(
        "\nfirst(q?:maxLength=5,page?:minimum=1 default=1): First.\nsecond(q:maxLength=8,page?): Second.")
    assert "items" in props["_select"] and "type" not in props["_select"]  # its items say it is a list
    assert entry["annotations"] == {"readOnlyHint": True}  # open world is the MCP default


def test_optional_form_and_merge_units():
    assert optional_form({"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}], "default": None,
                          "description": "d"}) == {"type": "string", "maxLength": 5, "description": "d"}
    assert optional_form({"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3}) == {
        "anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3}
    assert merge_parameter([{"type": "string", "maxLength": 40}, {"type": "string", "maxLength": 40}]) == {
        "type": "string", "maxLength": 40}
    assert merge_parameter([{"type": "integer", "minimum": 1}, {"type": "integer"}]) == {"type": "integer"}
    assert merge_parameter([{"enum": [1], "type": "integer"}, {"const": 2, "type": "integer"}]) == {
        "type": "integer", "enum": [1, 2]}
    assert compact_annotations({"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                "openWorldHint": False}) == {"readOnlyHint": True, "openWorldHint": False}
    assert compact_annotations({"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True,
                                "openWorldHint": True}) == {"destructiveHint": False, "idempotentHint": True}


async def test_what_the_projection_lets_through_the_action_refuses_with_a_self_healing_error():
    tester = ToolTester(TOOLS)
    # `status` advertises x|y|z|w (the union); action b accepts y|z only.
    result = await tester.call("shapes", "b", {"status": "x", "n": "1", "text": "ab", "note": None})
    assert result.is_error and result.error_code == "VALIDATION_ERROR"
    assert '<field name="status">' in result.text and 'You sent: "x"' in result.text
    # `text` advertises no bound (a allows 10, b 20): b still refuses 21 characters
    result = await tester.call("shapes", "b", {"status": "y", "n": "1", "text": "t" * 21, "note": None})
    assert result.is_error and '<field name="text">' in result.text


def test_flat_exposition_is_compact_too():
    tool = Tool("flat", exposition="flat")

    @tool.action(readonly=True)
    async def get(id: str, verbose: bool | None = None):
        """Get."""

    [entry] = tool_entries(tool)
    assert entry["inputSchema"]["properties"]["verbose"] == {"type": "boolean"}
    assert entry["inputSchema"]["required"] == ["id"]
    assert entry["annotations"] == {"readOnlyHint": True}  # open world is the MCP default


# -- output schemas ----------------------------------------------------------------------------------------
def _value(schema: Any, root: dict[str, Any], pick: int, depth: int = 0) -> Any:
    """A value of `schema`; `pick` chooses the branch of each union, the type of each type list, the value of
    each enum and whether optional fields are sent, so that a few picks reach every view of a result."""
    from mcpfusion.docs.samples import resolve

    schema = resolve(schema, root)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        return _value(options[pick % len(options)], root, pick, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][pick % len(schema["enum"])]
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = kind[pick % len(kind)]
    if kind == "object":
        required = set(schema.get("required", ()))
        return {k: _value(s, root, pick, depth + 1) for k, s in schema.get("properties", {}).items()
                if k in required or pick % 2 == 0} if depth < 8 else {}
    if kind == "array":
        return [_value(schema.get("items", {}), root, pick, depth + 1)] if depth < 8 else []
    return {"string": "2026-01-15" if schema.get("format") == "date" else "text", "integer": 1, "number": 1.5,
            "boolean": True, "null": None}.get(kind)


def _serving(action, exposition: str) -> dict[str, Any]:
    variant = copy.copy(action.tool)
    variant.exposition = exposition
    for entry in tool_entries(variant):
        enum = entry["inputSchema"]["properties"].get("action", {}).get("enum")
        if (enum and action.name in enum) or (not enum and entry["name"] == f"{action.tool.name}_{action.name}"):
            return entry
    raise AssertionError(f"{action.label} is not advertised under {exposition}")


OUTPUT_ACTIONS = [p for p in ACTIONS if p.values[1].output_schema is not None]


@pytest.mark.parametrize(("label", "action"), OUTPUT_ACTIONS)
def test_advertised_output_schemas_accept_every_result_the_action_may_send(label, action):
    full = action.output_schema
    results = [v for pick in range(12) if _valid(full, v := _value(full, full, pick))]
    assert len(results) >= 2, action.label
    for exposition in ("grouped", "profiles", "flat"):
        advertised = _serving(action, exposition).get("outputSchema")
        if advertised is None:
            continue  # a grouped tool whose other actions are untyped advertises none
        Draft202012Validator.check_schema(advertised)
        refused = [r for r in results if not _valid(advertised, r)]
        assert not refused, (exposition, action.label, refused[0], advertised)


def test_views_of_one_object_merge_into_the_union_of_their_fields():
    admin = {"type": "object", "properties": {
        "id": {"type": "string"}, "email": {"type": "string", "maxLength": 80},
        "note": {"anyOf": [{"type": "string", "maxLength": 500}, {"type": "null"}]},
        "kind": {"type": "string", "enum": ["a", "b"]}}, "required": ["id", "email", "note"]}
    support = {"type": "object", "properties": {
        "id": {"type": "string"}, "email": {"type": "string", "const": "[REDACTED]"},
        "kind": {"type": "string", "enum": ["a", "b"]}}, "required": ["id", "email"]}
    page = {"type": "object", "properties": {"items": {"type": "array", "items": admin}}, "required": ["items"]}
    support_page = {**page, "properties": {"items": {"type": "array", "items": support}}}
    merged = output_schema([{"anyOf": [admin, support]}, {"type": "object", "anyOf": [page, support_page]}])
    # a page and an object are alternatives; the two views of each are one schema
    assert merged["type"] == "object" and len(merged["anyOf"]) == 2
    one = {"$ref": "#/$defs/s1"}
    # below the root, fields imply "type": "object" and items "type": "array"
    assert merged["anyOf"][1] == {"properties": {"items": {"items": one}}, "required": ["items"]}
    assert merged["$defs"]["s1"] == {"properties": {
        "id": {"type": "string"}, "email": {"type": "string"}, "note": {"type": ["string", "null"]},
        "kind": {"enum": ["a", "b"]}}, "required": ["id", "email"]}
    for value in ({"id": "1", "email": "[REDACTED]"}, {"id": "1", "email": "x@y", "note": None, "kind": "a"},
                  {"items": [{"id": "1", "email": "[REDACTED]"}]}):
        assert _valid(merged, value)
    assert not _valid(merged, {"id": "1"}) and not _valid(merged, {"id": "1", "email": "e", "kind": "c"})


def test_alternatives_stay_apart_and_colliding_or_recursive_definitions_stay_as_declared():
    circle = {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}}
    square = {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}}
    implied = [{k: v for k, v in s.items() if k != "type"} for s in (circle, square)]
    assert output_schema([{"anyOf": [circle, square]}])["anyOf"] == implied  # neither's fields in the other
    # two actions' models of one name: each resolved with its own definitions
    a = {"$ref": "#/$defs/Item", "$defs": {"Item": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                    "required": ["x"]}}}
    b = {"$ref": "#/$defs/Item", "$defs": {"Item": {"type": "object", "properties": {"y": {"type": "string"}},
                                                    "required": ["y"]}}}
    both = output_schema([a, b])
    assert _valid(both, {"x": 1}) and _valid(both, {"y": "t"}) and not _valid(both, {"x": "t"})
    # a recursive model keeps its references; a recursive definition of a taken name is renamed
    tree = {"$ref": "#/$defs/Item", "$defs": {"Item": {"type": "object", "properties": {
        "children": {"type": "array", "items": {"$ref": "#/$defs/Item"}}}, "required": ["children"]}}}
    other = {"$ref": "#/$defs/Item", "$defs": {"Item": {"type": "object", "properties": {
        "next": {"anyOf": [{"$ref": "#/$defs/Item"}, {"type": "null"}]}}, "required": ["next"]}}}
    merged = output_schema([tree, other])
    assert set(merged["$defs"]) == {"Item", "Item_1"}
    assert merged["$defs"]["Item"] == {"properties": {"children": {"items": {"$ref": "#/$defs/Item"}}},
                                       "required": ["children"]}  # types implied by fields and items
    assert _valid(merged, {"children": [{"children": []}]}) and _valid(merged, {"next": {"next": None}})
    assert not _valid(merged, {"children": [{"next": None}]}) and not _valid(merged, {"next": {"children": []}})
