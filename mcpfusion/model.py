"""Models: one declaration of a domain entity, with casts, hidden, guarded and fillable fields.

Built on pydantic: `Model(Invoice, hidden=[...], guarded=[...], fillable={"create": [...]})` where `Invoice`
is a `BaseModel`. What is hidden never leaves the server; what is guarded the agent can never write; each
operation accepts only its fillable fields.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import datetime as dt
import decimal
import functools
import inspect
import textwrap
from collections.abc import Callable, Iterable, Mapping
from types import FunctionType
from typing import Annotated, Any, ClassVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, create_model
from pydantic._internal._decorators import Decorator, PydanticDescriptorProxy
from pydantic.fields import FieldInfo
from pydantic.json_schema import SkipJsonSchema

from .stripping import stripping_annotation

Cast = Callable[[Any], Any] | type | str
READ_SCHEMA_OF = "__mcpfusion_read_schema_of__"  # set on a Model's read schema: never an input type


# The classes a stored number may come as, besides an int (one tuple, not a union made on every call).
_DECIMAL_OR_STR = (decimal.Decimal, str)
_NUMERIC = (decimal.Decimal, float, str)
_FLOAT_SOURCES = (decimal.Decimal, int, str)
_MAX_DIGITS = 4300  # Python's own limit on the digits of an int read from text

# The named casts below take None as it is (a missing value stays missing), and return what they cannot
# convert unchanged for the field's own validation to judge. The common value (already of the field's type)
# is looked at first: a cast runs for every field of every row a presenter validates.


def _decimal(value: Any) -> decimal.Decimal:
    """A finite decimal of a stored number or numeric text; a ValueError (the field's validation error, one row
    left out) for anything else: text that is no number, nan, infinity, or more digits than an int converts."""
    try:
        number = decimal.Decimal(value.strip() if isinstance(value, str) else value)
    except decimal.InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if not number.is_finite() or number.adjusted() >= _MAX_DIGITS:  # int("1e999999999") would never end
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _number(value: Any) -> Any:
    if isinstance(value, _DECIMAL_OR_STR):
        number = _decimal(value)
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
    number = _decimal(value)
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number")
    return int(number)


def _float(value: Any) -> Any:
    if not isinstance(value, _FLOAT_SOURCES):
        return value
    try:
        return float(value)
    except OverflowError:  # an int past float's range (a ValueError is the field's validation error already)
        raise ValueError("too large for a float") from None


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
    return _given_cast(fn)


def _given_cast(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A cast given as a callable: None kept, and whatever it raises a ValueError (`Decimal("n/a")` raises
    `InvalidOperation`, `int([])` a TypeError): a stored value it cannot convert is that row's validation
    error, never the whole answer's internal error."""
    def cast(value: Any) -> Any:
        if value is None:
            return None
        try:
            return fn(value)
        except (ValueError, AssertionError):
            raise  # pydantic's own validation errors (PydanticCustomError is a ValueError)
        except Exception as exc:
            raise ValueError(f"cannot be cast ({type(exc).__name__})") from None
    return cast


# Of the source's config, what would describe it under the derived model's name: the schema's title, and its
# extra JSON schema (examples of a whole row would show hidden fields).
_OWN_SCHEMA: dict[str, Any] = {"title": None, "json_schema_extra": None}


def _has_code(model: type[BaseModel]) -> bool:
    """Whether `model` declares validators, serializers or computed fields (code that may read any field)."""
    found = model.__pydantic_decorators__
    return any(getattr(found, f.name) for f in dataclasses.fields(found))


