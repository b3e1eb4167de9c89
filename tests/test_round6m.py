"""Round 6m: `_select` on hand-written list and conditional output schemas, the lockfile pinning security
schemes, header schemas and raw tools (and comparing as data), `mcpfusion docs` of an app without REST, docs
examples the action takes (or none, named), and bounded sample sizes."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Annotated, Any, Literal

import pytest
from fastapi import Depends, FastAPI, Header, Security
from fastapi.security import APIKeyCookie, APIKeyHeader, HTTPBearer
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator
from pydantic import Base64Str, BaseModel, Field, NaiveDatetime, PastDate, create_model

from mcpfusion import MCPFusion, Presenter, Tool, success_structured
from mcpfusion.docs import economy, export_site, lock
from mcpfusion.docs.manifest import build_manifest, raw_descriptors
from mcpfusion.errors import ValidationFailed
from mcpfusion.schema import root_keys
from mcpfusion.testing import ToolTester

ROW = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a", "b"]}
LISTED = {"type": "object", "properties": {"items": {"type": "array", "items": ROW}}, "required": ["items"]}
ROWS = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]


# -- 1. `_select` on a hand-written list output schema --------------------------------------------------------

def rows_tool(wrapped: bool = False) -> Tool:
    tool = Tool("rows", select=True, exposition="flat")

    @tool.action(readonly=True, output_schema=LISTED)
    async def list_rows() -> Any:
        """Rows."""
        return success_structured({"items": ROWS}) if wrapped else ROWS

    return tool


async def test_select_on_a_hand_written_list_schema_offers_and_keeps_the_rows_fields():
    tool = rows_tool()
    assert tool.select_keys() == ["a", "b"]  # as for output_schema=list[Row]: never "items"
    result = await ToolTester([tool]).call("rows", "list_rows", {"_select": ["b"]})
    assert result.error_code is None and result.structured_content == {"items": [{"b": "x"}, {"b": "y"}]}
    wrong = await ToolTester([tool]).call("rows", "list_rows", {"_select": ["items"]})
    assert wrong.error_code == "VALIDATION_ERROR"  # (it emptied every row)
    rest = TestClient(MCPFusion("rows", tools=[tool]).build_app()).post("/api/rows/list_rows", json={"_select": ["b"]})
    assert rest.status_code == 200 and rest.json() == [{"b": "x"}, {"b": "y"}]


async def test_select_keeps_the_rows_fields_of_a_list_the_handler_wrapped_itself():
    result = await ToolTester([rows_tool(wrapped=True)]).call("rows", "list_rows", {"_select": ["a"]})
    assert result.error_code is None and result.structured_content == {"items": [{"a": 1}, {"a": 2}]}


# -- 2. `_select` on schemas with minProperties, dependentRequired, if/then, allOf/anyOf of $refs -----------

SELECTABLE = {
    "minProperties": {**ROW, "minProperties": 2},
    "dependentRequired": {"type": "object", "properties": ROW["properties"], "dependentRequired": {"b": ["a"]}},
    "if_then": {"type": "object", "properties": ROW["properties"], "if": {"properties": {"b": {"const": "x"}}},
                "then": {"required": ["a"]}},
    "allOf_ref": {"type": "object", "allOf": [{"$ref": "#/$defs/Row"}], "$defs": {"Row": ROW}},
    "anyOf_ref": {"type": "object", "anyOf": [{"$ref": "#/$defs/Row"}], "$defs": {"Row": ROW}},
    "list_of_refs": {"type": "object", "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Row"}}},
                     "required": ["items"], "$defs": {"Row": ROW}},
}


@pytest.mark.parametrize("case", sorted(SELECTABLE))
async def test_select_of_an_advertised_field_validates_on_every_hand_written_shape(case):
    schema = SELECTABLE[case]
    tool = Tool("t", select=True, exposition="flat")
    listed = case == "list_of_refs"

    @tool.action(readonly=True, output_schema=schema)
    async def go() -> Any:
        """Go."""
        return [ROWS[0]] if listed else success_structured(dict(ROWS[0]))

    assert root_keys(schema) == ["a", "b"] and tool.select_keys() == ["a", "b"]
    result = await ToolTester([tool]).call("t", "go", {"_select": ["b"]})
    assert result.error_code is None, result.text
    assert result.structured_content == ({"items": [{"b": "x"}]} if listed else {"b": "x"})
    whole = await ToolTester([tool]).call("t", "go", {})
    assert whole.error_code is None  # the whole answer still validates


# -- 3. the lockfile pins security schemes, header schemas and raw tools --------------------------------------

api_key = APIKeyHeader(name="x-api-key")
api_cookie = APIKeyCookie(name="sid")


def no_key() -> None:
    return None


def tenant_plain(x_tenant: str = Header()) -> str:
    return x_tenant


def tenant_strict(x_tenant: Literal["acme", "globex"] = Header()) -> str:
    return x_tenant


def by_key(k: Any = Security(api_key)) -> Any:
    return k


def by_cookie(k: Any = Security(api_cookie)) -> Any:
    return k


def by_bearer(k: Any = Depends(HTTPBearer())) -> Any:
    return k


def shop(reader: Any = no_key, raw: dict[str, Any] | None = None) -> MCPFusion:
    tool = Tool("shop", exposition="flat")

    @tool.action(readonly=True)
    async def summary(key: Any = Depends(reader)) -> dict[str, Any]:
        """Totals."""
        return {"total": 5}

    fusion = MCPFusion("shop", tools=[tool])
    if raw is not None:
        fusion.raw_tool("thumbnail", **raw)(lambda **kw: "t")
    return fusion


def pinned(fusion: MCPFusion) -> dict[str, Any]:
    return lock.contract(fusion.registry, fusion)


THUMB = {"description": "A thumbnail", "annotations": {"readOnlyHint": True},
         "input_schema": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}}


@pytest.mark.parametrize(("reader", "line"), [
    (by_key, 'shop.summary: now requires API key in header "x-api-key"'),
    (by_cookie, 'shop.summary: now requires API key in cookie "sid"'),
    (by_bearer, "shop.summary: now requires HTTP bearer"),
])
def test_a_new_security_scheme_is_a_change_of_contract(reader, line):
    assert lock.diff(pinned(shop()), pinned(shop(reader))) == [line]
    assert lock.diff(pinned(shop(reader)), pinned(shop())) == [line.replace("now requires", "no longer requires")]
    assert lock.diff(pinned(shop(reader)), pinned(shop(reader))) == []


def test_a_header_whose_values_narrow_is_a_change_of_contract():
    [changed] = lock.diff(pinned(shop(tenant_plain)), pinned(shop(tenant_strict)))
    assert changed.startswith('shop.summary: header "x-tenant" changed: ') and '"acme"' in changed


def test_raw_tools_are_pinned():
    base = pinned(shop(raw=THUMB))
    assert lock.diff(base, pinned(shop())) == ["raw tool thumbnail: removed"]
    assert lock.diff(pinned(shop()), base) == ["raw tool thumbnail: added"]
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "size": {"type": "integer"}},
              "required": ["id", "size"]}
    assert lock.diff(base, pinned(shop(raw={**THUMB, "input_schema": schema}))) == [
        'raw tool thumbnail: new required parameter "size"',
        'raw tool thumbnail: parameter "id" changed: {"type": "string"} -> {"type": "integer"}']
    assert lock.diff(base, pinned(shop(raw={**THUMB, "description": "Deletes the image",
                                            "annotations": {"destructiveHint": True}}))) == [
        'raw tool thumbnail: description "A thumbnail" -> "Deletes the image"',
        "raw tool thumbnail: destructiveHint null -> true", "raw tool thumbnail: readOnlyHint true -> null"]
    # What is written reads back as the same contract (its digests worked out again).
    assert lock.diff(lock.resealed(json.loads(lock.dumps(base))), base) == []


def test_a_lockfile_of_format_4_reads_as_one_format_change():
    served = pinned(shop(tenant_plain, raw=THUMB))
    older = json.loads(lock.dumps(served))
    older["mcpfusion_lock"] = 4
    del older["raw_tools"]
    for action in older["tools"]["shop"]["actions"].values():
        for parameter in action.get("request_parameters") or []:
            del parameter["schema"]
    assert lock.diff(lock.resealed(older), served) == [
        f"lockfile format 4 -> 5 (now pinned: {lock.FORMATS[5]})"]


# -- 7. no false positives: order, number spelling; an unnamed change still says where ---------------------

ItemA = create_model("Item", sku=(str, ...), qty=(int, ...))  # one model, its fields in either order
ItemB = create_model("Item", qty=(int, ...), sku=(str, ...))


def ordered(swap: bool) -> dict[str, Any]:
    tool = Tool("shop", exposition="flat")
    if swap:
        @tool.action("place", readonly=True)
        async def place_b(b: str, a: str, line: ItemB) -> dict[str, Any]:  # type: ignore[valid-type]
            """Place."""
            return {}
    else:
        @tool.action("place", readonly=True)
        async def place_a(a: str, b: str, line: ItemA) -> dict[str, Any]:  # type: ignore[valid-type]
            """Place."""
            return {}
    return pinned(MCPFusion("shop", tools=[tool]))


def test_parameter_and_field_order_is_no_change():
    before, after = ordered(False), ordered(True)
    assert lock.diff(before, after) == [] and before["digest"] == after["digest"]


def test_a_lockfile_with_whole_floats_written_as_ints_still_matches():
    tool = Tool("geo", exposition="flat")

    @tool.action(readonly=True)
    async def near(radius: Annotated[float, Field(ge=0.0, le=50.0)] = 5.0) -> dict[str, Any]:
        """Places near."""
        return {}

    served = pinned(MCPFusion("geo", tools=[tool]))
    # What JSON.stringify writes of a Python lockfile: 5.0 as 5 (Python reads it back as an int).
    text = lock.dumps(served).replace("5.0", "5").replace("50.0", "50")
    reread = lock.resealed(json.loads(text))
    assert lock.diff(reread, served) == [] and reread["digest"] == served["digest"]
    radius = served["tools"]["geo"]["actions"]["near"]["input_schema"]["properties"]["radius"]
    assert radius["default"] == 5 and type(radius["default"]) is int


def test_a_change_no_rule_names_says_where_it_is():
    served = pinned(shop())
    changed = json.loads(lock.dumps(served))
    changed["tools"]["shop"]["actions"]["summary"]["future_key"] = {"x": 1}
    [line] = lock.diff(served, lock.resealed(changed))
    assert line.startswith("shop.summary: changed at future_key") and "digest" not in line


# -- 4. `mcpfusion docs` of an app mounted with rest=False -----------------------------------------------------

def test_the_export_of_an_app_without_rest_has_no_curl_and_no_try_it_form(tmp_path):
    notes = Tool("notes", description="Notes")

    @notes.action(readonly=True)
    async def search(text: str) -> list[str]:
        """Search notes."""
        return [text]

    app = FastAPI()
    MCPFusion("notes", tools=[notes]).mount(app, rest=False)
    export_site(app, tmp_path)
    manifest = json.loads((tmp_path / "tools.json").read_text())
    [entry] = manifest["tools"][0]["actions"]
    assert manifest["rest"] is False and entry["rest_path"] is None and entry["examples"]["curl"] is None
    assert '<form class="tryit' not in (tmp_path / "index.html").read_text()
    assert TestClient(app).post("/api/notes/search", json={"text": "x"}).status_code == 404
    with_rest = FastAPI()
    MCPFusion("notes", tools=[notes]).mount(with_rest)
    export_site(with_rest, tmp_path / "rest")
    assert json.loads((tmp_path / "rest" / "tools.json").read_text())["rest"] is True


# -- 5. docs examples the action takes, or none (named) --------------------------------------------------------

Code = Annotated[str, Field(pattern=r"^\p{Lu}{3}$")]  # no example can be made for it


class Line(BaseModel):
    sku: Code
    qty: int = Field(ge=1)


class Deep(BaseModel):
    a: Deep | None = None
    name: str


def example_tool() -> Tool:
    t = Tool("ex", exposition="flat")

    def add(fn: Any) -> None:
        fn.__doc__ = fn.__name__
        t.action(readonly=True)(fn)

    async def nested_missing(line: Line) -> str:
        return "ok"

    async def past_date(when: PastDate) -> str:
        return "ok"

    async def naive_datetime(when: NaiveDatetime) -> str:
        return "ok"

    async def base64(blob: Base64Str) -> str:
        return "ok"

    async def decimal_places(amount: Annotated[decimal.Decimal, Field(max_digits=4, decimal_places=0)]) -> str:
        return "ok"

    async def enum_and_pattern(kind: Annotated[Literal["x", "Y"], Field(pattern="^[A-Z]$")]) -> str:
        return "ok"

    async def recursive(d: Deep) -> str:
        return "ok"

    async def list_missing(codes: Annotated[list[Code], Field(min_length=1)], n: int) -> str:
        return "ok"

    for fn in (nested_missing, past_date, naive_datetime, base64, decimal_places, enum_and_pattern, recursive,
               list_missing):
        add(fn)
    return t


def test_every_documented_example_is_taken_by_the_action_or_named_missing():
    tool = example_tool()
    manifest = build_manifest(MCPFusion("ex", tools=[tool]).registry)
    missing = {}
    for entry in manifest["tools"][0]["actions"]:
        action = tool.actions[entry["name"]]
        args = entry["example_arguments"]
        try:
            action.validate(dict(args))
        except ValidationFailed as exc:  # only the parameters it names missing may be refused
            assert {name.split(".")[0].split("[")[0] for name, _ in exc.fields} <= set(entry["example_missing"]), (
                entry["name"], args, exc.fields)
        missing[entry["name"]] = entry["example_missing"]
    assert missing == {"nested_missing": ["line"], "past_date": [], "naive_datetime": [], "base64": [],
                       "decimal_places": [], "enum_and_pattern": [], "recursive": [], "list_missing": ["codes"]}
    examples = {e["name"]: e["example_arguments"] for e in manifest["tools"][0]["actions"]}
    assert dt.date.fromisoformat(examples["past_date"]["when"]) < dt.date.today()
    assert examples["list_missing"] == {"n": 42}


RAW = {
    "allof_two": {"type": "object", "properties": {"p": {"allOf": [
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}]}}, "required": ["p"]},
    "nested_required_only": {"type": "object", "properties": {"p": {
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "b"]}}, "required": ["p"]},
    "min_properties": {"type": "object", "properties": {"p": {
        "type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}}}, "required": ["p"]},
    "min_items_unique": {"type": "object", "properties": {"l": {
        "type": "array", "items": {"type": "integer", "maximum": 1}, "minItems": 3, "uniqueItems": True}},
        "required": ["l"]},
    "not_default": {"type": "object", "properties": {"s": {"type": "string", "not": {"const": "s_1"}}},
                    "required": ["s"]},
    "contains": {"type": "object", "properties": {"l": {"type": "array", "contains": {"const": 7}}},
                 "required": ["l"]},
}


def test_raw_tool_examples_validate_against_their_schema_or_are_named_missing():
    fusion = MCPFusion("raw")
    for name, schema in RAW.items():
        fusion.raw_tool(name, description=name, input_schema=schema)(lambda **kw: "ok")
    manifest = build_manifest(fusion.registry, raw_tools=raw_descriptors(fusion))
    missing = {}
    for entry in manifest["raw_tools"]:
        errors = [e for e in Draft202012Validator(entry["input_schema"]).iter_errors(entry["example_arguments"])
                  if e.validator != "required"]
        assert errors == [], (entry["name"], entry["example_arguments"])
        missing[entry["name"]] = entry["example_missing"]
    assert missing == {"allof_two": [], "nested_required_only": [], "min_properties": [],
                       "min_items_unique": ["l"], "not_default": [], "contains": []}


# -- 6. bounded sample sizes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("prop", [
    {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}, "minItems": 1_000_000},
    {"type": "string", "minLength": 50_000_000},
    {"type": "array", "minItems": 60, "items": {"type": "array", "minItems": 60, "items": {
        "type": "array", "minItems": 60, "items": {"type": "string"}}}},
])
def test_an_example_past_the_size_caps_is_none_and_named(prop):
    fusion = MCPFusion("gw")
    fusion.raw_tool("mirror", description="mirrored", input_schema={
        "type": "object", "properties": {"v": prop}, "required": ["v"]})(lambda **kw: "ok")
    response = TestClient(fusion.build_app()).get("/tools.json")
    [entry] = response.json()["raw_tools"]
    assert entry["example_missing"] == ["v"] and len(response.content) < 200_000


def test_the_limit_economy_presents_a_bounded_sample(monkeypatch):
    asked: list[int] = []
    sample_items = economy.sample_items
    monkeypatch.setattr(economy, "sample_items", lambda p, n=None: asked.append(n) or sample_items(p, n))
    view = Presenter("row").schema({"id": str, "name": str}).limit(10_000)
    figures = economy._limit_economy(view, None)
    assert asked == [economy.MAX_LIMIT_SAMPLE]
    assert figures["limit"] == 10_000 and figures["items"] == 40_000 and figures["sampled"] == 100
    assert figures["before"] > figures["after"] > 0 and 60 < figures["percent"] < 90
    small = economy._limit_economy(Presenter("row").schema({"id": str}).limit(5), None)
    assert small["items"] == 20 and "sampled" not in small
