"""Booleans sent where a number is declared: refused before validation.

Pydantic's lax mode (what FastAPI validates JSON bodies with, and so do actions) reads `true` as 1 and
`false` as 0 for an int or float field. Numeric text ("100") stays accepted as FastAPI accepts it, but a
boolean for an amount or a quantity is never what an agent meant: `unit_price_cents: true` would store one
cent. The action's input schema says where numbers go; `numbers_plan` turns it into a plan made once per action
(None when no number is declared: nothing runs), `booleans_in` lists the paths of the booleans found there.
"""

from __future__ import annotations

from typing import Any

from .errors import field_path

_NUMBER = "number"  # the plan of a value that must be a number (integer or number, maybe null)
_NUMERIC = frozenset({"integer", "number"})
_MAX_DEPTH = 32  # definitions that refer to themselves (trees) are followed this deep


def numbers_plan(schema: dict[str, Any]) -> Any:
    """The plan of an input schema: `_NUMBER`, `("object", {property: plan})`, `("array", plan)` or None."""
    return _plan(schema, schema.get("$defs") or {}, 0)


def _plan(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _plan(defs.get(ref[len("#/$defs/"):]), defs, depth + 1)
    choices = node.get("anyOf") or node.get("oneOf")
    if isinstance(choices, list):
        plans = [(_plan(c, defs, depth + 1), c) for c in choices]
        kept = [p for p, c in plans if not (isinstance(c, dict) and c.get("type") == "null")]
        # Every choice a number (or null): a boolean fits none of them. One structured choice and null: its plan.
        if kept and all(p == _NUMBER for p in kept):
            return _NUMBER
        if len(kept) == 1 and len(plans) == 2 and kept[0] is not None:
            return kept[0]
        return None
    kind = node.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if kinds & _NUMERIC and kinds <= _NUMERIC | {"null"}:
        return _NUMBER
    if kind == "object":
        properties = {name: _plan(sub, defs, depth + 1) for name, sub in (node.get("properties") or {}).items()}
        properties = {name: plan for name, plan in properties.items() if plan is not None}
        return ("object", properties) if properties else None
    if kind == "array":
        items = _plan(node.get("items"), defs, depth + 1)
        return None if items is None else ("array", items)
    return None


def booleans_in(plan: Any, value: Any) -> list[str]:
    """The paths (`lines[0].unit_price_cents`) where `value` holds a boolean and `plan` wants a number."""
    found: list[str] = []
    _walk(plan, value, (), found)
    return found


def _walk(plan: Any, value: Any, path: tuple[str | int, ...], found: list[str]) -> None:
    if plan == _NUMBER:
        if value is True or value is False:
            found.append(field_path(path))
    elif plan[0] == "object":
        if isinstance(value, dict):
            for name, sub in plan[1].items():
                if name in value:
                    _walk(sub, value[name], (*path, name), found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(plan[1], item, (*path, index), found)
