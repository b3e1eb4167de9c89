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
    """The plan of an input schema: `_NUMBER`, `("object", {property: plan}, plan of other keys)`,
    `("array", plan of the items, plans of the first ones)` or None."""
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
        kept = [(p, c) for p, c in plans if not (isinstance(c, dict) and c.get("type") == "null")]
        # A number among choices that are numbers or text (`int | str`, a Decimal's number or string): a boolean
        # fits none of them (lax mode would read it as the number). One structured choice and null: its plan.
        if any(p == _NUMBER for p, _ in kept) and all(p == _NUMBER or _text(c) for p, c in kept):
            return _NUMBER
        if len(kept) == 1 and len(plans) == 2 and kept[0][0] is not None:
            return kept[0][0]
        return None
    kind = node.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if kinds & _NUMERIC and kinds <= _NUMERIC | {"null"}:
        return _NUMBER
    if kind == "object":
        # Every declared property, None where no number is: a declared key is never read as another key.
        properties = {name: _plan(sub, defs, depth + 1) for name, sub in (node.get("properties") or {}).items()}
        others = _plan(node.get("additionalProperties"), defs, depth + 1)  # (`dict[str, int]`'s values)
        if others is None and all(plan is None for plan in properties.values()):
            return None
        return ("object", properties, others)
    if kind == "array":
        items = _plan(node.get("items"), defs, depth + 1)
        prefix = node.get("prefixItems")  # (a tuple's items, each its own)
        first = tuple(_plan(sub, defs, depth + 1) for sub in prefix) if isinstance(prefix, list) else ()
        if items is None and not any(plan is not None for plan in first):
            return None
        return ("array", items, first)
    return None


def _text(choice: Any) -> bool:
    """Whether a union's choice is plain text (a `str`): no boolean is one."""
    return isinstance(choice, dict) and choice.get("type") == "string"


def booleans_in(plan: Any, value: Any) -> list[str]:
    """The paths (`lines[0].unit_price_cents`) where `value` holds a boolean and `plan` wants a number."""
    found: list[str] = []
    _walk(plan, value, (), found)
    return found


def _walk(plan: Any, value: Any, path: tuple[str | int, ...], found: list[str]) -> None:
    if plan is None:
        return
    if plan == _NUMBER:
        if value is True or value is False:
            found.append(field_path(path))
    elif plan[0] == "object":
        if isinstance(value, dict):
            _, properties, others = plan
            for name, item in value.items():
                _walk(properties.get(name, others), item, (*path, name), found)
    elif isinstance(value, list):
        _, items, first = plan
        for index, item in enumerate(value):
            _walk(first[index] if index < len(first) else items, item, (*path, index), found)
