"""Hand-written input schemas (raw tools, `input_schema=` on an action): checked with jsonschema, their
patterns matched in linear time by pydantic-core's Rust regex (the engine actions' patterns use), so no
argument can hold the event loop (ReDoS), and their faults bounded as an action's are (values cut short, each
unknown key a field of its own: the answer lists the first ones and counts the rest)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

from .errors import field_path, secret_at, sent_value, shortened


def input_validator(schema: dict[str, Any], where: str) -> Any:
    """A validator of a raw tool's hand-written input schema, refused at declaration when it is not a valid
    JSON schema of an object (MCP's arguments are one)."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{where}: input_schema is not a valid JSON schema ({exc.message})") from None
    if schema.get("type") != "object":
        raise ValueError(f"{where}: input_schema must be an object schema (\"type\": \"object\"): MCP's "
                         "arguments are an object")
    _check_patterns(cls, schema, where)
    return _linear_time(cls)(schema)


def output_validator(schema: dict[str, Any]) -> Any:
    """A validator of a raw tool's declared `outputSchema` (checked at declaration by `check_output_schema`),
    its patterns matched in linear time as an input schema's are."""
    from jsonschema.validators import validator_for

    return _linear_time(validator_for(schema))(schema)


def _check_patterns(cls: Any, schema: dict[str, Any], where: str) -> None:
    """Refuse the patterns the linear-time engine cannot compile (look-arounds, backreferences): matched by a
    backtracking engine, one argument could hold the event loop for minutes (ReDoS)."""
    from pydantic_core import SchemaError
    from referencing.jsonschema import specification_with

    nodes = list(_subschemas(schema, specification_with(cls.META_SCHEMA.get("$id") or cls.META_SCHEMA["id"])))
    if any("unevaluatedProperties" in n for n in nodes) and any("patternProperties" in n for n in nodes):
        # (jsonschema matches patternProperties with Python's `re` when it looks for unevaluated properties)
        raise ValueError(f"{where}: input_schema: unevaluatedProperties beside patternProperties is not supported "
                         "(their patterns would be matched by a backtracking engine): use additionalProperties")
    for node in nodes:
        patterns = [node["pattern"]] if isinstance(node.get("pattern"), str) else []
        patterns += list(node.get("patternProperties") or ())
        for pattern in patterns:
            try:
                _linear_pattern(pattern)
            except SchemaError as exc:
                reason = str(exc).strip().rsplit("error: ", 1)[-1]
                raise ValueError(f"{where}: input_schema's pattern {pattern!r} is refused: {reason} (patterns are "
                                 "matched in linear time, safe from ReDoS: write it without look-arounds or "
                                 "backreferences)") from None


def _subschemas(schema: Any, spec: Any) -> Iterable[Any]:
    """`schema` and every schema inside it, as its draft defines them (not the values of const, enum...)."""
    if not isinstance(schema, dict):
        return
    yield schema
    for sub in spec.subresources_of(schema):
        yield from _subschemas(sub, spec)


@functools.lru_cache(maxsize=1024)
def _linear_pattern(pattern: str) -> Callable[[str], bool]:
    """Whether a string matches `pattern` (anywhere, as JSON Schema's `pattern`), by pydantic-core's Rust regex
    (the engine actions' patterns use): linear time, whatever the input. Raises `pydantic_core.SchemaError`
    for what it cannot compile. Cached: patterns come from declarations, a validator is built once."""
    from pydantic_core import SchemaValidator, core_schema

    return SchemaValidator(core_schema.str_schema(pattern=pattern)).isinstance_python


@functools.cache
def _linear_time(cls: Any) -> Any:
    """`cls` (a jsonschema validator class) matching `pattern`, `patternProperties` and `additionalProperties`'s
    patterns with `_linear_pattern`, and naming each unknown key apart (`_additional_properties`)."""
    from jsonschema.validators import extend

    return extend(cls, {"pattern": _pattern, "patternProperties": _pattern_properties,  # type: ignore[no-untyped-call]
                        "additionalProperties": _additional_properties})


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterable[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _linear_pattern(pattern)(instance):
        yield ValidationError(f"String should match pattern {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: dict[str, Any]) -> Iterable[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        matches = _linear_pattern(pattern)
        for key, value in instance.items():
            if matches(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: Any, schema: dict[str, Any]) -> Iterable[Any]:
    """jsonschema's `additionalProperties`, but one error per unknown key (the agent's answer lists the first
    ones and counts the rest, as an action's does), not one message naming them all."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties") or {}
    patterns = [_linear_pattern(p) for p in schema.get("patternProperties") or ()]
    extras = [key for key in instance if key not in known and not any(m(key) for m in patterns)]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        accepted = f"Accepted here: {', '.join(map(str, known))}." if known else "Remove it."
        for key in extras:
            yield ValidationError(f"Unknown field. {accepted}", path=[key], instance=instance[key])


def _bounded_message(error: Any) -> str:
    """jsonschema's message for `error`, as long as the value it quotes is short: a 200 KB string over its
    maxLength is quoted in it whole ("'AAAA…' is too long")."""
    quoted = repr(error.instance)
    message = str(error.message)
    if len(quoted) > 100:
        message = message.replace(quoted, shortened(quoted, 100))
    return shortened(message.rstrip("."), 300)


def faults(validator: Any, arguments: dict[str, Any]) -> list[tuple[str, str]]:
    """The arguments' faults against `validator`'s schema, each naming its field (empty: valid)."""
    errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    fields: dict[tuple[str, str], None] = {}  # (ordered, without repeats: one per missing field)
    for error in errors:
        path = tuple(error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, dict):
            fields.update({(field_path((*path, name)), "Field required."): None
                           for name in error.validator_value if name not in error.instance})
        elif error.validator == "additionalProperties" and error.validator_value is False:
            fields[(field_path(path), error.message)] = None  # (one per unknown key: see _additional_properties)
        elif secret_at(validator.schema, path):  # (its message quotes the value too: said without it)
            fields[(field_path(path) or "(arguments)",
                    f"The value does not satisfy {error.validator} {sent_value(error.validator_value)}.")] = None
        else:
            fields[(field_path(path) or "(arguments)",
                    f"{_bounded_message(error)}. You sent: {sent_value(error.instance)}.")] = None
    return list(fields)
