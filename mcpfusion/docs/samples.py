"""Deterministic sample values built from JSON schemas (example arguments and sample responses).

`variant` shifts enum choices and numbers so that a list of samples covers the enum values a presenter's
conditional rules, UI blocks and suggestions may depend on (e.g. an `overdue` status).

A sample keeps to the schema's bounds, `multipleOf`, lengths, formats and (simple) patterns, and to the item
types of a tuple; a value it cannot make fit (a pattern with look-arounds, a format longer than `maxLength`)
is None, and `arguments` then leaves that parameter out rather than show an example that fails (the docs
name it: the manifest's `example_missing`). So does a value the action itself refuses (`arguments(...,
faults=)`: its validators, `PastDate`, a naive datetime, decimal places) when no other try fits either, and
an example larger than `MAX_ITEMS` items or `MAX_LENGTH` characters (a schema asking for a million items gets
no example, not a page of megabytes). An `allOf` is sampled as its branches merged.
Example arguments take their dates from `today` (a month ahead: a due date, a booking), so they stay valid
for an action that refuses past dates; sample responses keep fixed dates, the same on every run.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import json
import math
import operator
import re
import warnings
from collections.abc import Callable
from typing import Any

_FORMATS = {
    "email": "jane.doe@example.com",
    "name-email": "Jane Doe <jane.doe@example.com>",
    "date": "2026-01-15",
    "date-time": "2026-01-15T09:30:00Z",
    "time": "09:30:00",
    "duration": "P1D",
    "uuid": "3f2b8c1e-5d4a-4f6b-9c2d-1a7e8b9c0d1f",
    "uuid4": "3f2b8c1e-5d4a-4f6b-9c2d-1a7e8b9c0d1f",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "hostname": "example.com",
    "ipv4": "192.0.2.10",
    "ipv6": "2001:db8::10",
    "ipvanyaddress": "192.0.2.10",
    "ipv4network": "192.0.2.0/24",
    "ipv6network": "2001:db8::/32",
    "ipvanynetwork": "192.0.2.0/24",
    "ipv4interface": "192.0.2.10/24",
    "ipv6interface": "2001:db8::10/32",
    "ipvanyinterface": "192.0.2.10/24",
    "base64": "ZXhhbXBsZQ==",  # "example" (`Base64Str`, `Base64Bytes`)
    "base64url": "ZXhhbXBsZQ==",
}
_MAX_DEPTH = 6
_AHEAD = dt.timedelta(days=30)  # example dates: a month after today
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


#: The largest example a sample makes: an array of more items, a string of more characters than a schema asks
#: for gets no sample (None), rather than a page of megabytes (a schema mirrored from a remote server may ask
#: for a million items); and at most so many values in all (nested arrays multiply).
MAX_ITEMS = 64
MAX_LENGTH = 4096
MAX_VALUES = 10_000


class _Plan:
    """How one sample is made, passed down its recursion: `today` (dates a month after it, else fixed), `alt`
    (bits of another try: 1 past dates, 2 date-times without an offset, 4 whole numbers), `strict` (an object
    missing a required value, or an array an item, is None: an example, never a partial one), what is left
    of the `MAX_VALUES` budget, and the declared examples: those that do not fit (`misfits`), those to pass
    over (`passed`) and those taken (`used`), each as (property name, example)."""

    __slots__ = ("today", "alt", "strict", "left", "misfits", "passed", "used")

    def __init__(self, today: dt.date | None, alt: int, strict: bool,
                 misfits: list[tuple[str, Any]] | None = None, passed: list[tuple[str, Any]] | None = None,
                 used: list[tuple[str, Any]] | None = None) -> None:
        self.today = today
        self.alt = alt
        self.strict = strict
        self.left = MAX_VALUES
        self.misfits = misfits
        self.passed = passed
        self.used = used


def sample(schema: Any, root: dict[str, Any] | None = None, *, name: str = "value", variant: int = 0,
           depth: int = 0, today: dt.date | None = None, alt: int = 0, strict: bool = False,
           misfits: list[tuple[str, Any]] | None = None, passed: list[tuple[str, Any]] | None = None,
           used: list[tuple[str, Any]] | None = None) -> Any:
    """A value that fits `schema`, or None when none is found (best effort: custom validators, look-arounds
    and cross-field rules are not honoured). With `today`, dates are a month after it; else fixed. `alt`:
    another try (see `_Plan`); `strict`: no object without a required field, no array with an item missing.
    A declared example that does not fit its own schema is passed over, and added to `misfits` as (the
    property's name, the example); so is one `passed` names (one a model's validator refused); each example
    taken is added to `used`."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    return _sample(schema, root, name, variant, depth, _Plan(today, alt, strict, misfits, passed, used))


