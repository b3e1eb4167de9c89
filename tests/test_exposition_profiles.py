"""The profiles exposition: actions grouped by annotation profile so every advertised key hint is the action's
own, routed strictly per group, documented with what each exposition costs."""

from __future__ import annotations

import copy

import pytest

from mcpfusion import Tool, tokens
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import economy
from mcpfusion.docs.economy import exposition_costs, exposition_figures, flat_entries
from mcpfusion.docs.examples import mcp_call
from mcpfusion.docs.page import tool_economy
from mcpfusion.listing import tool_entries
from mcpfusion.testing import ToolTester


def build(**options) -> Tool:
    tool = Tool("shop", description="Orders", toon_description=True, exposition="profiles", **options)

    @tool.action(readonly=True, open_world=False)
    async def list_orders(status: str | None = None):
        """List orders."""
        return [{"id": "o1", "status": status}]

    @tool.action(readonly=True, open_world=True)
    async def track(id: str):
        """Track a parcel with the carrier."""
        return {"id": id}

    @tool.action(idempotent=True, destructive=False, open_world=False)
    async def rename(id: str, name: str):
        """Rename an order."""
        return {"id": id, "name": name}

    @tool.action(open_world=True, destructive=False)
    async def ship(id: str):
        """Ship an order."""
        return {"id": id}

    @tool.action(destructive=True, open_world=False)
    async def delete(id: str):
        """Delete an order."""
        return None

    return tool


def hints(entry):
    return entry.get("annotations", {})


def test_default_profiles_split_reads_writes_and_destructive_with_their_own_key_hints():
    tool = build()
    entries = {e["name"]: e for e in tool_entries(tool)}
    assert list(entries) == ["shop_read", "shop_write", "shop_delete"]
    assert entries["shop_read"]["inputSchema"]["properties"]["action"]["enum"] == ["list_orders", "track"]
    assert hints(entries["shop_read"])["readOnlyHint"] is True  # open-world: aggregated (track is)
    assert "destructiveHint" not in hints(entries["shop_read"])
    assert entries["shop_write"]["inputSchema"]["properties"]["action"]["enum"] == ["rename", "ship"]
    assert hints(entries["shop_write"]) == {"destructiveHint": False}  # idempotent only if all are: not shown
    assert "action" not in entries["shop_delete"]["inputSchema"]["properties"]  # a group of one: flat
    assert hints(entries["shop_delete"]) == {"openWorldHint": False}  # destructive is MCP's default
    for name, entry in entries.items():
        for action in entry["inputSchema"]["properties"].get("action", {}).get("enum", []):
            own = tool.actions[action].annotations()
            advertised = {"readOnlyHint": False, "destructiveHint": True, **hints(entry)}
            assert advertised["readOnlyHint"] == own["readOnlyHint"], (name, action)
            if not own["readOnlyHint"]:
                assert advertised["destructiveHint"] == own["destructiveHint"], (name, action)


def test_all_four_hints_keep_every_hint_exact():
    tool = build(profile_hints=("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"))
    entries = {e["name"]: e for e in tool_entries(tool)}
    assert list(entries) == ["shop_list_orders", "shop_track", "shop_rename", "shop_ship", "shop_delete"]
    defaults = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
    for name, entry in entries.items():
        own = tool.actions[name.removeprefix("shop_")].annotations()
        advertised = {**defaults, **hints(entry)}
        keys = ["readOnlyHint", "openWorldHint"] + ([] if own["readOnlyHint"] else ["destructiveHint", "idempotentHint"])
        assert {k: advertised[k] for k in keys} == {k: own[k] for k in keys}, name


def two_reads(name: str) -> Tool:
    tool = Tool(name, exposition="profiles")

    @tool.action(readonly=True)
    async def x():
        """X."""

    @tool.action(readonly=True)
    async def y():
        """Y."""

    return tool


