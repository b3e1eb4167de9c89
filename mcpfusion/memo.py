"""Values remembered per object, by identity: for what is worked out once per annotation, dependant or other
long-lived declaration object (or per authenticated principal, which a caller's every call shares)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
MEMO_SIZE = 4096  # entries of one memo at the most: it starts again past them


def by_identity(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """`fn(obj)` remembered per object. By identity: an object may be unhashable, and two equal ones may
    differ in what `fn` reads (an annotation's extras). The memo keeps each object it holds alive, so an id
    is never reused while it is a key; it starts again past `MEMO_SIZE` objects."""
    memo: dict[int, tuple[Any, T]] = {}

    def remembered(obj: Any) -> T:
        known = memo.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1]
        value = fn(obj)
        if len(memo) >= MEMO_SIZE:
            memo.clear()
        memo[id(obj)] = (obj, value)
        return value

    return remembered
