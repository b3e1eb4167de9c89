"""Search by name and tag; the same rule runs in the page's script (static/docs.js) and on the server for
`/tools?q=` (so the search box also works with JavaScript off)."""

from __future__ import annotations

from typing import Any


def terms(query: str) -> list[str]:
    return [t for t in query.lower().split() if t]


def tool_keys(tool: dict[str, Any]) -> str:
    """What a tool is found by: its name and its tags. An MCP tool's name is a key of the actions it serves
    (`action_keys`), never of the whole tool: under `exposition="profiles"` `billing_write` finds the actions
    `billing_write` serves, not the read-only ones of `billing_read`."""
    return " ".join([tool["name"], *tool.get("tags", ())]).lower()


def action_keys(action: dict[str, Any]) -> str:
    """What an action is found by: its name, qualified name and MCP name."""
    return " ".join((action["name"], action["qualified_name"], action["mcp_name"])).lower()


def _hit(keys: str, words: list[str]) -> bool:
    return all(w in keys for w in words)


def filter_manifest(manifest: dict[str, Any], query: str) -> dict[str, Any]:
    """Tools matching every term (all their actions), else only the matching actions of a tool."""
    words = terms(query)
    if not words:
        return manifest
    kept = []
    for tool in manifest["tools"]:
        if _hit(tool_keys(tool), words):
            kept.append(tool)
            continue
        actions = [a for a in tool["actions"] if _hit(tool_keys(tool) + " " + action_keys(a), words)]
        if actions:
            kept.append({**tool, "actions": actions})
    return {**manifest, "tools": kept}
