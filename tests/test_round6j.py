"""Round 6j, mended: once a write ran (its handler returned, its yield dependencies closed), nothing that fails
after it says "nothing was done, retry": a middleware raising after `call_next`, a `Timeout` firing in a slow
middleware or audit sink (whose event is kept), text no wire can carry. A `Timeout` never cuts a write's commit;
its `BackgroundTasks` run; a `cursor_scope` value that cannot bind a call is a clear error; an error a handler's
`attach` callable raises is censored of the redacted values it quotes."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import enum
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import BackgroundTasks, Depends, HTTPException
from pydantic import BaseModel

from mcpfusion import Audit, EgressLimit, MCPFusion, Page, Presenter, Timeout, Tool, ToolError, attach
from mcpfusion.dispatch import completed_error
from mcpfusion.response import success
from tests.governance_kit import MODERN_META, Caller
from tests.service_kit import confirm_token

TRANSPORTS = ["tester", "rest", "mcp-2026", "stdio"]
DONE = "The action itself was done"


def said_done(text: str) -> bool:
    return DONE in text and "Do not call it again" in text and "etry later" not in text


async def call_once(app: Any, transport: str, tool: str, action: str, args: dict[str, Any]) -> Any:
    caller = Caller(app, transport, tool, token=None)
    try:
        return await caller.call(action, args)
    finally:
        await caller.aclose()


# -- 1. a Timeout firing after a write ran: "was done", and its audit event is kept ----------------------------

async def wait_forever(call: Any, call_next: Any) -> Any:
    """A middleware whose work after `call_next` never ends (a webhook that hangs): only a Timeout ends it."""
    response = await call_next(call)
    await asyncio.Event().wait()
    return response


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_timeout_after_a_write_ran_says_it_was_done_and_keeps_the_audit_event(transport: str) -> None:
    done: list[str] = []
    events: list[dict[str, Any]] = []
    tasks: list[asyncio.Task[Any]] = []

    async def slow_sink(event: dict[str, Any]) -> None:
        # Still writing when the call's Timeout fires (an INSERT over a slow link): ends once it was cancelled.
        while not tasks[-1].cancelling():
            await asyncio.sleep(0.005)
        events.append(event)

    tool = Tool("acct")

    @tool.action(destructive=True)
    async def close(id: str) -> dict[str, str]:
        """Close an account."""
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        done.append(id)
        return {"closed": id}

    @tool.action(destructive=True, middleware=[wait_forever])
    async def close_hung(id: str) -> dict[str, str]:
        """Close an account, then notify (the notification hangs)."""
        tasks.append(asyncio.current_task())  # type: ignore[arg-type]
        done.append(id)
        return {"closed": id}

    app = MCPFusion("acct", tools=[tool], middleware=[Timeout(0.05), Audit(sink=slow_sink)]).build_app()
    for action in ("close", "close_hung"):
        done.clear()
        events.clear()
        out = await call_once(app, transport, "acct", action, {"id": "a1"})
        assert done == ["a1"]
        assert out.code == "TIMEOUT" and said_done(out.text), out.text
        assert "Nothing was returned" not in out.text
        if transport == "rest":
            assert out.status == 504 and out.problem["details"]["completed"] is True
        # The slow sink's event was written, not lost to the cancellation: the write answered (the Timeout cut
        # the sink), or the write done whose call was cancelled after (the Timeout cut the middleware).
        assert [e["outcome"] for e in events] == ["ok" if action == "close" else "completed"]


async def test_a_timeout_while_a_write_s_handler_runs_still_says_nothing_was_returned() -> None:
    tool = Tool("acct")

    @tool.action(destructive=True, middleware=[Timeout(0.05)])
    async def close(id: str) -> str:
        """Close an account (it hangs)."""
        await asyncio.Event().wait()
        return "closed"

    out = await call_once(MCPFusion("acct", tools=[tool]).build_app(), "tester", "acct", "close", {"id": "a1"})
    assert out.code == "TIMEOUT" and "Nothing was returned" in out.text and DONE not in out.text


@pytest.mark.parametrize("transport", ["tester", "rest", "mcp-2026"])
async def test_a_timeout_never_cuts_a_write_s_commit(transport: str) -> None:
    seen: list[str] = []

    async def session() -> AsyncIterator[str]:
        try:
            yield "db"
        except BaseException:
            seen.append("rolled back")
            raise
        await asyncio.sleep(0.3)  # a COMMIT that takes longer than the whole call's limit
        seen.append("committed")

    tool = Tool("acct")

    @tool.action(destructive=True, middleware=[Timeout(0.1)])
    async def close(id: str, db: str = Depends(session)) -> dict[str, str]:
        """Close an account (the commit is slow)."""
        return {"closed": id}

    @tool.action(destructive=True, middleware=[Timeout(0.1), wait_forever])
    async def close_hung(id: str, db: str = Depends(session)) -> dict[str, str]:
        """Close an account, commit, then notify (the notification hangs)."""
        return {"closed": id}

    app = MCPFusion("acct", tools=[tool]).build_app()
    out = await call_once(app, transport, "acct", "close", {"id": "a1"})
    assert out.code is None and seen == ["committed"]  # the answer of what was done, committed
    seen.clear()
    # The clock goes on once the commit is over: what hangs after it is cut, and answered as done.
    out = await call_once(app, transport, "acct", "close_hung", {"id": "a1"})
    assert seen == ["committed"] and out.code == "TIMEOUT" and said_done(out.text), out.text


# -- 2. a middleware raising after call_next of a write done -----------------------------------------------------

async def notify_after(call: Any, call_next: Any) -> Any:
    await call_next(call)
    raise ConnectionError("webhook down")  # a post-commit notification that fails


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_middleware_raising_after_a_write_ran_says_it_was_done(transport: str) -> None:
    done: list[str] = []
    events: list[dict[str, Any]] = []
    tool = Tool("acct")

    @tool.action(destructive=True, middleware=[notify_after])
    async def close(id: str) -> dict[str, str]:
        """Close an account, then notify."""
        done.append(id)
        return {"closed": id}

    @tool.action(readonly=True, middleware=[notify_after])
    async def look(id: str) -> dict[str, str]:
        """Read an account, then notify."""
        return {"id": id}

    @tool.action(destructive=True, middleware=[notify_after])
    async def refuse(id: str) -> str:
        """A write whose handler answers an error (nothing done)."""
        raise ToolError("NOT_FOUND", f"no account {id}", recovery="List the accounts first.")

    app = MCPFusion("acct", tools=[tool], middleware=[Audit(sink=events.append, mutations_only=False)]).build_app()
    out = await call_once(app, transport, "acct", "close", {"id": "a1"})
    assert done == ["a1"] and out.code == "INTERNAL_ERROR" and said_done(out.text), out.text
    assert [(e["outcome"], e["error_code"]) for e in events] == [("completed", "INTERNAL_ERROR")]
    # A read, and a write whose handler did not return, keep their advice (retry later).
    read = await call_once(app, transport, "acct", "look", {"id": "a1"})
    assert read.code == "INTERNAL_ERROR" and DONE not in read.text and "retry later" in read.text
    refused = await call_once(app, transport, "acct", "refuse", {"id": "a1"})
    assert DONE not in refused.text and events[-1]["outcome"] == "error"


def test_an_error_said_done_already_is_not_said_twice() -> None:
    tool = Tool("acct")

    @tool.action(destructive=True)
    async def close(id: str) -> str:
        """Close an account."""
        return id

    action = tool.actions["close"]
    once = completed_error(action, ToolError("RESPONSE_TOO_LARGE", "Too large."))
    assert completed_error(action, once) is once and once.message.count(DONE) == 1


# -- 3. text no wire can carry, from a write ----------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_write_answering_a_lone_surrogate_says_it_was_done(transport: str) -> None:
    done: list[str] = []
    tool = Tool("w")

    @tool.action()
    async def rename(id: str) -> str:
        """Rename an item; the stored name comes back with a lone surrogate."""
        done.append(id)
        return f"renamed {id} to x\ud800"

    @tool.action()
    async def rename_success(id: str) -> Any:
        """The same, answered with success()."""
        done.append(id)
        return success(f"renamed {id} to x\ud800")

    app = MCPFusion("w", tools=[tool]).build_app()
    for action in ("rename", "rename_success"):
        done.clear()
        out = await call_once(app, transport, "w", action, {"id": "a1"})
        assert done == ["a1"] and out.code == "INTERNAL_ERROR" and said_done(out.text), out.text


# -- 4. a write done runs its BackgroundTasks -----------------------------------------------------------------------

class Receipt(BaseModel):
    id: str
    amount: int


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_write_done_whose_answer_failed_runs_its_background_tasks(transport: str) -> None:
    sent: list[str] = []
    seen: list[str] = []

    async def session() -> AsyncIterator[str]:
        yield "db"
        seen.append("committed")

    def mail(to: str) -> None:
        sent.append(to)

    tool = Tool("acct")

    @tool.action()
    async def charge(amount: int, tasks: BackgroundTasks, db: str = Depends(session)) -> Receipt:
        """Charge a card and mail the receipt (its result breaks its output model)."""
        tasks.add_task(mail, "charge")
        return {"id": "ch_1", "amount": "not a number"}  # type: ignore[return-value]

    @tool.action(middleware=[EgressLimit(bytes=100)])
    async def export(owner: str, tasks: BackgroundTasks) -> dict[str, Any]:
        """Close an owner's accounts and mail them (answer over the egress limit)."""
        tasks.add_task(mail, "export")
        return {"closed": owner, "report": "x" * 1000}

    @tool.action(middleware=[notify_after])
    async def close(owner: str, tasks: BackgroundTasks) -> str:
        """Close an account and mail it; the webhook after fails."""
        tasks.add_task(mail, "close")
        return "closed"

    app = MCPFusion("acct", tools=[tool]).build_app()
    expected = {"charge": "INVALID_OUTPUT", "export": "RESPONSE_TOO_LARGE", "close": "INTERNAL_ERROR"}
    for action, args in (("charge", {"amount": 5}), ("export", {"owner": "bob"}), ("close", {"owner": "bob"})):
        out = await call_once(app, transport, "acct", action, args)
        assert out.code == expected[action] and said_done(out.text), out.text
        await app.state.mcpfusion.registry.background.drain()  # (started once the call was answered)
    assert sorted(sent) == ["charge", "close", "export"] and seen == ["committed"]


