"""What `tools/list` costs an agent (o200k tokens): mcpfusion against FastMCP for the same 8 actions.

The 8 actions are the reference service's `billing` list_invoices, get_invoice, create_invoice,
update_invoice_status, remind, void_invoice and `customers` list, get. FastMCP's side
(bench/peers/fastmcp_tools.py) declares them with the same parameter types, constraints, descriptions,
annotations and return types. Both listings go through the same `mcp.types.Tool` model and are counted as
compact JSON, once without output schemas on either side and once with them (FastMCP derives them from the
return types; mcpfusion advertises the ones its actions declare), so each ratio compares like with like.
One declaration differs: `customers` offers `_select` (`Tool(select=True)`: the agent may ask for some
fields only), which the peer does not; the rows "without `_select`" leave that parameter out of ours.
The peer declares all four hints on every tool and FastMCP sends a title and `_meta` on each: two more lines
compare against the peer declaring only the hints that differ from MCP's defaults, and on what a host
usually gives the model (name, description, input schema).

    python bench/tokens.py    # tables, then `ratio_no_output=.. ratio_output=.. grouped_no_output=.. grouped_output=..
                              #  profiles_no_output=.. profiles_output=..` (ratio_*: the reference service's own)
    python bench/tokens.py --json     # the figures as JSON
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import fastmcp  # noqa: E402
from mcp import types  # noqa: E402

from mcpfusion import tokens  # noqa: E402
from mcpfusion.listing import tool_entries  # noqa: E402
from mcpfusion.tool import Tool  # noqa: E402

ACTIONS = {
    "billing": ["list_invoices", "get_invoice", "create_invoice", "update_invoice_status", "remind", "void_invoice"],
    "customers": ["list", "get"],
}
EXPOSITIONS = ("grouped", "profiles", "flat")


def wire(entries: list[dict[str, Any]] | list[types.Tool], *, output: bool) -> list[dict[str, Any]]:
    """The listing as a client receives it (one serializer for both servers), optionally without outputSchema."""
    out = []
    for entry in entries:
        tool = entry if isinstance(entry, types.Tool) else types.Tool.model_validate(entry)
        data = tool.model_dump(mode="json", by_alias=True, exclude_none=True)
        if not output:
            data.pop("outputSchema", None)
        out.append(data)
    return out


def reference_tools() -> dict[str, Tool]:
    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    return app.state.mcpfusion.registry.tools


def without_select(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries without the `_select` parameter (`Tool(select=True)`), which FastMCP's peer does not declare."""
    out = copy.deepcopy(entries)
    for entry in out:
        entry["inputSchema"]["properties"].pop("_select", None)
    return out


def ours(exposition: str | None = None) -> list[dict[str, Any]]:
    """The 8 actions' entries, under the reference service's expositions or the one given."""
    entries: list[dict[str, Any]] = []
    for name, tool in reference_tools().items():
        if name not in ACTIONS:
            continue
        subset = copy.copy(tool)
        subset.actions = {a: tool.actions[a] for a in ACTIONS[name]}
        subset.exposition = exposition or tool.exposition  # type: ignore[assignment]
        entries += tool_entries(subset)
    return entries


async def fastmcp_listing(output_schemas: bool, *, every_hint: bool = True) -> list[types.Tool]:
    from peers.fastmcp_tools import build

    async with fastmcp.Client(build(output_schemas=output_schemas, every_hint=every_hint)) as client:
        return list((await client.session.list_tools()).tools)


#: What a host usually gives the model of each tool (as a function definition): neither `title`, hints nor
#: `_meta` reach it; FastMCP sends a title and `_meta` on every tool, mcpfusion only the hints that differ.
MODEL_VIEW = ("name", "description", "inputSchema")


