"""PII redaction: field paths compiled once into a function that censors values in place.

Paths: `customer.email`, `*.ssn` (any key at that level), `lines[*].card` (every list item).
Fail closed: when an explicit path meets a value it cannot look into (a string where an object was
declared, an object where a list was declared) the call fails instead of sending what it could not check.
A `*` segment is a filter, not a declaration: the next segment applies to the matched values that can take
it (objects, or lists of objects, for a key) and other siblings are skipped (`*.ssn` beside a list of strings).

The redactor hands back the real values it removed, so that the egress guard (`censor.py`) can keep them out
of every other block of the response; `redact_schema` types the same paths as the censor in a JSON schema.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

DEFAULT_CENSOR = "[REDACTED]"
_SEGMENT = re.compile(r"^(\*|[A-Za-z_][\w-]*)((?:\[\*\])*)$")

Steps = tuple[tuple[str, str | None], ...]
Redactor = Callable[..., None]  # redact(data, removed: list | None): the real values censored go to `removed`


class RedactionError(Exception):
    """A redaction path could not be applied to the data; nothing may be sent."""


def parse_path(path: str) -> Steps:
    """`lines[*].card` -> (("key", "lines"), ("each", None), ("key", "card"))."""
    steps: list[tuple[str, str | None]] = []
    for segment in path.split("."):
        if segment == "[*]":
            steps.append(("each", None))
            continue
        match = _SEGMENT.match(segment)
        if not match:
            raise ValueError(f"invalid redaction path {path!r}: bad segment {segment!r}")
        name, lists = match.groups()
        steps.append(("any", None) if name == "*" else ("key", name))
        steps.extend(("each", None) for _ in range(lists.count("[*]")))
    if steps[-1][0] == "each":
        steps.append(("any", None))
    return tuple(steps)


def _fits(value: Any, kind: str) -> bool:
    """Whether a value matched by `*` can take the next step (else the wildcard skips it)."""
    if kind == "each":
        return isinstance(value, list)
    if kind == "key":
        return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))
    return isinstance(value, dict | list)


def _walk(node: Any, steps: Steps, i: int, censor: Any, path: str, removed: list[Any] | None) -> None:
    if node is None:
        return
    kind, name = steps[i]
    last = i == len(steps) - 1
    if kind == "key":
        if isinstance(node, list) and i and steps[i - 1][0] == "any":
            for item in node:  # `*.ssn` on a list of objects: every object's ssn
                if isinstance(item, dict):
                    _walk(item, steps, i, censor, path, removed)
            return
        if not isinstance(node, dict):
            raise RedactionError(f"redaction path {path!r} expected an object at {name!r}")
        if name not in node:
            return
        if last:
            if removed is not None:
                removed.append(node[name])
            node[name] = censor
        else:
            _walk(node[name], steps, i + 1, censor, path, removed)
    elif kind == "each":
        if not isinstance(node, list):
            raise RedactionError(f"redaction path {path!r} expected a list")
        for item in node:
            _walk(item, steps, i + 1, censor, path, removed)
    else:  # any: every value of an object or item of a list
        if isinstance(node, dict):
            if last:
                if removed is not None:
                    removed.extend(node.values())
                for key in node:
                    node[key] = censor
            else:
                after = steps[i + 1][0]
                for value in node.values():
                    if _fits(value, after):
                        _walk(value, steps, i + 1, censor, path, removed)
        elif isinstance(node, list):
            if last:
                raise RedactionError(f"redaction path {path!r} ends on a list")
            after = steps[i + 1][0]
            for item in node:
                if _fits(item, after):
                    _walk(item, steps, i + 1, censor, path, removed)


def _key_path(path: str, names: list[str], censor: Any) -> Callable[[Any, list[Any] | None], None]:
    """`_walk` for a path of plain keys (`customer.email`, the common case), without the per-step dispatch:
    same result, same errors."""
    *parents, leaf = names

    def apply(node: Any, removed: list[Any] | None) -> None:
        for name in parents:
            if node is None:
                return
            if not isinstance(node, dict):
                raise RedactionError(f"redaction path {path!r} expected an object at {name!r}")
            if name not in node:
                return
            node = node[name]
        if node is None:
            return
        if not isinstance(node, dict):
            raise RedactionError(f"redaction path {path!r} expected an object at {leaf!r}")
        if leaf not in node:
            return
        if removed is not None:
            removed.append(node[leaf])
        node[leaf] = censor

    return apply


def _steps_path(path: str, steps: Steps, censor: Any) -> Callable[[Any, list[Any] | None], None]:
    def apply(node: Any, removed: list[Any] | None) -> None:
        _walk(node, steps, 0, censor, path, removed)

    return apply


@lru_cache(maxsize=512)
def compile_paths(paths: tuple[str, ...], censor: Any = DEFAULT_CENSOR) -> Redactor:
    """One function that applies every path to a value in place (cached per path set). Given a list as
    `removed`, it appends the real values it censored."""
    appliers = []
    for path in paths:
        steps = parse_path(path)
        if all(kind == "key" for kind, _ in steps):
            appliers.append(_key_path(path, [str(name) for _, name in steps], censor))
        else:
            appliers.append(_steps_path(path, steps, censor))

    if len(appliers) == 1:
        return appliers[0]  # one path: no loop around it

    def redact(data: Any, removed: list[Any] | None) -> None:
        for apply in appliers:
            apply(data, removed)

    return redact


def redactor(paths: Sequence[str], censor: Any = DEFAULT_CENSOR) -> Redactor:
    return compile_paths(tuple(paths), censor)


# -- the same paths on a JSON schema ----------------------------------------------------------------------


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema itself, or its anyOf/oneOf branches (Optional fields, embeds of item-or-list)."""
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            return [b for s in schema[union] if isinstance(s, dict) for b in _branches(s)]
    return [schema]