# -- 5. a cursor_scope value that cannot bind a call ----------------------------------------------------------------

class User:  # what a get_current_user dependency may return (an ORM row)
    def __init__(self, name: str) -> None:
        self.name = name


@dataclasses.dataclass
class Principal:
    name: str
    seen: datetime.datetime


def scope_object() -> User:
    return User("alice")


def scope_dataclass() -> Principal:
    return Principal("alice", datetime.datetime.now())  # another value on every call: no token would ever match


def ledger(scope: Any, voided: list[str]) -> Any:
    tool = Tool("led")

    @tool.action(destructive=True, confirm=True)
    async def void(id: str) -> str:
        """Void an entry."""
        voided.append(id)
        return f"voided {id}"

    @tool.action(readonly=True, paginate=2)
    async def entries(page: Page) -> list[dict[str, int]]:
        """The entries."""
        voided.append("listed")
        return page.keyset([{"n": n} for n in range(5)], key=lambda r: r["n"])

    return MCPFusion("led", tools=[tool], cursor_scope=scope).build_app()


@pytest.mark.parametrize("scope", [scope_object, scope_dataclass])
@pytest.mark.parametrize("transport", ["rest", "mcp-2026"])
async def test_a_cursor_scope_that_cannot_bind_a_call_is_a_clear_error(scope: Any, transport: str) -> None:
    voided: list[str] = []
    app = ledger(scope, voided)
    for action, args in (("void", {"id": "e1"}), ("entries", {})):
        out = await call_once(app, transport, "led", action, args)
        assert out.code == "INTERNAL_ERROR", out.text
        assert f"cursor_scope dependency {scope.__qualname__} returned a" in out.text
        assert "e.g. the tenant id" in out.text and "calling again gives the same error" in out.text
    assert voided == []


