"""A presenter's model as a dict schema: validation, stripping of undeclared keys and the JSON dump in Rust,
without building model instances (pydantic-core's typed-dict schema made from the model's own core schema).

Only models whose validation cannot tell the difference are converted: plain fields (no alias, no exclusion,
no validator or serializer that receives info, no default factory that reads the data), no computed field,
model validator, custom `__init__`, serialization setting (`ser_json_*`: a dict schema's serializer does not
read them) or extra fields kept, and no union of several models. Field schemas (types, constraints, casts as
plain before/after validators, defaults) and each model's config are reused as they are, so a dict that
validates gives the same values, in the same order, as the model would dump. Anything else keeps the model:
`codec` answers None. Callers try the dict schema on dicts only and fall back to the model on any
`ValidationError` but one (`not_finite`), so errors, attribute objects and model instances are the model's
business. One deliberate difference: a float field refuses nan and inf (JSON cannot write them).
A schema whose validated values already are JSON values also gets a validator that is its own dump (`dump`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaSerializer, SchemaValidator, ValidationError, core_schema

from .memo import MEMO_SIZE

# The dict schema's validator and serializer, and a validator whose output already is the JSON dump (None
# when the schema can give something else than JSON values: see `_native`).
Codec = tuple[SchemaValidator, SchemaSerializer, SchemaValidator | None]

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
    return _codec(schema)


def not_finite(exc: ValidationError) -> bool:
    """Whether a dict schema refused a value for being nan or inf (the model would have written null)."""
    return any(e["type"] == "finite_number" for e in exc.errors(include_url=False, include_input=False))


def dump(codec: Codec, raw: Any) -> Any:
    """`raw` validated, stripped and dumped as JSON values: in one pass when the codec has a native validator
    and `raw` fits it (JSON values where the schema takes anything), else validated then dumped (a cast
    before validation then runs twice: casts are functions of the value). `ValidationError` when it does not
    fit the schema."""
    native = codec[2]
    if native is not None:
        try:
            return native.validate_python(raw)
        except ValidationError:
            pass  # e.g. a date or a tuple among values of `Any`: the serializer writes them
    return codec[1].to_python(codec[0].validate_python(raw), mode="json")


def _codec(schema: Any) -> Codec:
    try:
        native = SchemaValidator(_native(schema))
    except _Unsupported:
        native = None
    return SchemaValidator(schema), SchemaSerializer(schema), native


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
    return _codec(out)


def _convert(schema: dict[str, Any]) -> dict[str, Any]:
    if "serialization" in schema:
        raise _Unsupported("a custom serializer")
    kind = schema["type"]
    if kind == "float":
        # JSON has no number for nan and inf: a result holding one would go out as null where the output
        # schema promises a number. Refused here (the model would dump it as null), and the refusal stands.
        return {**schema, "allow_inf_nan": False}
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
    if any(key.startswith("ser_") for key in config):
        # A dict schema's serializer does not read its config: dates, durations or bytes written otherwise.
        raise _Unsupported("serialization settings")
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


# -- validation whose output is its own JSON dump ----------------------------------------------------------

_NATIVE_LEAVES = frozenset({"str", "int", "bool", "none"})  # validated as exact str, int, bool, None
_NATIVE_VALUES = (str, int, bool, type(None))
_NATIVE_KINDS = _NATIVE_LEAVES | {"date", "definition-ref", "any", "literal", "nullable", "function-before", "default",
                                  "list", "dict", "union", "typed-dict", "definitions"}
_JSON_REF = "mcpfusion-json-value"
# What `Any` holds that the serializer writes back unchanged: exact JSON values, as new lists and dicts (an
# enum member or a subclass of str or int becomes its plain value, as the serializer writes it). Anything
# else (a float that is not finite, a date, a tuple, a key that is not a string...) fails it.
_JSON_VALUE = core_schema.union_schema([
    core_schema.str_schema(strict=True), core_schema.int_schema(strict=True), core_schema.bool_schema(strict=True),
    core_schema.float_schema(strict=True, allow_inf_nan=False), core_schema.none_schema(),
    core_schema.list_schema(core_schema.definition_reference_schema(_JSON_REF), strict=True),
    core_schema.dict_schema(core_schema.str_schema(strict=True), core_schema.definition_reference_schema(_JSON_REF),
                            strict=True),
], ref=_JSON_REF)
_JSON_INLINE = {key: value for key, value in _JSON_VALUE.items() if key != "ref"}


class _IsoDates(dict[dt.date, str]):
    """The ISO text of dates (`date.isoformat`, the base method), remembered: few dates recur call after call,
    and `__getitem__` finds one in C, where `date.isoformat` formats it through `printf` (~3k instructions)."""

    __slots__ = ()

    def __missing__(self, day: dt.date) -> str:
        text = dt.date.isoformat(day)
        if day.__class__ is dt.date:  # (a subclass may compare equal to a date and hash otherwise: not kept)
            if len(self) >= MEMO_SIZE:
                self.clear()
            self[day] = text
        return text


_ISO_DATES = _IsoDates()


def _native(schema: dict[str, Any]) -> Any:
    """A dict schema (`_convert`'s) whose validation output is exactly what its serializer's JSON dump of
    that output is: only exact str, int, bool and None leaves (literals of them), dates (as their ISO
    text), lists, dicts with string keys and typed dicts, unions and optionals of those, defaults that are
    such leaves, casts before validation; `Any` as a JSON value (`_JSON_VALUE`). `_Unsupported` for anything
    else (a float, a datetime, a set, a cast after validation, a default factory...): the serializer is
    needed."""
    out = _native_schema(schema)
    return core_schema.definitions_schema(out, [_JSON_VALUE])


def _native_schema(schema: dict[str, Any]) -> Any:
    kind = schema["type"]
    if kind not in _NATIVE_KINDS or "serialization" in schema:  # (a union's choices may serialize their way)
        raise _Unsupported(kind)
    if kind in _NATIVE_LEAVES or kind == "definition-ref":
        return schema
    if kind == "date":
        # The serializer writes a date as `date.isoformat` does (the base method: a subclass's own is not
        # what the serializer calls; a model configured to write dates otherwise is not converted).
        return core_schema.no_info_after_validator_function(_ISO_DATES.__getitem__, schema)
    if kind == "any":
        # The union itself where the schema says `Any` (its lists and dicts refer to it): a scalar, the
        # common value, is validated without the reference's recursion guard.
        return _JSON_INLINE
    if kind == "literal":
        if not all(value.__class__ in _NATIVE_VALUES for value in schema["expected"]):
            raise _Unsupported("a literal of another type")
        return schema
    if kind in ("nullable", "function-before"):
        return {**schema, "schema": _native_schema(schema["schema"])}
    if kind == "default":
        if "default" not in schema or schema["default"].__class__ not in _NATIVE_VALUES:
            raise _Unsupported("a default factory or a default that is not a leaf")
        return {**schema, "schema": _native_schema(schema["schema"])}
    if kind == "list":
        items = schema.get("items_schema", {"type": "any"})
        return {**schema, "items_schema": _native_schema(items)}
    if kind == "dict":
        if schema.get("keys_schema", {}).get("type") != "str":
            raise _Unsupported("keys that may not be strings")
        return {**schema, "values_schema": _native_schema(schema.get("values_schema", {"type": "any"}))}
    if kind == "union":
        return {**schema, "choices": [_native_choice(choice) for choice in schema["choices"]]}
    if kind == "typed-dict":
        fields = schema["fields"]
        return {**schema, "fields": {name: {**field, "schema": _native_schema(field["schema"])}
                                     for name, field in fields.items()}}
    return {**schema, "schema": _native_schema(schema["schema"]),  # definitions
            "definitions": [_native_schema(d) for d in schema["definitions"]]}


def _native_choice(choice: Any) -> Any:
    if isinstance(choice, tuple):  # (schema, label)
        return (_native_schema(choice[0]), *choice[1:])
    return _native_schema(choice)
