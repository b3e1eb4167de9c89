"""Exposition: the compact projection of tools that `tools/list` advertises.

The server validates every call strictly against the action's own argument model, so what is advertised
only has to tell an agent how to build a valid call, in as few tokens as possible. The projection:

- drops `"default": null` and the `null` branch of an optional parameter whose default is `None` (leaving
  it out is the same call);
- merges a parameter shared by several actions into one schema that accepts what each of them accepts
  (enum values united, constraints kept only where every action agrees, a flat `anyOf` otherwise), never
  an `anyOf` of `anyOf`s; its description is the one every such action declares, or each action's own
  after the names of those declaring it (`list_invoices: Only this customer's invoices.`): never one action's
  read as another's;
- says which action takes which parameter once per action, in the grouped description (`get(id,note?)`
  or the TOON table's `params` column), never per parameter, with what an action alone says of a shared
  parameter where the merged schema says less: the values it takes (`update(id,status:not overdue)`), its
  type, bounds, format and default (`rename(id,name:maxLength=80)`);
- leaves out what an enum of strings already says (its `"type"`, a description listing its values), and
  below the root what `properties` and `items` say (`"type": "object"`, `"type": "array"`) and
  `"additionalProperties": false` (like the root's: every parameter is named, another one gets the
  self-healing error);
- inlines a `$defs` entry referenced once;
- advertises only the annotations that differ from the MCP defaults;
- merges output schemas (`output_schema`): the views of one object as one schema with the union of
  their fields, value bounds left out, nullable scalars as type lists, repeated objects in `$defs`.

A call the projection lets through and the action refuses gets the usual self-healing validation error;
every result is still checked against the action's own output schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .output import share
from .schema import NODES, inline_refs, rewrite, without

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
    """An optional parameter whose default is `None`: without `"default": null` nor its `null` branch (or
    the `null` of a `type` list)."""
    if "default" not in schema or schema["default"] is not None:
        return schema
    out = {k: v for k, v in schema.items() if k != "default"}
    branches = out.get("anyOf")
    kinds = out.get("type")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        elif rest:
            out["anyOf"] = rest
    elif isinstance(kinds, list) and "null" in kinds:
        rest = [k for k in kinds if k != "null"]
        out["type"] = rest[0] if len(rest) == 1 else rest
    elif kinds == "null":
        out.pop("type")
    return out


_FILLER = {"one", "of", "or", "and", "either"}


def short_enums(node: Any, *, types: bool = True) -> Any:
    """Enums without what they already say: a description that only lists the enum's values ("One of
    draft, sent, paid.") and, with `types`, the `"type": "string"` of an enum of strings."""
    if isinstance(node, list):
        return [short_enums(n, types=types) if isinstance(n, NODES) else n for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: short_enums(v, types=types) if isinstance(v, NODES) else v for k, v in node.items()}
    values = out.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        if types and out.get("type") == "string":
            del out["type"]
        text = out.get("description")
        if isinstance(text, str):
            words = {w for w in re.split(r"[^\w-]+", text.lower()) if w} - _FILLER
            if words and words <= {str(v).lower() for v in values}:
                del out["description"]
    return out


def advertised_parameter(schema: dict[str, Any], *, required: bool, types: bool = True) -> dict[str, Any]:
    """One parameter as advertised: optional ones in their short form, enums short (their types too unless
    `types` is false: before merging with another action's variant, which needs them)."""
    out: dict[str, Any] = short_enums(schema if required else optional_form(schema), types=types)
    return out


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True)


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """A schema as a flat list of alternatives (nested `anyOf`s opened, descriptions moved out)."""
    core = {k: v for k, v in schema.items() if k != "description"}
    if set(core) == {"anyOf"} or (set(core) == {"type", "anyOf"} and core["type"] == "object"):
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


