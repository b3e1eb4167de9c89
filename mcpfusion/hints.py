"""A handler's type hints, as `typing.get_type_hints(fn, include_extras=True)` gives them, for less.

Under `from __future__ import annotations` every annotation is a string that `typing` compiles anew at each
evaluation: compiling was about half of declaring an action (a server of 500 actions evaluates ~1,300 of
them, most of them repeated: `str`, `dict[str, Any]`, `Annotated[str, Field(max_length=40)]`). Here each
distinct string is compiled once per process, then evaluated in the function's module as `typing` does.
Whatever is not the plain case (a wrapped function, a forward reference left inside a type, a special form,
an annotation that fails to evaluate) goes to `typing` itself, so the values and the errors stay its own.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

_CODE: dict[str, types.CodeType] = {}  # annotation source -> its compiled expression
_REFUSED_ORIGINS = (typing.ClassVar, typing.Final, typing.Generic, typing.Protocol)  # typing refuses these


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`typing.get_type_hints(fn, include_extras=True)`."""
    annotations = getattr(fn, "__annotations__", None)
    if not isinstance(fn, types.FunctionType) or hasattr(fn, "__wrapped__") or not isinstance(annotations, dict):
        return typing.get_type_hints(fn, include_extras=True)
    hints: dict[str, Any] = {}
    for name, value in annotations.items():
        if isinstance(value, str):
            try:
                code = _CODE.get(value)
                if code is None:
                    code = _CODE[value] = compile(value, "<annotation>", "eval")
                value = eval(code, fn.__globals__)  # noqa: S307 - what typing.get_type_hints evaluates
            except Exception:
                return typing.get_type_hints(fn, include_extras=True)  # raises typing's own error
        if value is None:
            value = types.NoneType
        if not _plain(value):
            return typing.get_type_hints(fn, include_extras=True)
        hints[name] = value
    return hints


def _plain(value: Any) -> bool:
    """A class or a parameterized type that `typing` would return as it is: nothing left to resolve in it."""
    if isinstance(value, type):  # a class (most hints): nothing inside it to resolve
        return value is not typing.Generic and value is not typing.Protocol
    if value is Any:
        return True
    origin = typing.get_origin(value)
    if origin is None:
        if not isinstance(value, type) or value in (typing.Generic, typing.Protocol):
            return False
    elif origin in _REFUSED_ORIGINS:
        return False
    return _settled(value)


def _settled(value: Any) -> bool:
    """No forward reference inside (typing resolves the strings of `list["X"]`, not the values of a Literal)."""
    args = typing.get_args(value)
    if not args:
        return not isinstance(value, typing.ForwardRef)
    if isinstance(value, types.GenericAlias) and any(isinstance(a, str) for a in args):
        return False
    return all(_settled(a) for a in args)
