"""Models: one declaration of a domain entity, with casts, hidden, guarded and fillable fields.

Built on pydantic: `Model(Invoice, hidden=[...], guarded=[...], fillable={"create": [...]})` where `Invoice`
is a `BaseModel`. What is hidden never leaves the server; what is guarded the agent can never write; each
operation accepts only its fillable fields.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, create_model
from pydantic.fields import FieldInfo

from .stripping import stripping_annotation

Cast = Callable[[Any], Any] | type | str
READ_SCHEMA_OF = "__mcpfusion_read_schema_of__"  # set on a Model's read schema: never an input type


# The classes a stored number may come as, besides an int (one tuple, not a union made on every call).
_DECIMAL_OR_STR = (decimal.Decimal, str)
_NUMERIC = (decimal.Decimal, float, str)
_FLOAT_SOURCES = (decimal.Decimal, int, str)

# The named casts below take None as it is (a missing value stays missing), and return what they cannot
# convert unchanged for the field's own validation to judge. The common value (already of the field's type)
# is looked at first: a cast runs for every field of every row a presenter validates.


def _number(value: Any) -> Any:
    if isinstance(value, _DECIMAL_OR_STR):
        number = decimal.Decimal(value)
        return int(number) if number == number.to_integral_value() else float(number)
    return value


def _date(value: Any) -> Any:
    if value.__class__ is dt.date or value is None:
        return value
    if isinstance(value, str):
        return dt.date.fromisoformat(value[:10])
    if isinstance(value, dt.datetime):
        return value.date()
    return value


def _integer(value: Any) -> Any:
    """An int from a stored number or numeric text; a fractional value is an error, never truncated."""
    if value.__class__ is int or value is None:
        return value
    if isinstance(value, bool) or not isinstance(value, _NUMERIC):
        return int(value) if isinstance(value, bool) else value
    try:
        number = decimal.Decimal(value.strip() if isinstance(value, str) else value)
    except decimal.InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number")
    return int(number)


def _float(value: Any) -> Any:
    return float(value) if isinstance(value, _FLOAT_SOURCES) else value


def _str(value: Any) -> Any:
    return value if value is None or isinstance(value, str) else str(value)


def _bool(value: Any) -> Any:
    return value if value is None or isinstance(value, bool) else str(value).lower() in {"1", "true", "yes", "on"}


def _datetime(value: Any) -> Any:
    return dt.datetime.fromisoformat(value) if isinstance(value, str) else value


# By name; each takes None as it is (see above), so it is the field's validator itself, not wrapped.
_NAMED_CASTS: dict[str, Callable[[Any], Any]] = {
    "int": _integer,
    "float": _float,
    "number": _number,
    "str": _str,
    "string": _str,
    "bool": _bool,
    "date": _date,
    "datetime": _datetime,
}
_NONE_SAFE = frozenset(map(id, _NAMED_CASTS.values()))  # by identity: a cast given may not be hashable


def _cast_function(cast: Cast) -> Callable[[Any], Any]:
    if isinstance(cast, str):
        try:
            fn = _NAMED_CASTS[cast]
        except KeyError:
            raise ValueError(f"unknown cast {cast!r}; use one of {sorted(_NAMED_CASTS)} or a callable") from None
    elif isinstance(cast, type):
        fn = _NAMED_CASTS.get(cast.__name__, cast)
    else:
        fn = cast
    if id(fn) in _NONE_SAFE:
        return fn
    return lambda value: None if value is None else fn(value)


class Model:
    """A domain entity as the agent may see and write it."""

    def __init__(
        self,
        schema: type[BaseModel],
        *,
        name: str | None = None,
        casts: Mapping[str, Cast] | None = None,
        hidden: Iterable[str] = (),
        guarded: Iterable[str] = (),
        fillable: Mapping[str, Iterable[str]] | None = None,
        partial_operations: Iterable[str] = ("update",),
    ) -> None:
        self.source = schema
        self.name = name or schema.__name__
        self.hidden = frozenset(hidden)
        self.guarded = frozenset(guarded)
        self.casts = {k: _cast_function(v) for k, v in (casts or {}).items()}
        self.fillable = {op: tuple(fields) for op, fields in (fillable or {}).items()}
        self.partial_operations = frozenset(partial_operations)
        known = set(schema.model_fields)
        for label, names in [("hidden", self.hidden), ("guarded", self.guarded), ("casts", self.casts)] + [
            (f"fillable[{op}]", fields) for op, fields in self.fillable.items()
        ]:
            unknown = set(names) - known
            if unknown:
                raise ValueError(f"{self.name}: {label} names unknown fields {sorted(unknown)}")
        for op, fields in self.fillable.items():
            blocked = set(fields) & (self.guarded | self.hidden)
            if blocked:
                raise ValueError(f"{self.name}: fillable[{op}] lists guarded or hidden fields {sorted(blocked)}")
        self._read_model = self._build_read_model()
        self._inputs: dict[str, type[BaseModel]] = {}

    def _field(self, name: str, *, cast: bool = True) -> tuple[Any, FieldInfo]:
        info = self.source.model_fields[name]
        annotation: Any = info.annotation
        if cast and name in self.casts:
            annotation = Annotated[annotation, BeforeValidator(self.casts[name])]
        return annotation, info

    def _build_read_model(self) -> type[BaseModel]:
        fields = {n: self._field(n) for n in self.source.model_fields if n not in self.hidden}
        # Nested models keep no undeclared key either (a nested `extra="allow"` would send what it kept).
        fields = {n: (stripping_annotation(a), info) for n, (a, info) in fields.items()}
        # What the agent reads: nan and inf refused (JSON would write null where the schema says number).
        model = create_model(  # type: ignore[call-overload]
            self.name, __config__=ConfigDict(extra="ignore", from_attributes=True, allow_inf_nan=False), **fields
        )
        setattr(model, READ_SCHEMA_OF, self.name)
        return model  # type: ignore[no-any-return]

    @property
    def schema(self) -> type[BaseModel]:
        """The pydantic model of what the agent may see (hidden fields removed, casts applied)."""
        return self._read_model

    def json_schema(self) -> dict[str, Any]:
        return self._read_model.model_json_schema()

    @property
    def descriptions(self) -> dict[str, str]:
        """Visible fields' descriptions: a presenter turns them into domain rules."""
        return {
            n: f.description for n, f in self._read_model.model_fields.items() if f.description
        }

    def read(self, obj: Any) -> dict[str, Any]:
        """Casts applied, hidden fields dropped, undeclared fields stripped."""
        return self._read_model.model_validate(obj, from_attributes=True).model_dump(mode="json")

    def input_model(self, operation: str) -> type[BaseModel]:
        """The input model of one operation: only its fillable fields, unknown and guarded keys rejected.

        Used as a handler parameter type, its fields become the action's own parameters.
        """
        if operation not in self.fillable:
            raise KeyError(f"{self.name} has no fillable profile {operation!r}; known: {sorted(self.fillable)}")
        if operation not in self._inputs:
            partial = operation in self.partial_operations
            fields: dict[str, Any] = {}
            for name in self.fillable[operation]:
                # Casts shape stored values on the way out; input keeps pydantic's own validation, which
                # refuses 2.9 for an int instead of truncating it (money is never silently rounded).
                annotation, info = self._field(name, cast=False)
                if partial:
                    info = FieldInfo.merge_field_infos(info, default=None)
                    annotation = annotation | None
                fields[name] = (annotation, info)
            model = create_model(
                f"{self.name}{operation.title().replace('_', '')}Input",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
            model.__mcpfusion_flatten__ = True
            model.__mcpfusion_guarded__ = self.guarded
            model.__mcpfusion_hidden__ = self.hidden
            self._inputs[operation] = model
        return self._inputs[operation]

    def __repr__(self) -> str:
        return f"Model({self.name!r})"