def shared_description(texts: Sequence[str], actions: Sequence[str] = ()) -> str | None:
    """The description of a parameter several actions take (`texts`: each one's own, "" for none): the text
    they all declare, else each text after the `actions` that declare it (`list_invoices: Only this customer's
    invoices.`), so no action reads another's; None when they disagree and `actions` does not name them."""
    sentences = [t if not t or t[-1] in ".!?" else t + "." for t in texts]
    if len(set(sentences)) == 1:
        return sentences[0] or None
    if len(actions) != len(sentences):
        return None
    by_text: dict[str, list[str]] = {}
    for action, text in zip(actions, sentences, strict=True):
        by_text.setdefault(text, []).append(action)
    return " ".join(f"{','.join(names)}: {text}" for text, names in by_text.items() if text)


def merge_parameter(variants: Sequence[dict[str, Any]], actions: Sequence[str] = ()) -> dict[str, Any]:
    """One advertised schema for a parameter several actions declare (`actions`: their names, in the same
    order), accepting what each accepts: branches of the same scalar type merged, other shapes side by side in
    one flat `anyOf`; described as `shared_description` says."""
    unique: dict[str, dict[str, Any]] = {}
    for variant in variants:
        for branch in _branches(variant):
            unique.setdefault(_key(branch), branch)
    by_type: dict[Any, list[dict[str, Any]]] = {}
    for branch in unique.values():
        kind = branch.get("type")
        by_type.setdefault(kind if kind in _SCALARS else _key(branch), []).append(branch)
    merged_types = [group[0] if len(group) == 1 else _merge_scalars(group) for group in by_type.values()]
    merged: dict[str, Any] = dict(merged_types[0]) if len(merged_types) == 1 else {"anyOf": merged_types}
    description = shared_description([str(v.get("description") or "").strip() for v in variants], actions)
    if description:
        merged["description"] = description
    return merged


_BARE = re.compile(r"[\w.-]+")


def _values(schema: dict[str, Any]) -> list[Any] | None:
    """The values a parameter schema allows when it lists them all (an enum, a const, `null`, or an `anyOf`
    of those), else None."""
    values: dict[str, Any] = {}
    for branch in _branches(schema):
        found = [None] if branch == {"type": "null"} else _enum(branch)
        if found is None:
            return None
        values.update((_key(v), v) for v in found)
    return list(values.values())


def _shown(value: Any) -> str:
    return value if isinstance(value, str) and _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)


#: Keywords of a shared scalar parameter that an action's line repeats where the merged schema leaves them out
#: (the actions disagree): `text:maxLength=10`.
_NOTED = ("format", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
          "multipleOf")
_KINDS = {str: "string", bool: "boolean", int: "integer", float: "number"}


def narrowed(schemas: Sequence[dict[str, Any]], advertised: dict[str, Any]) -> list[dict[str, str]]:
    """For each action of a grouped tool (its input schema in `schemas`), what it alone says of each parameter
    it shares with another action where the merged schema in `advertised` (the grouped input schema) says
    less: the values it takes (`a|b`, or `not c` when the values left out are fewer), its type among the
    merged ones (`type=integer`), the bounds, format and scalar default the actions disagree on
    (`maxLength=10`, `default=0`), `null` aside. The grouped description writes them in the action's line
    (`update(id,status:not overdue)`), so merging never hides what goes with which action."""
    names: dict[str, list[Any]] = {}
    for schema in schemas:
        for name, pschema in schema.get("properties", {}).items():
            names.setdefault(name, []).append({k: v for k, v in pschema.items() if k != "description"})
    merged = advertised.get("properties", {})
    differ = {n for n, variants in names.items() if n in merged and any(v != variants[0] for v in variants[1:])}
    return [_narrowed(schema, {n: merged[n] for n in schema.get("properties", {}) if n in differ},
                      advertised.get("$defs", {})) for schema in schemas]


