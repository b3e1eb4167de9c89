"""Deterministic sample values built from JSON schemas (example arguments and sample responses).

`variant` shifts enum choices and numbers so that a list of samples covers the enum values a presenter's
conditional rules, UI blocks and suggestions may depend on (e.g. an `overdue` status).
"""

from __future__ import annotations

import re
from typing import Any

_FORMATS = {
    "email": "jane.doe@example.com",
    "date": "2026-01-15",
    "date-time": "2026-01-15T09:30:00Z",
    "time": "09:30:00",
    "uuid": "3f2b8c1e-5d4a-4f6b-9c2d-1a7e8b9c0d1f",
    "uri": "https://example.com/",
    "url": "https://example.com/",
}
_MAX_DEPTH = 6
# "Invoice id, e.g. inv_0001 (see list_invoices)." -> inv_0001: the value the author documented.
_DESCRIBED = re.compile(r"\b(?:e\.g\.|for example|such as)[,:]?\s+[`'\"]?([^\s`'\",;()]+)", re.I)


def described_example(schema: dict[str, Any]) -> str | None:
    """The example a parameter's description gives (`e.g. X`, `for example X`), if any."""
    found = _DESCRIBED.search(schema.get("description") or "")
    return found.group(1).rstrip(".:") or None if found else None


def resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    """Follow a local `$ref` (`#/$defs/X` or `#/definitions/X`)."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 10:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return {}
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        merged = {k: v for k, v in schema.items() if k != "$ref"}
        schema = {**target, **merged}
        seen += 1
    return schema if isinstance(schema, dict) else {}


def sample(schema: Any, root: dict[str, Any] | None = None, *, name: str = "value", variant: int = 0,
           depth: int = 0) -> Any:
    """A value that fits `schema` (best effort: patterns and custom validators are not honoured)."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    schema = resolve(schema, root)
    if depth > _MAX_DEPTH:
        return None
    if "examples" in schema and isinstance(schema["examples"], list) and schema["examples"]:
        return schema["examples"][variant % len(schema["examples"])]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][variant % len(schema["enum"])]
    if "default" in schema and schema["default"] is not None and variant == 0:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = [resolve(o, root) for o in schema.get(key, [])]
        options = [o for o in options if o.get("type") != "null"]
        if options:
            # `Optional[str] = Field(description=...)`: the description sits beside the anyOf.
            option = {"description": schema["description"], **options[0]} if "description" in schema else options[0]
            return sample(option, root, name=name, variant=variant, depth=depth + 1)
    if schema.get("allOf"):
        return sample(schema["allOf"][0], root, name=name, variant=variant, depth=depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties", {})
        return {
            key: sample(sub, root, name=key, variant=variant, depth=depth + 1) for key, sub in props.items()
        }
    if kind == "array":
        size = max(1, int(schema.get("minItems", 1)))
        items = schema.get("items", {})
        return [sample(items, root, name=name, variant=variant + i, depth=depth + 1) for i in range(size)]
    described = described_example(schema) if variant == 0 else None
    if described is not None and kind in ("string", "integer", "number", None):
        try:
            return {"integer": int, "number": float}.get(kind, str)(described)
        except ValueError:
            pass  # "e.g. ten" for a number: not usable, fall back to a generated value
    if kind == "integer":
        return _number(schema, 42 + variant, int)
    if kind == "number":
        return _number(schema, 12.5 + variant, float)
    if kind == "boolean":
        return variant % 2 == 1
    if kind == "null":
        return None
    if kind == "string" or kind is None:
        fmt = schema.get("format")
        if fmt in _FORMATS:
            return _FORMATS[fmt]
        text = f"{name}_{variant + 1}"
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        text = text.ljust(low, "x")
        return text[:high] if high else text
    return None


def _number(schema: dict[str, Any], value: float, kind: type) -> Any:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    if low is not None and value < low:
        value = low + (1 if "exclusiveMinimum" in schema else 0)
    if high is not None and value > high:
        value = high - (1 if "exclusiveMaximum" in schema else 0)
    return kind(value)


def arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Example arguments for an input schema: its required parameters with sample values."""
    props = schema.get("properties", {})
    return {
        key: sample(props[key], schema, name=key) for key in schema.get("required", []) if key in props
    }
