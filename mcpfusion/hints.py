"""A handler's type hints, as `typing.get_type_hints(fn, include_extras=True)` gives them, for less.

Under `from __future__ import annotations` every annotation is a string that `typing` compiles anew at each
evaluation: compiling was about half of declaring an action (a server of 500 actions evaluates ~1,300 of
them, most of them repeated: `str`, `dict[str, Any]`, `Annotated[str, Field(max_length=40)]`). Here each
distinct string is compiled once per process, then evaluated in the function's module as `typing` does.
Whatever is not the plain case (a wrapped function, a forward reference left inside a type, a special form,
an annotation that fails to evaluate) goes to `typing` itself, so the values and the errors stay its own.

Evaluating was still most of declaring an action: `Annotated[str, Field(max_length=40)]` builds a `FieldInfo`
and an `Annotated` alias each time. An annotation made only of names, subscripts, `|`, constants and calls of
the declarative constructors (pydantic's `Field`, FastAPI's `Query`, `Depends`..., annotated-types'
constraints) has a value that depends on nothing but the objects its names are bound to: it is evaluated once
per distinct binding of those names, and the value shared, as an alias written once (`Id = Annotated[...]`)
is shared by every function that uses it. Anything else (an attribute, a lambda, a call of another function)
is evaluated anew each time, as `typing` does.
"""

from __future__ import annotations

import ast
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from annotated_types import BaseMetadata, GroupedMetadata
from fastapi import Body, Cookie, Depends, File, Form, Header, Path, Query, Security
from pydantic import Field

from . import memo

_REFUSED_ORIGINS = (typing.ClassVar, typing.Final, typing.Generic, typing.Protocol)  # typing refuses these


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`typing.get_type_hints(fn, include_extras=True)`."""
    annotations = getattr(fn, "__annotations__", None)
    if not isinstance(fn, types.FunctionType) or hasattr(fn, "__wrapped__") or not isinstance(annotations, dict):
        return typing.get_type_hints(fn, include_extras=True)
    namespace = fn.__globals__
    builtins = _builtins(namespace)
    known = _HANDLERS.get(id(fn.__code__))
    if known is not None and known.holds(fn, annotations, namespace, builtins):
        return dict(known.hints)
    hints: dict[str, Any] = {}
    shared = True  # every value is one kept in `_VALUES`
    for name, value in annotations.items():
        if isinstance(value, str):
            try:
                value, plain, kept = _evaluated(value, namespace, builtins)
            except Exception:
                return typing.get_type_hints(fn, include_extras=True)  # raises typing's own error
            shared = shared and kept
        else:
            value, plain = _settle(value)
            shared = False
        if not plain:
            return typing.get_type_hints(fn, include_extras=True)
        hints[name] = value
    if shared and builtins is not None:
        _remember(fn, annotations, namespace, builtins, hints)
    return hints


class _Handler:
    """The hints of the handlers made from one code object (a handler declared in a loop or a factory, as each
    tool of a server declares its `get`, `list`...): valid for another of them with the same annotations in
    the same module, its names bound to the same objects. One lookup per handler instead of one per annotation."""

    __slots__ = ("code", "namespace", "annotations", "names", "bound", "ids", "hints")

    def __init__(
        self,
        fn: types.FunctionType,
        annotations: dict[str, Any],
        namespace: dict[str, Any],
        names: tuple[str, ...],
        bound: list[Any],
        hints: dict[str, Any],
    ) -> None:
        self.code = fn.__code__  # kept alive: its id is not reused while it is a key
        self.namespace = namespace
        self.annotations = dict(annotations)
        self.names = names
        self.bound = bound
        self.ids = list(map(id, bound))
        self.hints = dict(hints)

    def holds(
        self,
        fn: types.FunctionType,
        annotations: dict[str, Any],
        namespace: dict[str, Any],
        builtins: dict[str, Any] | None,
    ) -> bool:
        if self.code is not fn.__code__ or self.namespace is not namespace or self.annotations != annotations:
            return False
        bound = _bound(self.names, namespace, builtins)
        return bound is not None and list(map(id, bound)) == self.ids  # `bound` kept alive: the ids are its


_HANDLERS: dict[int, _Handler] = {}  # id of a handler's code object -> its hints


def _remember(
    fn: types.FunctionType,
    annotations: dict[str, Any],
    namespace: dict[str, Any],
    builtins: dict[str, Any],
    hints: dict[str, Any],
) -> None:
    """Keep `fn`'s hints for the other handlers of its code (every annotation of it was a shared value)."""
    names = tuple(dict.fromkeys(n for text in annotations.values() for n in _SOURCES[text].names or ()))
    bound = _bound(names, namespace, builtins)
    if bound is not None:
        if len(_HANDLERS) >= memo.MEMO_SIZE:
            _HANDLERS.clear()
        _HANDLERS[id(fn.__code__)] = _Handler(fn, annotations, namespace, names, bound, hints)


def _builtins(namespace: dict[str, Any]) -> dict[str, Any] | None:
    """The builtins `eval` gives code run in `namespace`, None when it would make them up (no `__builtins__`)."""
    builtins = namespace.get("__builtins__")
    if isinstance(builtins, types.ModuleType):
        return vars(builtins)
    return builtins if isinstance(builtins, dict) else None


