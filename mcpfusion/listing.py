"""How tools look on the MCP wire: their MCP names and their `tools/list` entries, grouped (one MCP tool
with an `action` discriminator) or flat (one MCP tool per action). The one place that builds them; the
schemas inside come from the tool's declarations, compacted by `mcpfusion.exposition`.

Nothing here is cached: the engine keeps the one cached listing of a server (`Engine.invalidate_tools`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import exposition
from .tool import Action, Tool


def flat_name(tool_name: str, action_name: str) -> str:
    """The MCP tool name of one action under the flat exposition."""
    return f"{tool_name}_{action_name}"


def mcp_name(action: Action) -> str:
    """The MCP tool name `tools/call` uses for `action` (the tool's own name when grouped)."""
    tool = action.tool
    return flat_name(tool.name, action.name) if tool.exposition == "flat" else tool.name


def how_to_call(action: Action) -> str:
    """How the agent calls `action`, for notices: "billing with action list_invoices" or "billing_list"."""
    name = mcp_name(action)
    return name if action.tool.exposition == "flat" else f"{name} with action {action.name}"


def flat_entries(tool: Tool) -> list[dict[str, Any]]:
    """`tools/list` entries of the flat exposition: one MCP tool per action."""
    out = []
    for action in tool.actions.values():
        entry: dict[str, Any] = {
            "name": flat_name(tool.name, action.name),
            "description": action.description or tool.description,
            "inputSchema": exposition.action_input_schema(action.input_schema),
        }
        hints = exposition.compact_annotations(action.annotations())
        if hints:
            entry["annotations"] = hints
        if action.title:
            entry["title"] = action.title
        if action.output_schema:
            entry["outputSchema"] = action.output_schema
        out.append(entry)
    return out


def grouped_entry(tool: Tool, description: str | None = None) -> dict[str, Any]:
    """The `tools/list` entry of the grouped exposition: one MCP tool with an `action` discriminator."""
    entry: dict[str, Any] = {
        "name": tool.name,
        "description": description if description is not None else tool.grouped_description(),
        "inputSchema": tool.grouped_input_schema(),
    }
    hints = exposition.compact_annotations(tool.annotations())
    if hints:
        entry["annotations"] = hints
    if tool.title:
        entry["title"] = tool.title
    output = tool.grouped_output_schema()
    if output:
        entry["outputSchema"] = output
    return entry


def tool_entries(tool: Tool) -> list[dict[str, Any]]:
    """The `tools/list` entries one tool contributes under its exposition (none without actions)."""
    if not tool.actions:
        return []
    return flat_entries(tool) if tool.exposition == "flat" else [grouped_entry(tool)]


def entries(tools: Iterable[Tool]) -> list[dict[str, Any]]:
    """The `tools/list` entries of several tools, in order."""
    return [entry for tool in tools for entry in tool_entries(tool)]
