"""An answer a middleware gives in place of call_next's passes the checks a handler's answer passes for THIS
caller, whatever it carries (structuredContent too: a cache's kept answer, a hand-built `success_structured`):
suggestions of what this caller may call, its `_select`, content checks, the outputSchema, a write's texts;
a page keeps its next_cursor. And the checks work on a copy: the object the middleware gave is never changed
(a cache gives it again, to other callers)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from mcpfusion import ActionCall, CallNext, MCPFusion, Presenter, Tool, ToolResponse, suggest
from mcpfusion.content import Image
from mcpfusion.response import response, success, success_structured, tool_error
from tests.wire_kit import every_wire


class Invoice(BaseModel):
    id: str
    amount: int


class Caller:
    """What an app's authentication stores: who calls, and the scopes granted."""

    def __init__(self, sub: str, scopes: set[str]) -> None:
        self.sub = sub
        self.scopes = scopes


ADMIN = Caller("admin", {"billing:read", "billing:write"})
SUPPORT = Caller("support", {"billing:read"})
VOIDABLE = Presenter("invoice").schema(Invoice).suggest(lambda i: [suggest("billing.void", "Void it")])


def as_caller(app: Any, caller: Caller) -> Any:
    """`app` with every HTTP request authenticated as `caller`."""

    async def authenticated(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            scope["mcpfusion.auth"] = caller
        await app(scope, receive, send)

    return authenticated


def billing_app(cache: Any, *, returns: Any = VOIDABLE, readonly: bool = True) -> Any:
    """`billing.get` (wrapped in `cache`) beside `billing.void`, which only `billing:write` may call."""
    billing = Tool("billing", select=True)

    @billing.action(readonly=readonly, returns=returns, middleware=[cache])
    async def get(id: str) -> dict[str, Any]:
        """An invoice."""
        return {"id": id, "amount": 5}

    @billing.action(scopes=["billing:write"])
    async def void(id: str) -> str:
        """Void an invoice."""
        return "voided"

    return MCPFusion("m", tools=[billing]).build_app()


def keeping(kept: dict[str, ToolResponse]) -> Any:
    """A cache keyed on the id: it keeps call_next's answer and gives it to every later caller."""

    async def cache(call: ActionCall, call_next: CallNext) -> ToolResponse:
        found = kept.get(call.arguments["id"])
        if found is None:
            found = kept[call.arguments["id"]] = await call_next(call)
        return found

    return cache


def giving(answer: ToolResponse) -> Any:
    """A middleware answering the same object on every call, without call_next."""

    async def cache(call: ActionCall, call_next: CallNext) -> ToolResponse:
        return answer

    return cache


def texts(result: dict[str, Any]) -> str:
    return json.dumps(result["content"])


# -- 1. a middleware's answer carrying structuredContent is checked for this caller ---------------------------

async def test_a_kept_answer_suggests_another_caller_only_what_it_may_call() -> None:
    app = billing_app(keeping({}))
    _, modern, legacy = await every_wire(as_caller(app, ADMIN), "billing", "get", {"id": "c"})
    assert "billing.void" in texts(modern)  # the admin may void it: suggested
    _, modern, legacy = await every_wire(as_caller(app, SUPPORT), "billing", "get", {"id": "c"})
    for result in (modern, legacy):
        assert result["isError"] is False and result["structuredContent"] == {"id": "c", "amount": 5}
        assert "billing.void" not in texts(result)  # (the support role cannot see that action)


async def test_a_kept_answer_gets_this_callers_select() -> None:
    app = billing_app(keeping({}))
    await every_wire(app, "billing", "get", {"id": "d"})
    rest, modern, legacy = await every_wire(app, "billing", "get", {"id": "d", "_select": ["id"]})
    assert rest.json() == {"id": "d"}
    for result in (modern, legacy):
        assert result["structuredContent"] == {"id": "d"}
        assert json.loads(result["content"][0]["text"]) == {"id": "d"}


async def test_a_hand_built_success_structured_leaves_out_suggestions_of_no_registered_action() -> None:
    answer = success_structured({"id": "h", "amount": 1})
    answer.view.suggestions = [suggest("billing.ghost", "No such action")]
    answer.texts.append("<action_suggestions>\n- billing.ghost: No such action\n</action_suggestions>")
    _, modern, legacy = await every_wire(billing_app(giving(answer)), "billing", "get", {"id": "h"})
    for result in (modern, legacy):
        assert result["isError"] is False and "billing.ghost" not in texts(result)


async def test_a_middleware_answer_with_structured_content_has_its_content_checked() -> None:
    answer = success_structured({"id": "i", "amount": 1})
    answer.content = (Image(b"plain text, no picture", "image/png"),)
    rest, modern, legacy = await every_wire(billing_app(giving(answer)), "billing", "get", {"id": "i"})
    for result in (modern, legacy):
        assert result["isError"] is True and "CONTENT_REFUSED" in texts(result)
        assert not any(block["type"] == "image" for block in result["content"])
    assert rest.json()["code"] == "CONTENT_REFUSED"


async def test_a_writes_middleware_answer_with_a_text_no_wire_carries_is_a_clear_error() -> None:
    answer = success_structured({"id": "w", "amount": 1})
    answer.texts.append("a file name \ud800")
    rest, modern, legacy = await every_wire(billing_app(giving(answer), readonly=False), "billing", "get",
                                            {"id": "w"})
    for result in (modern, legacy):
        assert result["isError"] is True and "structuredContent" not in result
    assert rest.status_code == 500 and rest.json()["code"] == "INTERNAL_ERROR"


async def test_a_kept_page_gets_this_callers_select_and_keeps_its_next_cursor() -> None:
    kept: dict[str, ToolResponse] = {}

    async def cache(call: ActionCall, call_next: CallNext) -> ToolResponse:
        found = kept.get("page")
        if found is None:
            found = kept["page"] = await call_next(call)
        return found

    tool = Tool("log", select=True)

    @tool.action(readonly=True, paginate=2, returns=Presenter("inv").schema(Invoice), middleware=[cache])
    async def rows() -> list[dict[str, Any]]:
        """Rows."""
        return [{"id": str(n), "amount": n} for n in range(5)]

    app = MCPFusion("p", tools=[tool]).build_app()
    _, first, _ = await every_wire(app, "log", "rows", {})
    cursor = first["structuredContent"]["next_cursor"]
    assert isinstance(cursor, str)
    rest, modern, legacy = await every_wire(app, "log", "rows", {"_select": ["id"]})
    for result in (modern, legacy):
        assert result["structuredContent"] == {"items": [{"id": "0"}, {"id": "1"}], "next_cursor": cursor}
    assert rest.json() == [{"id": "0"}, {"id": "1"}] and rest.headers["next-cursor"] == cursor


# -- 2. the middleware's object is never changed ----------------------------------------------------------------

async def test_one_callers_select_does_not_narrow_a_cached_answer_for_later_callers() -> None:
    answer = success({"id": "x", "amount": 3})
    app = billing_app(giving(answer))
    rest, modern, _ = await every_wire(app, "billing", "get", {"id": "x", "_select": ["id"]})
    assert rest.json() == {"id": "x"} and modern["structuredContent"] == {"id": "x"}
    rest, modern, legacy = await every_wire(app, "billing", "get", {"id": "x"})
    assert rest.json() == {"id": "x", "amount": 3}
    assert modern["structuredContent"] == legacy["structuredContent"] == {"id": "x", "amount": 3}
    assert answer.structured_content is None and answer.view.data == {"id": "x", "amount": 3}
    assert answer.texts == ['{"id":"x","amount":3}'] and answer.view.presented is None


async def test_a_select_after_a_plain_call_still_applies_to_a_cached_answer() -> None:
    app = billing_app(giving(success({"id": "y", "amount": 3})))
    await every_wire(app, "billing", "get", {"id": "y"})  # (a check that filled the cached object in would stay)
    rest, modern, legacy = await every_wire(app, "billing", "get", {"id": "y", "_select": ["id"]})
    assert rest.json() == {"id": "y"}
    assert modern["structuredContent"] == legacy["structuredContent"] == {"id": "y"}


async def test_a_callers_hidden_suggestions_are_dropped_from_its_copy_only() -> None:
    answer = response({"id": "s", "amount": 2}).suggest([suggest("billing.void", "Void it")]).build()
    app = billing_app(giving(answer))
    _, modern, legacy = await every_wire(as_caller(app, SUPPORT), "billing", "get", {"id": "s"})
    assert "billing.void" not in texts(modern) + texts(legacy)
    _, modern, legacy = await every_wire(as_caller(app, ADMIN), "billing", "get", {"id": "s"})
    assert "billing.void" in texts(modern) and "billing.void" in texts(legacy)
    assert [s.action for s in answer.view.suggestions] == ["billing.void"] and len(answer.texts) == 2


async def test_a_middleware_page_whose_next_cursor_is_no_string_is_invalid_output() -> None:
    answer = success_structured([{"id": "0", "amount": 0}])
    answer.structured_content = {"items": answer.view.data, "next_cursor": 5}
    tool = Tool("log")

    @tool.action(readonly=True, paginate=2, returns=Presenter("inv").schema(Invoice), middleware=[giving(answer)])
    async def rows() -> list[dict[str, Any]]:
        """Rows."""
        return []

    _, modern, legacy = await every_wire(MCPFusion("p", tools=[tool]).build_app(), "log", "rows", {})
    for result in (modern, legacy):
        assert result["isError"] is True and "INVALID_OUTPUT" in texts(result)


async def test_a_middleware_error_answer_suggests_only_what_this_caller_may_call() -> None:
    answer = tool_error("CONFLICT", "Invoice e is locked.", recovery="Void it first.")
    answer.view.suggestions = [suggest("billing.void", "Void it")]
    answer.texts.append("<action_suggestions>\n- billing.void: Void it\n</action_suggestions>")
    app = billing_app(giving(answer))
    _, modern, legacy = await every_wire(as_caller(app, SUPPORT), "billing", "get", {"id": "e"})
    for result in (modern, legacy):
        assert result["isError"] is True and "CONFLICT" in texts(result) and "billing.void" not in texts(result)
    _, modern, _ = await every_wire(as_caller(app, ADMIN), "billing", "get", {"id": "e"})
    assert "billing.void" in texts(modern) and len(answer.texts) == 2
