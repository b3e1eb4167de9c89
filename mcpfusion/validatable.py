"""Parameter types pydantic can validate, checked when an action is declared.

An action's argument model is made on its first use (declaring hundreds of actions stays cheap), so a type
pydantic cannot build a schema for (a plain class) would otherwise surface at the first `tools/list`, and
break it for every tool. The usual types are known at a glance; any other class is tried once (its schema
built and remembered), so the mistake fails at declaration, naming the action and the parameter, as FastAPI
refuses a route with such a parameter.
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


@functools.cache
def serialization_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's serialization JSON schema, generated once per model (the presenters of a model share its
    class): read only, callers build new dicts from it."""
    return model.model_json_schema(mode="serialization")


def check_output_model(model: type[BaseModel], where: str) -> None:
    """Raise a `TypeError` naming `where` when `model` has no JSON schema: no outputSchema could be advertised,
    and the first `tools/list` (and /openapi.json) would fail for every tool."""
    try:
        serialization_schema(model)
    except PydanticUserError as exc:  # PydanticInvalidForJsonSchema among them
        raise TypeError(f"{where}: the output model {model.__qualname__} has no JSON schema ({exc.message}); give "
                        "each field a type with one, or a WithJsonSchema annotation") from None

