"""Parameter types pydantic can validate, checked when an action is declared.

An action's argument model is made on its first use (declaring hundreds of actions stays cheap), so a type
pydantic cannot build a schema for (a plain class) would otherwise surface at the first `tools/list`, and
break it for every tool. The usual types are known at a glance; any other class is tried once (its schema
built and remembered), so the mistake fails at declaration, naming the action and the parameter, as FastAPI
refuses a route with such a parameter.

An output model is checked when declared too: it must have a JSON schema, and that schema must say what its
serializers write. A `field_serializer` or `model_serializer` without a return annotation leaves pydantic no
type but the field's (or the model's fields), so the advertised schema would not be what is sent: refused.
A `PlainSerializer`/`WrapSerializer` without `return_type` (often a lambda) is advertised as any value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import functools
import typing
import uuid
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, PlainValidator, PydanticSchemaGenerationError, PydanticUserError, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

# Classes whose values pydantic validates (their subclasses too, which it validates the same way).
_KNOWN = (str, int, float, bool, bytes, decimal.Decimal, dt.date, dt.time, dt.timedelta, uuid.UUID, PurePath,
          enum.Enum, BaseModel, dict, list, tuple, set, frozenset)


def check_validatable(annotation: Any, where: str) -> None:
    """Raise a `TypeError` naming `where` when `annotation` holds a class pydantic cannot validate."""
    for cls in _classes_in(annotation):
        if cls is not Any and not _validatable(cls):
            raise TypeError(f"{where} has the type {cls.__qualname__}, which pydantic cannot validate: use a "
                            "pydantic model or a dataclass of supported types, or give it a validator "
                            "(Annotated[..., PlainValidator(...)])")


def _classes_in(annotation: Any) -> list[Any]:
    """The classes an annotation is made of (`list[Weird] | None` -> Weird), `Annotated` extras left out
    (a validator among them makes the type validatable whatever it is)."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        if any(isinstance(e, PlainValidator) or hasattr(e, "__get_pydantic_core_schema__") for e in extras):
            return []  # the extra makes the schema: the class itself is not validated
        return _classes_in(base)
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return [annotation]
    return [cls for arg in typing.get_args(annotation) for cls in _classes_in(arg)]


@functools.lru_cache(maxsize=512)
def _validatable(cls: type) -> bool:
    if cls is type(None) or issubclass(cls, _KNOWN) or hasattr(cls, "__get_pydantic_core_schema__"):
        return True
    if not (dataclasses.is_dataclass(cls) or typing.is_typeddict(cls)) and cls.__module__ == "builtins":
        return True  # object, complex...: pydantic's own business (and an error of its own if any)
    try:
        TypeAdapter(cls)
    except (PydanticSchemaGenerationError, PydanticUserError):
        return False
    return True


class _Written(GenerateJsonSchema):
    """Pydantic's JSON schema of what is written: a serializer function whose return type is unknown writes
    any value (pydantic would advertise the type it is given, which the function may well change)."""

    def ser_schema(self, schema: core_schema.SerSchema | core_schema.IncExSeqSerSchema
                   | core_schema.IncExDictSerSchema) -> JsonSchemaValue | None:
        if schema["type"] in ("function-plain", "function-wrap") and schema.get("return_schema") is None:
            return {}
        return super().ser_schema(schema)


@functools.cache
def serialization_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's serialization JSON schema, generated once per model (the presenters of a model share its
    class): read only, callers build new dicts from it."""
    return model.model_json_schema(mode="serialization", schema_generator=_Written)


def check_output_model(model: type[BaseModel], where: str) -> None:
    """Raise a `TypeError` naming `where` when `model` has no JSON schema (no outputSchema could be advertised,
    and the first `tools/list`, and /openapi.json, would fail for every tool), when a serializer of it writes
    what its schema cannot say, or when it is not written as an object."""
    try:
        schema = serialization_schema(model)
    except PydanticUserError as exc:  # PydanticInvalidForJsonSchema among them
        raise TypeError(f"{where}: the output model {model.__qualname__} has no JSON schema ({exc.message}); give "
                        "each field a type with one, or a WithJsonSchema annotation") from None
    found = _unannotated_serializer(model)
    if found is not None:
        owner, kind, fn = found
        inside = "" if owner is model else f" (of {getattr(owner, '__qualname__', owner)!s}, which it holds)"
        name = getattr(fn, "__qualname__", repr(fn))
        writes = ("the model's own fields, not the keys it writes" if kind == "model_serializer"
                  else "the field's own type, not what it writes")
        example = "-> dict[str, Any], or a TypedDict of its keys" if kind == "model_serializer" else "-> str"
        raise TypeError(f"{where}: the output model {model.__qualname__} has the {kind} {name}{inside} without a "
                        f"return annotation, so its JSON schema would advertise {writes} (clients checking "
                        f"outputSchema refuse such a result): annotate its return type ({example}), or give "
                        "return_type= to the decorator")
    root = schema
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        root = schema.get("$defs", {}).get(ref[len("#/$defs/"):], schema)
    if root.get("type", "object") != "object":
        raise TypeError(f"{where}: the output model {model.__qualname__} is written as {root['type']!r}, not an "
                        "object (structuredContent and a presenter's data are objects): make its serializer "
                        "return a dict")


@functools.cache
def _unannotated_serializer(model: type[BaseModel]) -> tuple[Any, str, Any] | None:
    """(the class, `field_serializer` or `model_serializer`, the function) of the first decorated serializer,
    in `model` or any type inside it, whose return type pydantic does not know; None: there is none."""
    pending: list[tuple[Any, Any]] = [(model.__pydantic_core_schema__, model)]
    seen: set[int] = set()
    while pending:
        node, owner = pending.pop()
        if id(node) in seen:  # (a schema may share a node: each is looked at once)
            continue
        seen.add(id(node))
        if isinstance(node, list):
            pending.extend((item, owner) for item in node if isinstance(item, dict | list))
            continue
        if node.get("type") in ("model", "dataclass") and "cls" in node:
            owner = node["cls"]
        written = node.get("serialization")
        if (isinstance(written, dict) and written.get("type") in ("function-plain", "function-wrap")
                and written.get("return_schema") is None):
            if written.get("is_field_serializer"):
                return owner, "field_serializer", written["function"]
            decorators = getattr(owner, "__pydantic_decorators__", None)
            if node.get("type") in ("model", "dataclass") and decorators is not None and any(
                    d.func is written["function"] for d in decorators.model_serializers.values()):
                return owner, "model_serializer", written["function"]
        pending.extend((value, owner) for key, value in node.items()
                       if key != "metadata" and isinstance(value, dict | list))
    return None
