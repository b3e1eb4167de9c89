"""Unknown keys inside the arguments' objects.

The arguments' own model refuses an unknown key (`extra="forbid"`), but a nested model keeps pydantic's
default, `extra="ignore"`: a misspelt optional field (`{"address": {"cty": "Paris"}}`) would vanish and the
call succeed without it. What was sent is walked beside what was validated, and every key that no field of
its model reads is refused as the root's are, naming what that object takes.

A model that decides for itself is left to itself: one allowing extra keys, one reshaping its input before its
fields read it (a `before` or `wrap` model validator), a field read through an `AliasPath`.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Any

from pydantic import AliasChoices, AliasPath, BaseModel, RootModel

Loc = tuple[str | int, ...]


def holds_models(annotation: Any) -> bool:
    """Whether values of `annotation` may hold a pydantic model (in a list, a dict, a union...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(holds_models(arg) for arg in typing.get_args(annotation) if not isinstance(arg, (str, int)))


def unknown_fields(sent: Any, value: Any) -> list[tuple[Loc, type[BaseModel]]]:
    """(where, the model there) of each key of `sent` that no field of the model validated from it reads."""
    found: list[tuple[Loc, type[BaseModel]]] = []
    _walk(sent, value, (), found)
    return found


def accepted(model: type[BaseModel]) -> str:
    """The keys `model` reads, as an agent sends them (an alias rather than the field's name)."""
    return ", ".join(field.alias or name for name, field in model.model_fields.items())


def _walk(sent: Any, value: Any, loc: Loc, found: list[tuple[Loc, type[BaseModel]]]) -> None:
    if isinstance(value, BaseModel):
        reads = _reads(value.__class__) if sent.__class__ is dict else None
        if reads is None:
            return
        for key, item in sent.items():
            name = reads.get(key)
            if name is None:
                found.append(((*loc, key), value.__class__))
            else:
                _walk(item, getattr(value, name, None), (*loc, key), found)
    elif isinstance(value, (list, tuple)):
        if sent.__class__ is list and len(sent) == len(value):
            for i, (item, validated) in enumerate(zip(sent, value, strict=True)):
                _walk(item, validated, (*loc, i), found)
    elif isinstance(value, dict) and sent.__class__ is dict:
        for key, item in sent.items():
            if key in value:
                _walk(item, value[key], (*loc, key), found)


@functools.lru_cache(maxsize=1024)
def _reads(model: type[BaseModel]) -> dict[str, str] | None:
    """Each key `model` reads, to the field it fills; None when the model decides which keys it takes."""
    if issubclass(model, RootModel) or model.model_config.get("extra") == "allow":
        return None
    decorators = model.__pydantic_decorators__
    if any(d.info.mode in ("before", "wrap") for d in decorators.model_validators.values()):
        return None
    reads: dict[str, str] = {}
    for name, field in model.model_fields.items():
        reads[name] = name  # (by name as well as by alias: more than pydantic takes is never a false refusal)
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                reads[alias] = name
            elif isinstance(alias, AliasChoices):
                for choice in alias.choices:
                    if not isinstance(choice, str):
                        return None
                    reads[choice] = name
            elif isinstance(alias, AliasPath):
                return None
    return reads


def model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """The model of the object at `loc` in arguments of `model` (None when its annotations do not say one)."""
    annotation: Any = model
    for step in loc:
        annotation = _inside(annotation, step)
        if annotation is None:
            return None
    found = _models(annotation)
    return found[0] if len(found) == 1 else None


def _inside(annotation: Any, step: str | int) -> Any:
    """The annotation of what `step` reaches in a value of `annotation`: a model's field, an item, a value."""
    models = _models(annotation)
    if isinstance(step, str) and len(models) == 1:
        reads = _reads(models[0]) or {}
        name = reads.get(step)
        return None if name is None else models[0].model_fields[name].annotation
    for arg in _branches(annotation):
        origin = typing.get_origin(arg)
        if isinstance(step, int) and origin in (list, tuple, set, frozenset):
            items = [a for a in typing.get_args(arg) if a is not Ellipsis]
            return items[0] if len(items) == 1 else None
        if isinstance(step, str) and origin is dict:
            return typing.get_args(arg)[1]
    return None


def _branches(annotation: Any) -> list[Any]:
    """`annotation` without `Annotated`, each member of a union apart."""
    if typing.get_origin(annotation) is Annotated:
        return _branches(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [branch for arg in typing.get_args(annotation) for branch in _branches(arg)]
    return [annotation]


def _models(annotation: Any) -> list[type[BaseModel]]:
    return [b for b in _branches(annotation) if isinstance(b, type) and issubclass(b, BaseModel)]


__all__ = ["accepted", "holds_models", "model_at", "unknown_fields"]
