"""Token economy, computed (o200k) from the real tools and real presenter output on sample data.

- description: the tool as a grouped MCP tool with its TOON description, against the same tool described
  the conventional way (one MCP tool per action, each with its full JSON schema and every hint: what a
  FastMCP-style server advertises), and the cost of each exposition (grouped, profiles, flat).
- `_select`: a sample response in full, against the same response with `_select` on two root fields.
- `limit`: a sample collection of 4x the limit through the presenter without its limit, against with it. At
  most `MAX_LIMIT_SAMPLE` rows are presented (a `limit(10000)` would present 40,000 rows at the first /tools):
  past that, the same presenter capped at a quarter of the rows sampled, both counts scaled up (`sampled`).
"""

from __future__ import annotations

import copy
import logging
import typing
from collections import abc
from typing import Any

from .. import listing, tokens
from ..presenter import Presenter
from ..select import select_keys
from ..tool import Action, Exposition, Tool
from . import samples
from .presenters import sample_failure, sample_item, sample_items

logger = logging.getLogger("mcpfusion.docs")
LIMIT_SAMPLE_FACTOR = 4
MAX_LIMIT_SAMPLE = 100  # rows presented at most for the `limit` figures; more are extrapolated from these
SELECT_SAMPLE_KEYS = 2


def toon_description(tool: Tool) -> str:
    """The tool's TOON description (what `toon_description=True` advertises)."""
    return tool.toon_text()


def advertised_toon(tool: Tool) -> list[tuple[str, str]]:
    """(MCP tool name, description) of each TOON description `tools/list` advertises for the tool: one for a
    grouped tool, one per group of several actions under `exposition="profiles"` (a group of one is a flat
    tool, described as its action); none without `toon_description` or when flat."""
    if not tool.toon_description:
        return []
    return [(e.name, listing.grouped_entry(e.tool)["description"]) for e in listing.exposed(tool)
            if e.action is None]


def grouped_entry(tool: Tool, *, output: bool = True) -> dict[str, Any]:
    """The tool as one grouped MCP tool with its TOON description (without `output`: no outputSchema)."""
    entry = listing.grouped_entry(tool, tool.toon_text())
    return entry if output else _without_output(entry)


def _without_output(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "outputSchema"}


def flat_entries(tool: Tool, *, output: bool = False) -> list[dict[str, Any]]:
    """The tool the conventional way: one MCP tool per action, its full JSON schema and every hint (and, with
    `output`, the output schema each action declares)."""
    out = []
    for a in tool.actions.values():
        entry = {"name": listing.flat_name(tool.name, a.name), "description": a.description,
                 "inputSchema": a.input_schema, "annotations": a.annotations()}
        if output and a.output_schema:
            entry["outputSchema"] = a.output_schema
        out.append(entry)
    return out


EXPOSITIONS: tuple[Exposition, ...] = ("grouped", "profiles", "flat")


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 2) if whole else None


def exposition_figures(tool: Tool) -> dict[str, dict[str, Any]]:
    """Per exposition (the tool's other settings unchanged): its MCP tools, the tokens of its `tools/list`
    entries with and without `outputSchema`, and each against the conventional listing (`flat_entries`, with
    and without the output schemas)."""
    plain = tokens.count_json(flat_entries(tool))
    plain_output = tokens.count_json(flat_entries(tool, output=True))
    figures: dict[str, dict[str, Any]] = {}
    for name in EXPOSITIONS:
        variant = copy.copy(tool)
        variant.exposition = name
        entries = listing.tool_entries(variant)
        with_output = tokens.count_json(entries)
        without = tokens.count_json([_without_output(e) for e in entries])
        figures[name] = {"mcp_tools": len(entries), "tokens": with_output,
                         "vs_plain": _ratio(with_output, plain_output),
                         "no_output": without, "no_output_vs_plain": _ratio(without, plain)}
    return figures


def exposition_costs(tool: Tool) -> dict[str, int]:
    """Tokens of the tool's `tools/list` entries under each exposition (its other settings unchanged)."""
    return {name: f["tokens"] for name, f in exposition_figures(tool).items()}


def _saving(before: int, after: int) -> dict[str, Any]:
    saved = before - after
    return {"before": before, "after": after, "saved": saved,
            "percent": round(100 * saved / before, 1) if before else 0.0}


def description_economy(tool: Tool) -> dict[str, Any]:
    """The grouped TOON entry against the flat JSON entries, like for like: both without outputSchema (the
    description and input schemas are what grouping saves on)."""
    grouped, flat = grouped_entry(tool, output=False), flat_entries(tool)
    # The descriptions tools/list advertises (each group's under profiles), else the tool's for comparison.
    advertised = advertised_toon(tool)
    toon_tokens = (sum(tokens.count(text) for _, text in advertised) if advertised
                   else tokens.count(toon_description(tool)))
    grouped_tokens = tokens.count_json(grouped)
    flat_tokens = tokens.count_json(flat)
    return {
        "toon_description": toon_tokens,
        "grouped_toon_entry": grouped_tokens,
        "flat_json_entries": flat_tokens,
        "flat_tool_count": len(flat),
        "saving": _saving(flat_tokens, grouped_tokens),
        "expositions": exposition_figures(tool),
    }