def test_one_profile_keeps_the_grouped_form_and_bad_keys_are_refused():
    tool = two_reads("ro")
    [entry] = tool_entries(tool)
    assert entry["name"] == "ro" and entry["annotations"]["readOnlyHint"] is True
    with pytest.raises(ValueError, match="not MCP hints"):
        Tool("x", exposition="profiles", profile_hints=("readonly",))
    with pytest.raises(ValueError, match="exposition must be"):
        Tool("x", exposition="by_hints")  # type: ignore[arg-type]


def test_a_group_name_clashing_with_an_action_is_refused():
    tool = two_reads("t")

    @tool.action(destructive=True)
    async def read():
        """Named like the reads group would be... but it is alone in its profile: t_read."""

    with pytest.raises(ValueError, match="advertised twice"):
        tool_entries(tool)


async def test_routing_is_strict_per_group_and_names_the_serving_tool():
    tool = build()
    registry = ToolRegistry([tool])
    request = ToolTester([tool]).app  # an app for make_request
    from mcpfusion.testing import make_request

    ok = await registry.call("shop_read", {"action": "list_orders"}, make_request(request))
    assert not ok.is_error
    refused = await registry.call("shop_read", {"action": "ship", "id": "o1"}, make_request(request))
    assert refused.is_error and "ship is served by the tool shop_write (with this action)." in refused.texts[0]
    refused = await registry.call("shop_write", {"action": "delete", "id": "o1"}, make_request(request))
    assert refused.is_error and "delete is served by the tool shop_delete." in refused.texts[0]
    deleted = await registry.call("shop_delete", {"id": "o1"}, make_request(request))
    assert not deleted.is_error
    assert sorted(e["name"] for e in registry.mcp_tools()) == ["shop_delete", "shop_read", "shop_write"]
    # the tester and the docs address an action by its tool and name, whatever MCP tool serves it
    assert not (await ToolTester([tool]).call("shop", "ship", {"id": "o1"})).is_error
    assert mcp_call(tool.actions["ship"], {"id": "o1"})["params"] == {
        "name": "shop_write", "arguments": {"action": "ship", "id": "o1"}}
    assert mcp_call(tool.actions["delete"], {"id": "o1"})["params"] == {"name": "shop_delete", "arguments": {"id": "o1"}}


def test_docs_show_the_cost_of_each_exposition():
    costs = exposition_costs(build())
    assert set(costs) == {"grouped", "profiles", "flat"}
    # Grouped is the cheapest; profiles repeat the TOON header and selection sentence per group, so for four
    # one-line actions they cost about what flat entries do.
    assert costs["grouped"] < min(costs["profiles"], costs["flat"])
    assert costs["profiles"] < 1.1 * costs["flat"]


def test_docs_show_each_exposition_with_and_without_output_schemas():
    from app.main import create_app
    from app.settings import Settings

    billing = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:")).state.mcpfusion.registry.tools["billing"]
    figures = exposition_figures(billing)
    plain, plain_output = (tokens.count_json(flat_entries(billing, output=o)) for o in (False, True))
    for name, f in figures.items():
        variant = copy.copy(billing)
        variant.exposition = name
        entries = tool_entries(variant)
        assert f["mcp_tools"] == len(entries) and f["tokens"] == tokens.count_json(entries)
        assert f["no_output"] == tokens.count_json([{k: v for k, v in e.items() if k != "outputSchema"}
                                                    for e in entries]) < f["tokens"]
        assert f["vs_plain"] == round(f["tokens"] / plain_output, 2) < 1
        assert f["no_output_vs_plain"] == round(f["no_output"] / plain, 2) < 1
    html = tool_economy({**economy.advertised_economy(billing, tool_entries(billing))})
    assert "Cost of each exposition" in html
    for name, f in figures.items():
        assert f"<td><code>{name}</code></td><td>{f['mcp_tools']}</td><td>{f['no_output']}</td>" in html
