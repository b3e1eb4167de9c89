"""A server with 100 tools of 5 actions each (`bench/cold_start.py`): typed parameters with descriptions,
defaults and constraints, a read-only list/get pair, writes with a model body, one presenter per tool.

    uvicorn many_tools_server:app --app-dir bench
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from mcpfusion import Presenter, Tool
from mcpfusion.app import MCPFusion

TOOLS = 100


class Item(BaseModel):
    id: str = Field(description="Item id")
    name: str = Field(min_length=1, max_length=200, description="Display name")
    status: Literal["active", "archived"] = "active"
    amount_cents: int = Field(0, ge=0, description="Amount in CENTS")


class ItemCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    amount_cents: int = Field(0, ge=0)


def make_tool(n: int) -> Tool:
    """Tool `area{n}` with list, get, create, update and archive."""
    tool = Tool(f"area{n}", description=f"Items of area {n}")
    presenter = Presenter(f"item{n}").schema(Item).rules([f"Amounts of area {n} are in CENTS."])
    store: dict[str, dict[str, Any]] = {"i1": {"id": "i1", "name": "first", "status": "active", "amount_cents": 100}}

    @tool.action(readonly=True, returns=presenter)
    async def list_items(
        status: Annotated[Literal["active", "archived"] | None, Field(description="Only this status")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many")] = 20,
    ) -> list[dict[str, Any]]:
        """List items"""
        return [i for i in store.values() if status is None or i["status"] == status][:limit]

    @tool.action(readonly=True, returns=presenter)
    async def get_item(id: Annotated[str, Field(description="Item id, e.g. i1", max_length=40)]) -> dict[str, Any]:
        """Get one item"""
        return store[id]

    @tool.action(returns=presenter)
    async def create_item(item: ItemCreate) -> dict[str, Any]:
        """Create an item"""
        new = {"id": f"i{len(store) + 1}", "status": "active", **item.model_dump()}
        store[new["id"]] = new
        return new

    @tool.action(idempotent=True, returns=presenter)
    async def rename_item(id: Annotated[str, Field(max_length=40)], name: Annotated[str, Field(min_length=1)]
                          ) -> dict[str, Any]:
        """Rename an item"""
        store[id]["name"] = name
        return store[id]

    @tool.action(destructive=True, returns=presenter)
    async def archive_item(id: Annotated[str, Field(max_length=40)], reason: str = "") -> dict[str, Any]:
        """Archive an item"""
        store[id]["status"] = "archived"
        return store[id]

    return tool


fusion = MCPFusion(name="bench-many-tools", version="1.0.0", tools=[make_tool(n) for n in range(TOOLS)])
app = fusion.build_app()
