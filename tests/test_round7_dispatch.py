"""Round 7, dispatch: a response a middleware gives in place of its call_next's (a cache answering on its own)
is held to the action's output contract as a handler's answer is: a typed action's data goes out as checked
structuredContent (REST: the JSON object), data that does not fit and content alone are `INVALID_OUTPUT`, never a
result the official clients refuse; call_next's response passed on as it is is not checked again. And a
resource template's NOT_FOUND names `data.uri` on 2026-07-28 too."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from mcpfusion import ActionCall, CallNext, MCPFusion, Presenter, Tool, ToolError, ToolResponse, link
from mcpfusion.output import Output
from mcpfusion.response import error_response, success, success_structured
from tests.wire_kit import ACCEPT, META_2026, every_wire, session


class Row(BaseModel):
    id: str
    note: str


def app_answering(answer: Any, *, select: bool = False, outer: list[ToolResponse] | None = None) -> Any:
    """An app whose action `o.get_row` (a presenter's outputSchema) has a middleware answering `answer()` for
    id "cached" without calling call_next; `outer` records what a middleware around it saw."""

    async def cache(call: ActionCall, call_next: CallNext) -> ToolResponse:
        if call.arguments.get("id") == "cached":
            return answer()  # type: ignore[no-any-return]
        return await call_next(call)

    async def watch(call: ActionCall, call_next: CallNext) -> ToolResponse:
        response = await call_next(call)
        if outer is not None:
            outer.append(response)
        return response

    tool = Tool("o", select=select)

    @tool.action(readonly=True, returns=Presenter("row").schema(Row), middleware=[watch, cache])
    async def get_row(id: str) -> dict[str, Any]:
        """A row."""
        return {"id": id, "note": "n"}

    return MCPFusion("mw", tools=[tool]).build_app()


def error_code(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


# -- 1. a middleware's own answer on a typed action --------------------------------------------------------------

async def test_a_middleware_answering_data_on_its_own_sends_checked_structured_content_on_every_wire() -> None:
    cached = {"id": "cached", "note": "from cache"}
    rest, modern, legacy = await every_wire(app_answering(lambda: success(cached)), "o", "get_row", {"id": "cached"})
    for result in (modern, legacy):
        assert result["isError"] is False
        assert result["structuredContent"] == cached  # (what the official clients require with an outputSchema)
        assert json.loads(result["content"][0]["text"]) == cached
    assert rest.status_code == 200
    assert rest.json() == cached  # the object, not its JSON text encoded again


async def test_a_middleware_answering_a_json_string_on_a_typed_action_is_invalid_output() -> None:
    text = '{"id":"cached","note":"from cache"}'
    rest, modern, legacy = await every_wire(app_answering(lambda: success(text)), "o", "get_row", {"id": "cached"})
    for result in (modern, legacy):
        assert result["isError"] is True
        assert "structuredContent" not in result
        assert "INVALID_OUTPUT" in error_code(result)
    assert rest.status_code == 500
    assert rest.json()["code"] == "INVALID_OUTPUT"


async def test_a_middleware_answering_fields_the_schema_keeps_out_is_invalid_output() -> None:
    leaky = {"id": "cached", "note": "n", "internal": "never sent"}
    rest, modern, legacy = await every_wire(app_answering(lambda: success(leaky)), "o", "get_row", {"id": "cached"})
    for result in (modern, legacy):
        assert result["isError"] is True and "never sent" not in json.dumps(result)
    assert rest.json()["code"] == "INVALID_OUTPUT" and "never sent" not in rest.text


async def test_a_middleware_answering_content_alone_on_a_typed_action_is_invalid_output() -> None:
    alone = lambda: ToolResponse([], content=(link("probe://rows/cached", "cached"),))  # noqa: E731
    rest, modern, legacy = await every_wire(app_answering(alone), "o", "get_row", {"id": "cached"})
    for result in (modern, legacy):
        assert result["isError"] is True
        assert "INVALID_OUTPUT" in error_code(result)
    assert rest.json()["code"] == "INVALID_OUTPUT"


async def test_a_middleware_answering_structured_content_that_does_not_fit_is_invalid_output() -> None:
    wrong = lambda: success_structured({"id": 7})  # noqa: E731
    _, modern, legacy = await every_wire(app_answering(wrong), "o", "get_row", {"id": "cached"})
    for result in (modern, legacy):
        assert result["isError"] is True and "INVALID_OUTPUT" in error_code(result)


async def test_a_middleware_error_answer_passes_as_it_is() -> None:
    rest, modern, _ = await every_wire(app_answering(_refusal), "o", "get_row", {"id": "cached"})
    assert modern["isError"] is True and "FORBIDDEN" in error_code(modern)
    assert rest.status_code == 403


def _refusal() -> ToolResponse:
    return error_response(ToolError("FORBIDDEN", "Not from the cache.", recovery="Ask someone."))


async def test_the_outer_middleware_sees_the_checked_answer_of_an_inner_one() -> None:
    seen: list[ToolResponse] = []
    app = app_answering(lambda: success('{"id":"cached"}'), outer=seen)
    await every_wire(app, "o", "get_row", {"id": "cached"})
    assert seen and all(r.is_error for r in seen)  # (an audit around it records the failure the caller gets)


async def test_a_middleware_answer_gets_the_agents_select() -> None:
    cached = {"id": "cached", "note": "from cache"}
    rest, modern, legacy = await every_wire(app_answering(lambda: success(cached), select=True), "o", "get_row",
                                            {"id": "cached", "_select": ["id"]})
    for result in (modern, legacy):
        assert result["isError"] is False
        assert result["structuredContent"] == {"id": "cached"}
    assert rest.json() == {"id": "cached"}


async def test_an_earlier_answer_kept_by_a_cache_is_sent_again_with_its_structured_content() -> None:
    kept: dict[str, ToolResponse] = {}

    async def cache(call: ActionCall, call_next: CallNext) -> ToolResponse:
        found = kept.get(call.arguments["id"])
        if found is None:
            found = kept[call.arguments["id"]] = await call_next(call)
        return found

    tool = Tool("o")

    @tool.action(readonly=True, returns=Presenter("row").schema(Row), middleware=[cache])
    async def get_row(id: str) -> dict[str, Any]:
        """A row."""
        return {"id": id, "note": "n", "internal": "x"}

    app = MCPFusion("mw", tools=[tool]).build_app()
    for _ in range(2):  # the second: the kept response, a middleware's own
        _, modern, legacy = await every_wire(app, "o", "get_row", {"id": "a"})
        for result in (modern, legacy):
            assert result["isError"] is False and result["structuredContent"] == {"id": "a", "note": "n"}


async def test_call_nexts_response_passed_on_as_it_is_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checks: list[str] = []
    check = Output.check

    def counted(self: Output, response: ToolResponse, presenter: Any) -> ToolResponse:
        checks.append(self.label)
        return check(self, response, presenter)

    monkeypatch.setattr(Output, "check", counted)

    async def passing(call: ActionCall, call_next: CallNext) -> ToolResponse:
        return await call_next(call)

    tool = Tool("o", middleware=[passing, passing])

    @tool.action(readonly=True, returns=Presenter("row").schema(Row), middleware=[passing])
    async def get_row(id: str) -> dict[str, Any]:
        """A row."""
        return {"id": id, "note": "n"}

    app = MCPFusion("mw", tools=[tool]).build_app()
    rest, _, _ = await every_wire(app, "o", "get_row", {"id": "a"})
    assert rest.json() == {"id": "a", "note": "n"}
    assert checks == ["o/get_row"] * 3  # once per call (REST, 2026, 2025), however many middleware


# -- 2. a template's NOT_FOUND names the URI on 2026-07-28 too ----------------------------------------------------

def missing_items() -> Any:
    fusion = MCPFusion("p")

    @fusion.resource_template("probe://items/{id}", mime_type="application/json")
    async def item(id: str) -> dict[str, Any]:
        raise ToolError("NOT_FOUND", f"Item {id} not found")

    return fusion.build_app()


async def test_a_templates_not_found_carries_data_uri_on_2026_as_on_2025() -> None:
    uri, method = "probe://items/missing", "resources/read"
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=missing_items()),
                                 base_url="http://127.0.0.1") as http:
        modern = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": method, "mcp-name": uri},
                                 json={"jsonrpc": "2.0", "id": 1, "method": method,
                                       "params": {"uri": uri, "_meta": META_2026}})
        legacy = await http.post("/mcp", headers=await session(http),
                                 json={"jsonrpc": "2.0", "id": 2, "method": method, "params": {"uri": uri}})
    error_2026, error_2025 = _error(modern), _error(legacy)
    assert error_2026["code"] == -32602 and error_2025["code"] == -32002
    assert error_2026["data"] == error_2025["data"] == {"code": "NOT_FOUND", "uri": uri}


def _error(response: httpx.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["error"]  # type: ignore[no-any-return]
    return response.json()["error"]  # type: ignore[no-any-return]
