"""JSON schema helpers: lean input schemas (no pydantic titles) and grouped-tool merging."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_NAME_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def lean(schema: Any) -> Any:
    """Drop pydantic's generated `title`s (tokens the agent pays for and never needs)."""
    if isinstance(schema, list):
        return [lean(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: lean(sub) for name, sub in value.items()}
        else:
            out[key] = lean(value)
    return out


def closed(schema: Any) -> Any:
    """A copy of `schema` where every object schema listing its properties allows no other key (unless it
    says what other keys may be)."""
    if isinstance(schema, list):
        return [closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NAME_MAPS and isinstance(value, dict):  # names -> schemas (a field may be named "properties")
            out[key] = {name: closed(sub) for name, sub in value.items()}
        elif key in ("const", "enum", "default", "examples"):  # values, not schemas
            out[key] = value
        else:
            out[key] = closed(value)
    if isinstance(schema.get("properties"), dict) and "additionalProperties" not in schema \
            and "patternProperties" not in schema:
        out["additionalProperties"] = False
    return out


#: What a schema walker descends into. The walkers (here and in `mcpfusion.exposition`) leave anything else as it
#: is, and test for a node before calling themselves on a value: a call saved on each of a schema's many leaves.
NODES = (dict, list)


def copied(schema: Any) -> Any:
    """A copy of a JSON schema (dicts and lists copied, values shared): what `copy.deepcopy` makes of one, in a
    fraction of its time (no memo: a schema is a tree)."""
    if isinstance(schema, dict):
        return {key: copied(value) if isinstance(value, NODES) else value for key, value in schema.items()}
    if isinstance(schema, list):
        return [copied(value) if isinstance(value, NODES) else value for value in schema]
    return schema


def without(schema: Any, keywords: frozenset[str] | set[str]) -> Any:
    """`schema` without these keywords anywhere (property and definition names are names, never keywords)."""
    if isinstance(schema, list):
        return [without(s, keywords) if isinstance(s, NODES) else s for s in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: {name: without(sub, keywords) for name, sub in value.items()}
        if key in _NAME_MAPS and isinstance(value, dict)
        else without(value, keywords) if isinstance(value, NODES) else value
        for key, value in schema.items()
        if key not in keywords
    }


def rewrite(schema: Any, fn: Callable[[dict[str, Any], bool], dict[str, Any]], *, root: bool = True) -> Any:
    """`schema` rebuilt bottom up: `fn(node, is_root)` gets each (sub)schema once its parts are rewritten
    (property and definition names are names, never schemas) and returns what replaces it."""
    if isinstance(schema, list):
        return [rewrite(s, fn, root=False) if isinstance(s, NODES) else s for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        key: {name: rewrite(sub, fn, root=False) for name, sub in value.items()}
        if key in _NAME_MAPS and isinstance(value, dict)
        else rewrite(value, fn, root=False) if isinstance(value, NODES) else value
        for key, value in schema.items()
    }
    return fn(out, root)


#: How a list is sent as structuredContent: `{"items": [...]}`, with `next_cursor` when paginated (the names
#: `mcpfusion.output` writes).
LIST_KEYS = frozenset({"items", "next_cursor"})


def local(schema: Any, root: dict[str, Any]) -> Any:
    """`schema` with its local `$ref`s (`#/$defs/X`, `#/definitions/X`, chained) followed in `root`; the
    target's own keys win over the reference's siblings. A reference it cannot follow is left as it is."""
    for _ in range(10):  # (a chain of references, never a cycle)
        ref = schema.get("$ref") if isinstance(schema, dict) else None
        if not isinstance(ref, str) or ref.count("/") != 2 or ref.split("/")[1] not in ("$defs", "definitions"):
            return schema
        defs = root.get(ref.split("/")[1])
        target = defs.get(ref.rsplit("/", 1)[-1]) if isinstance(defs, dict) else None
        if not isinstance(target, dict):
            return schema
        schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **target}
    return schema


def list_row(schema: dict[str, Any], root: dict[str, Any] | None = None) -> Any:
    """The schema of a row of a list output schema (`{"items": [...]}`, what a list is sent as), or None;
    local references are followed in `root` (by default the schema itself)."""
    root = schema if root is None else root
    schema = local(schema, root)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or "items" not in properties or not set(properties) <= LIST_KEYS:
        return None
    rows = local(properties["items"], root)
    return rows.get("items") if isinstance(rows, dict) and isinstance(rows.get("items"), dict) else None


def root_keys(schema: dict[str, Any] | None) -> list[str]:
    """The names `_select` keeps of an object schema: its root properties (through a local `$ref`, and in each
    branch of a root `allOf`/`anyOf`/`oneOf`); of a list (`{"items": [...]}`) those of its rows, as `_select`
    keeps them in every row."""
    return _keys(schema, schema, 0, True) if schema else []


def _keys(node: Any, root: dict[str, Any], depth: int, listed: bool) -> list[str]:
    """`listed`: `node` may be a list (the root, a branch of it), not a row of one."""
    node = local(node, root)
    if not isinstance(node, dict) or depth > 8:
        return []
    row = list_row(node, root) if listed else None
    if row is not None:
        return _keys(row, root, depth + 1, False)
    properties = node.get("properties")
    keys = [k for k in properties if isinstance(k, str)] if isinstance(properties, dict) else []
    for key in ("allOf", "anyOf", "oneOf"):
        branches = node.get(key)
        for branch in branches if isinstance(branches, list) else ():
            keys += [k for k in _keys(branch, root, depth + 1, listed) if k not in keys]
    return keys


def inline_refs(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """Replace local `#/$defs/X` references by their definitions (for OpenAPI, whose refs are document-wide).

    Recursive models are cut at a small depth with an open object schema; a discriminator's `mapping` to
    `$defs` goes with the definitions (`unmapped`).
    """
    if isinstance(schema, list):
        return [inline_refs(s, defs, depth) if isinstance(s, NODES) else s for s in schema]
    if not isinstance(schema, dict):
        return schema
    if defs is None:
        defs = schema.get("$defs", {})
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        if depth > 8:
            return {"type": "object"}
        target = defs.get(ref.rsplit("/", 1)[-1], {"type": "object"})
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        return {**inline_refs(target, defs, depth + 1), **inline_refs(rest, defs, depth)}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$defs":
            continue
        if key in _NAME_MAPS and isinstance(value, dict):  # names -> schemas (a field may be named "$ref")
            out[key] = {name: inline_refs(sub, defs, depth) if isinstance(sub, NODES) else sub
                        for name, sub in value.items()}
        elif key == "discriminator" and isinstance(value, dict):
            out[key] = unmapped(value)
        else:
            out[key] = inline_refs(value, defs, depth) if isinstance(value, NODES) else value
    return out


def unmapped(discriminator: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI `discriminator` without the `mapping` entries that point into `$defs`: once the definitions
    are inlined (and `$defs` gone) they would point nowhere. `propertyName` still tells the branches apart."""
    mapping = discriminator.get("mapping")
    if not isinstance(mapping, dict):
        return discriminator
    kept = {value: ref for value, ref in mapping.items() if not (isinstance(ref, str) and ref.startswith("#/$defs/"))}
    out = {k: v for k, v in discriminator.items() if k != "mapping"}
    return {**out, "mapping": kept} if kept else out