def _validators(source: type[BaseModel], kept: set[str]) -> dict[str, Any]:
    """The source's validators for a model of only the `kept` fields: field validators and serializers
    narrowed to those fields (dropped when they name none: the field is not there to validate), model
    validators as they are. Computed fields and model serializers describe what is read: not an input's."""
    found = source.__pydantic_decorators__
    out: dict[str, Any] = {}
    by_field: list[Decorator[Any]] = [*found.validators.values(), *found.field_validators.values(),
                                      *found.field_serializers.values()]
    for dec in by_field:
        fields = tuple(f for f in dec.info.fields if f == "*" or f in kept)
        if fields:
            out[dec.cls_var_name] = _redeclared(source, dec, dataclasses.replace(dec.info, fields=fields,
                                                                                   check_fields=False))
    by_model: list[Decorator[Any]] = [*found.root_validators.values(), *found.model_validators.values()]
    for dec in by_model:
        out[dec.cls_var_name] = _redeclared(source, dec, dec.info)
    return out


_MEMBER_TYPES = (FunctionType, property, classmethod, staticmethod, functools.cached_property)


def _methods(source: type[BaseModel]) -> dict[str, Any]:
    """The source's own methods and properties (not its fields, not pydantic's): its validators, kept on an
    input model, may call them (`self._check()`), and an input model is no subclass of the source."""
    mro = source.__mro__
    classes = mro[: mro.index(BaseModel)]
    return {name: value for cls in reversed(classes) for name, value in vars(cls).items()
            if isinstance(value, _MEMBER_TYPES) and not hasattr(BaseModel, name)}  # (pydantic's own kept)


def _reads_the_instance(dec: Decorator[Any]) -> bool:
    """Whether a model validator reads the validated instance (mode "after" or "wrap", or a v1 root validator
    without pre=True), not the input as sent: its code then reads the fields as attributes."""
    return getattr(dec.info, "mode", "after") != "before"


