"""Round 5z: a trailing `[*]` censors each item whole whatever it holds (a mapping's keys included, as `.*`
does on a dict), in the interpreted walk, the compiled tree and the advertised schema; `x[*].*` still goes
on into each item (every value, keys kept)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest

from mcpfusion import Presenter, Tool, ui
from mcpfusion.redaction import Node, compile_tree, parse_path, redact_schema
from mcpfusion.redaction import _steps_path as steps_path
from tests.firewall_kit import PATHS, app_for, every_path

EMAIL = "ada.lovelace@example.com"
C = "[REDACTED]"


def _shares() -> dict[str, Any]:
    return {"shares": [{EMAIL: "editor"}, None, ["bob@example.com", 3], "plain"]}


def _interpreted(path: str, data: dict[str, Any]) -> list[Any]:
    removed: list[Any] = []
    steps_path(path, parse_path(path), C)(data, removed)
    return removed


def _compiled(path: str, data: dict[str, Any]) -> list[Any]:
    removed: list[Any] = []
    compile_tree(Node([path], C, True, ()))(data, removed)
    return removed


@pytest.mark.parametrize("run", [_interpreted, _compiled], ids=["interpreted", "compiled"])
def test_a_trailing_each_censors_every_item_whole(run: Any) -> None:
    data = _shares()
    removed = run("shares[*]", data)
    assert data == {"shares": [C, None, C, C]}  # a null item stays null
    assert removed == [{EMAIL: "editor"}, ["bob@example.com", 3], "plain"]  # the whole items, keys too


@pytest.mark.parametrize("run", [_interpreted, _compiled], ids=["interpreted", "compiled"])
def test_each_then_star_keeps_each_items_keys(run: Any) -> None:
    data = {"shares": [{EMAIL: "editor"}]}
    assert run("shares[*].*", data) == ["editor"]
    assert data == {"shares": [{EMAIL: C}]}


@pytest.mark.parametrize("run", [_interpreted, _compiled], ids=["interpreted", "compiled"])
def test_nested_lists_censor_the_innermost_items(run: Any) -> None:
    data = {"grid": [[{"k": "v"}, "a"], [None]]}
    assert run("grid[*][*]", data) == [{"k": "v"}, "a"]
    assert data == {"grid": [[C, C], [None]]}


def test_a_path_under_an_item_hidden_whole_passes_it_by() -> None:
    data = {"shares": [{"who": EMAIL}]}
    removed: list[Any] = []
    compile_tree(Node(["shares[*]", "shares[*].who"], C, True, ()))(data, removed)
    assert data == {"shares": [C]} and removed == [{"who": EMAIL}]


def test_the_schema_types_each_item_as_the_censor() -> None:
    schema = {"type": "object", "properties": {
        "shares": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}},
        "maybe": {"type": "array", "items": {"anyOf": [{"type": "object"}, {"type": "null"}]}},
        "kept": {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}}}}
    out = redact_schema(schema, ["shares[*]", "maybe[*]", "kept[*].*"])
    assert out["properties"]["shares"]["items"] == {"const": C, "type": "string"}
    assert out["properties"]["maybe"]["items"] == {"anyOf": [{"const": C, "type": "string"}, {"type": "null"}]}
    assert out["properties"]["kept"]["items"]["additionalProperties"] == {"const": C, "type": "string"}


def _doc() -> Presenter:
    return (Presenter("doc")
            .schema({"id": str, "shares": list[dict[str, str]], "by_doc": dict[str, dict[str, str]]})
            .redact_pii(["shares[*]", "by_doc.*"])
            .ui(lambda d: ui.summary(f"shared with {next(iter(d['shares'][0]))}")))


def test_the_sent_data_fits_the_advertised_schema() -> None:
    doc = _doc()
    response = doc.present({"id": "d1", "shares": [{EMAIL: "editor"}], "by_doc": {"d1": {EMAIL: "editor"}}})
    assert response.view.data == {"id": "d1", "shares": [C], "by_doc": {"d1": C}}
    jsonschema.validate(response.view.data, doc.wire_schema())


def test_no_path_sends_a_list_items_keys() -> None:
    tool = Tool("docs")

    @tool.action(readonly=True, returns=_doc())
    async def get(id: str) -> dict[str, Any]:
        """Get a document."""
        return {"id": id, "shares": [{EMAIL: "editor"}], "by_doc": {"d1": {EMAIL: "editor"}}}

    answers = asyncio.run(every_path(app_for(tool), "docs", "get", {"id": "d1"}))
    assert set(answers) == set(PATHS)
    for path, answer in answers.items():
        assert answer.error is None, path
        assert EMAIL not in answer.raw, path  # data, text and the UI block quoting the key (the egress guard)
        assert json.loads(json.dumps(answer.data))["shares"] == [C], path
