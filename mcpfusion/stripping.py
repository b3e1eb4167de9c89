"""Output models that strip undeclared keys at every depth: what the schema firewall validates with.

A model declared with `extra="allow"` keeps the keys it does not declare, and writes them back out; nested
inside an output model it would hand the agent whatever the handler's data held beside the declared fields.
`stripping_model` gives the model the firewall uses: undeclared keys ignored, attributes read, nan and inf
refused, aliases read by either name and written by alias, and every nested model that would keep extra keys
replaced, wherever it sits in a field's type (`list[Address]`, `dict[str, Address]`, `A | B`, `Annotated`,
a model that contains itself); so is a TypedDict whose `__pydantic_config__` keeps them.
"""

from __future__ import annotations

import copy
import functools
import types
import typing
from typing import Any

from pydantic import BaseModel
from typing_extensions import is_typeddict

# Models being rebuilt, by the name their own fields (or their nested models') refer to the new class with (a
# model that contains itself, `kids: list[Tree]`, or models that contain each other); resolved once the
# outermost model is made, when every class those names stand for exists.
_building: dict[type[BaseModel], str] = {}
_made: dict[str, type[BaseModel]] = {}  # the classes made under those names
_incomplete: list[type[BaseModel]] = []  # made while a name they refer to had no class yet


@functools.cache
def stripping_model(model: type[BaseModel]) -> type[BaseModel]:
    """`model` reading attributes and ignoring extra keys at every depth: one subclass per model, whatever
    the number of presenters built on it (a pydantic class costs milliseconds to make); the model itself
    when nothing needs to change."""
    name = _building[model] = f"{model.__name__}__stripping_{id(model):x}"
    try:
        fields = {key: new for key, info in model.model_fields.items()
                  if (new := stripping_annotation(info.annotation)) is not info.annotation}
    finally:
        del _building[model]
    aliased = any(f.alias is not None or f.serialization_alias is not None for f in model.model_fields.values())
    own = model.model_config
    settled = own.get("extra") == "ignore" and own.get("from_attributes") and own.get("allow_inf_nan") is False
    if settled and not aliased and not fields:
        return model
    # nan and inf refused: JSON would write them as null, against the number the output schema promises.
    config: dict[str, Any] = {**own, "extra": "ignore", "from_attributes": True, "allow_inf_nan": False}
    if aliased:
        config.update(validate_by_name=True, serialize_by_alias=True)
    namespace: dict[str, Any] = {"model_config": config, "__module__": model.__module__}
    if fields:  # the same fields (defaults, constraints, aliases), their nested models replaced
        namespace["__annotations__"] = fields
        namespace.update({key: copy.copy(model.model_fields[key]) for key in fields})
    made: type[BaseModel] = type(model.__name__, (model,), namespace)
    _made[name] = made
    if not made.__pydantic_complete__:  # it refers to a model still being made (itself, or one containing it)
        _incomplete.append(made)
    if not _building:  # the outermost model: every class the names stand for exists now
        waiting = list(_incomplete)
        _incomplete.clear()
        for cls in waiting:
            cls.model_rebuild(_types_namespace=dict(_made))
    return made


def stripping_annotation(annotation: Any) -> Any:
    """`annotation` with every nested model or TypedDict that keeps extra keys replaced by its stripping
    model; the annotation itself (the same object) when none does."""
    if is_typeddict(annotation):
        return _stripping_typeddict(annotation) if _keeps_extra(annotation) else annotation
    if isinstance(annotation, type):
        if not (issubclass(annotation, BaseModel) and _keeps_extra(annotation)):
            return annotation
        building = _building.get(annotation)
        return stripping_model(annotation) if building is None else typing.ForwardRef(building)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is None or not args or origin is typing.Literal:
        return annotation
    if origin is typing.Annotated:
        base = stripping_annotation(args[0])
        return annotation if base is args[0] else typing.Annotated[(base, *annotation.__metadata__)]
    new = tuple(stripping_annotation(a) for a in args)
    if all(n is a for n, a in zip(new, args, strict=True)):
        return annotation
    if origin is typing.Union or origin is types.UnionType:
        return typing.Union[new]  # noqa: UP007 (a union built from a tuple of types)
    if isinstance(annotation, types.GenericAlias):
        return types.GenericAlias(origin, new)
    copy_with = getattr(annotation, "copy_with", None)
    return copy_with(new) if copy_with is not None else annotation


_typeddicts_building: set[type] = set()  # a TypedDict that contains itself is kept as it is at the inner level


def _stripping_typeddict(typeddict: type) -> Any:
    """A TypedDict subclass ignoring extra keys at every depth (pydantic reads `__pydantic_config__`)."""
    if typeddict in _typeddicts_building:
        return typeddict
    _typeddicts_building.add(typeddict)
    try:
        changed = {key: new for key, hint in _hints(typeddict).items()
                   if (new := stripping_annotation(hint)) is not hint}
    finally:
        _typeddicts_building.discard(typeddict)
    namespace = {"__annotations__": changed, "__module__": typeddict.__module__,
                 "__pydantic_config__": {**_typeddict_config(typeddict), "extra": "ignore"}}
    return types.new_class(typeddict.__name__, (typeddict,), exec_body=lambda ns: ns.update(namespace))


def _typeddict_config(typeddict: type) -> dict[str, Any]:
    return dict(getattr(typeddict, "__pydantic_config__", None) or {})


def _hints(typeddict: type) -> dict[str, Any]:
    """A TypedDict's keys and types, `Required` and `NotRequired` kept (the types as written when a name in
    them cannot be resolved here: pydantic resolves them, the nested models in them are not replaced)."""
    try:
        return typing.get_type_hints(typeddict, include_extras=True)
    except (NameError, TypeError):
        return dict(typeddict.__annotations__)


def _keeps_extra(model: Any, seen: frozenset[type] = frozenset()) -> bool:
    """Whether `model` (a model or a TypedDict), or one anywhere in its fields' types, keeps keys it does not
    declare."""
    if is_typeddict(model):
        if _typeddict_config(model).get("extra") == "allow":
            return True
        annotations = list(_hints(model).values())
    else:
        if model.model_config.get("extra") == "allow":
            return True
        annotations = [f.annotation for f in model.model_fields.values()]
    seen = seen | {model}
    return any(_keeps_extra(m, seen) for a in annotations for m in _containers_in(a) if m not in seen)


def _containers_in(annotation: Any) -> list[type]:
    """The pydantic models and TypedDicts a type is made of."""
    if is_typeddict(annotation):
        return [annotation]
    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, BaseModel) else []
    if typing.get_origin(annotation) is typing.Literal:
        return []
    return [m for arg in typing.get_args(annotation) for m in _containers_in(arg)]


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a type is made of (`dict[str, A] | B` -> A, B)."""
    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, BaseModel) else []
    if typing.get_origin(annotation) is typing.Literal:
        return []
    return [m for arg in typing.get_args(annotation) for m in models_in(arg)]
