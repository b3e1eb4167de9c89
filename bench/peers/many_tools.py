"""Peers of `bench/many_tools_server.py` for `bench/cold_start.py`: the same 100 x 5 actions declared in
FastMCP (`BENCH_PEER=fastmcp`) or the official SDK's `MCPServer` (`BENCH_PEER=sdk`), one tool per action
(neither groups actions into a tool): same parameter types, constraints, defaults and descriptions, same
annotations, typed returns (their output schemas), JSON replies. `app` is the server's ASGI application.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

TOOLS = 100
PEER = os.environ.get("BENCH_PEER", "fastmcp")


class Item(BaseModel):
    id: str = Field(description="Item id")
    name: str = Field(min_length=1, max_length=200, description="Display name")
    status: Literal["active", "archived"] = "active"
    amount_cents: int = Field(0, ge=0, description="Amount in CENTS")


class ItemCreate(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    amount_cents: int = Field(0, ge=0)


def hints(*, readonly: bool = False, destructive: bool = False, idempotent: bool = False) -> ToolAnnotations:
    """The annotations mcpfusion advertises for the same declaration (open-world unless said otherwise)."""
    return ToolAnnotations(readOnlyHint=readonly, destructiveHint=destructive, idempotentHint=idempotent,
                           openWorldHint=True)


def add_area(server: Any, n: int) -> None:
    """Tools `area{n}_list_items`, `_get_item`, `_create_item`, `_rename_item` and `_archive_item`."""
    store: dict[str, dict[str, Any]] = {"i1": {"id": "i1", "name": "first", "status": "active", "amount_cents": 100}}
    tool = server.tool

    @tool(name=f"area{n}_list_items", description="List items", annotations=hints(readonly=True))
    async def list_items(
        status: Annotated[Literal["active", "archived"] | None, Field(description="Only this status")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many")] = 20,
    ) -> list[Item]:
        return [Item(**i) for i in store.values() if status is None or i["status"] == status][:limit]

    @tool(name=f"area{n}_get_item", description="Get one item", annotations=hints(readonly=True))
    async def get_item(id: Annotated[str, Field(description="Item id, e.g. i1", max_length=40)]) -> Item:
        return Item(**store[id])

    @tool(name=f"area{n}_create_item", description="Create an item", annotations=hints(destructive=True))
    async def create_item(item: ItemCreate) -> Item:
        new = {"id": f"i{len(store) + 1}", "status": "active", **item.model_dump()}
        store[new["id"]] = new
        return Item(**new)

    @tool(name=f"area{n}_rename_item", description="Rename an item",
          annotations=hints(destructive=True, idempotent=True))
    async def rename_item(id: Annotated[str, Field(max_length=40)], name: Annotated[str, Field(min_length=1)]) -> Item:
        store[id]["name"] = name
        return Item(**store[id])

    @tool(name=f"area{n}_archive_item", description="Archive an item", annotations=hints(destructive=True))
    async def archive_item(id: Annotated[str, Field(max_length=40)], reason: str = "") -> Item:
        store[id]["status"] = "archived"
        return Item(**store[id])


if PEER == "sdk":
    from mcp.server.mcpserver import MCPServer

    sdk = MCPServer("bench-many-tools")
    for n in range(TOOLS):
        add_area(sdk, n)
    app = sdk.streamable_http_app(json_response=True)
else:
    from fastmcp import FastMCP

    fast = FastMCP("bench-many-tools")
    for n in range(TOOLS):
        add_area(fast, n)
    app = fast.http_app(path="/mcp", json_response=True)
