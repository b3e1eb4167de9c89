"""Booleans sent where a number is declared, numbers where a date is: refused before validation.

Pydantic's lax mode (what FastAPI validates JSON bodies with, and so do actions) reads `true` as 1 and
`false` as 0 for an int or float field. Numeric text ("100") stays accepted as FastAPI accepts it, but a
boolean for an amount or a quantity is never what an agent meant: `unit_price_cents: true` would store one
cent. Lax mode also reads a number, or text holding only one, as a Unix timestamp for a date, a datetime or a
time: `due_date: 86400` is 1970-01-02 and `"20270101"` (a compact date) fails with a message about datetimes.
The input schema says such a field is text (`format: date`), so a number there is refused with the form to use.

The action's input schema says where numbers and dates go; `numbers_plan` turns it into a plan made once per
action (None when neither is declared: nothing runs), `mistyped` lists the paths of the values found there
that lax mode would misread, each with what to send instead.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import field_path

_NUMBER = "number"  # the plan of a value that must be a number (integer or number, maybe null)
# The plans of text fields holding a date, a datetime or a time (their JSON Schema formats), by format.
_DATES = {"date": "date", "date-time": "date-time", "time": "time"}
_FORMS = {"date": "a date as text, YYYY-MM-DD (e.g. 2027-01-31)",
          "date-time": "a date and time as ISO 8601 text (e.g. 2027-01-31T09:30:00Z)",
          "time": "a time as text, HH:MM[:SS] (e.g. 09:30)"}
# Text lax mode reads as a timestamp: a number alone, blanks around it allowed.
_NUMERIC_TEXT = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")
_NUMERIC = frozenset({"integer", "number"})
_MAX_DEPTH = 32  # definitions that refer to themselves (trees) are followed this deep


_REF = "$ref"
_LOCAL = "#/$defs/"


def _defined(node: dict[str, Any], defs: dict[str, Any]) -> Any:
    """The definition a `$ref` node names among `defs` (None: no local definition, as an unknown one)."""
    ref = node[_REF]
    return defs.get(ref[len(_LOCAL):]) if isinstance(ref, str) and ref.startswith(_LOCAL) else None


def numbers_plan(schema: dict[str, Any]) -> Any:
    """The plan of an input schema: `_NUMBER`, `("object", {property: plan}, plan of other keys)`,
    `("array", plan of the items, plans of the first ones)` or None."""
    return _plan(schema, schema.get("$defs") or {}, 0)


def _plan(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return None
    if _REF in node:
        return _plan(_defined(node, defs), defs, depth + 1)
    choices = node.get("anyOf") or node.get("oneOf")
    if isinstance(choices, list):
        plans = [(_plan(c, defs, depth + 1), c) for c in choices]
        kept = [(p, c) for p, c in plans if not (isinstance(c, dict) and c.get("type") == "null")]
        # A number among choices that are numbers or text (`int | str`, a Decimal's number or string): a boolean
        # fits none of them (lax mode would read it as the number). One structured choice and null: its plan.
        forms = [p for p, _ in kept if p.__class__ is str and p in _FORMS]
        if forms and len(kept) > 1 and all(p == _NUMBER or p in forms or _text(c) for p, c in kept):
            # A date among scalars (`date | datetime`, `date | str`, `int | date`): lax mode would read a number,
            # or text holding one, as a timestamp unless another choice takes it as it is.
            numbers = any(p == _NUMBER for p, _ in kept)
            texts = any(_text(c) and p not in forms for p, c in kept)
            return ("when", forms[0], numbers, texts)
        if any(p == _NUMBER for p, _ in kept) and all(p == _NUMBER or _text(c) for p, c in kept):
            return _NUMBER
        if len(kept) == 1 and len(plans) == 2 and kept[0][0] is not None:
            return kept[0][0]
        return _mixed(kept, defs, depth)
    kind = node.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    if kinds & _NUMERIC and kinds <= _NUMERIC | {"null"}:
        return _NUMBER
    if kinds <= {"string", "null"} and "string" in kinds and node.get("format") in _DATES:
        return _DATES[node["format"]]
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


def _mixed(kept: list[tuple[Any, Any]], defs: dict[str, Any], depth: int) -> Any:
    """The plan of a union mixing numbers with objects or arrays (`int | list[int]`, `int | Line`, two models):
    `("union", a number among the choices, the objects' plan, the arrays' plan)`, or None when a choice takes
    a boolean (then a boolean is no mistake there) or nothing in it wants a number."""
    if any(_takes_booleans(choice, defs, depth) for _, choice in kept):
        return None
    plans = [plan for plan, _ in kept if plan is not None]
    number = _NUMBER in plans
    objects = [plan for plan in plans if plan != _NUMBER and plan[0] == "object"]
    arrays = [plan for plan in plans if plan != _NUMBER and plan[0] == "array"]
    merged = _merged_objects(objects)
    array = arrays[0] if len(arrays) == 1 else None
    if not number and merged is None and array is None:
        return None
    return ("union", number, merged, array)


def _takes_booleans(choice: Any, defs: dict[str, Any], depth: int) -> bool:
    """Whether a union's choice may hold a boolean: a `bool`, anything (no type), or an enum or const of one."""
    if not isinstance(choice, dict) or depth > _MAX_DEPTH:
        return True
    if _REF in choice:
        return _takes_booleans(_defined(choice, defs), defs, depth + 1)
    if "enum" in choice or "const" in choice:
        return any(isinstance(v, bool) for v in choice.get("enum", [choice.get("const")]))
    nested = choice.get("anyOf") or choice.get("oneOf")
    if isinstance(nested, list):
        return any(_takes_booleans(sub, defs, depth + 1) for sub in nested)
    kind = choice.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    return kind is None or "boolean" in kinds