def _censored(schema: dict[str, Any], censor: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"const": censor}
    if isinstance(censor, str):
        out["type"] = "string"
    if schema.get("description"):
        out["description"] = f"{schema['description']} (redacted)"
    return out


def _walk_schema(schema: dict[str, Any], steps: Steps, i: int, censor: Any) -> None:
    kind, name = steps[i]
    last = i == len(steps) - 1
    for branch in _branches(schema):
        if kind == "key":
            if i and steps[i - 1][0] == "any" and isinstance(branch.get("items"), dict):
                _walk_schema(branch["items"], steps, i, censor)
            props = branch.get("properties")
            if isinstance(props, dict) and isinstance(props.get(name), dict):
                if last:
                    props[name] = _censored(props[name], censor)
                else:
                    _walk_schema(props[name], steps, i + 1, censor)
            extra = branch.get("additionalProperties")
            if isinstance(extra, dict):  # a dict[str, X]: any key may be the one named
                if last:
                    branch["additionalProperties"] = {"anyOf": [extra, _censored(extra, censor)]}
                else:
                    _walk_schema(extra, steps, i + 1, censor)
        elif kind == "each":
            if isinstance(branch.get("items"), dict):
                _walk_schema(branch["items"], steps, i + 1, censor)
        else:
            targets = [s for s in (branch.get("properties") or {}).values() if isinstance(s, dict)]
            if isinstance(branch.get("additionalProperties"), dict):
                targets.append(branch["additionalProperties"])
            if isinstance(branch.get("items"), dict) and not last:
                targets.append(branch["items"])
            if last:
                for key, sub in list((branch.get("properties") or {}).items()):
                    branch["properties"][key] = _censored(sub, censor)
                if isinstance(branch.get("additionalProperties"), dict):
                    branch["additionalProperties"] = _censored(branch["additionalProperties"], censor)
            else:
                for sub in targets:
                    _walk_schema(sub, steps, i + 1, censor)


def redact_schema(schema: dict[str, Any], paths: Sequence[str], censor: Any = DEFAULT_CENSOR) -> dict[str, Any]:
    """A copy of an (inlined, `$ref`-free) JSON schema where every redacted path is typed as the censor."""
    out = copy.deepcopy(schema)
    for path in paths:
        _walk_schema(out, parse_path(path), 0, censor)
    return out
