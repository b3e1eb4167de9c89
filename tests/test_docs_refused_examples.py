"""A presenter field's example its JSON schema allows but the model's validators refuse (a `field_validator`
raising ValueError) is one warning line naming the presenter and the field, and the docs sample another value:
not a traceback logged for a sample that cannot render, nor a page without the presenter's render."""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field, field_validator

from mcpfusion import Presenter
from mcpfusion.docs.presenters import describe, sample_item, sample_items
from mcpfusion.docs.samples import sample


def not_bad(value: str) -> str:
    if "bad" in value:
        raise ValueError("must not say bad")
    return value


class Row(BaseModel):
    code: str = Field(examples=["bad", "good"])
    note: str = Field(examples=["bad note"])

    _code = field_validator("code", "note")(not_bad)


class Line(BaseModel):
    sku: str = Field(examples=["bad-sku"])
    tags: list[str] = Field(examples=[["bad tag"]])

    _sku = field_validator("sku")(not_bad)

    @field_validator("tags")
    @classmethod
    def _tags(cls, tags: list[str]) -> list[str]:
        return [not_bad(tag) for tag in tags]


class Order(BaseModel):
    lines: list[Line]


def warnings_of(caplog) -> list[str]:
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_an_example_a_field_validator_refuses_is_one_warning_and_not_sampled(caplog):
    view = Presenter("row_refused").schema(Row)
    with caplog.at_level(logging.DEBUG, logger="mcpfusion"):
        info = describe(view, None, many=None)
        describe(view, None, many=True)  # (every page samples again: said once)
    assert info["sample_error"] is None
    assert warnings_of(caplog) == [
        "presenter 'row_refused': field 'code': example 'bad' is refused by the model's validators; the docs "
        "sample another value",
        "presenter 'row_refused': field 'note': example 'bad note' is refused by the model's validators; the "
        "docs sample another value"]
    assert [item["code"] for item in sample_items(view, 2)] == ["good", "good"]  # the example that passes
    assert sample_item(view)["note"] == "note_1"  # none passes: a generated value


def test_a_nested_example_a_validator_refuses_is_passed_over(caplog):
    view = Presenter("order_refused").schema(Order)
    with caplog.at_level(logging.DEBUG, logger="mcpfusion"):
        info = describe(view, None, many=False)
    assert info["sample_error"] is None
    assert warnings_of(caplog) == [
        "presenter 'order_refused': field 'sku': example 'bad-sku' is refused by the model's validators; the "
        "docs sample another value",
        "presenter 'order_refused': field 'tags': example ['bad tag'] is refused by the model's validators; the "
        "docs sample another value"]
    assert sample_item(view) == {"lines": [{"sku": "sku_1", "tags": ["tags_1"]}]}


def test_the_sampler_passes_over_the_examples_it_is_told_and_says_which_it_took():
    schema = {"type": "object", "properties": {"a": {"type": "string", "examples": ["x", "y"]},
                                               "b": {"type": "integer", "examples": [3]}}}
    used: list = []
    assert sample(schema, used=used) == {"a": "x", "b": 3} and used == [("a", "x"), ("b", 3)]
    used = []
    assert sample(schema, passed=[("a", "x"), ("b", 3)], used=used) == {"a": "y", "b": 42} and used == [("a", "y")]
