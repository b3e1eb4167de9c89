"""Frozen slotted dataclasses built without their `__init__` (the hot path's UI blocks and suggestions), and
the repr of the plain classes written where a dataclass would cost its import (`fields_repr`).

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (or, as `UIBlock` and
`Suggestion` do, through the slots' own setters): a call per field. An instance of a class with the same
slots and nothing else takes plain attribute stores, and assigning it the frozen class afterwards (CPython
allows `__class__` assignment between classes of the same layout) makes it an instance of that class, equal to
one `__init__` would have made, frozen from then on.
"""

from __future__ import annotations

from typing import Any


def writable(cls: type[Any]) -> type[Any]:
    """A class with `cls`'s slots and nothing else, to fill an instance of and then set its `__class__` to
    `cls`; every slot must be set before that (a frozen class has no defaults in its slots)."""
    if cls.__bases__ != (object,) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slotted class on object")
    return type(f"Writable{cls.__name__}", (), {"__slots__": cls.__slots__, "__module__": cls.__module__})


def fields_repr(obj: Any, names: tuple[str, ...]) -> str:
    """`obj`'s repr as a dataclass with these fields writes it: `Name(a=1, b='x')`. A dataclass compiles its
    generated methods when its module is imported, a cost of every process's start; the internal classes made
    once per declaration (an action's output, a resource, a prompt) are plain classes with this repr instead."""
    return f"{obj.__class__.__qualname__}({', '.join(f'{name}={getattr(obj, name)!r}' for name in names)})"
