"""Probe 4's docs findings: a presenter field's example that does not fit the field, and control or bidi
characters of descriptions on the tools page."""

from __future__ import annotations

import logging
from typing import Literal

from pydantic import BaseModel, Field

from mcpfusion import Presenter, Tool
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import build_manifest, render_page
from mcpfusion.docs.presenters import describe, sample_item
from mcpfusion.docs.samples import sample


class Row(BaseModel):
    kind: Literal["a", "b"] = Field(examples=["c"])
    size: int = Field(ge=1, examples=[0, 5])


def test_an_example_that_does_not_fit_its_field_is_one_warning_and_not_sampled(caplog):
    view = Presenter("row_p4").schema(Row)
    with caplog.at_level(logging.DEBUG, logger="mcpfusion"):
        info = describe(view, None, many=None)
        describe(view, None, many=None)  # (every page samples again: said once)
    assert info["sample_error"] is None
    assert sample_item(view)["kind"] in ("a", "b") and sample_item(view)["size"] == 5
    assert not [r for r in caplog.records if r.exc_info]
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == ["presenter 'row_p4': field 'kind': example 'c' does not fit the field; the docs sample "
                      "another value",
                      "presenter 'row_p4': field 'size': example 0 does not fit the field; the docs sample "
                      "another value"]


def test_examples_are_sampled_when_they_fit_their_schema():
    assert sample({"type": "string", "enum": ["a", "b"], "examples": ["b"]}) == "b"
    assert sample({"type": "integer", "examples": [3.0]}) == 3.0
    assert sample({"type": "string", "examples": [1]}) == "value_1"


def test_the_tools_page_shows_control_and_bidi_characters_escaped():
    text = "abc\u202eTXT.exe\u202c nul\x00 \u2066iso\u2069 del\x7f\nsecond line\ttab"
    notes = Tool("notes", description=text)

    @notes.action(readonly=True)
    async def search(q: str = Field(description=text)) -> list[dict]:
        """Search."""
        return []

    manifest = build_manifest(ToolRegistry([notes]))
    page = render_page(manifest)
    assert not any(c in page for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\x00\x7f")
    assert "abc\\u202eTXT.exe\\u202c nul\\u0000 \\u2066iso\\u2069 del\\u007f\nsecond line\ttab" in page
    assert manifest["tools"][0]["description"] == text  # tools.json keeps the text as it is
