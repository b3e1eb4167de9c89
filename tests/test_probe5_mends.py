"""Three declaration and error paths a new user met: an HTTPException 5xx a dependency raises answers with a
recovery (and the wait its Retry-After asks) like every internal error; a paginated action whose handler
returns no rows is a logged INVALID_OUTPUT, never an answer without `items` or cursor; a presenter action whose
handler returns a response it built (`toon_success`) is refused with a log line saying why."""

from __future__ import annotations

import logging
from typing import Any

import httpx
from fastapi import Depends, HTTPException
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool, toon_success
from mcpfusion.testing import ToolTester


class Person(BaseModel):
    name: str


people = Tool("people", exposition="flat")


async def unavailable() -> None:
    raise HTTPException(503, "the directory is down", headers={"Retry-After": "7"})


@people.action(readonly=True)
async def busy(_: None = Depends(unavailable)) -> str:
    """Never answers."""
    return "never"


@people.action(readonly=True)
async def broken() -> str:
    """Fails with a 502."""
    raise HTTPException(502, "upstream said no")


@people.action(readonly=True, paginate=2)
async def paged_dict() -> Any:  # (annotated `dict`, the declaration itself is refused)
    """Pages, but answers one object."""
    return {"id": "x"}


@people.action(readonly=True, returns=Presenter("person").schema(Person))
async def as_toon() -> Any:
    """Builds its own answer past the presenter."""
    return toon_success([{"name": "Ada", "email": "ada@example.com"}])


fusion = MCPFusion("people", tools=[people])
tester = ToolTester(fusion.registry)


async def test_a_503_says_to_wait_and_a_502_to_retry_later():
    busy_result = await tester.call("people", "busy", {})
    assert busy_result.error_code == "INTERNAL_ERROR"
    assert "<recovery>Wait 7 s, then call again.</recovery>" in busy_result.text, busy_result.text
    assert busy_result.raw.view.error.retry_after == 7
    broken_result = await tester.call("people", "broken", {})
    assert "<recovery>This is a server problem, not your call; retry later.</recovery>" in broken_result.text
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fusion.build_app()),
                                 base_url="http://127.0.0.1") as client:
        r = await client.post("/api/people/busy", json={})
    assert r.status_code == 503 and r.headers["retry-after"] == "7"
    assert r.json()["recovery"] == "Wait 7 s, then call again."


async def test_a_paginated_action_answering_no_rows_is_an_invalid_output(caplog):
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        result = await tester.call("people", "paged_dict", {})
    assert result.error_code == "INVALID_OUTPUT", result.text
    assert "returned dict, not its rows" in caplog.text


async def test_a_response_built_past_the_presenter_is_refused_saying_why(caplog):
    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        result = await tester.call("people", "as_toon", {})
    assert result.error_code == "INVALID_OUTPUT" and "ada@example.com" not in result.text
    assert "never shaped by the action's presenter: return the data instead" in caplog.text
