"""The dependency plan: a tree of plain `async def` dependencies is solved without FastAPI's per-call solver,
with the same calls, in the same order, the same values and the same caching as `solve_dependencies`; any
other tree (and any call while `app.dependency_overrides` is set) goes through FastAPI's solver."""

from __future__ import annotations

import dataclasses
import inspect
from contextlib import AsyncExitStack
from typing import Any

import pytest
from fastapi import BackgroundTasks, Depends, FastAPI, Header, Response, Security
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import solve_dependencies
from fastapi.security import SecurityScopes
from starlette.requests import Request

from mcpfusion import Context, Page, Tool
from mcpfusion.dependencies import (
    KNOWN_FIELDS,
    build_dependant,
    make_plan,
    plan_of,
    provide_context,
    provide_page,
    resolve,
)
from mcpfusion.testing import ToolTester


def tree(calls: list[str]) -> dict[str, Any]:
    """Dependencies shaped like the reference service's: a caller shared by a store and a presenter choice,
    plus one that must run every time it is named (`use_cache=False`)."""

    async def caller(request: Request) -> str:
        calls.append("caller")
        return request.headers.get("x-user", "anonymous")

    async def fresh() -> int:
        calls.append("fresh")
        return len(calls)

    async def store(request: Request, who: str = Depends(caller), n: int = Depends(fresh, use_cache=False)) -> str:
        calls.append("store")
        return f"store of {who} ({request.url.path}, {n})"

    async def presenter(who: str = Depends(caller), n: int = Depends(fresh, use_cache=False)) -> str:
        calls.append("presenter")
        return f"view for {who} ({n})"

    return {"caller": caller, "fresh": fresh, "store": store, "presenter": presenter}


def parameters(**defaults: Any) -> list[inspect.Parameter]:
    return [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=value) for name, value in defaults.items()]


def request_for(app: FastAPI | None = None, headers: dict[str, str] | None = None) -> Request:
    raw = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/mcp", "headers": raw, "query_string": b""}
    if app is not None:
        scope["app"] = app
    return Request(scope)


async def fastapi_solves(dependant: Any, request: Request) -> dict[str, Any]:
    """What FastAPI's own solver gives for `dependant` (the reference)."""
    async with AsyncExitStack() as stack:
        request.scope["fastapi_inner_astack"] = request.scope["fastapi_function_astack"] = stack
        solved = await solve_dependencies(request=request, dependant=dependant, async_exit_stack=stack,
                                          embed_body_fields=False)
    assert not solved.errors
    return solved.values


async def test_plain_tree_is_planned_and_matches_fastapi_calls_order_values_and_caching():
    deps = tree(calls := [])
    dependant = build_dependant(parameters(store=Depends(deps["store"]), request=None)[:1],
                                deps["presenter"])
    plan = make_plan(dependant)
    assert plan is not None
    request = request_for(headers={"x-user": "ada"})

    expected = await fastapi_solves(dependant, request)
    fastapi_calls = list(calls)
    calls.clear()
    values = await resolve(dependant, request, AsyncExitStack())

    assert values == expected
    assert calls == fastapi_calls == ["caller", "fresh", "store", "fresh", "presenter"]
    assert values["store"] == "store of ada (/mcp, 2)"


async def test_request_parameter_of_the_action_itself_is_planned():
    async def who(request: Request) -> str:
        return request.headers.get("x-user", "")

    dependant = build_dependant([inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request),
                                 *parameters(user=Depends(who))], None)
    request = request_for(headers={"x-user": "grace"})
    assert make_plan(dependant) is not None
    assert await resolve(dependant, request, AsyncExitStack()) == await fastapi_solves(dependant, request)


def _yielding():
    async def dependency():
        yield 1

    return dependency


def _sync():
    def dependency() -> int:
        return 1

    return dependency


def _header():
    async def dependency(x_user: str = Header(default="")) -> str:
        return x_user

    return dependency


def _scoped():
    async def dependency(scopes: SecurityScopes) -> list[str]:
        return scopes.scopes

    return dependency


def _background():
    async def dependency(tasks: BackgroundTasks) -> BackgroundTasks:
        return tasks

    return dependency


def _response():
    async def dependency(response: Response) -> Response:
        return response

    return dependency


@pytest.mark.parametrize("make", [_yielding, _sync, _header, _scoped, _background, _response])
def test_anything_but_plain_async_dependencies_goes_to_fastapis_solver(make):
    async def outer(value: Any = Depends(make())) -> Any:
        return value

    assert make_plan(build_dependant(parameters(value=Depends(outer)), None)) is None  # nested
    assert make_plan(build_dependant(parameters(value=Depends(make())), None)) is None  # direct


def test_security_scopes_and_scoped_dependencies_go_to_fastapis_solver():
    async def caller() -> str:
        return "ada"

    assert make_plan(build_dependant(parameters(who=Security(caller, scopes=["read"])), None)) is None
    assert make_plan(build_dependant(parameters(who=Depends(caller, scope="function")), None)) is None


def test_every_field_of_fastapis_dependant_is_one_the_plan_knows():
    """A FastAPI with a new kind of parameter or dependency option would get no plans (its solver answers):
    review `_plain_node` / `_plain_params` for it and add it to KNOWN_FIELDS."""
    assert {f.name for f in dataclasses.fields(Dependant)} <= KNOWN_FIELDS


def test_the_plan_is_worked_out_once_per_dependant():
    deps = tree([])
    dependant = build_dependant(parameters(store=Depends(deps["store"])), None)
    assert plan_of(dependant) is plan_of(dependant) is not None


async def test_overrides_go_through_fastapi_and_apply():
    deps = tree(calls := [])
    dependant = build_dependant(parameters(store=Depends(deps["store"])), None)
    app = FastAPI()

    async def other_caller() -> str:
        calls.append("override")
        return "override"

    app.dependency_overrides[deps["caller"]] = other_caller
    values = await resolve(dependant, request_for(app), AsyncExitStack())
    assert values["store"].startswith("store of override")
    assert calls[0] == "override"
    app.dependency_overrides.clear()
    calls.clear()
    assert (await resolve(dependant, request_for(app), AsyncExitStack()))["store"].startswith("store of anonymous")
    assert calls[0] == "caller"


async def test_context_and_page_are_provided_by_async_dependencies():
    """FastAPI runs a plain `def` dependency in its thread pool: the injected providers are `async def`, so an
    action taking `Context` or `Page` keeps its dependencies planned."""
    assert inspect.iscoroutinefunction(provide_context) and inspect.iscoroutinefunction(provide_page)

    tool = Tool("things")

    @tool.action(paginate=2)
    async def list_things(page: Page, ctx: Context) -> list[dict]:
        """List things"""
        return page.keyset([{"id": f"t{i}", "via": ctx.transport} for i in range(3)], key=lambda r: [r["id"]])

    assert make_plan(tool.actions["list_things"].dependant) is not None
    result = await ToolTester([tool]).call("things", "list_things")
    assert not result.is_error
    assert [row["id"] for row in result.data] == ["t0", "t1"]  # the page of 2 the Page dependency gave
    assert result.data[0]["via"] == "detached"  # the tester passed no context: a detached one