class Tenant(enum.Enum):
    ACME = "acme"


@pytest.mark.parametrize("value", ["acme", 7, ("acme", 7), frozenset({"a", "b"}), Tenant.ACME,
                                   uuid.UUID(int=7), {"tenant": "acme", "ids": [1, 2]}])
async def test_a_stable_cursor_scope_still_binds_confirmations(value: Any) -> None:
    voided: list[str] = []
    app = ledger(lambda: value, voided)
    caller = Caller(app, "rest", "led", token=None)
    try:
        asked = await caller.call("void", {"id": "e1"})
        assert asked.code == "CONFIRMATION_REQUIRED", asked.text
        ran = await caller.call("void", {"id": "e1", "_confirm": confirm_token(asked.text)})
        first = await caller.call("entries", {})
    finally:
        await caller.aclose()
    assert ran.code is None and voided[0] == "e1" and first.code is None


# -- 6. an error raised by a handler's attach callable is censored ------------------------------------------------

SECRET = "person1@secret.example"
CUSTOMERS = {"c1": {"id": "c1", "name": "Ada", "email": SECRET}}


def statement(shown: dict[str, Any]) -> Any:
    row = CUSTOMERS[shown["id"]]  # the full record: the callable sees the real email
    raise ToolError("NOT_FOUND", f"No statement on file for {row['name']} <{row['email']}>.",
                    recovery=f"Ask {row['email']} to sign up.", details={"email": row["email"]})


