"""PII redaction: field paths compiled once into a function that censors values in place.

Paths: `customer.email`, `*.ssn` (any key at that level), `lines[*].card` (every list item).
Fail closed: when an explicit path meets a value it cannot look into (a string where an object was
declared, an object where a list was declared) the call fails instead of sending what it could not check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

DEFAULT_CENSOR = "[REDACTED]"
_SEGMENT = re.compile(r"^(\*|[A-Za-z_][\w-]*)((?:\[\*\])*)$")

Redactor = Callable[[Any], None]


class RedactionError(Exception):
    """A redaction path could not be applied to the data; nothing may be sent."""


def parse_path(path: str) -> tuple[tuple[str, str | None], ...]:
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


def _walk(node: Any, steps: tuple[tuple[str, str | None], ...], i: int, censor: Any, path: str) -> None:
    if node is None:
        return
    kind, name = steps[i]
    last = i == len(steps) - 1
    if kind == "key":
        if not isinstance(node, dict):
            raise RedactionError(f"redaction path {path!r} expected an object at {name!r}")
        if name not in node:
            return
        if last:
            node[name] = censor
        else:
            _walk(node[name], steps, i + 1, censor, path)
    elif kind == "each":
        if not isinstance(node, list):
            raise RedactionError(f"redaction path {path!r} expected a list")
        for item in node:
            _walk(item, steps, i + 1, censor, path)
    else:  # any: every value of an object or item of a list; scalars hold no fields
        if isinstance(node, dict):
            if last:
                for key in node:
                    node[key] = censor
            else:
                for value in node.values():
                    if isinstance(value, dict | list):
                        _walk(value, steps, i + 1, censor, path)
        elif isinstance(node, list):
            for item in node:
                if last:
                    raise RedactionError(f"redaction path {path!r} ends on a list")
                if isinstance(item, dict | list):
                    _walk(item, steps, i + 1, censor, path)


@lru_cache(maxsize=512)
def compile_paths(paths: tuple[str, ...], censor: Any = DEFAULT_CENSOR) -> Redactor:
    """One function that applies every path to a value in place (cached per path set)."""
    compiled = [(p, parse_path(p)) for p in paths]

    def redact(data: Any) -> None:
        for path, steps in compiled:
            _walk(data, steps, 0, censor, path)

    return redact


def redactor(paths: Sequence[str], censor: Any = DEFAULT_CENSOR) -> Redactor:
    return compile_paths(tuple(paths), censor)