def _narrowed(schema: dict[str, Any], merged: dict[str, Any], defs: dict[str, Any]) -> dict[str, str]:
    required = set(schema.get("required", ()))
    notes: dict[str, str] = {}
    for name, shown in merged.items():
        own = inline_refs(advertised_parameter(schema["properties"][name], required=name in required, types=False),
                          schema.get("$defs", {}))
        wide = inline_refs(shown, defs)
        parts = [_values_note(own, wide) or _type_note(own, wide), *_keyword_notes(own, wide)]
        if isinstance(own.get("default"), str | int | float) and (
                "default" not in wide or _key(own["default"]) != _key(wide["default"])):
            parts.append(f"default={_shown(own['default'])}")
        if any(parts):
            notes[name] = " ".join(p for p in parts if p)
    return notes


def _values_note(own: dict[str, Any], wide: dict[str, Any]) -> str | None:
    values = _values(own)
    if values is None or values == [None]:
        return None
    union = _values(wide)
    taken = {_key(v) for v in values}
    left_out = [v for v in union or () if _key(v) not in taken]
    if union is not None and not left_out:
        return None
    if union is not None and len(left_out) < len(values):
        return "not " + "|".join(_shown(v) for v in left_out)
    return "|".join(_shown(v) for v in values)


def _kinds(schema: dict[str, Any]) -> list[str]:
    """The JSON types a schema's branches take (an enum's values say theirs), `null` left out."""
    kinds: list[str] = []
    for branch in _branches(schema):
        kind = branch.get("type")
        found = kind if isinstance(kind, list) else [kind] if kind else [
            _KINDS.get(type(v), "null") for v in _enum(branch) or ()]
        kinds += [k for k in found if k != "null" and k not in kinds]
    return kinds


def _type_note(own: dict[str, Any], wide: dict[str, Any]) -> str | None:
    mine, theirs = _kinds(own), _kinds(wide)
    return "type=" + "|".join(mine) if mine and set(mine) < set(theirs) else None


def _keyword_notes(own: dict[str, Any], wide: dict[str, Any]) -> list[str]:
    """`key=value` for each bound or format of the action's one non-null branch that the merged branch of the
    same type does not say."""
    mine = [b for b in _branches(own) if b != {"type": "null"}]
    if len(mine) != 1:
        return []
    one = mine[0]
    same = next((b for b in _branches(wide) if b.get("type") == one.get("type")), {})
    return [f"{k}={_shown(one[k])}" for k in _NOTED if k in one and (k not in same or _key(same[k]) != _key(one[k]))]


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


def action_input_schema(schema: dict[str, Any], *, advertised: dict[str, Any] | None = None) -> dict[str, Any]:
    """One action's advertised input schema (the flat exposition's): each parameter as `advertised_parameter`
    gives it (or as `advertised` overrides it), without the root's `additionalProperties: false` (the
    parameters are all named; another one still gets the self-healing error), typed as `implied_types` says."""
    required = set(schema.get("required", ()))
    overrides = advertised or {}
    properties = {
        name: overrides.get(name) or advertised_parameter(p, required=name in required)
        for name, p in schema.get("properties", {}).items()
    }
    out = {k: v for k, v in schema.items() if k != "additionalProperties"}
    compact: dict[str, Any] = reading_order(implied_types(inline_single_refs({**out, "properties": properties}),
                                                           closed=False))
    return compact


