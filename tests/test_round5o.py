"""Round 5o: a `ToolError`'s code and severity have the documented shape (refused where the error is made; a
handler raising a malformed one answers INTERNAL_ERROR on every transport), and `ui.table` refuses a row of
another width than its header and writes `None` and booleans as the data block does."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient

from mcpfusion import ActionCall, CallNext, MCPFusion, Tool, ToolError, ToolResponse, tool_error, ui
from mcpfusion.errors import HTTP_STATUS
from mcpfusion.problem import http_code
from mcpfusion.testing import ToolTester

ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

BAD_CODES = ["not_found", 'BAD"CODE', "BAD-CODE", "NOT.FOUND", "", "1CODE", "_CODE", "NOT FOUND", "NOT_FOUND\n",
             "A" * 65, "ÉTÉ"]


@pytest.mark.parametrize("code", BAD_CODES)
def test_a_malformed_code_is_refused_where_the_error_is_made(code):
    with pytest.raises(ValueError, match="upper-case letter"):
        ToolError(code, "m")
    with pytest.raises(ValueError, match="upper-case letter"):
        tool_error(code, "m")


@pytest.mark.parametrize("code", [None, 404, b"NOT_FOUND"])
def test_a_code_that_is_not_text_is_refused(code):
    with pytest.raises(ValueError, match=f"not a {type(code).__name__}"):
        ToolError(code, "m")  # type: ignore[arg-type]


def test_a_huge_code_is_not_echoed_whole():
    with pytest.raises(ValueError) as raised:
        ToolError("x" * 100_000, "m")
    assert len(str(raised.value)) < 300


@pytest.mark.parametrize("severity", ['x"y', "ERROR", "info", "", None])
def test_a_severity_not_documented_is_refused(severity):
    with pytest.raises(ValueError, match="'error', 'warning' or 'critical'"):
        ToolError("NOT_FOUND", "m", severity=severity)  # type: ignore[arg-type]


def test_the_documented_shapes_and_every_code_the_framework_writes_are_accepted():
    codes = [*HTTP_STATUS, "A", "A" * 64, "HTTP_418", "E2E_FAILED", "NOT_NOW"]
    codes += [http_code(status)[0] for status in range(400, 600)]  # REST's code for a status (`HTTP_418`)
    for code in codes:
        for severity in ("error", "warning", "critical"):
            assert ToolError(code, "m", severity=severity).render().startswith(
                f'<tool_error code="{code}" severity="{severity}">')


def _app() -> MCPFusion:
    t = Tool("t")

    @t.action()
    async def quoted() -> dict:
        """Raises a code with a quote."""
        raise ToolError('BAD"CODE', "m")

    @t.action()
    async def lower() -> dict:
        """Returns a lower-case code."""
        return tool_error("not_found", "m")  # type: ignore[return-value]

    @t.action()
    async def severe() -> dict:
        """Raises a severity with a quote."""
        raise ToolError("NOT_FOUND", "m", severity='x"y')

    async def refuse(call: ActionCall, call_next: CallNext) -> ToolResponse:
        raise ToolError("NOT-ALLOWED", "m")

    @t.action(middleware=[refuse])
    async def guarded() -> dict:
        """A middleware raises a code with a hyphen."""
        return {}

    def needs() -> None:
        raise ToolError("Missing", "m")

    @t.action()
    async def depends(_: None = Depends(needs)) -> dict:
        """A dependency raises a mixed-case code."""
        return {}

    return MCPFusion("t", tools=[t])


ACTIONS = ["quoted", "lower", "severe", "guarded", "depends"]


@pytest.mark.parametrize("action", ACTIONS)
def test_a_handler_making_a_malformed_error_answers_internal_error_on_rest(action, caplog):
    client = TestClient(_app().build_app(), raise_server_exceptions=False)
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        answer = client.post(f"/api/t/{action}", json={})
    assert answer.status_code == 500
    problem = answer.json()
    assert problem["type"] == "urn:mcpfusion:error:INTERNAL_ERROR" and problem["code"] == "INTERNAL_ERROR"
    assert '"' not in problem["type"] and "CODE" not in answer.text and "x\\\"y" not in answer.text
    assert any("a ToolError" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)  # the cause, logged


@pytest.mark.parametrize("action", ACTIONS)
def test_a_handler_making_a_malformed_error_answers_internal_error_on_mcp(action):
    client = TestClient(_app().build_app(), raise_server_exceptions=False)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}
    opened = client.post("/mcp", json=init, headers=ACCEPT)
    assert opened.status_code == 200
    headers = {**ACCEPT, "mcp-protocol-version": "2025-06-18"}
    if "mcp-session-id" in opened.headers:
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "t", "arguments": {"action": action}}}
    answer = client.post("/mcp", json=call, headers=headers)
    assert answer.status_code == 200
    text = answer.text
    body = json.loads(text[text.index("{"):text.rindex("}") + 1])
    result = body["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith('<tool_error code="INTERNAL_ERROR" severity="error">')


@pytest.mark.parametrize("action", ACTIONS)
def test_a_handler_making_a_malformed_error_answers_internal_error_in_the_tester(action):
    result = asyncio.run(ToolTester(_app().registry).call("t", action))
    assert result.is_error and result.error_code == "INTERNAL_ERROR"


# ui.table


@pytest.mark.parametrize("rows", [[["1", "2"]], [["1"], ["2", "3"]], [[1, 2]], [("1", "2")], [["1", "2"]] * 100])
def test_a_row_wider_than_the_header_is_refused(rows):
    with pytest.raises(ValueError, match=r"row \d+ has 2 cells, its header 1"):
        ui.table(["a"], rows)


@pytest.mark.parametrize("rows", [[["1"]], [["1", "2"], ["3"]], [[None]], [iter(["1"])]])
def test_a_row_narrower_than_the_header_is_refused_naming_it(rows):
    index = len(rows) - 1
    with pytest.raises(ValueError, match=f"ui.table's row {index} has 1 cells, its header 2"):
        ui.table(["a", "b"], rows)


def test_a_row_from_a_generator_is_checked_too():
    with pytest.raises(ValueError, match="row 1 has 3 cells, its header 2"):
        ui.table(("a", "b"), (row for row in [["1", "2"], ["1", "2", "3"]]))


@pytest.mark.parametrize("rows", [1, 3, 13, 65])  # small tables, joined ones and the general path (> 64 rows)
def test_none_is_an_empty_cell_and_booleans_are_written_as_json(rows):
    block = ui.table(["a", "b", "c"], [[None, True, False]] * rows)
    lines = block.content.splitlines()
    assert lines[2:] == ["|  | true | false |"] * rows
    mixed = ui.table(["n", "ok"], [[1.5, True], ["x", None]] * rows)
    assert mixed.content.splitlines()[2:4] == ["| 1.5 | true |", "| x |  |"]


def test_headers_none_and_booleans_too():
    assert ui.table([None, True], [["1", "2"]]).content.splitlines()[0] == "|  | true |"


def test_rectangular_tables_render_as_before():
    assert ui.table(["a", "b"], [["1", "2"], [3, 4.5]]).content == "| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4.5 |"
    assert ui.table(["a"], [["x|y"]]).content == "| a |\n|---|\n| x\\|y |"
    assert ui.table(["a"], []).content == "| a |\n|---|"
