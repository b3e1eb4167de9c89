"""Output contracts against a developer's own types: a serializer's output is what the schema advertises (one
pydantic cannot describe is refused when declared); a dataclass or TypedDict return type is a firewall, as in
FastAPI; `ui()`/`suggest()` called twice add, as `rules()` does."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, NotRequired

import jsonschema
import pytest
from pydantic import BaseModel, PlainSerializer, field_serializer, field_validator, model_serializer
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict

from mcpfusion import Model, Presenter, Tool, suggest, ui
from tests.firewall_kit import app_for, every_path, tools_list

WIRES = ("rest", "mcp-2026", "mcp-2025")


async def checked(tool: Tool, action: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    """The data of `tool.action` on every wire, each checked against the outputSchema tools/list advertises."""
    app = app_for(tool)
    (listed,) = await tools_list(app)
    schema = listed["outputSchema"]
    answers = await every_path(app, tool.name, action, args)
    for wire in WIRES:
        answer = answers[wire]
        assert answer.error is None, (wire, answer.raw)
        structured = {"items": answer.data} if wire == "rest" and isinstance(answer.data, list) else answer.data
        jsonschema.validate(structured, schema)
    assert answers["rest"].data == answers["mcp-2026"].data == answers["mcp-2025"].data or isinstance(
        answers["rest"].data, list)
    return {wire: answers[wire] for wire in WIRES}


# -- 1: serializers -------------------------------------------------------------------------------------------


class Cents(BaseModel):
    amount: int

    @field_serializer("amount")
    def as_euros(self, v):  # type: ignore[no-untyped-def]  # (the mistake under test: no return annotation)
        return f"{v / 100:.2f}"


class Combined(BaseModel):
    a: str
    b: str

    @model_serializer
    def written(self):  # type: ignore[no-untyped-def]
        return {"a": self.a, "combined": f"{self.a}/{self.b}"}


class Wrapped(BaseModel):
    a: str

    @model_serializer(mode="wrap")
    def written(self, handler):  # type: ignore[no-untyped-def]
        return {**handler(self), "extra": 5}


class HoldsCents(BaseModel):
    rows: list[Cents]


def _declare_cents(how: str, model: Any) -> None:
    tool = Tool("q")
    if how == "annotation":
        async def get() -> Any:
            """Get."""
            return {"amount": 1234}
        get.__annotations__["return"] = model
        tool.action(readonly=True)(get)
    elif how in ("returns", "output_schema"):
        @tool.action(readonly=True, **{how: model})
        async def get_named() -> dict:
            """Get."""
            return {"amount": 1234}
    else:
        Presenter("p").schema(model)


@pytest.mark.parametrize("how", ["annotation", "returns", "output_schema", "presenter"])
@pytest.mark.parametrize(("model", "kind", "function"), [
    (Cents, "field_serializer", "Cents.as_euros"),
    (Combined, "model_serializer", "Combined.written"),
    (Wrapped, "model_serializer", "Wrapped.written"),
    (HoldsCents, "field_serializer", "Cents.as_euros"),
])
def test_a_serializer_without_a_return_annotation_is_refused_when_declared(how, model, kind, function):
    with pytest.raises(TypeError) as refused:
        _declare_cents(how, model)
    message = str(refused.value)
    assert f"the output model {model.__name__} has the {kind} {function}" in message
    assert "without a return annotation" in message and "annotate its return type" in message


def test_a_model_whose_serializer_writes_no_object_is_refused():
    class Text(BaseModel):
        a: str

        @model_serializer
        def written(self) -> str:
            return self.a

    with pytest.raises(TypeError, match="is written as 'string', not an object"):
        Presenter("p").schema(Text)


class CentsTyped(BaseModel):
    amount: int

    @field_serializer("amount")
    def as_euros(self, v: int) -> str:
        return f"{v / 100:.2f}"


class Keys(TypedDict):
    a: str
    combined: str


class CombinedTyped(BaseModel):
    a: str
    b: str

    @model_serializer
    def written(self) -> Keys:
        return {"a": self.a, "combined": f"{self.a}/{self.b}"}


class WrappedTyped(BaseModel):
    a: str

    @model_serializer(mode="wrap")
    def written(self, handler: Any) -> dict[str, Any]:
        return {**handler(self), "extra": 5}


class Lambdas(BaseModel):
    amount: Annotated[int, PlainSerializer(lambda v: f"{v / 100:.2f}")]  # no return type: advertised as any


class Nested(BaseModel):
    totals: list[CentsTyped]
    pair: CombinedTyped


@pytest.mark.parametrize(("model", "raw", "sent"), [
    (CentsTyped, {"amount": 1234}, {"amount": "12.34"}),
    (CombinedTyped, {"a": "x", "b": "y"}, {"a": "x", "combined": "x/y"}),
    (WrappedTyped, {"a": "x"}, {"a": "x", "extra": 5}),
    (Lambdas, {"amount": 1234}, {"amount": "12.34"}),
    (Nested, {"totals": [{"amount": 5}], "pair": {"a": "x", "b": "y"}},
     {"totals": [{"amount": "0.05"}], "pair": {"a": "x", "combined": "x/y"}}),
])
@pytest.mark.parametrize("how", ["annotation", "presenter"])
async def test_what_an_annotated_serializer_writes_is_what_the_output_schema_advertises(model, raw, sent, how):
    tool = Tool("q")
    returns = Presenter("p").schema(model) if how == "presenter" else None

    async def get() -> Any:
        """Get."""
        return raw

    if how == "annotation":
        get.__annotations__["return"] = model
    tool.action(readonly=True, returns=returns)(get)
    answers = await checked(tool, "get")
    assert all(answer.data == sent for answer in answers.values())


# -- 2: a dataclass or TypedDict return type --------------------------------------------------------------------


@dataclasses.dataclass
class Customer:
    id: int
    name: str
    tags: list[str] = dataclasses.field(default_factory=list)


class CustomerTD(TypedDict):
    id: int
    name: str
    nickname: NotRequired[str]


ROW = {"id": 1, "name": "Ada", "ssn": "111-22-3333"}


@pytest.mark.parametrize(("how", "spec", "sent"), [
    ("annotation", Customer, {"id": 1, "name": "Ada", "tags": []}),
    ("annotation", CustomerTD, {"id": 1, "name": "Ada"}),
    ("annotation", list[Customer], [{"id": 1, "name": "Ada", "tags": []}]),
    ("annotation", list[CustomerTD], [{"id": 1, "name": "Ada"}]),
    ("annotation", Customer | None, {"id": 1, "name": "Ada", "tags": []}),
    ("returns", Customer, {"id": 1, "name": "Ada", "tags": []}),
    ("output_schema", CustomerTD, {"id": 1, "name": "Ada"}),
    ("returns", list[CustomerTD], [{"id": 1, "name": "Ada"}]),
])
async def test_a_dataclass_or_typeddict_output_type_strips_undeclared_keys(how, spec, sent):
    tool = Tool("crm")
    many = isinstance(sent, list)

    async def get() -> Any:
        """Get."""
        return [dict(ROW)] if many else dict(ROW)

    if how == "annotation":
        get.__annotations__["return"] = spec
        tool.action(readonly=True)(get)
    else:
        tool.action(readonly=True, **{how: spec})(get)
    answers = await checked(tool, "get")
    for wire, answer in answers.items():
        assert "111-22-3333" not in answer.raw and "ssn" not in answer.raw, wire
    assert answers["rest"].data == sent
    assert answers["mcp-2026"].data == ({"items": sent} if many else sent)


async def test_a_typeddict_key_not_required_is_sent_when_given_and_a_dataclass_instance_is_read():
    tool = Tool("crm")

    @tool.action(readonly=True)
    async def nick() -> CustomerTD:
        """Nick."""
        return {"id": 2, "name": "Bob", "nickname": "B", "ssn": "x"}  # type: ignore[typeddict-unknown-key]

    @tool.action(readonly=True)
    async def instance() -> Customer:
        """Instance."""
        return Customer(1, "Ada", ["vip"])

    app = app_for(tool)
    nicked = await every_path(app, "crm", "nick")
    assert all(nicked[w].data == {"id": 2, "name": "Bob", "nickname": "B"} for w in WIRES)
    read = await every_path(app, "crm", "instance")
    assert all(read[w].data == {"id": 1, "name": "Ada", "tags": ["vip"]} for w in WIRES)


@pydantic_dataclass
class Checked:
    id: int

    @field_validator("id")
    @classmethod
    def positive(cls, v: int) -> int:
        return v


def test_a_record_the_firewall_cannot_apply_to_is_refused_never_ignored():
    tool = Tool("crm")
    with pytest.raises(TypeError, match="holds pydantic models, dataclasses or TypedDicts"):
        @tool.action(readonly=True)
        async def by_id() -> dict[str, Customer]:
            """By id."""
            return {}

    with pytest.raises(TypeError, match="pydantic dataclass .*Checked has validators.*declare it as a pydantic "
                                        "BaseModel"):
        @tool.action(readonly=True)
        async def checked_one() -> Checked:
            """One."""
            return Checked(1)
    assert not tool.actions


def test_a_dataclass_annotation_next_to_a_presenter_is_checked_against_it():
    view = Presenter("v").schema({"email": str})
    tool = Tool("crm")
    with pytest.raises(TypeError, match="Customer has no field 'email'"):
        @tool.action(readonly=True, returns=view)
        async def get() -> Customer:
            """Get."""
            return Customer(1, "Ada")


def test_a_model_with_an_annotated_serializer_still_works_as_a_mcpfusion_model():
    read = Model(CentsTyped, name="CentsRead")
    assert Presenter("p").schema(read).present({"amount": 250}).view.data == {"amount": "2.50"}


# -- 3: ui() and suggest() called twice ---------------------------------------------------------------------------


def _blocks(response: Any) -> list[str]:
    return [b.render() for b in response.view.ui_blocks]


def test_a_second_ui_or_suggest_adds_to_the_first_in_call_order():
    view = (Presenter("inv").schema({"id": str, "total": int})
            .ui(lambda i: ui.summary(f"first {i['id']}"))
            .ui(lambda i, ctx: [ui.summary(f"second {i['total']}"), None])
            .suggest(lambda i: suggest("billing.get", "one"))
            .suggest(lambda i: [suggest("billing.list", "two"), suggest("billing.get", "one")]))
    for response in (view.present({"id": "inv_1", "total": 5}), view.copy().present({"id": "inv_1", "total": 5})):
        blocks = _blocks(response)
        assert len(blocks) == 2 and "first inv_1" in blocks[0] and "second 5" in blocks[1]
        assert [s.action for s in response.view.suggestions] == ["billing.get", "billing.list"]
    rows = view.present([{"id": "a", "total": 1}, {"id": "b", "total": 2}])
    assert [b.split("**: ")[1].split("\n")[0] for b in _blocks(rows)] == ["first a", "second 1", "first b", "second 2"]


def test_a_second_collection_ui_or_collection_suggest_adds_and_replace_drops():
    view = (Presenter("rows").schema({"id": str})
            .collection_ui(lambda rows: ui.summary(f"{len(rows)} rows"))
            .collection_ui(lambda rows: ui.summary("again"))
            .collection_suggest(lambda rows: [suggest("billing.get", "one")])
            .collection_suggest(lambda rows: [suggest("billing.list", "two")]))
    response = view.present([{"id": "a"}])
    blocks = _blocks(response)
    assert len(blocks) == 2 and "1 rows" in blocks[0] and "again" in blocks[1]
    assert [s.action for s in response.view.suggestions] == ["billing.get", "billing.list"]
    variant = view.copy("brief").collection_ui(lambda rows: ui.summary("only"), replace=True).collection_suggest(
        lambda rows: None, replace=True)
    brief = variant.present([{"id": "a"}])
    assert len(_blocks(brief)) == 1 and "only" in _blocks(brief)[0] and not brief.view.suggestions
    assert len(_blocks(view.present([{"id": "a"}]))) == 2  # the original keeps its own
