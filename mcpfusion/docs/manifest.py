"""The manifest: everything the docs page shows, as JSON (`/tools.json`) or TOON (`/tools.toon`).

The HTML page is rendered from this manifest and nothing else, so the two never disagree.
"""

from __future__ import annotations

import logging
from typing import Any

import toons

from .. import listing, tokens, toon
from ..dispatch import CallContext, ToolRegistry
from ..tool import Action, Tool
from ..version import __version__
from . import economy, examples, presenters
from .lock import pagination, paging_text
from .schema_table import rows

logger = logging.getLogger("mcpfusion.docs")
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
Memo = dict[tuple[int, bool | None], dict[str, Any]]  # (id of a presenter, how it is sampled) -> its description


def _toon_table(text: str) -> list[dict[str, Any]]:
    """The action table decoded back from the TOON description text (strict decoder)."""
    try:
        decoded = toons.loads(text.rsplit("\n\n", 1)[-1])
    except Exception:  # never expected: the encoder's output is valid TOON; show the text alone then
        logger.warning("TOON description did not decode", exc_info=True)
        return []
    return decoded if isinstance(decoded, list) else []


def paging(action: Action) -> dict[str, Any] | None:
    """How the action pages (as the lockfile pins it) with a line saying how to walk the pages; None: it
    answers whole."""
    pinned = pagination(action)
    if pinned is None:
        return None
    return {**pinned, "summary": f"paginated, {paging_text(pinned)}: follow next_cursor (REST: the Next-Cursor "
                                 "header) as the cursor parameter until there is none"}


def action_entry(action: Action, curl_base: str, memo: Memo | None = None,
                 registry: ToolRegistry | None = None) -> dict[str, Any]:
    ctx = CallContext(action, {}, None)
    memo = {} if memo is None else memo  # one description per presenter and shape, however many actions share it
    shape = presenters.many(action)
    for p in action.presenters:
        if (id(p), shape) not in memo:
            memo[(id(p), shape)] = presenters.describe(p, ctx, shape)
    arguments = examples.example_arguments(action)
    return {
        "name": action.name,
        "qualified_name": action.qualified_name,
        "title": action.title,
        "description": action.description,
        "annotations": action.annotations(),
        "guards": registry.guards_of(action) if registry is not None else [],
        "scopes": sorted(action.scopes),
        "mcp_name": listing.mcp_name(action),
        "discriminated": listing.discriminated(action),
        "rest_path": examples.rest_path(action),
        "parameters": rows(action.input_schema),
        "input_schema": action.input_schema,
        "output_schema": action.output_schema,
        "content_types": sorted(action.content_types or ()),
        "pagination": paging(action),
        "presenters": [memo[(id(p), shape)] for p in action.presenters],
        "presenter_by_dependency": action.presenter_dependency is not None,
        "example_arguments": arguments,
        "examples": {
            "mcp": examples.mcp_call(action, arguments),
            "curl": examples.curl(examples.rest_path(action), arguments, curl_base),
        },
        "tokens": economy.action_economy(action, ctx) if tokens.enabled() else None,
    }


def tool_entry(tool: Tool, curl_base: str, memo: Memo | None = None,
               registry: ToolRegistry | None = None) -> dict[str, Any]:
    text = economy.toon_description(tool)
    advertised = listing.tool_entries(tool)
    if registry is not None and not registry.output_schemas:  # as tools/list advertises them then
        advertised = [{k: v for k, v in e.items() if k != "outputSchema"} for e in advertised]
    return {
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "tags": list(tool.tags),
        "exposition": tool.exposition,
        "select": tool.select,
        "select_keys": tool.select_keys() if tool.select else [],
        "toon_description": {
            "text": text,
            "table": _toon_table(text),
            "advertised": tool.toon_description and any(e.action is None for e in listing.exposed(tool)),
        },
        "annotations": tool.annotations(),
        "mcp_tools": advertised,
        "tokens": economy.advertised_economy(tool, advertised) if tokens.enabled() else None,
        "actions": [action_entry(a, curl_base, memo, registry) for a in tool.actions.values()],
    }


def build_manifest(
    registry: ToolRegistry, *, title: str = "Tools", curl_base: str = DEFAULT_BASE_URL
) -> dict[str, Any]:
    """The manifest of every registered tool. `curl_base` is the server URL written into curl examples."""
    memo: Memo = {}
    return {
        "title": title,
        "generator": f"mcpfusion {__version__}",
        "token_encoding": tokens.ENCODING if tokens.enabled() else None,
        "tools": [tool_entry(t, curl_base, memo, registry) for t in registry.tools.values() if t.actions],
    }


def rebase(manifest: dict[str, Any], curl_base: str) -> dict[str, Any]:
    """The same manifest with its curl examples aimed at `curl_base` (cheap: no token counting again)."""
    tools = []
    for tool in manifest["tools"]:
        actions = []
        for a in tool["actions"]:
            curl = examples.curl(a["rest_path"], a["example_arguments"], curl_base)
            actions.append({**a, "examples": {**a["examples"], "curl": curl}})
        tools.append({**tool, "actions": actions})
    return {**manifest, "tools": tools}


def manifest_toon(manifest: dict[str, Any]) -> str:
    """The manifest in TOON (pipe delimiter), decodable by the official `toon-format` package."""
    return toon.encode(manifest)
