"""What an agent reads in `tools/list` is as complete as FastMCP's listing of the same declarations.

The 8 actions of `bench/tokens.py` (the reference service's billing and customers actions, declared alike in
FastMCP in bench/peers/fastmcp_tools.py). For every exposition (grouped, profiles, flat), each action's
advertised view must name every parameter FastMCP names, with its type(s), enum values, format, bounds
(but the opaque cursor's), default, nested fields and whether the action requires it; every parameter
description FastMCP sends must reach the agent (or say nothing an enum does not; the cursor's is said by each
page that has a next one); the action's own hints must be what FastMCP advertises wherever they can be
(profiles, flat); every output field FastMCP advertises must be advertised. A parameter several actions
share is advertised once, its enum united, and the line of an action that takes fewer of its values says
which (`status:not overdue`): an agent learns each action's values exactly; the server validates per action.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from mcpfusion.exposition import MCP_DEFAULT_HINTS, PROFILE_HINTS, short_enums
from tests import signatures

_SPEC = importlib.util.spec_from_file_location("bench_tokens", Path(__file__).resolve().parents[1] / "bench" / "tokens.py")
assert _SPEC and _SPEC.loader
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)  # the bench's 8 actions, its FastMCP peer and its views of our listing

ACTIONS: dict[str, list[str]] = bench.ACTIONS
EXPOSITIONS = ("grouped", "profiles", "flat")
_BOUNDS = ("minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems",
           "maxItems", "pattern")


@pytest.fixture(scope="module")
def peer() -> dict[str, dict[str, Any]]:
    listing = asyncio.run(bench.fastmcp_listing(True))
    return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing}


def _ours(exposition: str) -> list[dict[str, Any]]:
    return list(bench.ours(exposition))


def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        target = root.get("$defs", {})[schema["$ref"].rsplit("/", 1)[-1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _branches(schema: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    schema = _resolve(schema, root)
    out = []
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        out += _branches(branch, root)
    rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
    if not schema.get("anyOf") and not schema.get("oneOf") or set(rest) - {"description", "default", "type"}:
        out.append(rest)
    return out


def _types(schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """The JSON types a value may have (an enum's or const's values say theirs), `null` left out."""
    names = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
    found: set[str] = set()
    for branch in _branches(schema, root):
        kind = branch.get("type")
        if isinstance(kind, list):
            found |= set(kind)
        elif kind:
            found.add(kind)
        elif "enum" in branch or "const" in branch:
            values = branch.get("enum", [branch.get("const")])
            found |= {names.get(type(v).__name__, "null") for v in values}
        elif "properties" in branch:
            found.add("object")  # below the root, fields say it (exposition.implied_types)
        elif "items" in branch:
            found.add("array")
    return found - {"null"}


def _enum(schema: dict[str, Any], root: dict[str, Any]) -> set[Any] | None:
    values: set[Any] = set()
    for branch in _branches(schema, root):
        if "enum" in branch:
            values |= {v for v in branch["enum"] if v is not None}
        elif "const" in branch:
            values.add(branch["const"])
        elif branch.get("type") not in (None, "null"):
            return None  # a branch that takes any value of its type
    return values or None


def _field(branches: list[dict[str, Any]], key: str) -> set[Any]:
    return {b[key] for b in branches if key in b}


def _default(schema: dict[str, Any], root: dict[str, Any]) -> str | None:
    """The default a value takes when left out (None: none, or null), as JSON."""
    found = [b["default"] for b in [_resolve(schema, root), *_branches(schema, root)] if "default" in b]
    return json.dumps(found[0], sort_keys=True) if found and found[0] is not None else None


def assert_covers(ours: dict[str, Any], ours_root: dict[str, Any], theirs: dict[str, Any],
                  theirs_root: dict[str, Any], where: str, *, bounds: bool = True) -> None:
    """`ours` tells an agent at least what `theirs` does about the value at `where`: its types, enum values,
    format, fields (and which are required), items, bounds (unless `bounds` is false) and default."""
    assert _types(theirs, theirs_root) <= _types(ours, ours_root), where
    enum = _enum(theirs, theirs_root)
    if enum is not None:
        assert enum <= (_enum(ours, ours_root) or set()), where
    mine, other = _branches(ours, ours_root), _branches(theirs, theirs_root)
    assert _field(other, "format") <= _field(mine, "format"), where
    for key in _BOUNDS if bounds else ():
        assert _field(other, key) <= _field(mine, key), f"{where}: {key} {_field(other, key)} not advertised"
    default = _default(theirs, theirs_root)
    assert default is None or default == _default(ours, ours_root), f"{where}: default {default} not advertised"
    for branch in other:
        props = branch.get("properties") or {}
        if props:
            match = [b for b in mine if set(props) <= set(b.get("properties") or {})]
            assert match, f"{where}: fields {sorted(props)} not advertised"
            assert set(branch.get("required", ())) <= set(match[0].get("required", ())), where
            for name, sub in props.items():
                assert_covers(match[0]["properties"][name], ours_root, sub, theirs_root, f"{where}.{name}")
        if branch.get("type") == "array" and "items" in branch:
            items = [b["items"] for b in mine if b.get("type", "array") == "array" and "items" in b]
            assert items, f"{where}: not advertised as a list"
            assert_covers(items[0], ours_root, branch["items"], theirs_root, f"{where}[]")


def _view(entries: list[dict[str, Any]], tool: str, action: str) -> tuple[dict[str, Any], dict[str, signatures.Param]]:
    """The advertised entry serving `tool.action` and the action's parameters (required, and what its line
    adds to the merged schema)."""
    for entry in entries:
        schema = entry["inputSchema"]
        enum = schema["properties"].get("action", {}).get("enum")
        if enum and action in enum:
            lines = signatures.lines(entry)
            assert list(lines) == enum, entry["name"]  # the description lists every action it serves
            return entry, lines[action]
        if entry["name"] == f"{tool}_{action}" and not enum:
            required = set(schema.get("required", ()))
            return entry, {p: signatures.Param(p in required) for p in schema["properties"] if p != "_select"}
    raise AssertionError(f"{tool}.{action} is not advertised")


def _told_values(schema: dict[str, Any], root: dict[str, Any], found: signatures.Param) -> set[Any] | None:
    """The values an agent learns an action takes of a parameter: the advertised enum, narrowed by what the
    action's line says (`a|b`: those; `not c`: the enum without them)."""
    if found.values is not None:
        return set(found.values)
    values = _enum(schema, root)
    return values - set(found.not_values) if values is not None and found.not_values else values


