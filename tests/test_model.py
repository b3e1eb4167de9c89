"""Models: casts, hidden, guarded and fillable profiles."""

import datetime as dt
from decimal import Decimal
from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError

from mcpfusion import Model, Tool
from mcpfusion.listing import tool_entries
from mcpfusion.testing import ToolTester


class Invoice(BaseModel):
    id: str
    customer_id: str
    amount_cents: int = Field(description="CENTS, divide by 100")
    due_date: dt.date
    status: Literal["draft", "paid", "overdue"] = "draft"
    cost_basis: int = 0
    created_at: str = ""


InvoiceModel = Model(
    Invoice,
    casts={"amount_cents": "int", "due_date": "date"},
    hidden=["cost_basis"],
    guarded=["id", "created_at"],
    fillable={"create": ["customer_id", "amount_cents", "due_date"], "update": ["status", "due_date"]},
)


def test_read_applies_casts_and_drops_hidden():
    row = {"id": "i", "customer_id": "c", "amount_cents": Decimal("1250.00"), "due_date": "2026-12-01T10:00:00",
           "cost_basis": 999, "extra": 1}
    assert InvoiceModel.read(row) == {
        "id": "i", "customer_id": "c", "amount_cents": 1250, "due_date": "2026-12-01", "status": "draft",
        "created_at": "",
    }


def test_schema_and_descriptions_exclude_hidden():
    assert "cost_basis" not in InvoiceModel.json_schema()["properties"]
    assert InvoiceModel.descriptions == {"amount_cents": "CENTS, divide by 100"}


def test_input_models_per_operation():
    create = InvoiceModel.input_model("create")
    assert list(create.model_fields) == ["customer_id", "amount_cents", "due_date"]
    assert create.model_json_schema()["required"] == ["customer_id", "amount_cents", "due_date"]
    update = InvoiceModel.input_model("update")
    assert update.model_json_schema().get("required") is None  # update is partial
    assert update.model_validate({"status": "paid"}).status == "paid"
    with pytest.raises(ValidationError):
        create.model_validate({"customer_id": "c", "amount_cents": 1, "due_date": "2026-01-01", "id": "x"})
    with pytest.raises(KeyError):
        InvoiceModel.input_model("delete")


def test_definition_errors_are_caught():
    with pytest.raises(ValueError, match="unknown fields"):
        Model(Invoice, hidden=["nope"])
    with pytest.raises(ValueError, match="guarded or hidden"):
        Model(Invoice, guarded=["id"], fillable={"create": ["id"]})
    with pytest.raises(ValueError, match="unknown cast"):
        Model(Invoice, casts={"id": "uuid-ish"})


async def test_fixture_and_guarded_field_named_in_error(tool_tester):
    tool = Tool("billing")

    @tool.action()
    async def update_invoice_status(id: str, changes: InvoiceModel.input_model("update")):
        """Change the status."""
        return {"id": id, **changes.model_dump(exclude_unset=True)}

    tester = tool_tester([tool])
    ok = await tester.call("billing", "update_invoice_status", {"id": "i1", "status": "paid"})
    assert ok.data == {"id": "i1", "status": "paid"}
    bad = await tester.call("billing", "update_invoice_status", {"id": "i1", "created_at": "now", "cost_basis": 1})
    assert '<field name="created_at">This field is guarded: it cannot be written by the agent. Remove it.</field>' in bad.text
    # A hidden field is answered as any unknown one: its own message would reveal which names the model hides.
    assert '<field name="cost_basis">Unknown field. This action accepts: id, status, due_date.</field>' in bad.text
    unknown = await tester.call("billing", "update_invoice_status", {"id": "i1", "cost_basiz": 1})
    assert unknown.text == bad.text.replace("cost_basis", "cost_basiz").replace(
        '<field name="created_at">This field is guarded: it cannot be written by the agent. Remove it.</field>\n', "")
    assert isinstance(tester, ToolTester)
    schema = tool_entries(tool)[0]["inputSchema"]["properties"]
    assert "created_at" not in schema and "cost_basis" not in schema and "status" in schema


@pytest.mark.parametrize("cast", ["int", "float", "number", "str", "string", "bool", "date", "datetime", int, dt.date])
def test_a_named_cast_keeps_a_missing_value_missing(cast):
    class Optional(BaseModel):
        value: object = None

    assert Model(Optional, casts={"value": cast}).read({"value": None}) == {"value": None}


def test_a_callable_cast_never_sees_a_missing_value():
    seen = []

    def doubled(value):
        seen.append(value)
        return value * 2

    class Counted(BaseModel):
        n: int | None = None

    model = Model(Counted, casts={"n": doubled})
    assert model.read({"n": None}) == {"n": None}
    assert model.read({"n": 4}) == {"n": 8}
    assert seen == [4]


@pytest.mark.parametrize(("stored", "read"), [
    (7, 7), (True, 1), (Decimal("12.00"), 12), (" 42 ", 42), (3.0, 3), ("1e3", 1000),
])
def test_the_int_cast_reads_stored_numbers(stored, read):
    value = InvoiceModel.read({"id": "i", "customer_id": "c", "amount_cents": stored, "due_date": dt.date(2026, 1, 2)})
    assert value["amount_cents"] == read and value["amount_cents"].__class__ is int


@pytest.mark.parametrize("stored", [2.5, Decimal("0.1"), "12.5", "twelve", float("nan")])
def test_the_int_cast_never_truncates(stored):
    with pytest.raises(ValidationError):
        InvoiceModel.read({"id": "i", "customer_id": "c", "amount_cents": stored, "due_date": dt.date(2026, 1, 2)})


def test_a_cast_that_cannot_be_hashed_is_still_a_cast():
    class Halved:  # defines equality without a hash: unhashable, as a user's callable may be
        def __eq__(self, other):
            return isinstance(other, Halved)

        def __call__(self, value):
            return value // 2

    class Counted(BaseModel):
        n: int | None = None

    model = Model(Counted, casts={"n": Halved()})
    assert model.read({"n": 8}) == {"n": 4} and model.read({"n": None}) == {"n": None}
