"""Frozen slotted dataclasses built without their `__init__` (the hot path's UI blocks and suggestions), and
the repr of the plain classes written where a dataclass would cost its import (`fields_repr`).

A frozen dataclass's `__init__` sets each field through `object.__setattr__` (or, as `UIBlock` and
`Suggestion` do, through the slots' own setters): a call per field. An instance of a class with the same
slots and nothing else takes plain attribute stores, and assigning it the frozen class afterwards (CPython
allows `__class__` assignment between classes of the same layout) makes it an instance of that class, equal to
one `__init__` would have made, frozen from then on.
"""

from __future__ import annotations

import reprlib
from dataclasses import FrozenInstanceError
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


class _Factory:
    """The default of a field made anew for each instance (a dataclass's `default_factory`): `__init__`
    tests for this marker, shown in the signature as a dataclass's `<factory>`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


FACTORY: Any = _Factory()


class Fields:
    """Base of plain classes that behave as `@dataclass` ones with the fields `_fields` (each class that
    declares fields lists them itself, and in `__match_args__`): equality with an instance of the same class
    field by field, no hash (a mutable dataclass has none) and the dataclass repr. The decorator compiles its
    generated methods per class when the module is imported; these are compiled once, here."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._values() == other._values()
        return NotImplemented  # defining __eq__ alone leaves the class unhashable, as a mutable dataclass

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        return fields_repr(self, self._fields)


class Frozen(Fields):
    """`Fields` as `@dataclass(frozen=True)`: the hash of the fields' tuple, `FrozenInstanceError` on
    assignment or deletion, pickling and copying through the fields (a slotted class has no `__dict__` to
    restore). A subclass sets its fields in `__init__` with `object.__setattr__`."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(self._values())

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __getstate__(self) -> list[Any]:
        return list(self._values())

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(self._fields, state):  # noqa: B905 (as a dataclass's)
            object.__setattr__(self, name, value)