class _Source:
    """A distinct annotation string, compiled; `names` are the global names it reads when its value can be
    shared (None otherwise), `callees` those of them it calls. (A plain class: a NamedTuple compiles its
    methods at import.)"""

    __slots__ = ("code", "names", "callees")

    def __init__(self, code: types.CodeType, names: tuple[str, ...] | None, callees: tuple[int, ...]) -> None:
        self.code = code
        self.names = names
        self.callees = callees


_SOURCES: dict[str, _Source] = {}
# (source, id of each object its names are bound to) -> (those objects, kept alive so that no id is reused while
# it is a key; the value, None made NoneType; whether typing would return it as it is)
_VALUES: dict[tuple[Any, ...], tuple[list[Any], Any, bool]] = {}
#: Called in an annotation, these build an equal value each time, and nothing but it.
_DECLARATIVE = (Field, Body, Cookie, Depends, File, Form, Header, Path, Query, Security)
_SHAREABLE_NODES = (
    ast.Expression,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Subscript,
    ast.Tuple,
    ast.List,
    ast.BinOp,
    ast.BitOr,
    ast.Call,
    ast.keyword,
)
_MISSING = object()


def _source(text: str) -> _Source:
    """`text` compiled, and read for what its value depends on."""
    tree = ast.parse(text, "<annotation>", "eval")
    code = compile(tree, "<annotation>", "eval")
    names: list[str] = []
    called: set[str] = set()
    for node in ast.walk(tree):
        if (
            not isinstance(node, _SHAREABLE_NODES)
            or (isinstance(node, ast.BinOp) and type(node.op) is not ast.BitOr)
            or (isinstance(node, ast.Call) and not isinstance(node.func, ast.Name))
            or (isinstance(node, ast.keyword) and node.arg is None)
        ):  # an attribute, a lambda, `f()()`, `**kw`
            return _Source(code, None, ())
        if isinstance(node, ast.Call):
            called.add(typing.cast(ast.Name, node.func).id)
        elif isinstance(node, ast.Name) and node.id not in names:
            names.append(node.id)
    return _Source(code, tuple(names), tuple(i for i, n in enumerate(names) if n in called))


def _evaluated(text: str, namespace: dict[str, Any], builtins: dict[str, Any] | None) -> tuple[Any, bool, bool]:
    """The value of annotation `text` in a module's `namespace` (typing's evaluation), whether it is plain, and
    whether it is the value kept for its names' bindings."""
    source = _SOURCES.get(text)
    if source is None:
        source = _SOURCES[text] = _source(text)
    bound = _bound(source.names, namespace, builtins) if source.names is not None else None
    if bound is None:  # not made of names alone, or a name unbound
        return (*_settle(eval(source.code, namespace)), False)  # noqa: S307 - what typing.get_type_hints evaluates
    key = (text, *map(id, bound))
    known = _VALUES.get(key)
    if known is not None:  # its objects are alive (kept there): these ids are theirs
        return known[1], known[2], True
    value, plain = _settle(eval(source.code, namespace))  # noqa: S307 - as above
    if not all(_declarative(bound[at]) for at in source.callees):  # it calls what may answer anything else
        return value, plain, False
    if len(_VALUES) >= memo.MEMO_SIZE:  # bounded, as every memo: one made of many modules made on the fly
        _VALUES.clear()
    _VALUES[key] = (bound, value, plain)
    return value, plain, True


def _bound(names: tuple[str, ...], namespace: dict[str, Any], builtins: dict[str, Any] | None) -> list[Any] | None:
    """The objects `names` are bound to in `namespace` (then in its builtins), None if one is unbound."""
    if builtins is None:
        return None
    bound = []
    for name in names:
        obj = namespace.get(name, _MISSING)
        if obj is _MISSING:
            obj = builtins.get(name, _MISSING)
            if obj is _MISSING:
                return None
        bound.append(obj)
    return bound


def _declarative(callee: Any) -> bool:
    """Pydantic's `Field`, FastAPI's parameter functions, an annotated-types constraint class."""
    if isinstance(callee, type):
        return BaseMetadata in callee.__mro__ or GroupedMetadata in callee.__mro__
    return any(callee is known for known in _DECLARATIVE)


def _settle(value: Any) -> tuple[Any, bool]:
    """An evaluated annotation as typing returns it (None is NoneType), and whether it is plain."""
    if value is None:
        value = types.NoneType
    return value, _plain(value)


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


# `fn(annotation)` remembered per annotation object, for what depends on the annotation alone (its classes, its
# extras): `type_hints` gives every handler written with the same annotation one shared object, so a server's
# repeated parameters are looked at once.
per_annotation = memo.by_identity


def type_name(annotation: Any) -> str:
    """A type as written in code, for messages: `Customer`, `dict[str, Customer]` (module paths and an
    `Annotated` wrapper left out)."""
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return re.sub(r"\b[\w.]+\.(\w+)", r"\1", str(annotation))
