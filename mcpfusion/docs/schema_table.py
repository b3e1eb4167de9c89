"""JSON schema to table rows: the parameter table of an action and the field list of a presenter."""

from __future__ import annotations

import json
from typing import Any

from .samples import resolve


def type_label(schema: Any, root: dict[str, Any]) -> str:
    """A short human type: `string`, `integer | null`, `array<string>`, `Invoice`, `object`."""
    if not isinstance(schema, dict):
        return "any"
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref.rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return " | ".join(dict.fromkeys(type_label(s, root) for s in schema[key]))
    if schema.get("allOf"):
        return " & ".join(type_label(s, root) for s in schema["allOf"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(kind)
    if kind == "array":
        return f"array<{type_label(schema.get('items', {}), root)}>"
    if kind == "string" and schema.get("format"):
        return f"string ({schema['format']})"
    if kind:
        return str(kind)
    if "enum" in schema:
        return "enum"
    return "object" if "properties" in schema else "any"


def _enum(schema: dict[str, Any], root: dict[str, Any]) -> list[Any] | None:
    schema = resolve(schema, root)
    enum = schema.get("enum")
    if isinstance(enum, list):
        return enum
    if "const" in schema:
        return [schema["const"]]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, []):
            found = _enum(option, root)
            if found:
                return found
    if schema.get("type") == "array":
        return _enum(schema.get("items", {}), root)
    return None


def _constraints(schema: dict[str, Any]) -> list[str]:
    names = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
             "pattern", "minItems", "maxItems", "uniqueItems")
    return [f"{n}={json.dumps(schema[n], ensure_ascii=False)}" for n in names if n in schema]


def rows(schema: dict[str, Any] | None) -> list[dict[str, Any]]:
    """One row per root property: name, type, required, enum, default, description, constraints."""
    if not schema:
        return []
    root = schema
    obj = resolve(schema, root)
    required = set(obj.get("required", []))
    out = []
    for name, sub in obj.get("properties", {}).items():
        resolved = resolve(sub, root)
        row: dict[str, Any] = {
            "name": name,
            "type": type_label(sub, root),
            "required": name in required,
            "enum": _enum(sub, root),
            "description": sub.get("description") or resolved.get("description") or "",
            "constraints": _constraints(resolved),
        }
        if "default" in sub:
            row["default"] = sub["default"]
        out.append(row)
    return out
