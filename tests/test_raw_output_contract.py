"""A raw tool declaring an `outputSchema` answers structuredContent the schema accepts, whether its own result
or a middleware's answer in its place (a cache, a guard): a client's SDK refuses a result without it."""

from __future__ import annotations

import logging
from typing import Any

from mcpfusion import MCPFusion, success, success_structured
from tests.test_runtime_mends import client, tools_call

SCHEMA = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}


def _app(result: Any, middleware: list[Any] | None = None) -> Any:
    fusion = MCPFusion("raw", middleware=middleware or [])

    @fusion.raw_tool("totals", output_schema=SCHEMA, annotations={"readOnlyHint": True})
    async def totals() -> Any:
        return result

    return fusion.build_app()


GOOD = {"content": [{"type": "text", "text": '{"total": 3}'}], "structuredContent": {"total": 3}}


async def test_a_result_the_output_schema_accepts_goes_out_as_it_is():
    async with client(_app(GOOD)) as http:
        answer = await tools_call(http, "totals", {})
    assert answer.get("isError") is not True and answer["structuredContent"] == {"total": 3}


async def test_a_result_without_or_against_its_structured_content_is_an_internal_error(caplog):
    caplog.set_level(logging.ERROR, "mcpfusion")
    wrong = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"total": "three", "ssn": "x"}}
    for result, where in (("3 in all", "structuredContent (missing)"), (wrong, "structuredContent['total']")):
        async with client(_app(result)) as http:
            answer = await tools_call(http, "totals", {})
        assert answer["isError"] is True and "INTERNAL_ERROR" in answer["content"][0]["text"], answer
        assert "structuredContent" not in answer
        assert where in caplog.text and "three" not in caplog.text  # where, never the values


async def test_a_middlewares_own_answer_is_held_to_the_same_contract():
    async def cached_text(call: Any, call_next: Any) -> Any:
        return success("cached: 3 in all")  # no structuredContent: the tool's outputSchema promises it

    async def cached_data(call: Any, call_next: Any) -> Any:
        return success_structured({"total": 3})

    async with client(_app(GOOD, [cached_text])) as http:
        refused = await tools_call(http, "totals", {})
    async with client(_app(GOOD, [cached_data])) as http:
        kept = await tools_call(http, "totals", {})
    assert refused["isError"] is True and "INTERNAL_ERROR" in refused["content"][0]["text"], refused
    assert kept["isError"] is False and kept["structuredContent"] == {"total": 3}


async def test_an_error_needs_no_structured_content():
    async with client(_app({"content": [{"type": "text", "text": "no totals today"}], "isError": True})) as http:
        answer = await tools_call(http, "totals", {})
    assert answer["isError"] is True and answer["content"][0]["text"] == "no totals today"