def _merged_objects(objects: list[Any]) -> Any:
    """One plan for the objects of a union: a key's plan where every object declaring it agrees on it."""
    if len(objects) <= 1:
        return objects[0] if objects else None
    names = {name for _, properties, _ in objects for name in properties}
    merged = {}
    for name in names:
        declared = [properties[name] for _, properties, _ in objects if name in properties]
        merged[name] = declared[0] if all(plan == declared[0] for plan in declared) else None
    others = [other for _, _, other in objects]
    return ("object", merged, others[0] if all(other == others[0] for other in others) else None)


def _text(choice: Any) -> bool:
    """Whether a union's choice is plain text (a `str`): no boolean is one."""
    return isinstance(choice, dict) and choice.get("type") == "string"


_NOT_BOOLEAN = "Input should be a number, not true or false."


def mistyped(plan: Any, value: Any) -> list[tuple[str, str]]:
    """(path, what to send instead) where `value` holds a boolean and `plan` wants a number, or a number (as
    JSON or as text) and `plan` wants a date, a datetime or a time; paths as `lines[0].unit_price_cents`."""
    found: list[tuple[str, str]] = []
    _walk(plan, value, (), found)
    return found


def _walk(plan: Any, value: Any, path: tuple[str | int, ...], found: list[tuple[str, str]]) -> None:
    if plan is None:
        return
    if plan == _NUMBER:
        if value is True or value is False:
            found.append((field_path(path), _NOT_BOOLEAN))
    elif plan.__class__ is str:  # a date, datetime or time
        cls = value.__class__
        if cls is int or cls is float or cls is str and _NUMERIC_TEXT.fullmatch(value):
            found.append((field_path(path), f"Input should be {_FORMS[plan]}, not a number (read as a timestamp)."))
    elif plan[0] == "when":  # a union of a date with numbers or text
        _, form, numbers, texts = plan
        cls = value.__class__
        if value is True or value is False:
            if numbers:
                found.append((field_path(path), _NOT_BOOLEAN))
        elif (cls is int or cls is float) and not numbers:
            found.append((field_path(path), f"Input should be {_FORMS[form]}, not a number (read as a timestamp)."))
        elif cls is str and not texts and _NUMERIC_TEXT.fullmatch(value):
            found.append((field_path(path), f"Input should be a number (as a JSON number) or {_FORMS[form]}, not "
                          "a number as text (read as a timestamp)." if numbers else
                          f"Input should be {_FORMS[form]}, not a number (read as a timestamp)."))
    elif plan[0] == "union":
        _, number, objects, arrays = plan
        if value is True or value is False:
            if number:
                found.append((field_path(path), _NOT_BOOLEAN))
        elif isinstance(value, dict):
            _walk(objects, value, path, found)
        elif isinstance(value, list):
            _walk(arrays, value, path, found)
    elif plan[0] == "object":
        if isinstance(value, dict):
            _, properties, others = plan
            for name, item in value.items():
                _walk(properties.get(name, others), item, (*path, name), found)
    elif isinstance(value, list):
        _, items, first = plan
        for index, item in enumerate(value):
            _walk(first[index] if index < len(first) else items, item, (*path, index), found)