def _names_read(source: type[BaseModel], fn: Any, seen: set[Any] | None = None) -> set[str] | None:
    """The attribute names and string constants in `fn`'s code, and in the source's methods and properties
    it names (`self.check()` reads what `check` reads): what it may read of a model. None: no source to read."""
    seen = set() if seen is None else seen
    for wrapped in ("fget", "func", "__func__"):  # a property, cached property, classmethod: its function
        fn = getattr(fn, wrapped, fn)
    fn = inspect.unwrap(fn)
    if fn in seen:
        return set()
    seen.add(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return None
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for name in sorted(names):
        member = inspect.getattr_static(source, name, None)
        if not hasattr(BaseModel, name) and isinstance(member, _MEMBER_TYPES):
            more = _names_read(source, member, seen)
            if more is None:
                return None
            names |= more
    return names


def _validator_function(source: type[BaseModel], dec: Decorator[Any]) -> Any:
    """The function a validator was declared with (not pydantic's wrappers of it)."""
    declared = inspect.getattr_static(source, dec.cls_var_name)
    return getattr(declared, "wrapped", declared)


def _redeclared(source: type[BaseModel], dec: Decorator[Any], info: Any) -> PydanticDescriptorProxy[Any]:
    """`dec` as its decorator (`field_validator(...)` and the like) makes it, for another model's namespace."""
    return PydanticDescriptorProxy(inspect.getattr_static(source, dec.cls_var_name), info, dec.shim)


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
        self._check_code()
        self._read_model = self._build_read_model()
        self._inputs: dict[str, type[BaseModel]] = {}

    def _field(self, name: str, *, cast: bool = True) -> tuple[Any, FieldInfo]:
        info = self.source.model_fields[name]
        annotation: Any = info.annotation
        if cast and name in self.casts:
            annotation = Annotated[annotation, BeforeValidator(self.casts[name])]
        return annotation, info

    def _check_code(self) -> None:
        """Refuse what the source's own code would do unsafely on the derived models (never drop it silently)."""
        found = self.source.__pydantic_decorators__
        source = self.source.__name__
        if self.hidden and found.model_serializers:
            raise ValueError(f"{self.name}: {source} declares a model serializer, which could write the hidden fields "
                             f"{sorted(self.hidden)}: serialize field by field (field_serializer, computed_field)")
        partial = sorted(op for op in self.fillable if op in self.partial_operations)
        if partial and (found.model_validators or found.root_validators):
            raise ValueError(f"{self.name}: {source} declares model validators, which would see None for every "
                             f"field a partial operation ({', '.join(partial)}) is not sent: validate those fields "
                             "with field validators, or leave the operation out of partial_operations")
        for op, fields in self.fillable.items():
            self._check_model_validators(op, set(self.source.model_fields) - set(fields))

    def _check_model_validators(self, operation: str, left_out: set[str]) -> None:
        """Refuse a model validator reading a field `operation` does not take: its input model has no such
        attribute, so every call would fail with an AttributeError (an internal error for a valid call)."""
        found = self.source.__pydantic_decorators__
        validators: list[Decorator[Any]] = [*found.model_validators.values(), *found.root_validators.values()]
        for dec in validators:
            if not left_out or not _reads_the_instance(dec):
                continue
            read = _names_read(self.source, _validator_function(self.source, dec))
            wrong = sorted(left_out if read is None else read & left_out)
            if wrong:
                said = "may read" if read is None else "reads"
                raise ValueError(
                    f"{self.name}: {self.source.__name__}'s model validator {dec.cls_var_name} {said} {wrong}, which "
                    f"the {operation!r} operation does not take (its input has no such attribute): make it "
                    "mode='before' (it reads the input dict, where they are missing), or check them in the action")

    def _build_read_model(self) -> type[BaseModel]:
        """A subclass of the source, so that its validators, serializers, computed fields and methods hold:
        casts applied, nested models ignoring undeclared keys, hidden fields never written.

        A hidden field is dropped, unless the source has code (validators, serializers, computed fields)
        that may read it: then it is kept for that code, excluded from every dump and schema."""
        keep_hidden = _has_code(self.source)
        annotations: dict[str, Any] = {}
        namespace: dict[str, Any] = {}
        for name, info in self.source.model_fields.items():
            annotation, _ = self._field(name)
            if name in self.hidden and not keep_hidden:
                annotations[name] = ClassVar[Any]  # a class variable is no field: the subclass has no such field
            elif name in self.hidden:
                annotations[name] = Annotated[annotation, SkipJsonSchema()]  # type: ignore[type-arg]
                # Optional: a row without it reads as before (the code reading it gets None).
                namespace[name] = FieldInfo.merge_field_infos(
                    info, exclude=True, **({"default": None} if info.is_required() else {}))
            elif (annotation := stripping_annotation(annotation)) is not info.annotation:
                annotations[name] = annotation
                namespace[name] = copy.copy(info)
        # What the agent reads: nan and inf refused (JSON would write null where the schema says number).
        config = {**self.source.model_config, "extra": "ignore", "from_attributes": True, "allow_inf_nan": False,
                  **_OWN_SCHEMA, "title": self.name}
        namespace.update(__annotations__=annotations, __module__=self.source.__module__, model_config=config)
        model: type[BaseModel] = type(self.name, (self.source,), namespace)
        setattr(model, READ_SCHEMA_OF, self.name)
        return model

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
            n: f.description for n, f in self._read_model.model_fields.items() if f.description and not f.exclude
        }

    def read(self, obj: Any) -> dict[str, Any]:
        """Casts applied, hidden fields dropped, undeclared fields stripped."""
        return self._read_model.model_validate(obj, from_attributes=True).model_dump(mode="json")

    def input_model(self, operation: str) -> type[BaseModel]:
        """The input model of one operation: only its fillable fields, unknown and guarded keys rejected, the
        source's validators of those fields and its model validators applied (see `_validators`), with the
        source's methods and properties they may call.

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
            config = ConfigDict(**{**self.source.model_config, "extra": "forbid", **_OWN_SCHEMA})  # type: ignore[typeddict-item]
            model = create_model(
                f"{self.name}{operation.title().replace('_', '')}Input",
                __config__=config,
                __validators__={**_methods(self.source), **_validators(self.source, set(fields))},
                **fields,
            )
            model.__mcpfusion_flatten__ = True
            model.__mcpfusion_guarded__ = self.guarded
            model.__mcpfusion_hidden__ = self.hidden
            self._inputs[operation] = model
        return self._inputs[operation]

    def __repr__(self) -> str:
        return f"Model({self.name!r})"
