"""A length limit on `Text` / `OptionalText` is a string's: "String should have at least 3 characters", not
pydantic's generic "Value should have at least 3 items after validation", on every transport; an
`OptionalText` sent as null passes its limits (it was `len(None)`: an internal error); the schemas the tools
advertise say the same (the limits on the string: tools/list is unchanged, token for token)."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field, ValidationError

from models import NO_NUL, Text
from tests.service_kit import build, call

TRANSPORTS = ["inproc", "rest", "mcp"]


class Note(BaseModel):
    # A field's limits declared before the NUL rule (models.NO_NUL), as the reference service declares them.
    reason: Annotated[str, Field(min_length=3, max_length=5), NO_NUL]
    key: Annotated[str | None, Field(min_length=3, max_length=6), NO_NUL] = None
    before: Text = Field("abc", min_length=1, max_length=200)  # (a Field default: pydantic applies it first)


@pytest.mark.parametrize(("values", "message"), [
    ({"reason": "ab"}, "String should have at least 3 characters"),
    ({"reason": "abcdef"}, "String should have at most 5 characters"),
    ({"reason": "abc", "key": "ab"}, "String should have at least 3 characters"),
    ({"reason": "abc", "key": "abcdefg"}, "String should have at most 6 characters"),
    ({"reason": "abc", "before": ""}, "String should have at least 1 character"),
    ({"reason": "a\x00c"}, "must not contain a NUL character"),
    ({"reason": "abc", "key": "a\x00bc"}, "must not contain a NUL character"),
])
def test_limits_are_a_strings_and_the_nul_rule_still_holds(values, message):
    with pytest.raises(ValidationError) as raised:
        Note(**values)
    assert message in str(raised.value) and "items" not in str(raised.value)


def test_null_passes_the_limits_of_optional_text():
    assert Note(reason="abc", key=None).key is None


def test_the_json_schema_is_what_it_was():
    properties = Note.model_json_schema()["properties"]
    assert properties["reason"] == {"maxLength": 5, "minLength": 3, "title": "Reason", "type": "string"}
    assert properties["key"] == {"anyOf": [{"maxLength": 6, "minLength": 3, "type": "string"}, {"type": "null"}],
                                 "default": None, "title": "Key"}  # (the limits on the string branch: its own)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_short_void_reason_is_told_in_characters(tmp_path, transport):
    app = build(tmp_path)
    short = await call(transport, app, "billing", "void_invoice", {"id": "inv_0001", "reason": "ab"}, "demo-admin")
    assert short.error_code is not None and "String should have at least 3 characters" in short.raw, short
    assert "items after validation" not in short.raw
    long = await call(transport, app, "billing", "void_invoice", {"id": "inv_0001", "reason": "x" * 201},
                      "demo-admin")
    assert "String should have at most 200 characters" in long.raw, long


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_idempotency_key_is_told_in_characters_and_may_be_null(tmp_path, transport):
    app = build(tmp_path)
    payment = {"id": "inv_0001", "amount_cents": 1, "method": "card"}
    short = await call(transport, app, "billing", "record_payment", {**payment, "idempotency_key": "k1"},
                       "demo-admin")
    assert "String should have at least 8 characters" in short.raw, short
    null = await call(transport, app, "billing", "record_payment", {**payment, "idempotency_key": None},
                      "demo-admin")
    assert null.error_code is None, null
