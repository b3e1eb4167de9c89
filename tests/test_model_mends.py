"""Model keeps its source's code (validators, serializers, computed fields) without exposing hidden fields;
casts fail as a row's validation error; nested models and TypedDicts that keep extra keys are stripped."""

import decimal
import json
from typing import Annotated

import pytest
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    computed_field,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)
from typing_extensions import TypedDict

from mcpfusion import Flatten, Model, Presenter, Tool, dictschema
from mcpfusion.testing import ToolTester

SSN = "123-45-6789"


class Person(BaseModel):
    id: str
    name: str
    ssn: str
    internal: str = ""

    @field_serializer("ssn")
    def _mask(self, v: str) -> str:
        return "***-**-" + v[-4:]

    @field_validator("name")
    @classmethod
    def _tidy(cls, v: str) -> str:
        return v.strip().title()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def initials(self) -> str:
        return "".join(p[0] for p in self.name.split())


ROW = {"id": "p1", "name": "  ada lovelace ", "ssn": SSN, "internal": "x"}


async def _answer(returns, row, **kwargs):
    tool = Tool("hr")

    @tool.action(readonly=True, returns=returns, **kwargs)
    async def get() -> object:
        """Get."""
        return row

    return await ToolTester([tool]).call("hr", "get", {})


async def test_read_model_keeps_serializers_validators_and_computed_fields():
    people = Model(Person, hidden=["internal"])
    expected = {"id": "p1", "name": "Ada Lovelace", "ssn": "***-**-6789", "initials": "AL"}
    assert people.read(ROW) == expected
    got = await _answer(Presenter("person").schema(people), ROW)
    assert got.data == expected and SSN not in got.text and "internal" not in got.text


class Secretive(BaseModel):
    id: str
    ssn: str

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ssn_last4(self) -> str | None:
        return self.ssn[-4:] if self.ssn else None


async def test_computed_field_reads_a_hidden_field_never_sends_it():
    model = Model(Secretive, hidden=["ssn"])
    assert model.read({"id": "1", "ssn": SSN}) == {"id": "1", "ssn_last4": "6789"}
    assert model.read({"id": "1"}) == {"id": "1", "ssn_last4": None}  # a row without it reads as before
    for mode in ("validation", "serialization"):
        assert "ssn" not in model.schema.model_json_schema(mode=mode)["properties"]
    assert "ssn" not in model.descriptions
    presenter = Presenter("secretive").schema(model)
    got = await _answer(presenter, [{"id": "1", "ssn": SSN}, {"id": "2", "ssn": "987-65-4321"}])
    assert got.data == [{"id": "1", "ssn_last4": "6789"}, {"id": "2", "ssn_last4": "4321"}]
    assert SSN not in json.dumps(got.structured_content) and '"ssn"' not in json.dumps(presenter.wire_schema())


def test_plain_source_drops_hidden_fields_and_keeps_the_dict_schema():
    class Plain(BaseModel):
        id: str
        tenant: str

    model = Model(Plain, hidden=["tenant"])
    assert list(model.schema.model_fields) == ["id"] and issubclass(model.schema, Plain)
    assert dictschema.codec(model.schema) is not None  # the fast path of presenters stays open
    assert model.read({"id": "1", "tenant": "acme"}) == {"id": "1"}


def test_a_model_serializer_with_hidden_fields_is_refused():
    class Whole(BaseModel):
        id: str
        token: str

        @model_serializer
        def _all(self) -> dict[str, str]:
            return {"id": self.id, "token": self.token}

    with pytest.raises(ValueError, match="model serializer, which could write the hidden fields"):
        Model(Whole, hidden=["token"])
    assert Model(Whole).read({"id": "1", "token": "t"}) == {"id": "1", "token": "t"}


class Invoice(BaseModel):
    id: str
    email: str
    start: int
    end: int

    @field_validator("email")
    @classmethod
    def _mail(cls, v: str) -> str:
        if "@" not in v:
            raise ValueError("not an email address")
        return v.lower()

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        raise ValueError("never called: id is not an input")

    @model_validator(mode="after")
    def _order(self) -> "Invoice":
        if self.end < self.start:
            raise ValueError("end must not be before start")
        return self


async def test_input_model_keeps_the_sources_validators():
    create = Model(Invoice, guarded=["id"], fillable={"create": ["email", "start", "end"]}).input_model("create")
    assert create(email="ADA@X.ORG", start=1, end=2).model_dump() == {"email": "ada@x.org", "start": 1, "end": 2}
    with pytest.raises(ValidationError, match="not an email address"):
        create(email="nope", start=1, end=2)
    with pytest.raises(ValidationError, match="end must not be before start"):
        create(email="a@b", start=10, end=1)
    tool = Tool("t")

    @tool.action()
    async def make(data: Annotated[create, Flatten]) -> dict:  # type: ignore[valid-type]
        """Make."""
        return data.model_dump()

    got = await ToolTester([tool]).call("t", "make", {"email": "NOT-AN-EMAIL", "start": 10, "end": 1})
    assert got.is_error and got.error_code == "VALIDATION_ERROR" and "email" in got.text


def test_model_validators_on_a_partial_operation_are_refused():
    with pytest.raises(ValueError, match="model validators, which would see None"):
        Model(Invoice, fillable={"update": ["end"]})
    Model(Invoice, fillable={"update": ["start", "end"]}, partial_operations=())  # complete: all fields sent


class Item(BaseModel):
    id: str
    price: float


@pytest.mark.parametrize("cast", ["number", "int", "float", decimal.Decimal])
@pytest.mark.parametrize("stored", ["n/a", "sNaN", "Infinity", "1e999999999", 10**400, []])
async def test_a_cast_that_fails_leaves_the_row_out(cast, stored):
    model = Model(Item, casts={"price": cast})
    with pytest.raises(ValidationError):
        model.read({"id": "b", "price": stored})
    got = await _answer(Presenter("rows").schema(model), [{"id": "a", "price": "12"}, {"id": "b", "price": stored}])
    assert not got.is_error and got.data == [{"id": "a", "price": 12.0}]
    assert "1 of 2 item(s) could not be shown" in got.text


class Customer(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


class Loose(TypedDict):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]
    name: str
    customer: Customer


class Wrap(BaseModel):
    id: str
    td: Loose


STORED = {"id": "1", "customer": {"name": "Ada", "ssn": SSN},
          "td": {"name": "Ada", "ssn": SSN, "customer": {"name": "Ada", "ssn": SSN}}}
STRIPPED_TD = {"name": "Ada", "customer": {"name": "Ada"}}


async def test_field_map_strips_a_nested_model_that_allows_extra_keys():
    got = await _answer(Presenter("p").schema({"id": str, "customer": Customer}), STORED)
    assert got.data == {"id": "1", "customer": {"name": "Ada"}}


async def test_typeddict_that_allows_extra_keys_is_stripped_everywhere():
    assert (await _answer(Presenter("p").schema(Wrap), STORED)).data == {"id": "1", "td": STRIPPED_TD}
    assert (await _answer(Presenter("m").schema(Model(Wrap)), STORED)).data == {"id": "1", "td": STRIPPED_TD}
    assert Model(Wrap).read(STORED) == {"id": "1", "td": STRIPPED_TD}
    tool = Tool("t")

    @tool.action(readonly=True)
    async def typed() -> Wrap:
        """Typed."""
        return STORED  # type: ignore[return-value]

    got = await ToolTester([tool]).call("t", "typed", {})
    assert got.data == {"id": "1", "td": STRIPPED_TD} and SSN not in got.text
