"""`_select`: the field guillotine on the data block (root keys only)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from .errors import ValidationFailed, sent_value
from .schema import LIST_KEYS

SELECT_PARAM = "_select"


def select_keys(data: Any, keys: Collection[str]) -> Any:
    """Keep only `keys` at the root of an object, or of every object in a list: also of a list a handler sent
    as its structuredContent is sent (`{"items": [...]}`, its own `success_structured`), when no key names
    the wrapper's own (a list output schema offers its rows' fields: `schema.root_keys`)."""
    if isinstance(data, dict):
        rows = data.get("items")
        if isinstance(rows, list) and data.keys() <= LIST_KEYS and not any(k in LIST_KEYS for k in keys):
            return {**data, "items": [select_keys(row, keys) for row in rows]}
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


def unselectable(label: str, sent: Any, fields: Collection[str]) -> ValidationFailed:
    """The self-healing error of a `_select` that is not a list of `fields` (what the action answers)."""
    return ValidationFailed(label, [(SELECT_PARAM, f"Use a list of these field names of {label}: "
                                                   f"{', '.join(fields)}. You sent: {sent_value(sent)}.")])


def check_audience(label: str, sent: Any, fields: Collection[str]) -> None:
    """Refuse a `_select` that is not a list of the fields of this call's presenter (the audience a `returns=`
    dependency chose): another audience's presenter may have a field, but this caller would get empty objects,
    and the error names this caller's fields only."""
    if sent != [] and (not isinstance(sent, list) or not all(isinstance(k, str) and k in fields for k in sent)):
        raise unselectable(label, sent, fields)
