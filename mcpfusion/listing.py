"""How tools look on the MCP wire: their MCP names and their `tools/list` entries, grouped (one MCP tool
with an `action` discriminator), flat (one MCP tool per action) or by annotation profile (one MCP tool per
group of actions sharing their key hints). The one place that builds them; the schemas inside come from the
tool's declarations, compacted by `mcpfusion.exposition`.

A caller may see only some actions (`mcpfusion.authorization`: scopes): `restricted` keeps the others out of
the MCP tools that serve them, under the same names (a caller's scopes never rename or regroup a tool).

Nothing here is cached: the engine keeps the cached listings of a server (`Engine.invalidate_tools`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from . import exposition
from .tool import Action, Tool


def flat_name(tool_name: str, action_name: str) -> str:
    """The MCP tool name of one action under the flat exposition."""
    return f"{tool_name}_{action_name}"


class Exposed(NamedTuple):
    """One MCP tool of the listing: its name, the tool (or the group of its actions) behind it, and its only
    action when it takes no `action` discriminator."""

    name: str
    tool: Tool
    action: Action | None


def _view(tool: Tool, name: str, actions: list[Action], profile: str | None = None) -> Tool:
    """`tool` restricted to some actions, advertised under `name` (a group of the profiles exposition), titled
    after its `profile` when it has one (`Billing (read)`): a client shows each MCP tool by its title."""
    view = copy.copy(tool)
    view.name = name
    view.actions = {a.name: a for a in actions}
    if profile is not None and tool.title:
        view.title = f"{tool.title} ({profile.replace('_', ' ')})"
    return view


def exposed(tool: Tool) -> list[Exposed]:
    """The MCP tools `tool` is advertised as.

    grouped: one tool named after it, with the `action` discriminator. flat: `{tool}_{action}` per action.
    profiles: the actions grouped by the tool's `profile_hints` (by default reads apart from writes,
    destructive writes apart from the others), so those hints are each action's own: a group of several is
    `{tool}_{profile}` (e.g. `billing_read`, titled `Billing (read)`) with the discriminator, a group of one is
    `{tool}_{action}` (titled as the action); a tool of one profile keeps the grouped form.
    """
    actions = list(tool.actions.values())
    if not actions:
        return []
    if tool.exposition == "flat":
        groups = [[a] for a in actions]
    elif tool.exposition == "profiles":
        by_profile: dict[Any, list[Action]] = {}
        for action in actions:
            by_profile.setdefault(exposition.profile(action.annotations(), tool.profile_hints), []).append(action)
        groups = list(by_profile.values())
    else:
        groups = [actions]
    if len(groups) == 1 and tool.exposition != "flat":
        return [Exposed(tool.name, tool, None)]
    out = []
    for group in groups:
        if len(group) == 1:
            out.append(Exposed(flat_name(tool.name, group[0].name), _view(tool, tool.name, group), group[0]))
        else:
            profile = exposition.profile_name(group[0].annotations(), tool.profile_hints)
            name = flat_name(tool.name, profile)
            out.append(Exposed(name, _view(tool, name, group, profile), None))
    names = [e.name for e in out]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(f"tool {tool.name!r}: MCP tool name(s) {clash} advertised twice; rename an action")
    return out


def serving(action: Action) -> Exposed:
    """The MCP tool of the listing that serves `action`."""
    return next(e for e in exposed(action.tool) if action.name in e.tool.actions)


def mcp_name(action: Action) -> str:
    """The MCP tool name `tools/call` uses for `action`."""
    return serving(action).name


def discriminated(action: Action) -> bool:
    """Whether `tools/call` reaches `action` with the `action` discriminator."""
    return serving(action).action is None


def how_to_call(action: Action) -> str:
    """How the agent calls `action`, for notices: "billing with action list_invoices" or "billing_list"."""
    name = mcp_name(action)
    return f"{name} with action {action.name}" if discriminated(action) else name


def flat_entries(tool: Tool) -> list[dict[str, Any]]:
    """`tools/list` entries of one MCP tool per action (without discriminator)."""
    out = []
    for action in tool.actions.values():
        entry: dict[str, Any] = {
            "name": flat_name(tool.name, action.name),
            "description": action.description or tool.description,
            "inputSchema": action.advertised_input_schema(),
        }
        hints = exposition.compact_annotations(action.annotations())
        if hints:
            entry["annotations"] = hints
        if action.title:
            entry["title"] = action.title
        output = action.advertised_output_schema()
        if output:
            entry["outputSchema"] = output
        out.append(entry)
    return out


def grouped_entry(tool: Tool, description: str | None = None) -> dict[str, Any]:
    """The `tools/list` entry of the grouped exposition: one MCP tool with an `action` discriminator."""
    schema = tool.grouped_input_schema()
    entry: dict[str, Any] = {
        "name": tool.name,
        "description": description if description is not None else tool.grouped_description(schema),
        "inputSchema": schema,
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


def restricted(entry: Exposed, allows: Callable[[Action], bool]) -> Tool | None:
    """The tool behind `entry` with only the actions `allows` lets a caller see (`entry.tool` itself when it
    keeps them all), or None when it keeps none."""
    actions = [a for a in entry.tool.actions.values() if allows(a)]
    if len(actions) == len(entry.tool.actions):
        return entry.tool
    return _view(entry.tool, entry.name, actions) if actions else None


def tool_entries(tool: Tool, allows: Callable[[Action], bool] | None = None) -> list[dict[str, Any]]:
    """The `tools/list` entries one tool contributes under its exposition (none without actions), with only
    the actions `allows` (None: all of them)."""
    out: list[dict[str, Any]] = []
    for entry in exposed(tool):
        view = entry.tool if allows is None else restricted(entry, allows)
        if view is not None:
            out += flat_entries(view) if entry.action is not None else [grouped_entry(view)]
    return out


def entries(tools: Iterable[Tool], allows: Callable[[Action], bool] | None = None) -> list[dict[str, Any]]:
    """The `tools/list` entries of several tools, in order (with only the actions `allows`)."""
    return [entry for tool in tools for entry in tool_entries(tool, allows)]
