"""Declarations that stress the compact grouped schema: shared parameters of different types and enums,
optional and nullable parameters, flattened models, nested, recursive and union models, constraints."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from mcpfusion import Model, Tool


class Item(BaseModel):
    sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d+$", examples=["ABC-1"])]
    qty: Annotated[int, Field(ge=1, le=99)] = 1
    tags: list[str] = []


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


class Circle(BaseModel):
    kind: Literal["circle"]
    radius: Annotated[float, Field(gt=0)]


class Square(BaseModel):
    kind: Literal["square"]
    side: Annotated[float, Field(gt=0)]


class Order(BaseModel):
    id: str
    customer: str
    note: str | None = None
    total_cents: int = 0
    secret: str = ""


OrderModel = Model(Order, hidden=["secret"], guarded=["id", "total_cents"],
                   fillable={"create": ["customer", "note"], "update": ["note"]})

shapes = Tool("shapes", description="Shared parameters of every kind", toon_description=True)


@shapes.action(readonly=True)
async def a(
    status: Literal["x", "y"] | None = None,
    n: int = 0,
    text: Annotated[str, Field(max_length=10, description="Short text.")] = "",
    limit: int | None = 10,
    day: dt.date | None = None,
):
    """Optional everything."""


@shapes.action()
async def b(
    status: Literal["y", "z"],
    n: str,
    text: Annotated[str, Field(min_length=2, max_length=20, description="Longer text.")],
    note: str | None,
    flag: bool = False,
):
    """Required everything, other types."""


@shapes.action(idempotent=True)
async def c(item: Item, items: Annotated[list[Item], Field(max_length=3)] = [], ratio: float = 0.5):  # noqa: B006
    """Nested models."""


@shapes.action(destructive=True)
async def d(tree: Tree, shape: Circle | Square, mapping: dict[str, int] | None = None, only: Literal["only"] = "only"):
    """Recursive and union models."""


@shapes.action(open_world=True)
async def e(order: OrderModel.input_model("create"), n: Annotated[int, Field(ge=0, le=5)] = 1):  # type: ignore[valid-type]
    """A flattened model input (guarded and hidden fields refused)."""


@shapes.action()
async def f(order: OrderModel.input_model("update"), status: Literal["x", "z", "w"] = "x"):  # type: ignore[valid-type]
    """A partial flattened model input."""


plain = Tool("plain", description="Plain grouped description, `_select` on", select=True)


@plain.action(readonly=True)
async def first(q: Annotated[str | None, Field(max_length=5)] = None, page: Annotated[int, Field(ge=1)] = 1):
    """First."""


@plain.action(readonly=True)
async def second(q: Annotated[str, Field(max_length=8)], page: int | None = None):
    """Second."""


TOOLS = [shapes, plain]