def _sample(schema: Any, root: dict[str, Any], name: str, variant: int, depth: int, plan: _Plan) -> Any:
    schema = resolve(schema, root)
    plan.left -= 1
    if depth > _MAX_DEPTH or plan.left < 0:
        return None
    if "examples" in schema and isinstance(schema["examples"], list) and schema["examples"]:
        # An author's mistake (`Literal["a", "b"]` with `examples=["c"]`): a sample of it would not validate.
        fitting = [e for e in schema["examples"] if _example_fits(e, schema)]
        if plan.misfits is not None:
            plan.misfits.extend((name, e) for e in schema["examples"] if e not in fitting)
        if plan.passed:
            fitting = [e for e in fitting if (name, e) not in plan.passed]
        if fitting:
            if plan.used is not None:
                plan.used.append((name, fitting[variant % len(fitting)]))
            return fitting[variant % len(fitting)]
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        # The first that keeps to the schema's other rules (`Literal["x", "Y"]` with a pattern `^[A-Z]$`).
        values = schema["enum"][variant % len(schema["enum"]):] + schema["enum"][:variant % len(schema["enum"])]
        return next((v for v in values if _fits(v, schema)), None)
    if "default" in schema and schema["default"] is not None and variant == 0:
        return schema["default"]
    for key in ("anyOf", "oneOf"):
        options = [resolve(o, root) for o in schema.get(key, [])]
        options = [o for o in options if o.get("type") != "null"]
        if options:
            # `Optional[str] = Field(description=...)`: the description sits beside the anyOf.
            option = {"description": schema["description"], **options[0]} if "description" in schema else options[0]
            return _sample(option, root, name, variant, depth + 1, plan)
    if isinstance(schema.get("allOf"), list) and schema["allOf"]:
        return _sample(merged(schema, root), root, name, variant, depth + 1, plan)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        return _object(schema, root, variant, depth, plan)
    if kind == "array":
        return _array(schema, root, name, variant, depth, plan)
    described = described_example(schema) if variant == 0 else None
    if described is not None and kind in ("string", "integer", "number", None):
        try:
            value = {"integer": int, "number": float}.get(kind, str)(described)
        except ValueError:
            value = None  # "e.g. ten" for a number: not usable, fall back to a generated value
        if value is not None and _fits(value, schema):  # (not "e.g. someone@example.com" under maxLength 8)
            return value
    if kind == "integer":
        return _number(schema, 42 + variant, int)
    if kind == "number":
        return _number(schema, 42 + variant, int) if plan.alt & 4 else _number(schema, 12.5 + variant, float)
    if kind == "boolean":
        return variant % 2 == 1
    if kind == "null":
        return None
    if kind == "string" or kind is None:
        return _string(schema, root, name, variant, depth, plan)
    return None