def _output_paths(schema: dict[str, Any], root: dict[str, Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for branch in _branches(schema, root):
        for name, sub in (branch.get("properties") or {}).items():
            paths.add(prefix + name)
            paths |= _output_paths(sub, root, f"{prefix}{name}.")
        if "items" in branch:
            paths |= _output_paths(branch["items"], root, f"{prefix}[].")
    return paths


@pytest.mark.parametrize("exposition", EXPOSITIONS)
def test_every_action_tells_an_agent_what_fastmcp_tells_it(exposition, peer):
    entries = _ours(exposition)
    for tool, names in ACTIONS.items():
        for action in names:
            theirs = peer[f"{tool}_{action}"]
            entry, params = _view(entries, tool, action)
            where = f"{exposition}:{tool}.{action}"
            their_schema, our_schema = theirs["inputSchema"], entry["inputSchema"]
            their_required = set(their_schema.get("required", ()))
            # every parameter, and whether this action requires it
            assert {p: found.required for p, found in params.items()} == {
                p: p in their_required for p in their_schema["properties"]}, where
            for name, sub in their_schema["properties"].items():
                ours = our_schema["properties"][name]
                # the cursor is an opaque string the agent copies from next_cursor: its bounds are the server's
                assert_covers(ours, our_schema, sub, their_schema, f"{where}({name})", bounds=name != "cursor")
                # an enum's values for this action exactly, even where a merged enum unites several actions'
                assert _told_values(ours, our_schema, params[name]) == _enum(sub, their_schema), where
                said = sub.get("description")
                if name == "cursor":
                    # its use is told when the agent can use it, by each page that has a next one and by the
                    # error on a cursor the server did not issue (tests/test_pagination.py): a type alone here
                    assert ours == {"type": "string"}, where
                elif said and short_enums(sub).get("description"):  # not merely the enum's values
                    assert said in ours.get("description", ""), f"{where}({name}): {said!r} not advertised"
            # the action's own description, and its own hints where the exposition keeps them true (all under
            # flat, the profile's keys under profiles; the others aggregated, never less cautious)
            assert theirs["description"] in entry["description"], where
            if exposition != "grouped":
                hints = {**MCP_DEFAULT_HINTS, **entry.get("annotations", {})}
                exact = PROFILE_HINTS if exposition == "profiles" else tuple(MCP_DEFAULT_HINTS)
                for key, value in theirs["annotations"].items():
                    if key in ("destructiveHint", "idempotentHint") and hints["readOnlyHint"]:
                        continue  # meaningless for a read (MCP)
                    if key in exact:
                        assert hints[key] == value, (where, key)
                    else:
                        assert hints[key] == value or hints[key] == MCP_DEFAULT_HINTS[key], (where, key)
            # every output field FastMCP advertises, with its type
            their_out, our_out = theirs["outputSchema"], entry["outputSchema"]
            missing = _output_paths(their_out, their_out) - _output_paths(our_out, our_out)
            assert not missing, (where, sorted(missing))


@pytest.mark.parametrize("exposition", EXPOSITIONS)
def test_advertised_output_fields_keep_their_types(exposition, peer):
    """An output field FastMCP types is typed alike (or wider: a redacted value is a string either way)."""
    entries = _ours(exposition)
    for tool, names in ACTIONS.items():
        for action in names:
            theirs = peer[f"{tool}_{action}"]["outputSchema"]
            entry, _ = _view(entries, tool, action)
            ours = entry["outputSchema"]
            for their_branch in _branches(theirs, theirs):
                props = their_branch.get("properties") or {}
                match = [b for b in _branches(ours, ours) if set(props) <= set(b.get("properties") or {})]
                assert match, (exposition, tool, action, sorted(props))
                for name, sub in props.items():
                    assert _types(sub, theirs) <= _types(match[0]["properties"][name], ours), (action, name)


SAMPLE_CALLS = [
    ("billing", "list_invoices", {}), ("billing", "list_invoices", {"status": "overdue"}),
    ("billing", "get_invoice", {"id": "inv_0001"}), ("billing", "get_invoice", {"id": "inv_0002"}),
    ("billing", "remind", {"id": "inv_0001", "message": "Friendly"}),
    ("billing", "create_invoice", {"customer_id": "cus_0001", "due_date": str(dt.date.today() + dt.timedelta(days=30)),
                                   "lines": [{"description": "Audit", "quantity": 2, "unit_price_cents": 1500}]}),
    ("customers", "list", {}), ("customers", "get", {"id": "cus_0001"}),
]


@pytest.mark.parametrize("token", ["demo-admin", "demo-support"])
async def test_real_results_fit_every_advertised_output_schema(service_app, token):
    """Each caller's real results (the admin's views and the support agent's redacted ones) are accepted by
    the outputSchema each exposition advertises (what an MCP client validates structuredContent against)."""
    from jsonschema import Draft202012Validator

    from tests.service_kit import in_process

    tester = in_process(service_app)
    listings = {e: _ours(e) for e in EXPOSITIONS}
    checked = 0
    for tool, action, args in SAMPLE_CALLS:
        result = await tester.call(tool, action, args, headers={"authorization": f"Bearer {token}"})
        if result.is_error:
            assert token == "demo-support" and action in ("remind", "create_invoice"), result.text  # no write
            continue
        for exposition, entries in listings.items():
            schema = _view(entries, tool, action)[0]["outputSchema"]
            errors = [e.message for e in Draft202012Validator(schema).iter_errors(result.structured_content)]
            assert not errors, (exposition, tool, action, errors[:3])
            checked += 1
    assert checked >= 5 * len(EXPOSITIONS)
