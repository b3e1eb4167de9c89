"""Output firewalls of a developer's own types, as pydantic writes them: a generic dataclass or TypedDict
(`Envelope[int]`) is a firewall as a plain one is; a field named `_id`, `_links`, `model_config` or `json` is
kept (data and outputSchema) under its own name, in records and in a mapping presenter alike; and the docs read
what each of several `ui()`/`suggest()` calls compares, not only the first's."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Generic, NotRequired, TypeVar

import jsonschema
import pytest
from pydantic import Field, TypeAdapter
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict

from mcpfusion import MCPFusion, Presenter, Tool, suggest, ui
from mcpfusion.docs import presenters as docs
from tests.firewall_kit import Answer, app_for, every_path, tools_list

WIRES = ("inproc", "rest", "mcp-2026", "mcp-2025")
SSN = "111-22-3333"
T = TypeVar("T")


async def answered(tool: Tool, action: str, args: dict[str, Any] | None = None) -> dict[str, Answer]:
    """`tool.action` on every wire, each answer checked against the outputSchema tools/list advertises."""
    app = app_for(tool)
    (listed,) = await tools_list(app)
    assert "outputSchema" in listed, "no output schema advertised: the action has no firewall"
    answers = await every_path(app, tool.name, action, args)
    for wire in WIRES:
        answer = answers[wire]
        assert answer.error is None, (wire, answer.raw)
        assert SSN not in answer.raw and "ssn" not in answer.raw, wire
        if wire != "inproc":
            data = answer.data
            jsonschema.validate({"items": data} if isinstance(data, list) else data, listed["outputSchema"])
    return answers


def declared(spec: Any, value: Any, how: str = "annotation", **options: Any) -> Tool:
    """A tool whose action `get` returns `value`, its output declared as `spec` (`how`: the return annotation,
    `returns=` or `output_schema=`)."""
    tool = Tool("t", **options)

    async def get() -> Any:
        """Get."""
        return value

    if how == "annotation":
        get.__annotations__["return"] = spec
        tool.action(readonly=True)(get)
    else:
        tool.action(readonly=True, **{how: spec})(get)
    return tool


# -- 1: generic dataclasses and TypedDicts ---------------------------------------------------------------------


@dataclasses.dataclass
class Envelope(Generic[T]):
    value: T
    note: str = ""


class Row(TypedDict, Generic[T]):
    value: T


@dataclasses.dataclass
class Inner:
    id: int


@pytest.mark.parametrize(("how", "spec", "raw", "sent"), [
    ("annotation", Envelope[int], {"value": 1, "ssn": SSN}, {"value": 1, "note": ""}),
    ("annotation", Row[int], {"value": 1, "ssn": SSN}, {"value": 1}),
    ("annotation", list[Envelope[int]], [{"value": 1, "ssn": SSN}], [{"value": 1, "note": ""}]),
    ("annotation", Envelope[Inner] | None, {"value": {"id": 1, "ssn": SSN}}, {"value": {"id": 1}, "note": ""}),
    ("annotation", Row[list[Inner]], {"value": [{"id": 2, "ssn": SSN}], "ssn": SSN}, {"value": [{"id": 2}]}),
    ("returns", Envelope[str], {"value": "a", "ssn": SSN}, {"value": "a", "note": ""}),
    ("output_schema", list[Row[int]], [{"value": 3, "ssn": SSN}], [{"value": 3}]),
])
async def test_a_generic_dataclass_or_typeddict_output_is_a_firewall(how, spec, raw, sent):
    answers = await answered(declared(spec, raw, how), "get")
    assert answers["rest"].data == answers["inproc"].data == sent
    assert answers["mcp-2026"].data == answers["mcp-2025"].data == ({"items": sent} if isinstance(sent, list)
                                                                    else sent)


async def test_a_generic_record_advertises_its_parameters_and_reads_an_instance():
    tool = declared(Envelope[int], Envelope(7, "n"))
    (listed,) = await tools_list(app_for(tool))
    assert listed["outputSchema"]["properties"]["value"] == {"type": "integer"}
    answers = await answered(tool, "get")
    assert all(answers[w].data == {"value": 7, "note": "n"} for w in ("rest", "mcp-2026", "mcp-2025"))


class Opaque:
    """No pydantic schema: a generic record of it cannot be validated."""


def test_a_generic_record_the_firewall_cannot_apply_to_is_refused_clearly():
    with pytest.raises(TypeError, match=r"get: .*Envelope\[.*Opaque\] has a field pydantic cannot validate"):
        declared(Envelope[Opaque], {})
    with pytest.raises(TypeError, match="holds pydantic models, dataclasses or TypedDicts"):
        declared(dict[str, Envelope[int]], {})


# -- 2: fields pydantic would not take as a model's field -----------------------------------------------------


@dataclasses.dataclass
class Doc:
    _id: str
    title: str


class Resource(TypedDict):
    _links: dict[str, str]
    model_config: str
    name: str
    _rev: NotRequired[int]


@dataclasses.dataclass
class Shadows:
    json: str
    copy: int
    schema: str
    id_: str = "own"  # (the name `_id` would take, were it renamed naively)
    _id: str = "x"


@pydantic_dataclass
class Stored:
    _id: str = Field(description="The store's key.")
    _key: str = Field("k", alias="KEY")


@pytest.mark.parametrize(("spec", "value"), [
    (Doc, Doc("65a1f0c2", "Quarterly report")),
    (Doc, {"_id": "65a1f0c2", "title": "Quarterly report", "ssn": SSN}),
    (Resource, {"_links": {"self": "/r/1"}, "model_config": "strict", "name": "r1", "_rev": 2, "ssn": SSN}),
    (Resource, {"_links": {}, "model_config": "strict", "name": "r1"}),
    (Shadows, {"json": "j", "copy": 1, "schema": "s", "_id": "a", "ssn": SSN}),
    (Stored, {"_id": "a", "KEY": "b", "ssn": SSN}),
])
async def test_a_record_field_named_as_pydantic_reserves_is_sent_as_pydantic_writes_it(spec, value):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (`json` shadowing BaseModel.json would warn)
        tool = declared(spec, value)
    adapter = TypeAdapter(spec)
    written = adapter.dump_python(adapter.validate_python(value), mode="json", by_alias=True)
    answers = await answered(tool, "get")
    assert all(answers[w].data == written for w in WIRES)
    (listed,) = await tools_list(app_for(tool))
    assert set(listed["outputSchema"]["properties"]) == set(written) | ({"_rev"} if spec is Resource else set())


async def test_select_names_a_record_field_as_the_agent_sees_it():
    tool = declared(Doc, {"_id": "a1", "title": "t", "ssn": SSN}, select=True)
    (listed,) = await tools_list(app_for(tool))
    assert set(listed["inputSchema"]["properties"]["_select"]["items"]["enum"]) == {"_id", "title"}
    answers = await answered(tool, "get", {"_select": ["_id"]})
    assert answers["rest"].data == answers["mcp-2026"].data == {"_id": "a1"}


def test_a_mapping_presenter_keeps_such_fields_and_redacts_embeds_and_describes_them_by_key():
    child = Presenter("link").schema({"href": str})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        view = (Presenter("doc").schema({"_id": (str, "The store's key."), "model_config": str, "json": int,
                                         "_links": list})
                .redact_pii(["_id"]).embed("_links", child))
    raw = {"_id": "a1", "model_config": "m", "json": 1, "_links": [{"href": "/d/1", "x": 2}], "ssn": SSN}
    for response in (view.present(raw), view.present([raw])):
        item = response.view.data if isinstance(response.view.data, dict) else response.view.data[0]
        assert item == {"_id": "[REDACTED]", "model_config": "m", "json": 1, "_links": [{"href": "/d/1"}]}
        assert "_id: The store's key." in response.texts[-1]
    assert list(view.wire_schema()["properties"]) == ["_id", "model_config", "json", "_links"]
    assert view.present(raw, select=["json"]).view.data == {"json": 1}


# -- 3: docs of a presenter given several ui()/suggest() calls ----------------------------------------------------


def _invoice(two_calls: bool) -> Presenter:
    view = Presenter("invoice").schema({"id": str, "status": str})
    if two_calls:
        view = view.suggest(lambda inv: suggest("billing.get_invoice", "Open it")).ui(
            lambda inv: ui.summary("x", title="Always"))
    return (view
            .suggest(lambda inv: [suggest("billing.remind", "Remind") if inv["status"] == "overdue" else None])
            .ui(lambda inv, ctx: ui.summary("!", title="Overdue") if inv["status"] == "overdue" else None)
            .collection_suggest(lambda rows: None)
            .collection_suggest(lambda rows: [suggest("billing.list", "Paid")
                                              if any(r["id"] == "inv_9" for r in rows) else None]))


@pytest.mark.parametrize("two_calls", [False, True])
def test_docs_sample_what_every_ui_or_suggest_call_compares(two_calls):
    view = _invoice(two_calls)
    assert docs.tested_values(view) == {"status": ["overdue"], "id": ["inv_9"]}
    described = docs.describe(view, many=None)
    assert {"action": "billing.remind", "reason": "Remind"} in described["suggestions"]
    assert {"action": "billing.list", "reason": "Paid"} in described["suggestions"]
    assert {"type": "markdown", "title": "Overdue"} in described["ui_blocks"]
    assert ({"type": "markdown", "title": "Always"} in described["ui_blocks"]) is two_calls


def test_the_docs_page_shows_the_second_calls_conditional_suggestion():
    tool = Tool("billing")

    @tool.action(readonly=True, returns=_invoice(True))
    async def get_invoice(id: str) -> dict:
        """Get an invoice."""
        return {"id": id, "status": "open"}

    from fastapi.testclient import TestClient

    page = TestClient(MCPFusion("billing", tools=[tool]).build_app()).get("/tools.json").json()
    action = next(a for t in page["tools"] for a in t["actions"] if a["name"] == "get_invoice")
    assert "Remind" in str(action) and "Overdue" in str(action)