def http_statement(shown: dict[str, Any]) -> Any:
    raise HTTPException(404, f"no statement for {CUSTOMERS[shown['id']]['email']}")


def crm() -> Any:
    customer = Presenter("customer").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])
    tool = Tool("crm")

    @tool.action(readonly=True, returns=customer, content_types=["text/plain"])
    async def show(id: str) -> Any:
        """A customer and their statement."""
        return attach(CUSTOMERS[id], statement)

    @tool.action(readonly=True, returns=customer, content_types=["text/plain"])
    async def show_http(id: str) -> Any:
        """A customer and their statement (an HTTP error)."""
        return attach(CUSTOMERS[id], http_statement)

    @tool.action(returns=customer, content_types=["text/plain"])
    async def touch(id: str) -> Any:
        """A write answering the customer and their statement."""
        return attach(CUSTOMERS[id], statement)

    return MCPFusion("crm", tools=[tool]).build_app()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_error_raised_by_a_handler_s_attach_callable_is_censored(transport: str) -> None:
    app = crm()
    for action in ("show", "show_http", "touch"):
        out = await call_once(app, transport, "crm", action, {"id": "c1"})
        assert out.code is not None and SECRET not in out.text, out.text
        if action == "show":
            assert out.code == "NOT_FOUND" and "No statement on file for Ada" in out.text
        if action == "touch":  # a write: the error says it was done too
            assert out.code == "NOT_FOUND" and said_done(out.text)


async def test_an_attach_callable_s_http_error_is_censored_in_the_json_rpc_error() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "crm", "arguments": {"action": "show_http", "id": "c1"}, "_meta": MODERN_META}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "crm"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=crm()), base_url="http://127.0.0.1") as client:
        reply = (await client.post("/mcp", json=body, headers=headers)).json()
        problem = (await client.post("/api/crm/show_http", json={"id": "c1"})).json()
    assert "error" in reply and SECRET not in json.dumps(reply) and "no statement for" in reply["error"]["message"]
    assert problem["status"] == 404 and SECRET not in problem["detail"]