def merged(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """An `allOf` as one schema: its branches' properties together (one named by two branches is both
    schemas, an `allOf` again), their `required` together, any other keyword from the first that has it."""
    out: dict[str, Any] = {}
    parts = [{k: v for k, v in schema.items() if k != "allOf"}, *(resolve(b, root) for b in schema["allOf"])]
    for part in parts:
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                known = out.setdefault("properties", {})
                for prop, sub in value.items():
                    known[prop] = {"allOf": [known[prop], sub]} if prop in known else sub
            elif key == "required" and isinstance(value, list):
                out["required"] = list(dict.fromkeys([*out.get("required", []), *value]))
            else:
                out.setdefault(key, value)
    return out


def _object(schema: dict[str, Any], root: dict[str, Any], variant: int, depth: int, plan: _Plan) -> Any:
    """Every property (strict: an optional one without a value left out, and None when a required one has
    none), the required names no property declares from `additionalProperties`, then more of those while
    `minProperties` asks for them."""
    props = schema.get("properties", {}) if isinstance(schema.get("properties"), dict) else {}
    required = [r for r in schema.get("required", []) if isinstance(r, str)] if plan.strict else []
    extra = schema.get("additionalProperties", {})
    out: dict[str, Any] = {}
    for key, sub in props.items():
        value = _sample(sub, root, key, variant, depth + 1, plan)
        if value is None and plan.strict and not _allows_null(sub, root):
            if key in required:
                return None
            continue
        out[key] = value
    if not plan.strict:
        return out
    wanted = [r for r in required if r not in out]
    low = schema.get("minProperties", 0)
    if isinstance(low, int) and low > len(out) + len(wanted):
        free = [k for k in (f"key_{i}" for i in range(1, MAX_ITEMS + 1)) if k not in out and k not in wanted]
        wanted += free[:low - len(out) - len(wanted)]
    for key in wanted:
        if extra is False or key in props:  # (a property with no value: the object has none either)
            return None
        value = _sample(extra if isinstance(extra, dict) else {}, root, key, variant, depth + 1, plan)
        if value is None and not _allows_null(extra, root):
            return None
        out[key] = value
    return out if len(out) >= (low if isinstance(low, int) else 0) else None


def _array(schema: dict[str, Any], root: dict[str, Any], name: str, variant: int, depth: int,
           plan: _Plan) -> list[Any] | None:
    """As many items as `minItems` asks (at least one, at most `maxItems`); a tuple's items by position; one
    that `contains` asks for first. None past `MAX_ITEMS`; strict: None when an item has no value, or when
    `uniqueItems` asks for more distinct ones than it found."""
    prefix = schema.get("prefixItems") or []
    items = schema.get("items", {})
    low = int(schema.get("minItems", 0))
    size = max(1, low, len(prefix))
    if "maxItems" in schema:
        size = min(size, int(schema["maxItems"]))
    if items is False:  # a fixed tuple: no item past its positions
        size = min(size, len(prefix))
    if size > MAX_ITEMS:
        return None
    contains = schema.get("contains")
    out: list[Any] = []
    tries = size * 4 if plan.strict and schema.get("uniqueItems") else size  # (distinct items: more tries)
    for i in range(tries):
        if len(out) == size:
            break
        at = len(out)
        sub = contains if at == 0 and isinstance(contains, dict) and at >= len(prefix) else \
            prefix[at] if at < len(prefix) else items
        value = _sample(sub, root, name, variant + i, depth + 1, plan)
        if plan.strict and tries > size and value in out:
            continue
        out.append(value)
    if not plan.strict:
        return out
    if len(out) < size or any(v is None and not _allows_null(prefix[i] if i < len(prefix) else items, root)
                              for i, v in enumerate(out)):
        return [] if low == 0 and not prefix and not isinstance(contains, dict) else None
    return out


def _string(schema: dict[str, Any], root: dict[str, Any], name: str, variant: int, depth: int,
            plan: _Plan) -> str | None:
    """The format's example, else `{name}_{n}` fitted to the lengths, else a string the pattern matches."""
    if schema.get("contentMediaType") == "application/json":  # a `Json[...]` field: JSON text of its content
        inner = _sample(schema.get("contentSchema") or {}, root, name, variant, depth + 1, plan)
        return json.dumps(inner)
    fmt = schema.get("format")
    example = _FORMATS.get(fmt) if isinstance(fmt, str) else None
    if fmt in ("date", "date-time"):
        day = _FORMATS["date"] if plan.today is None else (plan.today + _AHEAD).isoformat()
        if plan.alt & 1:  # a date in the past (`PastDate`)
            day = ((plan.today or dt.date(2026, 1, 15)) - _AHEAD - _AHEAD).isoformat()
        offset = "" if plan.alt & 2 else "Z"  # (`NaiveDatetime` refuses one)
        example = day if fmt == "date" else f"{day}T09:30:00{offset}"
    if example is not None:
        return example if _fits(example, schema) else None
    low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
    if low > MAX_LENGTH:
        return None
    text = f"{name}_{variant + 1}".ljust(low, "x")
    text = text[:high] if high is not None else text
    if _fits(text, schema):
        return text
    return pattern_example(schema["pattern"], low, high) if isinstance(schema.get("pattern"), str) else None


_JSON_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def _example_fits(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a declared example keeps to its schema's enum, const and type, and to `_fits`."""
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return False
    if "const" in schema and value != schema["const"]:
        return False
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    if kinds and not any(_JSON_TYPES.get(k, lambda v: True)(value) for k in kinds):
        return False
    return _fits(value, schema)


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a scalar keeps to the schema's lengths, pattern, bounds and `multipleOf`."""
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
            return False
        pattern = schema.get("pattern")
        if not isinstance(pattern, str):
            return True
        compiled = _compiled(pattern)  # (a pattern Python cannot read: no example rather than a wrong one)
        return compiled is not None and compiled.search(value) is not None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return True
    bounds = (("minimum", operator.ge), ("maximum", operator.le), ("exclusiveMinimum", operator.gt),
              ("exclusiveMaximum", operator.lt))
    if not all(key not in schema or holds(value, schema[key]) for key, holds in bounds):
        return False
    step = schema.get("multipleOf")
    return not step or _multiple(value, step)


def _multiple(value: float, step: float) -> bool:
    quotient = value / step
    return math.isclose(quotient, round(quotient), rel_tol=1e-9, abs_tol=1e-9)


def _number(schema: dict[str, Any], value: float, kind: type) -> Any:
    """`value` if it fits; else the fitting value nearest to it among the bounds, one step inside them, the
    middle between them, each moved onto `multipleOf`. None when none fits (bounds that exclude each other)."""
    lows = [schema[k] for k in ("minimum", "exclusiveMinimum") if isinstance(schema.get(k), int | float)]
    highs = [schema[k] for k in ("maximum", "exclusiveMaximum") if isinstance(schema.get(k), int | float)]
    low, high = (max(lows) if lows else None), (min(highs) if highs else None)
    near: list[float] = [value]
    if low is not None:
        near += [low, low + 1, math.floor(low) + 1]
    if high is not None:
        near += [high, high - 1, math.ceil(high) - 1]
    if low is not None and high is not None:
        near.append((low + high) / 2)  # gt=0, lt=1: neither bound nor a whole step inside fits
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        near = [n * step for c in near for n in (math.floor(c / step), math.ceil(c / step))]
    for candidate in sorted(near, key=lambda c: abs(c - value)):
        if kind is int and candidate != int(candidate):
            continue
        if _fits(kind(candidate), schema):
            return kind(candidate)
    return None


# -- patterns ------------------------------------------------------------------------------------------------

class _Unsupported(Exception):
    """A regular expression construct the sampler does not write (a look-around, a back-reference...)."""


_MAX_GROWN = 4096  # a pattern example is grown to a minLength up to this (an example, not a stress test)
_POOL = "a1A_-x. "  # the characters tried for a class that starts with none (`[^...]`, `\w`)


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str] | None:
    r"""`pattern` compiled, or None when Python reads it otherwise than the server's engine may (`[[:alpha:]]`,
    a FutureWarning) or not at all (`\p{L}`)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return re.compile(pattern)
    except (re.error, FutureWarning, RecursionError):
        return None


def pattern_example(pattern: str, min_length: int = 0, max_length: int | None = None) -> str | None:
    """A short string that `pattern` matches (searched, as JSON Schema does) within the lengths, or None: the
    shortest the pattern allows, then one with every optional part once; each, when shorter than
    `min_length`, grown by repeating what the pattern lets repeat (`^[A-Z]+$` of length 3: "AAA")."""
    compiled = _compiled(pattern)
    try:
        tree = importlib.import_module("re._parser").parse(pattern) if compiled is not None else None
    except Exception:  # (a Python without re._parser, or one that reads the pattern otherwise)
        return None
    if compiled is None or tree is None:
        return None
    high = max_length if max_length is not None else math.inf
    for at_least_one in (False, True):
        text = _written(tree, at_least_one, 0)
        if text is not None and len(text) < min_length <= _MAX_GROWN:
            text = _written(tree, at_least_one, min_length - len(text))
        if text is None:
            return None
        # Still short (`^[A-Z]` of length 3, no repeat to grow): its last character again, if still matched.
        padded = text.ljust(min_length, text[-1:] or "a") if min_length <= _MAX_GROWN else text
        for candidate in dict.fromkeys((text, padded)):
            if min_length <= len(candidate) <= high and compiled.search(candidate):
                return candidate
    return None


def _written(tree: Any, at_least_one: bool, grow: int) -> str | None:
    """The text `_write` makes of a parsed pattern, `grow` characters longer where it can (None: a construct
    it does not write)."""
    out: list[str] = []
    try:
        _write(list(tree), out, at_least_one, [grow])
    except (_Unsupported, ValueError, TypeError, IndexError):
        return None
    return "".join(out)


def _write(items: list[Any], out: list[str], at_least_one: bool, grow: list[int]) -> None:
    """Append the characters the pattern's items match to `out`, one an entry; repeats write their least count
    (one, with `at_least_one`), then more while `grow[0]` characters are still wanted."""
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            out.append(chr(arg))
        elif kind == "NOT_LITERAL":
            out.append(next(c for c in _POOL if ord(c) != arg))
        elif kind == "ANY":
            out.append("a")
        elif kind == "IN":
            out.append(_class_member(arg))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, body = arg
            count = max(low, min(high, 1)) if at_least_one else low
            for _ in range(count):
                _write(list(body), out, at_least_one, grow)
            while grow[0] > 0 and count < high:  # lengthen here: the lengths ask for more than the least
                before = len(out)
                _write(list(body), out, at_least_one, [0])  # (counted here, not again inside)
                count += 1
                if len(out) == before:  # an empty body never lengthens anything
                    break
                grow[0] -= len(out) - before
        elif kind in ("SUBPATTERN", "ATOMIC_GROUP"):
            _write(list(arg[-1] if kind == "SUBPATTERN" else arg), out, at_least_one, grow)
        elif kind == "BRANCH":
            _write(list(arg[1][0]), out, at_least_one, grow)
        elif kind != "AT":  # anchors write nothing; the final search says whether they hold
            raise _Unsupported(kind)


def _class_member(items: list[Any]) -> str:
    r"""A character of a class (`[A-Z0-9_]`, `\d`, `[^,]`): its first literal or range, else one of a pool."""
    first = [chr(arg) if str(op) == "LITERAL" else chr(arg[0]) for op, arg in items if str(op) in ("LITERAL", "RANGE")]
    for candidate in ([] if any(str(op) == "NEGATE" for op, _ in items) else first) + list(_POOL) + ["1", "a"]:
        if _in_class(candidate, items):
            return candidate
    raise _Unsupported("class")


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


_CATEGORIES = {"DIGIT": str.isdigit, "SPACE": str.isspace, "WORD": _is_word}


def _in_class(char: str, items: list[Any]) -> bool:
    negate, hit = False, False
    for op, arg in items:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            hit = hit or ord(char) == arg
        elif kind == "RANGE":
            hit = hit or arg[0] <= ord(char) <= arg[1]
        elif kind == "CATEGORY":
            name = str(arg).removeprefix("CATEGORY_")
            test = _CATEGORIES.get(name.removeprefix("NOT_"))
            if test is None:
                raise _Unsupported(str(arg))
            hit = hit or (test(char) != name.startswith("NOT_"))
        else:
            raise _Unsupported(kind)
    return hit != negate


Faults = Callable[[dict[str, Any]], list[str]]


def arguments(schema: dict[str, Any], today: dt.date | None = None, faults: Faults | None = None) -> dict[str, Any]:
    """Example arguments for an input schema: its required parameters with sample values (dates a month after
    `today`, by default the current date). A parameter no value was found for is left out: the call then
    says what it needs, rather than refuse a made-up value.

    `faults`: the paths of the fields the action refuses in a call with these arguments (as its
    `ValidationFailed` names them). A parameter it refuses gets another try (a past date, a date-time
    without an offset, a whole number, the next enum value...), else is left out as well; a fault no
    parameter explains leaves no example at all: a valid example or none."""
    props = schema.get("properties", {})
    today = today or dt.date.today()
    found = {key: sample(props[key], schema, name=key, today=today, strict=True)
             for key in schema.get("required", []) if key in props}
    found = {key: value for key, value in found.items() if value is not None or _allows_null(props[key], schema)}
    if faults is None:
        return found
    for _ in range(len(found) + 1):
        refused = _refused(faults(found), found)
        if refused is None:
            return {}
        if not refused:
            return found
        for key in refused:
            other = _another(key, found, props[key], schema, today, faults)
            if other is _NONE:
                del found[key]
            else:
                found[key] = other
    return {}


_NONE = object()
_TRIES = [(alt, variant) for variant in (0, 1) for alt in range(8)][1:]  # (0, 0) is the first sample


def _another(key: str, found: dict[str, Any], schema: Any, root: dict[str, Any], today: dt.date,
             faults: Faults) -> Any:
    """Another value of `key` the action takes beside the other arguments, else `_NONE`."""
    tried = [found[key]]
    for alt, variant in _TRIES:
        value = sample(schema, root, name=key, today=today, alt=alt, variant=variant, strict=True)
        if value in tried or (value is None and not _allows_null(schema, root)):
            continue
        tried.append(value)
        refused = _refused(faults({**found, key: value}), {**found, key: value})
        if refused is not None and key not in refused:
            return value
    return _NONE


def _refused(paths: list[str], found: dict[str, Any]) -> list[str] | None:
    """The parameters of `found` the fault paths name (`line.sku`, `codes[0]`: `line`, `codes`); a fault of a
    parameter left out is already named missing. None: a fault names no parameter (the call as a whole)."""
    out: list[str] = []
    for path in paths:
        owner = max((k for k in found if path == k or path.startswith((f"{k}.", f"{k}["))), key=len, default=None)
        if owner is None:
            if _names_absent(path, found):
                continue
            return None
        if owner not in out:
            out.append(owner)
    return out


def _names_absent(path: str, found: dict[str, Any]) -> bool:
    """Whether `path` is a top-level parameter name (no nesting): one left out, so required and missing."""
    return bool(path) and path != "(arguments)" and not any(c in path for c in ".[") and path not in found


def _allows_null(schema: Any, root: dict[str, Any]) -> bool:
    schema = resolve(schema, root)
    kinds = schema.get("type")
    return (kinds == "null" or (isinstance(kinds, list) and "null" in kinds) or schema.get("const", 0) is None
            or any(_allows_null(o, root) for o in schema.get("anyOf", []) + schema.get("oneOf", [])))
