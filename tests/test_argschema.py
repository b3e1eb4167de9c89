"""An action's input schema put together from fields other actions had (`mcpfusion.argschema`) is pydantic's
own schema of its argument model, byte for byte, and listing a server whose actions repeat their parameters
makes no argument model; the first call makes it and validates as before."""

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from mcpfusion import MCPFusion, Tool
from mcpfusion.argschema import field_key
from mcpfusion.errors import ValidationFailed
from mcpfusion.schema import lean
from mcpfusion.tool import Action

ROOT = Path(__file__).resolve().parents[1]


def pydantic_own(action: Action) -> tuple[str, list[str]]:
    """What the action advertised before: the lean schema of its model, its required fields."""
    model = action.args_model
    required = [n for n, f in model.model_fields.items() if f.is_required()]
    return json.dumps(lean(model.model_json_schema())), required


def check(actions: list[Action]) -> int:
    """Each action's schema and required fields as pydantic makes them; how many were put together."""
    composed = 0
    for action in actions:
        got = action.arguments
        composed += "args_model" not in vars(action)
        assert (json.dumps(got.schema), list(got.required)) == pydantic_own(action), action.label
    return composed


class Body(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    amount_cents: int = Field(0, ge=0)


def twins(n: int) -> Tool:
    """A tool whose parameters have the same names, types, constraints and defaults in every copy (new
    `Field` objects each time, as a factory of tools makes them; one body class)."""

    tool = Tool(f"twin{n}", description="Twins")

    @tool.action(readonly=True)
    async def search(status: Annotated[Literal["open", "paid"] | None, Field(description="Only this")] = None,
                     limit: Annotated[int, Field(ge=1, le=100)] = 20, tags: list[str] | None = None) -> dict[str, Any]:
        """Search"""
        return {}

    @tool.action()
    async def create(body: Body, note: str = "") -> dict[str, Any]:
        """Create"""
        return {}

    @tool.action()
    async def ping() -> dict[str, Any]:
        """No parameters"""
        return {}

    return tool


def test_repeated_parameters_are_put_together_as_pydantic_writes_them():
    tools = [twins(n) for n in range(4)]
    first = check(list(tools[0].actions.values()))
    rest = check([a for t in tools[1:] for a in t.actions.values()])
    assert first <= 1  # only `ping` (no field) can be known before any model of this file is made
    assert rest == 9  # every action of the copies


def test_the_reference_service_and_the_bench_server_advertise_pydantic_own_schemas():
    from mcpfusion.cli import load

    _, fusion = load("app.main:app", str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import many_tools_server
    finally:
        sys.path.remove(str(ROOT / "bench"))
    bench = [a for t in many_tools_server.fusion.registry.tools.values() for a in t.actions.values()]
    check([a for t in fusion.registry.tools.values() for a in t.actions.values() if a.json_schema is None])
    assert check(bench) >= len(bench) - 5


def declared(*handlers: Any) -> list[Action]:
    tool = Tool("edge", description="Edge cases")
    for fn in handlers:
        tool.action()(fn)
    return list(tool.actions.values())


def test_values_that_compare_equal_but_are_written_differently_are_not_shared():
    async def one(x: Literal[1] = 1) -> None:
        """Literal 1"""

    async def true(x: Literal[True] = True) -> None:
        """Literal True: True == 1, but JSON writes them differently"""

    async def zero(y: float = 0.0) -> None:
        """0.0"""

    async def minus(y: float = -0.0) -> None:
        """-0.0 == 0.0"""

    async def described(y: Annotated[float, Field(description="Y")] = 0.0) -> None:
        """Another description"""

    actions = declared(one, true, zero, minus, described)
    assert check(actions) == 0
    schemas = [a.arguments.schema["properties"] for a in actions]
    assert schemas[1]["x"] == {"const": True, "default": True, "type": "boolean"}
    assert json.dumps(schemas[3]["y"]["default"]) == "-0.0"
    assert schemas[4]["y"]["description"] == "Y"


def test_two_models_of_one_name_get_pydantic_own_names():
    def item_v1() -> type[BaseModel]:
        class Item(BaseModel):
            id: str

        return Item

    def item_v2() -> type[BaseModel]:
        class Item(BaseModel):
            id: int
            label: str

        return Item

    v1, v2, v1_again = item_v1(), item_v2(), item_v1()

    async def first(item: v1) -> None:  # type: ignore[valid-type]
        """Known as Item"""

    async def second(other: v2) -> None:  # type: ignore[valid-type]
        """Another Item"""

    async def both(item: v1, other: v2) -> None:  # type: ignore[valid-type]
        """Both fields known, their definitions clash: pydantic renames them"""

    async def same(item: v1, twin: v1_again) -> None:  # type: ignore[valid-type]
        """Two classes of one name and one schema: pydantic writes one definition"""

    async def same_again(item: v1, twin: v1_again) -> None:  # type: ignore[valid-type]
        """The same fields, both known now"""

    actions = declared(first, second, both, same, same_again)
    assert check(actions[:2]) == 0
    assert check(actions[2:3]) == 0  # both fields known, not put together: pydantic's own schema
    assert check(actions[3:4]) == 0  # `twin` is another class
    assert check(actions[4:]) == 1
    clash = actions[2].arguments.schema["$defs"]
    assert len(clash) == 2 and all("__" in name for name in clash)
    assert list(actions[4].arguments.schema["$defs"]) == ["Item"]


class Node(BaseModel):
    name: str
    children: list["Node"] = []  # noqa: UP037 - the class is not defined yet


def test_aliases_recursion_and_hidden_fields():
    async def tree(root: Node, label: Annotated[str, Field(alias="Label")] = "x") -> None:
        """A recursive model and an alias"""

    async def again(root: Node, label: Annotated[str, Field(alias="Label")] = "x") -> None:
        """The same fields"""

    async def hidden(secret: SkipJsonSchema[int] = 1, n: int = 2) -> None:
        """A field that is left out of its schema"""

    async def hidden_again(secret: SkipJsonSchema[int] = 1, n: int = 2) -> None:
        """The same"""

    actions = declared(tree, again, hidden, hidden_again)
    assert check(actions[:2]) == 1  # `again`
    assert check(actions[2:]) == 0  # a field without a property: never shared
    assert list(actions[1].arguments.schema["properties"]) == ["root", "Label"]
    assert list(actions[3].arguments.schema["properties"]) == ["n"]


def test_a_forward_reference_is_never_shared():
    assert field_key("x", list[int], 1) == field_key("x", list[int], 1)
    assert field_key("x", list[int], 1) != field_key("x", list[int], True)
    assert field_key("x", "list[int]", 1) is None
    assert field_key("x", list["Node"], None) is not None  # a string argument stays as pydantic reads it
    from typing import List  # noqa: UP035 - typing's alias turns the string into a ForwardRef

    assert field_key("x", List["Node"], None) is None  # noqa: UP006


async def test_listing_makes_no_argument_model_and_the_first_call_validates_as_before():
    fusion = MCPFusion(name="twins", version="1.0.0", tools=[twins(n) for n in range(10, 13)])
    listed = {t["name"]: t for t in fusion.registry.mcp_tools()}
    assert set(listed) == {"twin10", "twin11", "twin12"}
    copies = [a for name in ("twin11", "twin12") for a in fusion.registry.tools[name].actions.values()]
    assert not any("args_model" in vars(a) for a in copies)
    made, composed = fusion.registry.tools["twin10"].actions["search"], fusion.registry.tools["twin12"].actions["search"]
    for bad in ({"limit": 0}, {"status": "overdue", "extra": 1}, {"tags": "x"}):
        with pytest.raises(ValidationFailed) as made_error:
            made.validate(bad)
        with pytest.raises(ValidationFailed) as composed_error:
            composed.validate(bad)
        assert composed_error.value.fields == made_error.value.fields
    assert composed.validate({"limit": 5}) == {"status": None, "limit": 5, "tags": None}
