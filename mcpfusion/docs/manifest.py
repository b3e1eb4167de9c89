"""The manifest: everything the docs page shows, as JSON (`/tools.json`) or TOON (`/tools.toon`).

The HTML page is rendered from this manifest and nothing else, so the two never disagree.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import toons

from .. import inputschema, listing, tokens, toon
from ..dispatch import CallContext, ToolRegistry
from ..rest import sendable_media_types
from ..tool import Action, Tool
from ..version import __version__
from . import economy, examples, presenters, samples
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


def missing_examples(schema: dict[str, Any] | None, arguments: dict[str, Any]) -> list[str]:
    """The required parameters no example value was found for (the page asks the reader to fill them in)."""
    schema = schema or {}
    return [k for k in schema.get("required", []) if k in schema.get("properties", {}) and k not in arguments]


def raw_faults(schema: dict[str, Any]) -> samples.Faults | None:
    """The fields a raw tool's input schema refuses in a call (as its calls are checked); None when the
    schema cannot be read as one (it was checked when declared)."""
    try:
        validator = inputschema.input_validator(schema, "raw_tool")
    except Exception:
        return None
    return lambda arguments: [name for name, _ in inputschema.faults(validator, arguments)]


def action_entry(action: Action, curl_base: str, memo: Memo | None = None,
                 registry: ToolRegistry | None = None, *, rest: bool = True) -> dict[str, Any]:
    """The action's entry; without `rest` (mounted with `rest=False`) no REST path and no curl example, as the
    app serves no REST route."""
    ctx = CallContext(action, {}, None)
    memo = {} if memo is None else memo  # one description per presenter and shape, however many actions share it
    shape = presenters.many(action)
    for p in action.presenters:
        if (id(p), shape) not in memo:
            memo[(id(p), shape)] = presenters.describe(p, ctx, shape)
    arguments = examples.example_arguments(action)
    sent = examples.request_examples(action, registry)  # the headers and cookies its dependencies read (MCP's too)
    path = examples.rest_path(action) if rest else None
    media = sendable_media_types(action) if path is not None else None
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
        "rest_path": path,
        "rest_media_types": media,  # what its REST 200 may be (the try-it form asks for them)
        "parameters": rows(action.input_schema),
        "request_parameters": sent,
        "input_schema": action.input_schema,
        "output_schema": action.output_schema,
        "content_types": sorted(action.content_types or ()),
        "pagination": paging(action),
        "presenters": [memo[(id(p), shape)] for p in action.presenters],
        "presenter_by_dependency": action.presenter_dependency is not None,
        "example_arguments": arguments,
        "example_missing": missing_examples(action.input_schema, arguments),
        "examples": {
            "mcp": examples.mcp_call(action, arguments),
            "curl": examples.curl(path, arguments, curl_base, sent, media) if path is not None else None,
        },
        "tokens": economy.action_economy(action, ctx) if tokens.enabled() else None,
    }


def toon_entry(tool: Tool) -> dict[str, Any]:
    """The TOON description as `tools/list` advertises it: the tool's (grouped), or each group's under
    `exposition="profiles"` (`groups`: MCP tool and text; `text` shows them in turn, each after its tool's
    name; `table` every group's rows); when none is advertised, the tool's own, shown for comparison."""
    groups = economy.advertised_toon(tool)
    if len(groups) == 1 and groups[0][0] == tool.name:
        text = groups[0][1]
        return {"text": text, "table": _toon_table(text), "advertised": True, "groups": [
            {"mcp_tool": tool.name, "text": text}]}
    if not groups:
        text = economy.toon_description(tool)
        return {"text": text, "table": _toon_table(text), "advertised": False, "groups": []}
    return {"text": "\n\n".join(f"{name}: {text}" for name, text in groups),
            "table": [row for _, text in groups for row in _toon_table(text)], "advertised": True,
            "groups": [{"mcp_tool": name, "text": text} for name, text in groups]}


def tool_entry(tool: Tool, curl_base: str, memo: Memo | None = None,
               registry: ToolRegistry | None = None, *, rest: bool = True) -> dict[str, Any]:
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
        "toon_description": toon_entry(tool),
        "annotations": tool.annotations(),
        "mcp_tools": advertised,
        "tokens": economy.advertised_economy(tool, advertised) if tokens.enabled() else None,
        "actions": [action_entry(a, curl_base, memo, registry, rest=rest) for a in tool.actions.values()],
    }


def raw_tool_entry(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A raw tool (`MCPFusion.raw_tool`) as tools/list advertises it: MCP only (no REST route), its
    annotations those it declares (MCP's defaults apply to the others)."""
    schema = descriptor.get("inputSchema") or {}
    arguments = samples.arguments(schema, faults=raw_faults(schema))
    annotations = descriptor.get("annotations") or {}
    name = descriptor["name"]
    return {
        "name": name,
        "title": descriptor.get("title") or annotations.get("title"),
        "description": descriptor.get("description") or "",
        "annotations": annotations,
        "parameters": rows(schema),
        "input_schema": schema,
        "output_schema": descriptor.get("outputSchema"),
        "mcp_tool": descriptor,
        "example_arguments": arguments,
        "example_missing": missing_examples(schema, arguments),
        "examples": {"mcp": {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": name, "arguments": arguments}}},
        "tokens": tokens.count_json(descriptor) if tokens.enabled() else None,
    }


def raw_descriptors(source: Any) -> list[dict[str, Any]]:
    """The tools/list entries of the raw tools of an MCPFusion (or of the app it mounted); none for anything
    else (a registry, tools)."""
    fusion = getattr(getattr(source, "state", None), "mcpfusion", None) or source
    raw = getattr(fusion, "raw_tools", None)
    return [t.descriptor for t in raw.values()] if isinstance(raw, dict) else []


def build_manifest(
    registry: ToolRegistry, *, title: str = "Tools", curl_base: str = DEFAULT_BASE_URL,
    raw_tools: Iterable[dict[str, Any]] = (), rest: bool = True,
) -> dict[str, Any]:
    """The manifest of every registered tool and of the `raw_tools` (their tools/list entries: every tool the
    server advertises is documented). `curl_base` is the server URL written into curl examples; without `rest`
    (the app serves no REST routes) there are none."""
    memo: Memo = {}
    return {
        "title": title,
        "generator": f"mcpfusion {__version__}",
        "token_encoding": tokens.ENCODING if tokens.enabled() else None,
        "rest": rest,
        "tools": [tool_entry(t, curl_base, memo, registry, rest=rest) for t in registry.tools.values() if t.actions],
        "raw_tools": [raw_tool_entry(d) for d in raw_tools],
    }


def rebase(manifest: dict[str, Any], curl_base: str) -> dict[str, Any]:
    """The same manifest with its curl examples aimed at `curl_base` (cheap: no token counting again)."""
    tools = []
    for tool in manifest["tools"]:
        actions = []
        for a in tool["actions"]:
            if a["rest_path"] is None:  # no REST route: nothing to aim
                actions.append(a)
                continue
            curl = examples.curl(a["rest_path"], a["example_arguments"], curl_base, a.get("request_parameters") or (),
                                 a.get("rest_media_types"))
            actions.append({**a, "examples": {**a["examples"], "curl": curl}})
        tools.append({**tool, "actions": actions})
    return {**manifest, "tools": tools}


def manifest_toon(manifest: dict[str, Any]) -> str:
    """The manifest in TOON (pipe delimiter), decodable by the official `toon-format` package."""
    return toon.encode(manifest)
