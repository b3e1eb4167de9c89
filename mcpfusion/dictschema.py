"""A presenter's model as a dict schema: validation, stripping of undeclared keys and the JSON dump in Rust,
without building model instances (pydantic-core's typed-dict schema made from the model's own core schema).

Only models whose validation cannot tell the difference are converted: plain fields (no alias, no exclusion,
no validator or serializer that receives info, no default factory that reads the data), no computed field,
model validator, custom `__init__` or extra fields kept, and no union of several models. Field schemas (types,
constraints, casts as plain before/after validators, defaults) and each model's config are reused as they
are, so a dict that validates gives the same values, in the same order, as the model would dump. Anything
else keeps the model: `codec` answers None. Callers try the dict schema on dicts only and fall back to the
model on any `ValidationError`, so errors, attribute objects and model instances are the model's business.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaSerializer, SchemaValidator, core_schema

Codec = tuple[SchemaValidator, SchemaSerializer]

_LEAVES = frozenset({"any", "none", "bool", "int", "float", "str", "bytes", "date", "datetime", "time",
                     "timedelta", "decimal", "uuid", "literal"})
_MODEL_KEYS = frozenset({"type", "cls", "schema", "config", "ref", "metadata", "custom_init", "root_model",
                         "post_init"})
_FIELDS_KEYS = frozenset({"type", "fields", "model_name", "computed_fields"})
_FIELD_KEYS = frozenset({"type", "schema", "metadata", "frozen"})


class _Unsupported(Exception):
    """The model's validation could tell a dict schema from itself: keep the model."""


def codec(model: type[BaseModel], *, many: bool = False) -> Codec | None:
    """Validator and serializer of `model` (of a list of it with `many`) as dicts, or None."""
    try:
        schema: Any = _convert(dict(model.__pydantic_core_schema__))
    except _Unsupported:
        return None
    if many:
        schema = core_schema.list_schema(schema)
    return SchemaValidator(schema), SchemaSerializer(schema)


def combined(model: type[BaseModel], children: list[tuple[str, type[BaseModel], bool]]) -> Codec | None:
    """`model` and, under each key, a child model (a list of it with `many`), as one dict schema: a presenter
    and its embedded children validated and dumped in one call. The children's keys come after the model's
    fields, in order, and are required. None unless every schema is a plain typed dict (no definitions) and
    no key is one of the model's fields; the model ignores extra keys (so the child keys change nothing of
    what it accepts)."""
    try:
        schema = _convert(dict(model.__pydantic_core_schema__))
        if schema["type"] != "typed-dict" or schema.get("extra_behavior") != "ignore":
            return None
        fields = dict(schema["fields"])
        for key, child, many in children:
            sub: Any = _convert(dict(child.__pydantic_core_schema__))
            if sub["type"] != "typed-dict" or key in fields:
                return None
            fields[key] = core_schema.typed_dict_field(core_schema.list_schema(sub) if many else sub)
    except _Unsupported:
        return None
    out: Any = {**{k: v for k, v in schema.items() if k != "ref"}, "fields": fields}
    return SchemaValidator(out), SchemaSerializer(out)


def _convert(schema: dict[str, Any]) -> dict[str, Any]:
    if "serialization" in schema:
        raise _Unsupported("a custom serializer")
    kind = schema["type"]
    if kind in _LEAVES or kind == "definition-ref":
        return schema
    if kind == "nullable":
        return {**schema, "schema": _convert(schema["schema"])}
    if kind == "default":
        if schema.get("default_factory_takes_data"):
            raise _Unsupported("a default factory reading the data")
        return {**schema, "schema": _convert(schema["schema"])}
    if kind in ("list", "set", "frozenset"):
        return {**schema, "items_schema": _convert(schema["items_schema"])} if "items_schema" in schema else schema
    if kind == "dict":
        out = dict(schema)
        for key in ("keys_schema", "values_schema"):
            if key in schema:
                out[key] = _convert(schema[key])
        return out
    if kind in ("function-before", "function-after"):
        if schema["function"]["type"] != "no-info":
            raise _Unsupported("a validator receiving info")
        return {**schema, "schema": _convert(schema["schema"])}
    if kind == "union":
        # Smart unions rank their choices by how exactly they match: models and dicts do not rank alike.
        if any(_has_model(choice) for choice in schema["choices"]):
            raise _Unsupported("a union of models")
        return schema
    if kind == "definitions":
        return {**schema, "schema": _convert(schema["schema"]),
                "definitions": [_convert(d) for d in schema["definitions"]]}
    if kind == "model":
        return _model(schema)
    raise _Unsupported(kind)


def _model(schema: dict[str, Any]) -> dict[str, Any]:
    inner = schema["schema"]
    if (set(schema) - _MODEL_KEYS or schema.get("custom_init") or schema.get("root_model")
            or schema.get("post_init") or inner["type"] != "model-fields" or set(inner) - _FIELDS_KEYS
            or inner.get("computed_fields")):
        raise _Unsupported("a model with more than plain fields")
    config: Any = schema.get("config") or {}
    extra = config.get("extra_fields_behavior", "ignore")
    if extra not in ("ignore", "forbid"):
        raise _Unsupported("extra fields kept")
    fields = {}
    for name, field in inner["fields"].items():
        if field["type"] != "model-field" or set(field) - _FIELD_KEYS:
            raise _Unsupported("an alias or an excluded field")
        sub = _convert(field["schema"])
        fields[name] = core_schema.typed_dict_field(sub, required=sub["type"] != "default")
    return dict(core_schema.typed_dict_schema(fields, extra_behavior=extra, config=config, ref=schema.get("ref")))


def _has_model(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("type") in ("model", "definition-ref", "dataclass", "typed-dict"):
            return True
        return any(_has_model(v) for v in schema.values())
    if isinstance(schema, list | tuple):
        return any(_has_model(v) for v in schema)
    return False
