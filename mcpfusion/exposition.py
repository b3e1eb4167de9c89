"""Exposition: the compact projection of tools that `tools/list` advertises.

The server validates every call strictly against the action's own argument model, so what is advertised
only has to tell an agent how to build a valid call, in as few tokens as possible. The projection:

- drops `"default": null` and the `null` branch of an optional parameter whose default is `None` (leaving
  it out is the same call);
- merges a parameter shared by several actions into one schema that accepts what each of them accepts
  (enum values united, constraints kept only where every action agrees, a flat `anyOf` otherwise), never
  an `anyOf` of `anyOf`s;
- leaves out per-parameter "Required for: ..." notes when the TOON description's table already says it;
- inlines a `$defs` entry referenced once;
- advertises only the annotations that differ from the MCP defaults.

A call the projection lets through and the action refuses gets the usual self-healing validation error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

#: MCP's values for an annotation that is absent (ToolAnnotations in the specification).
MCP_DEFAULT_HINTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
_WRITE_ONLY_HINTS = ("destructiveHint", "idempotentHint")  # "meaningful only when readOnlyHint == false"
_SCALARS = ("string", "integer", "number", "boolean")
_DEF_PREFIX = "#/$defs/"


def compact_annotations(hints: dict[str, Any]) -> dict[str, Any]:
    """The hints a client cannot infer: those that differ from MCP's defaults."""
    out = {k: v for k, v in hints.items() if MCP_DEFAULT_HINTS.get(k, not v) != v}
    if hints.get("readOnlyHint"):
        for key in _WRITE_ONLY_HINTS:
            out.pop(key, None)
    return out