def advertised_economy(tool: Tool, advertised: list[dict[str, Any]]) -> dict[str, Any]:
    """`description_economy` plus what is advertised now, and its ratio to the conventional listing, like for
    like: both without outputSchema, and (when outputSchemas are advertised) both with them."""
    figures = description_economy(tool)
    figures["advertised"] = tokens.count_json(advertised)
    figures["advertised_no_output"] = tokens.count_json([_without_output(e) for e in advertised])
    # What typed outputs cost in tools/list: the outputSchema entries (MCPFusion(output_schemas=False) drops them).
    figures["output_schemas"] = sum(tokens.count_json(e["outputSchema"]) for e in advertised if "outputSchema" in e)
    figures["ratio_vs_plain"] = _ratio(figures["advertised_no_output"], figures["flat_json_entries"])
    figures["flat_json_entries_output"] = tokens.count_json(flat_entries(tool, output=True))
    figures["ratio_vs_plain_output"] = (_ratio(figures["advertised"], figures["flat_json_entries_output"])
                                        if figures["output_schemas"] else None)
    return figures


def _text_tokens(presenter: Presenter, data: Any, ctx: Any, select: list[str] | None = None) -> int:
    return tokens.count(presenter.present(copy.deepcopy(data), ctx, select=select).text)


def returns_single_item(action: Action) -> bool:
    """True when the handler is annotated to return one object (then a limit never applies to it)."""
    try:
        annotation = typing.get_type_hints(action.fn).get("return")
    except Exception:  # unresolvable forward references: we do not know
        return False
    if annotation is None:
        return False
    origin = typing.get_origin(annotation) or annotation
    if not isinstance(origin, type):  # a union, Any, ...: it may be a list
        return False
    if issubclass(origin, str | bytes | dict):
        return True
    return not issubclass(origin, abc.Iterable)


def _limit_economy(presenter: Presenter, ctx: Any) -> dict[str, Any]:
    """What the presenter's limit saves on 4x as many rows: counted on `MAX_LIMIT_SAMPLE` rows at most, and
    past that scaled up from the presenter capped at the same share of the rows sampled."""
    limit = presenter.max_items or 0
    size = limit * LIMIT_SAMPLE_FACTOR
    rows = min(size, MAX_LIMIT_SAMPLE)
    items = sample_items(presenter, rows)
    unlimited = presenter.copy()  # the same presenter without its cap; the original is frozen
    unlimited.max_items = None
    capped = presenter
    if rows < size:
        capped = presenter.copy()
        capped.max_items = max(1, rows // LIMIT_SAMPLE_FACTOR)
    before, after = _text_tokens(unlimited, items, ctx), _text_tokens(capped, items, ctx)
    if rows < size:  # (rows cost tokens in proportion: the sample's figures, scaled to the whole)
        before, after = round(before * size / rows), round(after * size / rows)
    return {"limit": limit, "items": size, **({"sampled": rows} if rows < size else {}), **_saving(before, after)}


def action_economy(action: Action, ctx: Any = None) -> dict[str, Any] | None:
    """What `_select` and `limit` save on a sample response of this action (None when it has no shape)."""
    presenter = action.presenter or (action.presenters[0] if action.presenters else None)
    keys = action.output_keys()
    chosen = keys[:SELECT_SAMPLE_KEYS]
    # `_select` savings only where the agent can use `_select` (a row for a disabled feature is noise).
    out: dict[str, Any] = {"select": None, "limit": None, "error": None}
    try:
        if presenter is not None:
            item = sample_item(presenter)
            if action.tool.select and len(keys) > len(chosen):
                out["select"] = {"keys": chosen, **_saving(
                    _text_tokens(presenter, item, ctx), _text_tokens(presenter, item, ctx, chosen))}
            if presenter.max_items and not returns_single_item(action):
                out["limit"] = _limit_economy(presenter, ctx)
        elif action.tool.select and action.output_schema and len(keys) > len(chosen):
            data = samples.sample(action.output_schema)
            out["select"] = {"keys": chosen, **_saving(
                tokens.count_json(data), tokens.count_json(select_keys(data, chosen)))}
    except Exception as exc:  # a presenter callback that needs real dependencies
        logger.warning("token economy sample failed for %s", action.label, exc_info=True)
        out["error"] = sample_failure(exc)  # (its text stays in the log: it may hold a secret)
    if out["select"] is None and out["limit"] is None and out["error"] is None:
        return None
    return out
