"""Declaration mistakes fail when the action is declared, naming it and the parameter (as FastAPI refuses a
route), never at the first tools/list or call: there one bad action would break every tool."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import re
import uuid
from typing import Annotated, Literal

import pytest
from fastapi import Body, Header, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, PlainValidator
from starlette.responses import Response

from mcpfusion import Flatten, Tool
from mcpfusion.app import MCPFusion
from mcpfusion.testing import ToolTester


class Weird:
    pass


@dataclasses.dataclass
class Point:
    x: int
    y: int


@dataclasses.dataclass
class HoldsWeird:
    weird: Weird


class Color(enum.Enum):
    RED = "red"


class Shared(BaseModel):
    project_id: str = "p0"
    title: str


async def weird(x: Weird) -> int:
    """d"""
    return 1


async def weird_in_list(x: list[Weird] | None = None) -> int:
    """d"""
    return 1


async def weird_in_dataclass(x: HoldsWeird) -> int:
    """d"""
    return 1


async def positional_only(x: int, /) -> int:
    """d"""
    return x


async def query(a: int = Query(3)) -> int:
    """d"""
    return a


async def body(b: dict = Body(...)) -> int:  # noqa: B008 - the FastAPI form a user would write
    """d"""
    return 1


async def annotated_query(a: Annotated[int, Query()] = 3) -> int:
    """d"""
    return a


async def agen():
    """d"""
    yield 1


def gen():
    """d"""
    yield 1


async def clash(project_id: str, task: Annotated[Shared, Flatten]) -> dict:
    """d"""
    return {}


async def optional_flatten(task: Annotated[Shared | None, Flatten] = None) -> dict:
    """d"""
    return {}


@pytest.mark.parametrize(("fn", "says"), [
    (weird, "parameter 'x' has the type Weird, which pydantic cannot validate"),
    (weird_in_list, "parameter 'x' has the type Weird"),
    (weird_in_dataclass, "parameter 'x' has the type HoldsWeird"),
    (positional_only, "parameter 'x' is positional-only"),
    (query, "FastAPI's Query(...)"),
    (body, "FastAPI's Body(...)"),
    (annotated_query, "FastAPI's Query(...)"),
    (agen, "a generator cannot be an action"),
    (gen, "a generator cannot be an action"),
    (clash, "clashes with another parameter"),
    (optional_flatten, "parameter 'task': Flatten spreads a pydantic model's fields"),
    (functools.partial(positional_only, 1), "an action's handler is a function or method"),
])
def test_a_declaration_mistake_fails_at_once_naming_it(fn, says):
    with pytest.raises(TypeError) as refused:
        Tool("t", description="x").action(name="a")(fn)
    assert says in str(refused.value)
    if not isinstance(fn, functools.partial):
        assert fn.__qualname__ in str(refused.value)


async def test_the_usual_types_are_accepted_and_listed():
    tool = Tool("fine", description="x")

    @tool.action(readonly=True)
    async def everything(a: int, when: dt.datetime | None = None, ids: list[uuid.UUID] | None = None,
                         point: Point | None = None, color: Color = Color.RED, mode: Literal["x", "y"] = "x",
                         custom: Annotated[Weird | None, PlainValidator(lambda v: v)] = None,
                         x_tenant: str = Header("acme")) -> dict:
        """Everything"""
        return {"a": a, "point": dataclasses.asdict(point) if point else None, "color": color.value}

    fusion = MCPFusion("fine", tools=[tool])
    listed = fusion.registry.mcp_tools()
    assert listed and "point" in str(listed[0]["inputSchema"])
    called = await ToolTester(fusion.registry).call("fine", "everything", {"a": 1, "point": {"x": 1, "y": 2}})
    assert called.data == {"a": 1, "point": {"x": 1, "y": 2}, "color": "red"}


def test_prompt_and_completion_mistakes_fail_at_declaration_or_build():
    fusion = MCPFusion("p", tools=[])

    @fusion.prompt()
    def greet(name: str) -> str:
        """Greet"""
        return f"hi {name}"

    with pytest.raises(ValueError, match="duplicate prompt name 'greet'"):
        fusion.prompt(name="greet")(lambda: "again")
    fusion.completion(argument="nmae", prompt="greet")(lambda value: ["ann"])
    with pytest.raises(ValueError, match="the prompt 'greet' takes name"):
        fusion.build_app()
    other = MCPFusion("q", tools=[])
    other.completion(argument="id", resource_template="notes://{id}")(lambda value: [])
    with pytest.raises(ValueError, match="there is no resource template 'notes://{id}'"):
        other.build_app()


def test_a_paginated_action_returning_one_object_is_refused():
    tool = Tool("t", description="x")

    async def one() -> dict:
        """One"""
        return {}

    with pytest.raises(ValueError, match="one is paginated but returns one dict"):
        tool.action(readonly=True, paginate=2)(one)


@pytest.mark.parametrize(("schema", "says"), [
    ({"type": "strin"}, "is not a valid JSON schema"),
    ({"type": "array", "items": {"type": "integer"}}, "must be an object schema"),
    ({"properties": {"a": {"type": "integer"}}}, "must be an object schema"),
])
def test_an_output_schema_that_cannot_serve_is_refused_at_declaration(schema, says):
    tool = Tool("t", description="T")
    with pytest.raises(ValueError, match=f"<locals>.get: output_schema {says}"):
        @tool.action(readonly=True, output_schema=schema)
        async def get() -> dict:
            """Get"""
            return {}

    fusion = MCPFusion("s")
    with pytest.raises(ValueError, match=f"raw_tool 'raw': output_schema {says}"):
        @fusion.raw_tool("raw", output_schema=schema)
        async def raw() -> str:
            return "x"


def test_a_raw_tool_cannot_take_an_actions_mcp_name_nor_the_reverse():
    tool = Tool("t", description="T", exposition="flat")

    @tool.action(readonly=True)
    async def void(id: str) -> dict:
        """Void"""
        return {"id": id}

    fusion = MCPFusion("s", tools=[tool])
    with pytest.raises(ValueError, match="raw_tool 't_void': an action is already served under this MCP tool name"):
        @fusion.raw_tool("t_void")
        async def raw() -> str:
            return "raw"

    other = MCPFusion("s2")

    @other.raw_tool("t_void")
    async def first() -> str:
        return "raw"

    with pytest.raises(ValueError, match=r"MCP tool name\(s\) \['t_void'\] of tool 't' are already raw tools"):
        other.add_tool(tool)


@pytest.mark.parametrize(("template", "says"), [
    ("Void invoice {idx}?", "names {idx}, which the action does not take (it takes id, reason)"),
    ("Void {id.upper}, {missing[0]}?", "names {missing}"),
    ("Void {id?", "is not a valid template"),
])
def test_a_confirm_template_naming_what_the_action_does_not_take_is_refused(template, says):
    tool = Tool("t", description="T")
    with pytest.raises(ValueError, match=re.escape(f"t/void: confirm={template!r} {says}")):
        @tool.action(destructive=True, confirm=template)
        async def void(id: str, reason: str = "") -> dict:
            """Void"""
            return {"id": id}


class Money:
    pass


class Price(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    amount: Money


def test_an_output_model_without_a_json_schema_is_refused_at_declaration():
    """A field type with no JSON schema: no outputSchema could be listed, and the first tools/list (and
    /openapi.json) would fail for every tool of the server."""
    from mcpfusion import Presenter

    tool = Tool("shop", description="Shop")
    with pytest.raises(TypeError, match="price: the output model Price has no JSON schema"):
        @tool.action(readonly=True)
        async def price() -> Price:
            """Price"""
            return Price(amount=Money())

    with pytest.raises(TypeError, match="presenter 'price': the output model Price has no JSON schema"):
        Presenter("price").schema(Price)


@pytest.mark.parametrize(("build", "says"), [
    (lambda p: p.ui("table"), "Presenter.ui() takes a function"),
    (lambda p: p.collection_ui(None), "Presenter.collection_ui() takes a function"),
    (lambda p: p.suggest(["crm.get"]), "Presenter.suggest() takes a function"),
    (lambda p: p.attach("doc"), "Presenter.attach() takes a function"),
    (lambda p: p.limit("5"), "Presenter.limit() takes a whole number"),
    (lambda p: p.limit(True), "Presenter.limit() takes a whole number"),
    (lambda p: p.limit(0), "Presenter.limit() takes a whole number"),
])
def test_a_presenter_builder_given_what_can_never_work_says_so_at_once(build, says):
    from mcpfusion import Presenter

    with pytest.raises((TypeError, ValueError), match=re.escape(says)):
        build(Presenter("p").schema({"id": str}))


def test_http_responses_are_refused_as_an_actions_return_or_parameter():
    """FastAPI's Response (a return value, or a parameter to set headers on) means nothing to an agent: refused
    when declared, naming what to do, rather than a 500 on every call or headers silently dropped."""

    tool = Tool("t", description="T")

    async def made() -> JSONResponse:
        """Made."""
        return JSONResponse({"a": 1})

    async def headers(response: Response) -> dict:
        """Headers."""
        response.headers["x-a"] = "1"
        return {}

    with pytest.raises(TypeError, match="returns a JSONResponse.*return the data itself"):
        tool.action(readonly=True)(made)
    with pytest.raises(TypeError, match="parameter 'response' is a Response.*return the data"):
        tool.action(readonly=True)(headers)


def test_a_refused_query_parameter_is_told_its_own_type():
    tool = Tool("t", description="T")

    async def find(filters: dict[str, int] = Query(default={})) -> dict:  # noqa: B008
        """Find."""
        return filters

    with pytest.raises(TypeError, match=r"filters: dict\[str, int\] = \.\.\."):
        tool.action(readonly=True)(find)