def optional_form(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional parameter whose default is `None`: without `"default": null` nor its `null` branch."""
    if "default" not in schema or schema["default"] is not None:
        return schema
    out = {k: v for k, v in schema.items() if k != "default"}
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        elif rest:
            out["anyOf"] = rest
    elif out.get("type") == "null":
        out.pop("type")
    return out


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True)


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema as a flat list of alternatives (nested `anyOf`s opened, descriptions moved out)."""
    core = {k: v for k, v in schema.items() if k != "description"}
    if set(core) == {"anyOf"}:
        return [b for branch in core["anyOf"] for b in _branches(branch)]
    return [core]


def _enum(schema: dict[str, Any]) -> list[Any] | None:
    if "const" in schema:
        return [schema["const"]]
    values = schema.get("enum")
    return list(values) if isinstance(values, list) else None


def _merge_scalars(branches: list[dict[str, Any]]) -> dict[str, Any]:
    """One schema of their shared scalar type accepting every branch: constraints (and a default) kept where
    all branches agree, enum values united."""
    enums = [_enum(b) for b in branches]
    common = {
        k: v for k, v in branches[0].items()
        if k not in ("enum", "const") and all(k in b and _key(b[k]) == _key(v) for b in branches[1:])
    }
    if all(e is not None for e in enums):
        united: list[Any] = []
        for values in enums:
            united += [v for v in values or () if v not in united]
        common["enum"] = united
    return common


def merge_parameter(variants: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One advertised schema for a parameter several actions declare, accepting what each accepts: branches of
    the same scalar type merged, other shapes side by side in one flat `anyOf`."""
    descriptions: list[str] = []
    unique: dict[str, dict[str, Any]] = {}
    for variant in variants:
        text = str(variant.get("description") or "").strip()
        if text and text not in descriptions:
            descriptions.append(text)
        for branch in _branches(variant):
            unique.setdefault(_key(branch), branch)
    by_type: dict[Any, list[dict[str, Any]]] = {}
    for branch in unique.values():
        kind = branch.get("type")
        by_type.setdefault(kind if kind in _SCALARS else _key(branch), []).append(branch)
    merged_types = [group[0] if len(group) == 1 else _merge_scalars(group) for group in by_type.values()]
    merged: dict[str, Any] = dict(merged_types[0]) if len(merged_types) == 1 else {"anyOf": merged_types}
    if descriptions:
        merged["description"] = " ".join(d if d[-1] in ".!?" else d + "." for d in descriptions)
    return merged


def inline_single_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace each `$defs` entry referenced exactly once (and not by itself) by its definition."""
    defs = schema.get("$defs")
    if not defs:
        return schema
    text = _key({k: v for k, v in schema.items() if k != "$defs"})
    refs = {name: text.count(_key(_DEF_PREFIX + name)) for name in defs}
    inlined = {
        name for name, n in refs.items()
        if n == 1 and _DEF_PREFIX + name not in _key(defs[name])
        and not any(_DEF_PREFIX + name in _key(d) for other, d in defs.items() if other != name)
    }
    if not inlined:
        return schema

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEF_PREFIX) and ref[len(_DEF_PREFIX):] in inlined:
            rest = {k: walk(v) for k, v in node.items() if k != "$ref"}
            return {**walk(defs[ref[len(_DEF_PREFIX):]]), **rest}
        return {k: walk(v) for k, v in node.items()}

    out = {k: walk(v) for k, v in schema.items() if k != "$defs"}
    kept = {name: d for name, d in defs.items() if name not in inlined}
    if kept:
        out["$defs"] = kept
    return out


def parameter_notes(required_by: Iterable[str], optional_for: Iterable[str], *, required: bool) -> str:
    """"Required for: a. Optional for: b." (the first part only when no TOON table says it)."""
    notes = []
    req, opt = list(required_by), list(optional_for)
    if req and required:
        notes.append(f"Required for: {', '.join(req)}.")
    if opt:
        notes.append(f"Optional for: {', '.join(opt)}.")
    return " ".join(notes)


def action_input_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """One action's advertised input schema (the flat exposition's): optional parameters in their short form."""
    required = set(schema.get("required", ()))
    properties = {
        name: p if name in required else optional_form(p) for name, p in schema.get("properties", {}).items()
    }
    return inline_single_refs({**schema, "properties": properties})


def grouped_input_schema(
    discriminator: str,
    actions: Sequence[tuple[str, dict[str, Any]]],
    *,
    reserved: Iterable[str] = (),
    table_says_required: bool = False,
) -> dict[str, Any]:
    """The discriminator's enum + one merged schema per parameter of any action, noted with the actions that use
    it. `reserved` parameters (e.g. `_select`) are the same for every action and kept as they are."""
    keep = set(reserved)
    properties: dict[str, Any] = {discriminator: {"type": "string", "enum": [name for name, _ in actions]}}
    variants: dict[str, list[dict[str, Any]]] = {}
    users: dict[str, tuple[list[str], list[str]]] = {}
    defs: dict[str, Any] = {}
    for name, schema in actions:
        defs.update(schema.get("$defs", {}))
        required = set(schema.get("required", ()))
        for pname, pschema in schema.get("properties", {}).items():
            if pname in keep:
                properties[pname] = pschema
                continue
            properties.setdefault(pname, None)
            variants.setdefault(pname, []).append(pschema if pname in required else optional_form(pschema))
            req, opt = users.setdefault(pname, ([], []))
            (req if pname in required else opt).append(name)
    for pname, found in variants.items():
        merged = merge_parameter(found)
        notes = parameter_notes(*users[pname], required=not table_says_required)
        text = " ".join(t for t in (merged.pop("description", ""), notes) if t)
        properties[pname] = {**merged, "description": text} if text else merged
    out: dict[str, Any] = {"type": "object", "properties": properties, "required": [discriminator]}
    if defs:
        out["$defs"] = defs
    return inline_single_refs(out)



#: The hints that split a tool into groups under the profiles exposition, unless the tool says otherwise: a
#: read never looks like a write, a non-destructive write never looks destructive. Hints left out of the key
#: are aggregated cautiously inside a group (open-world if any action is, idempotent if all are).
PROFILE_HINTS = ("readOnlyHint", "destructiveHint")


def profile(hints: dict[str, Any], keys: Sequence[str] = PROFILE_HINTS) -> tuple[tuple[str, Any], ...]:
    """The grouping key of an action: its values of the `keys` hints (write-only hints of a read: None)."""
    read = bool(hints.get("readOnlyHint"))
    return tuple((k, None if read and k in _WRITE_ONLY_HINTS else hints.get(k, MCP_DEFAULT_HINTS[k])) for k in keys)


def profile_name(hints: dict[str, Any], keys: Sequence[str] = PROFILE_HINTS) -> str:
    """A short name for a profile: `read`, `write` or `destructive`, then `_idempotent` and `_external` when
    those hints are part of the key."""
    key = dict(profile(hints, keys))
    if hints.get("readOnlyHint"):
        words = ["read"]
    else:
        words = ["destructive" if key.get("destructiveHint") else "write"]
        if key.get("idempotentHint"):
            words.append("idempotent")
    if key.get("openWorldHint"):
        words.append("external")
    return "_".join(words)
