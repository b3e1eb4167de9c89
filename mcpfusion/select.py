"""`_select`: the field guillotine on the data block (root keys only)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

SELECT_PARAM = "_select"


def select_keys(data: Any, keys: Collection[str]) -> Any:
    """Keep only `keys` at the root of an object, or of every object in a list."""
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k in keys}
    if isinstance(data, list):
        return [select_keys(item, keys) for item in data]
    return data


def select_schema(keys: list[str]) -> dict[str, Any]:
    """The JSON schema of the `_select` parameter."""
    return {
        "type": "array",
        "items": {"type": "string", "enum": keys},
        "description": "Return only these root fields (saves tokens).",
    }