def fairness(peer: list[dict[str, Any]]) -> dict[str, Any]:
    """Without output schemas, the same comparison against the cheapest FastMCP declaration of the same hints
    (only those that differ from MCP's defaults, as the reference service declares them) and on what a host
    usually gives the model (`MODEL_VIEW`): the headline figures count FastMCP's hints in full, its titles
    and its `_meta`."""
    lean = wire(asyncio.run(fastmcp_listing(False, every_hint=False)), output=False)
    view = tokens.count_json([{k: t[k] for k in MODEL_VIEW if k in t} for t in peer])
    out: dict[str, Any] = {"fastmcp_declared_hints": tokens.count_json(lean), "fastmcp_model_view": view}
    for exposition in EXPOSITIONS:
        listing = wire(ours(exposition), output=False)
        mine = tokens.count_json([{k: t[k] for k in MODEL_VIEW if k in t} for t in listing])
        out[exposition] = {"declared_hints_ratio": round(tokens.count_json(listing) / out["fastmcp_declared_hints"], 2),
                           "model_view": mine, "model_view_ratio": round(mine / view, 2)}
    return out


def measure() -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    peers = {out: asyncio.run(fastmcp_listing(out)) for out in (False, True)}
    for output in (False, True):
        peer = wire(peers[output], output=output)
        base = tokens.count_json(peer)
        rows.append({"server": f"FastMCP {fastmcp.__version__}", "output_schemas": output, "tools": len(peer),
                     "with_output_schema": sum("outputSchema" in t for t in peer), "tokens": base, "ratio": 1.0})
        variants = [("mcpfusion (reference service)", None, False),
                    *((f"mcpfusion {e}", e, False) for e in EXPOSITIONS),
                    *((f"mcpfusion {e}, without `_select`", e, True) for e in ("grouped", "profiles"))]
        for label, exposition, like in variants:
            entries = ours(exposition)
            listing = wire(without_select(entries) if like else entries, output=output)
            count = tokens.count_json(listing)
            rows.append({"server": label, "output_schemas": output, "tools": len(listing),
                         "with_output_schema": sum("outputSchema" in t for t in listing), "tokens": count,
                         "ratio": round(count / base, 2)})
    return {"actions": ACTIONS, "encoding": tokens.ENCODING, "rows": rows,
            "fairness": fairness(wire(peers[False], output=False))}


def table(figures: dict[str, Any]) -> str:
    named = "; ".join(f"{tool}: {', '.join(names)}" for tool, names in figures["actions"].items())
    lines = [f"tools/list of the same 8 actions ({named}), {figures['encoding']} tokens, compact JSON", ""]
    for output in (False, True):
        lines.append("with output schemas (FastMCP: from return types; mcpfusion: as its actions declare them)"
                     if output else "without output schemas on either side (input schemas, descriptions, hints)")
        lines += ["| server | MCP tools | with outputSchema | tokens | vs FastMCP |", "|---|---:|---:|---:|---:|"]
        rows = [r for r in figures["rows"] if r["output_schemas"] == output]
        lines += [f"| {r['server']} | {r['tools']} | {r['with_output_schema']} | {r['tokens']} | {r['ratio']:.2f} |"
                  for r in rows]
        if output and any(r["with_output_schema"] < r["tools"] for r in rows):
            lines.append("note: some MCP tools above advertise no outputSchema while others do, "
                         "so this table is not like with like; the one above is.")
        lines.append("")
    fair = figures["fairness"]
    lines += [
        "the same, without output schemas, against FastMCP with only the hints that differ from MCP's defaults "
        f"declared ({fair['fastmcp_declared_hints']} tokens): "
        + ", ".join(f"{e} {fair[e]['declared_hints_ratio']:.2f}" for e in EXPOSITIONS),
        f"what a host usually gives the model ({', '.join(MODEL_VIEW)}): FastMCP {fair['fastmcp_model_view']}, "
        + ", ".join(f"{e} {fair[e]['model_view']} ({fair[e]['model_view_ratio']:.2f})" for e in EXPOSITIONS),
        "",
    ]
    ratio = {(r["server"], r["output_schemas"]): r["ratio"] for r in figures["rows"]}
    served, grouped, profiles = "mcpfusion (reference service)", "mcpfusion grouped", "mcpfusion profiles"
    lines.append(f"ratio_no_output={ratio[served, False]:.2f} ratio_output={ratio[served, True]:.2f} "
                 f"grouped_no_output={ratio[grouped, False]:.2f} grouped_output={ratio[grouped, True]:.2f} "
                 f"profiles_no_output={ratio[profiles, False]:.2f} profiles_output={ratio[profiles, True]:.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    figures = measure()
    print(json.dumps(figures, indent=2) if args.json else table(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
