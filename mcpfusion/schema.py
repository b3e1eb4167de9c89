"""JSON schema helpers: lean input schemas (no pydantic titles) and grouped-tool merging."""

from __future__ import annotations

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


def root_keys(schema: dict[str, Any] | None) -> list[str]:
    """Root property names of an object schema (through `$ref` to a local definition)."""
    if not schema:
        return []
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = schema.get("$defs", {}).get(ref.split("/")[-1], {})
    return list(schema.get("properties", {}))