def grouped_input_schema(
    discriminator: str,
    actions: Sequence[tuple[str, dict[str, Any]]],
    *,
    reserved: Iterable[str] = (),
    advertised: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The discriminator's enum + one merged schema per parameter of any action. Which action takes which
    parameter, and whether it must, is the description's (see `Tool.grouped_description`), said once per
    action rather than once per parameter. `reserved` parameters (e.g. `_select`) are the same for every
    action and kept as they are; `advertised` gives a parameter's advertised schema outright (`cursor`)."""
    keep = set(reserved)
    overrides = advertised or {}
    properties: dict[str, Any] = {discriminator: {"enum": [name for name, _ in actions]}}
    variants: dict[str, list[dict[str, Any]]] = {}
    takers: dict[str, list[str]] = {}
    defs: dict[str, Any] = {}
    for action, schema in actions:
        defs.update(schema.get("$defs", {}))
        required = set(schema.get("required", ()))
        for pname, pschema in schema.get("properties", {}).items():
            if pname in keep:
                properties[pname] = short_enums(pschema)
                continue
            properties.setdefault(pname, None)
            variants.setdefault(pname, []).append(
                advertised_parameter(pschema, required=pname in required, types=False))
            takers.setdefault(pname, []).append(action)
    for pname, found in variants.items():
        properties[pname] = overrides.get(pname) or short_enums(merge_parameter(found, takers[pname]))
    out: dict[str, Any] = {"type": "object", "properties": properties, "required": [discriminator]}
    if defs:
        out["$defs"] = short_enums(defs)
    compact: dict[str, Any] = reading_order(implied_types(inline_single_refs(out), closed=False))
    return compact


# -- output schemas ----------------------------------------------------------------------------------------
#: Bounds of a value the server sends: the agent reads it, never builds it, so they tell it nothing.
_OUTPUT_BOUNDS = frozenset({"minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                            "minItems", "maxItems", "pattern", "uniqueItems"})
_REF = re.compile(r'"\$ref": "#/\$defs/([^"]+)"')


def _recursive(defs: dict[str, Any]) -> bool:
    """Whether some definition reaches itself through `$ref`s (then refs are kept, not inlined)."""
    edges = {name: set(_REF.findall(_key(d))) for name, d in defs.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in edges.get(start, ()))

    return any(reaches(name, name, set()) for name in defs)


def _alike(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two object schemas that are views of one thing (one's fields among the other's: an admin's and a
    support agent's view of an invoice), not alternatives of a union."""
    pa, pb = a.get("properties"), b.get("properties")
    if not isinstance(pa, dict) or not isinstance(pb, dict) or not pa or not pb:
        return False
    return set(pa) <= set(pb) or set(pb) <= set(pa)


def _merge_objects(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One object schema accepting both: every field of either (merged where both have it), required only
    where both require it."""
    props: dict[str, Any] = dict(a["properties"])
    for name, schema in b["properties"].items():
        props[name] = merge_values([props[name], schema]) if name in props else schema
    out = {k: v for k, v in a.items() if k not in ("properties", "required") and b.get(k) == v}
    out["properties"] = props
    required = [r for r in a.get("required", ()) if r in set(b.get("required", ()))]
    if required:
        out["required"] = required
    return out


def merge_values(variants: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One schema accepting each variant of a value the server sends: views of one object merged field by
    field, lists merged by their items, scalars of one type merged (a redacted `const` with the plain value
    is that value's type), other shapes side by side in one flat `anyOf`."""
    merged: list[dict[str, Any]] = []
    for variant in variants:
        for branch in _branches(variant):
            for i, done in enumerate(merged):
                if done == branch:
                    break
                if _alike(done, branch):
                    merged[i] = _merge_objects(done, branch)
                    break
                if done.get("type") == branch.get("type") == "array" and "items" in done and "items" in branch:
                    merged[i] = {**done, "items": merge_values([done["items"], branch["items"]])}
                    break
                if done.get("type") in _SCALARS and done.get("type") == branch.get("type") and "$ref" not in done:
                    merged[i] = _merge_scalars([done, branch])
                    break
            else:
                merged.append(branch)
    return merged[0] if len(merged) == 1 else {"anyOf": merged}


def nullable_types(node: Any) -> Any:
    """`{"anyOf": [{"type": "string", ...}, {"type": "null"}]}` as `{"type": ["string", "null"], ...}`
    (the same values: the other keywords only constrain strings; never with an enum or a const)."""
    if isinstance(node, list):
        return [nullable_types(n) if isinstance(n, NODES) else n for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: nullable_types(v) if isinstance(v, NODES) else v for k, v in node.items()}
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches and len(branches) == 2:
        [other] = [b for b in branches if b != {"type": "null"}]
        if other.get("type") in _SCALARS and not {"enum", "const"} & set(other) and not set(other) & set(out):
            rest = {k: v for k, v in out.items() if k != "anyOf"}
            return {**other, **rest, "type": [other["type"], "null"]}
    return out


def implied_types(node: Any, *, closed: bool = True) -> Any:
    """Below the root, a schema with `properties` without its `"type": "object"` and one with `items` without
    its `"type": "array"` (those keywords say it); unless `closed`, without `"additionalProperties": false`
    either (an advertised input: the server refuses an unknown field with the self-healing error naming the
    accepted ones)."""

    def implied(schema: dict[str, Any], root: bool) -> dict[str, Any]:
        if not closed and schema.get("additionalProperties") is False:
            del schema["additionalProperties"]
        if not root and (schema.get("type") == "object" and schema.get("properties")
                         or schema.get("type") == "array" and isinstance(schema.get("items"), dict)):
            del schema["type"]
        return schema

    return rewrite(node, implied)


#: Keywords written first in an advertised input schema: o200k spends fewer tokens on the same schema when a
#: property reads `{"type":"string","description":"...","maxLength":40}` than with its bounds first
#: (bench/tokens.py: 676 -> 666 tokens for the 8 actions grouped, the same for every exposition).
_FIRST_KEYWORDS = ("type", "description")


def reading_order(node: Any) -> Any:
    """The same schema with each (sub)schema's `type` and `description` first, its other keywords after."""

    def ordered(schema: dict[str, Any], root: bool) -> dict[str, Any]:
        first = [k for k in _FIRST_KEYWORDS if k in schema]
        return {**{k: schema[k] for k in first}, **schema} if first else schema

    return rewrite(node, ordered)


def _text(schema: dict[str, Any]) -> str | None:
    """The JSON text of a schema, None when a value in it has none."""
    try:
        return json.dumps(schema)
    except (TypeError, ValueError):
        return None


def output_schema(schemas: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The advertised `outputSchema` of an MCP tool whose actions answer `schemas` (each possibly an `anyOf`
    of presenter views): the views of one object merged into one schema with the union of their fields,
    different shapes side by side, value bounds and what enums already say left out, `null`able scalars as
    type lists, the `"type": "object"` that fields already imply, repeated objects written once in `$defs`.
    It accepts every result each action may send; the server still checks each result against the action's
    own schema.

    Each schema's references are resolved with its own `$defs`, so two actions' definitions of one name never
    collide; a recursive model keeps its references, its definitions renamed `{name}_{n}` (n: the schema's
    position) where another schema defines the name otherwise."""
    roots: list[dict[str, Any]] = []
    kept: dict[str, Any] = {}
    resolved: dict[str, dict[str, Any]] = {}  # a schema's JSON text -> its root: most actions of a tool share one
    for n, schema in enumerate(schemas):
        own = schema.get("$defs", {})
        body = {k: v for k, v in schema.items() if k != "$defs"}
        if not _recursive(own):
            seen = _text(schema)  # the same text, the same schema (key order and value types included)
            root = resolved.get(seen) if seen is not None else None
            if root is None:
                root = without(inline_refs(body, own), _OUTPUT_BOUNDS)
                if seen is not None:
                    resolved[seen] = root
            roots.append(root)
            continue
        renamed = {name: name if kept.get(name, d) == d else f"{name}_{n}" for name, d in own.items()}
        text = _key(body), {name: _key(d) for name, d in own.items()}
        for old, new in renamed.items():
            if old != new:
                ref, to = _key(_DEF_PREFIX + old), _key(_DEF_PREFIX + new)
                text = text[0].replace(ref, to), {k: v.replace(ref, to) for k, v in text[1].items()}
        roots.append(without(json.loads(text[0]), _OUTPUT_BOUNDS))
        kept.update({renamed[name]: json.loads(d) for name, d in text[1].items()})
    merged = merge_values(roots)
    if "anyOf" in merged:
        merged = {"type": "object", **merged}
    compact = implied_types(nullable_types(short_enums(merged)))
    return share({**compact, "$defs": implied_types(without(kept, _OUTPUT_BOUNDS))} if kept else compact)


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
