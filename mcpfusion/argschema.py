"""An action's input schema (pydantic's JSON schema of its argument model, lean) without building the model
when every one of its fields was seen before, in a model of another action.

Pydantic builds a model class, its validator and its serializer, then walks it for the JSON schema: about
2 ms per action, so a server of hundreds of actions paid most of its first tools/list there, although
actions repeat the same parameters (`id`, `limit`, one body model...). The schema of a model whose config
is the argument models' is its fields' schemas side by side, so each field's part is kept under a key of
its name, annotation and default (their content: constraints, descriptions, defaults; classes and
functions by identity), and an action whose fields are all known gets its schema put together from
them. The model itself is made on the action's first call, which validates with it.

Exactness is the contract (tests/test_argschema.py compares both ways): a field takes part only when its
key can be read (no forward reference), definitions are shared only when pydantic named every one of them
by its short name, and an action whose fields would bring two different definitions of one name gets
pydantic's own schema. (Made by `InputSchema`: pydantic's, a Decimal's text with the pattern it takes.)
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import datetime as dt
import decimal
import enum
import operator
import threading
import types
import typing
import uuid
from collections.abc import Callable
from pathlib import PurePath
from typing import Any

from annotated_types import BaseMetadata, GroupedMetadata
from pydantic import BaseModel, PydanticUndefinedAnnotation, PydanticUserError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import core_schema

from .hints import per_annotation, type_name
from .schema import lean
from .slots import fields_repr

_DEFS = "#/$defs/"


class _Field:
    """One field's part of its model's JSON schema: the property (lean), its definitions (lean and as
    pydantic made them, which is what decides whether two of one name are the same), required or not.
    (Plain slotted classes here: a NamedTuple compiles its methods when the module is imported.)"""

    __slots__ = ("key", "schema", "defs", "raw_defs", "required")

    def __init__(self, key: str, schema: dict[str, Any], defs: dict[str, Any], raw_defs: dict[str, Any],
                 required: bool) -> None:
        self.key = key
        self.schema = schema
        self.defs = defs
        self.raw_defs = raw_defs
        self.required = required


class Arguments:
    """The lean JSON schema of an argument model and the names of its required fields."""

    __slots__ = ("schema", "required")

    def __init__(self, schema: dict[str, Any], required: tuple[str, ...]) -> None:
        self.schema = schema
        self.required = required

    def __repr__(self) -> str:
        return fields_repr(self, self.__slots__)  # the NamedTuple's


class InputSchema(GenerateJsonSchema):
    """Pydantic's JSON schema of an argument model, a Decimal's string form with the pattern of a decimal
    number within its `max_digits` / `decimal_places` (pydantic's says any string, then refuses "abc")."""

    def get_decimal_pattern(self, schema: core_schema.DecimalSchema) -> str | None:
        return self.build_decimal_pattern(schema)


_known: dict[Any, _Field] = {}
_lock = threading.Lock()


class _Unkeyable(Exception):
    """A field whose schema could depend on where its model is made (a forward reference)."""


class _Same:
    """Compares by identity: a class, a function, an object without a content we can read."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj  # kept alive: its id is never reused while it is a key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


_PLAIN = frozenset({str, int, bool, bytes, type(None)})
_FIELD_SLOTS = operator.attrgetter(*FieldInfo.__slots__)


def _key(obj: Any) -> Any:
    """A hashable key equal for two values exactly when pydantic sees the same thing in them."""
    kind = type(obj)
    if kind in _PLAIN:  # with the exact type: True is not 1, a str enum member is not its value
        return kind, obj
    if kind is float:
        return kind, repr(obj)  # -0.0 is not 0.0, nan is nan
    if kind in (list, tuple, set, frozenset):
        return kind, tuple(_key(o) for o in obj)
    if kind is dict:
        return kind, tuple((_key(k), _key(v)) for k, v in obj.items())
    if isinstance(obj, typing.ForwardRef):
        raise _Unkeyable
    if isinstance(obj, FieldInfo):
        # Every attribute (constraints, description, default, aliases...), most of them None: keyed inline.
        return kind, tuple([(type(v), v) if type(v) in _PLAIN else _key(v) for v in _FIELD_SLOTS(obj)])
    origin = typing.get_origin(obj)  # first: `list[int]` passes for a type too
    if origin is not None:  # list[int], int | None, Literal["a"], Annotated[str, Field(...)]
        return _Same(origin), tuple(_key(a) for a in typing.get_args(obj))
    if isinstance(obj, type):
        return _Same(obj)
    if dataclasses.is_dataclass(obj) and obj.__dataclass_params__.frozen:  # type: ignore[union-attr]
        return kind, tuple(_key(getattr(obj, f.name)) for f in dataclasses.fields(obj))
    if isinstance(obj, BaseMetadata):  # annotated_types' and pydantic's constraint records (`pattern=`)
        return kind, _key(vars(obj))
    return _Same(obj)


# An annotation's key, read once per annotation object: the handlers of a server repeat their annotations,
# one shared object each (see `mcpfusion.hints`), and what an annotation holds is not changed once declared.
_annotation_key = per_annotation(_key)


def field_key(name: str, annotation: Any, default: Any) -> Any:
    """The key of one field (`name: annotation = default`), None when it cannot be shared."""
    if isinstance(annotation, str):
        return None
    try:
        return name, _annotation_key(annotation), _key(default)
    except (_Unkeyable, RecursionError, AttributeError):
        return None


def _refs(schema: Any, into: set[str]) -> set[str]:
    """The local definitions `schema` refers to (directly)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            into.add(ref[len(_DEFS):])
        for value in schema.values():
            _refs(value, into)
    elif isinstance(schema, list):
        for value in schema:
            _refs(value, into)
    return into


def _closure(schema: Any, defs: dict[str, Any]) -> list[str]:
    """Names of the definitions `schema` needs, directly or through other definitions."""
    todo, seen = _refs(schema, set()), set()
    while todo:
        name = todo.pop()
        if name not in seen and name in defs:
            seen.add(name)
            _refs(defs[name], todo)
    return sorted(seen)


def _short(names: typing.Iterable[str]) -> bool:
    """Pydantic named every definition by its class's short name: it lengthens a name (`module__Name`,
    `Name-Input`) only to tell apart two definitions it would give one name, and one field seen alone
    would then be named differently."""
    return not any("__" in n or "-" in n for n in names)


def _learn(keys: list[Any], model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s lean schema; each of its keyed fields' parts is kept for other actions."""
    raw = model.model_json_schema(schema_generator=InputSchema)
    schema: dict[str, Any] = lean(raw)  # lean works node by node: its parts are the parts' lean schemas
    raw_defs = raw.get("$defs", {})
    properties = raw.get("properties", {})
    required = set(raw.get("required", ()))
    if len(properties) == len(model.model_fields) == len(keys) and _short(raw_defs):  # a property per field
        with _lock:
            for key, prop in zip(keys, properties, strict=True):
                if key is None or key in _known:
                    continue
                names = _closure(properties[prop], raw_defs)
                _known[key] = _Field(prop, schema["properties"][prop], {n: schema["$defs"][n] for n in names},
                                     {n: raw_defs[n] for n in names}, prop in required)
    return schema


def _compose(parts: list[_Field]) -> dict[str, Any] | None:
    """The schema of a model of these fields, as pydantic writes it (keys sorted, properties in field order),
    None if two fields bring different definitions of one name (pydantic would rename them)."""
    raw_defs: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for part in parts:
        for name, definition in part.raw_defs.items():
            if raw_defs.setdefault(name, definition) != definition:
                return None
            defs[name] = part.defs[name]
    schema: dict[str, Any] = {"$defs": dict(sorted(defs.items()))} if defs else {}
    schema["additionalProperties"] = False
    schema["properties"] = {p.key: p.schema for p in parts}
    required = [p.key for p in parts if p.required]
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema


def arguments(fields: dict[str, tuple[Any, Any]], model: Callable[[], type[BaseModel]]) -> Arguments:
    """The lean schema and required names of the argument model of `fields` (name -> (annotation, default or
    FieldInfo), with `extra="forbid"`); `model()` makes that model when a field is new."""
    keys = [field_key(name, annotation, default) for name, (annotation, default) in fields.items()]
    known = [part for part in map(_known.get, keys) if part is not None]
    if len(known) == len(keys):
        schema = _compose(known)
        if schema is not None:
            return Arguments(schema, tuple(n for n, p in zip(fields, known, strict=True) if p.required))
    built = model()
    schema = _learn(keys, built)
    return Arguments(schema, tuple(n for n, f in built.model_fields.items() if f.is_required()))


# What surely has a JSON schema: these classes (and their subclasses), and these generic forms of them.
_LISTABLE = (str, int, float, bool, bytes, type(None), decimal.Decimal, dt.date, dt.time, dt.timedelta, uuid.UUID,
             PurePath, enum.Enum)
_LISTABLE_FORMS = frozenset({list, tuple, set, frozenset, dict, typing.Union, types.UnionType, abc.Sequence,
                             abc.Mapping, abc.Set, typing.Literal})


def check_listable(annotation: Any, where: str) -> None:
    """Raise a `TypeError` naming `where` when a parameter's type has no JSON schema (`Callable`, `Iterator`,
    `typing.TypedDict` on Python < 3.12): pydantic may validate it, but no input schema could be advertised,
    and tools/list, /openapi.json and /tools would fail for every tool. The usual types are known at a glance;
    anything else gets its schema made once, here."""
    problem = _schema_problem(annotation)
    if problem:
        raise TypeError(f"{where} has the type {type_name(annotation)}, which has no JSON schema, so no input "
                        f"schema could describe it ({problem}); use a type with one (a pydantic model, "
                        "typing_extensions.TypedDict, a list...), or give it one (Annotated[..., WithJsonSchema(...)])")


@per_annotation
def _schema_problem(annotation: Any) -> str | None:
    """Why `annotation` has no JSON schema in an argument model, None when it has one."""
    if _surely_listable(annotation, set()):
        return None
    try:
        create_model("_probe", value=(annotation, ...)).model_json_schema()
    except PydanticUndefinedAnnotation:
        return None  # a forward reference its model resolves later (model_rebuild): judged when it is used
    except PydanticUserError as exc:
        return None if exc.code == "class-not-fully-defined" else exc.message.split("\n", 1)[0]
    return None


def _surely_listable(annotation: Any, seen: set[type]) -> bool:
    """True when `annotation` is made only of types that have a JSON schema (models walked field by field);
    False when it may not (then its schema is tried)."""
    if annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        # Constraints and Field() never take a schema away; another extra may make one (WithJsonSchema): tried.
        return all(isinstance(e, (FieldInfo, BaseMetadata, GroupedMetadata)) for e in extras) and \
            _surely_listable(base, seen)
    if origin is typing.Literal:
        return True
    if origin is not None:
        return origin in _LISTABLE_FORMS and all(a is Ellipsis or _surely_listable(a, seen)
                                                 for a in typing.get_args(annotation))
    if not isinstance(annotation, type):
        return False
    if issubclass(annotation, _LISTABLE) or annotation in _LISTABLE_FORMS:  # (not dict's subclasses: TypedDicts)
        return True
    if issubclass(annotation, BaseModel) and annotation.__pydantic_complete__:
        if annotation in seen:  # a recursive model: walked once
            return True
        seen.add(annotation)
        return all(_surely_listable(f.annotation, seen) and all(isinstance(m, (BaseMetadata, GroupedMetadata))
                                                                 for m in f.metadata)
                   for f in annotation.model_fields.values())
    return False
