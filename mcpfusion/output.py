"""The typed output contract of an action: the `outputSchema` it advertises and the check every structured
result passes before it is sent.

Where an action's output schema comes from (first match):

1. `output_schema=` a JSON schema (dict): advertised as given (with `_select`, its root fields optional),
   every result validated against it.
2. a pydantic model (or a `Model`, or a list of either) named by `output_schema=`, `returns=` or the return
   annotation: the model is the firewall (validate, apply casts, strip undeclared and hidden fields) and its
   serialization schema is the output schema, its fields' descriptions included (what a presenter sends
   as domain rules, no presenter sends here). A dataclass or TypedDict is such a model too (`record_model`
   makes one of its fields once, a generic one's with its parameters given, each field written under its
   own name, `_id` too), as FastAPI filters a response with one.
3. a presenter (`returns=presenter`, or the `presenters=` a `returns=` dependency chooses from): the
   presenter's wire schema (embeds included, redacted fields typed as the censor).

A derived schema leaves out the formats a value may be written outside of (a naive datetime has no UTC
offset, which `date-time` requires): a client checking formats would refuse a valid result.

structuredContent is always an object: a list is sent as `{"items": [...]}`. With `_select` on the tool,
root fields are optional. What a firewall (presenter or model) built is valid by construction; anything else
(a handler's own `success_structured`/`toon_success`, a presenter the action did not declare, data the
egress guard rewrote) is validated against the advertised schema with jsonschema. A mismatch never reaches
the wire: it is an `INVALID_OUTPUT` tool error, with the failing path (never the value) in the log.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import types
import typing
import weakref
from collections import abc
from typing import Any

import typing_extensions
from pydantic import (
    MISSING,
    BaseModel,
    ConfigDict,
    Field,
    PydanticSchemaGenerationError,
    PydanticUserError,
    create_model,
)
from typing_extensions import is_typeddict

from .errors import INVALID_OUTPUT, ToolError
from .hints import type_name
from .model import Model
from .presenter import Presenter, named_fields
from .response import ToolResponse
from .schema import NODES, closed, list_row, local, without
from .serializer import as_written
from .slots import fields_repr

logger = logging.getLogger("mcpfusion")
ITEMS = "items"
NEXT_CURSOR = "next_cursor"  # set by pagination on a page of a list


def model_of(spec: Any) -> tuple[Model | type[BaseModel] | None, bool | None]:
    """(the pydantic model or `Model` that `spec` names, whether it is a list of it); a dataclass or TypedDict
    names the model `record_model` makes of it (a `TypeError` when it cannot)."""
    if isinstance(spec, Model) or (isinstance(spec, type) and issubclass(spec, BaseModel)):
        return spec, False
    if is_record(spec):
        return record_model(spec), False
    origin = typing.get_origin(spec)
    args = typing.get_args(spec)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        return model_of(next(a for a in args if a is not type(None)))  # `-> Model | None`: None is NOT_FOUND
    if isinstance(origin, type) and issubclass(origin, abc.Sequence) and not issubclass(origin, str | bytes):
        inner, nested = model_of(args[0]) if args else (None, None)
        if inner is not None and not nested:  # (a list of lists of models is no list of models)
            return inner, True
    return None, None


def is_record(spec: Any) -> bool:
    """Whether `spec` is a dataclass or a TypedDict (a class: a dataclass's instance is data), a generic one
    with its parameters given (`Envelope[int]`) too."""
    cls = typing.get_origin(spec) or spec
    return isinstance(cls, type) and (dataclasses.is_dataclass(cls) or is_typeddict(cls))


def holds_records(annotation: Any) -> bool:
    """Whether a dataclass or TypedDict is anywhere in `annotation` (`dict[str, Customer]`, `A | B`...)."""
    return is_record(annotation) or any(holds_records(a) for a in typing.get_args(annotation))


# What a TypedDict's key may be wrapped in (`NotRequired[str]`): the key's own type is inside.
_REQUIRED = (typing.Required, typing_extensions.Required)
_NOT_REQUIRED = (typing.NotRequired, typing_extensions.NotRequired)
_QUALIFIERS = (*_REQUIRED, *_NOT_REQUIRED, typing_extensions.ReadOnly)


class _Record(BaseModel):
    """The base of the models `record_model` makes: the firewall's config (undeclared keys dropped, attributes
    read, nan and inf refused). Every field name is free: a clashing one is renamed (`named_fields`)."""

    model_config = ConfigDict(extra="ignore", from_attributes=True, allow_inf_nan=False, protected_namespaces=())


@functools.cache
def record_model(spec: Any) -> type[BaseModel]:
    """The pydantic model of a dataclass's or TypedDict's fields (types, defaults, `Field` annotations): what the
    output firewall validates with, as FastAPI validates a response with the class itself. Undeclared keys are
    dropped; a TypedDict key that is not required and not given stays out (`MISSING`), as it would be. Made
    once per class; a generic one's (`Envelope[int]`) is pydantic's generic model of it, its parameters given.
    A pydantic dataclass with validators, serializers or computed fields is refused: they would not run
    (declare it as a BaseModel)."""
    cls = typing.get_origin(spec)
    if cls is not None:
        model = record_model(cls)
        try:
            return model[typing.get_args(spec)]  # type: ignore[index, no-any-return]
        except TypeError as exc:  # (the arguments do not fit the class's parameters)
            raise TypeError(f"{type_name(spec)} cannot be a model of the output ({exc})") from None
        except (PydanticSchemaGenerationError, PydanticUserError) as exc:
            raise TypeError(f"{type_name(spec)} has a field pydantic cannot validate ({exc.message})") from None
    cls = spec
    name = cls.__qualname__
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is not None and any(getattr(decorators, f.name) for f in dataclasses.fields(decorators)):
        raise TypeError(f"the pydantic dataclass {name} has validators, serializers or computed fields, which the "
                        "output firewall would not run: declare it as a pydantic BaseModel")
    try:
        hints = typing_extensions.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # (a name the annotations use that the class's module lacks)
        raise TypeError(f"the annotations of {name} cannot be evaluated ({type(exc).__name__}: {exc})") from None
    fields: dict[str, Any] = {}
    if is_typeddict(cls):
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for key, hint in hints.items():
            # The qualifier first, as pydantic reads it: under `from __future__ import annotations` the class's
            # own `__required_keys__` could not see it.
            required = key in required_keys
            qualifier: Any = typing.get_origin(hint)
            while qualifier in _QUALIFIERS:
                if qualifier in _REQUIRED or qualifier in _NOT_REQUIRED:
                    required = qualifier in _REQUIRED
                hint = typing.get_args(hint)[0]
                qualifier = typing.get_origin(hint)
            fields[key] = (hint, ...) if required else (hint | MISSING, MISSING)
    else:
        given = getattr(cls, "__pydantic_fields__", {})  # a pydantic dataclass's: its `Field`s
        for field in dataclasses.fields(cls):
            if field.name in given:
                fields[field.name] = (hints[field.name], given[field.name])
            elif field.default_factory is not dataclasses.MISSING:
                fields[field.name] = (hints[field.name], Field(default_factory=field.default_factory))
            else:
                fields[field.name] = (hints[field.name], ... if field.default is dataclasses.MISSING else field.default)
    parameters = tuple(getattr(cls, "__parameters__", ()))
    base: Any = (_Record, typing.Generic[parameters]) if parameters else _Record  # type: ignore[index]
    try:
        return create_model(cls.__name__, __base__=base, __module__=cls.__module__, **named_fields(fields))
    except (PydanticSchemaGenerationError, PydanticUserError) as exc:
        raise TypeError(f"{name} has a field pydantic cannot validate ({exc.message})") from None


def cardinality(annotation: Any) -> bool | None:
    """True for a list-like return annotation, False for one object, None when it may be either."""
    if annotation is None or annotation is typing.Any:
        return None
    origin = typing.get_origin(annotation) or annotation
    if not isinstance(origin, type):
        return None  # a union, a type variable...: either
    if issubclass(origin, BaseModel | dict | abc.Mapping):
        return False
    if issubclass(origin, list | tuple | abc.Sequence | abc.Set) and not issubclass(origin, str | bytes):
        return True
    return None


_ANNOTATIONS = frozenset({"description", "default", "readOnly", "examples"})
_NAME_MAPS = ("properties", "$defs", "patternProperties")


#: Formats pydantic advertises for values it may write outside them: a naive datetime or time has no UTC offset,
#: which RFC 3339's date-time and full-time require (an aware type's JSON schema is the same, so the schema
#: cannot tell them apart), and a timedelta may be fractional or negative ("PT1.5S", "-P1D"), which the
#: `duration` format refuses. A client validating formats (the TypeScript SDK does) would refuse the result.
_LOOSE_FORMATS = frozenset({"date-time", "time", "duration"})


def bare(schema: Any, *, described: bool = False) -> Any:
    """A derived output schema without annotations (descriptions, defaults): the shape is the contract,
    and a presenter's field descriptions already reach the agent as domain rules. Roughly halves what
    outputSchema costs. `described`: the fields' descriptions are kept (an output model's: no presenter
    sends them as rules, and once in tools/list costs less than a rules block on every answer). It leaves out
    the formats a written value may not meet (`_LOOSE_FORMATS`)."""
    if described:
        return loose_formats_out(_field_descriptions(schema))
    return loose_formats_out(without(schema, _ANNOTATIONS))


def _field_descriptions(node: Any, field: bool = False) -> Any:
    """`node` without annotations, but for the `description` of each field (a schema under `properties`):
    the models' own docstrings mostly repeat the action's description."""
    if isinstance(node, list):
        return [_field_descriptions(n) if isinstance(n, NODES) else n for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: _field_descriptions(sub, key == "properties") for name, sub in value.items()}
        elif key in _ANNOTATIONS:
            if key == "description" and field and isinstance(value, str):
                out[key] = value
        elif key in ("const", "enum"):
            out[key] = value
        else:
            out[key] = _field_descriptions(value) if isinstance(value, NODES) else value
    return out


def loose_formats_out(node: Any) -> Any:
    """`node` without a `format` in `_LOOSE_FORMATS` (property names are names; `const` and `enum` are values)."""
    if isinstance(node, list):
        return [loose_formats_out(n) if isinstance(n, NODES) else n for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _NAME_MAPS and isinstance(value, dict):
            out[key] = {name: loose_formats_out(sub) for name, sub in value.items()}
        elif key in ("const", "enum"):
            out[key] = value
        elif not (key == "format" and isinstance(value, str) and value in _LOOSE_FORMATS):
            out[key] = loose_formats_out(value) if isinstance(value, NODES) else value
    return out


def _optional(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != "required"}


#: What asks a result for keys (a key `_select` left out would fail them): dropped where `_select` relaxes.
_REQUIRING = frozenset({"required", "minProperties", "dependentRequired"})


def selectable(schema: dict[str, Any], root: dict[str, Any] | None = None, depth: int = 0,
               listed: bool = True) -> dict[str, Any]:
    """A hand-written output schema as `_select` may answer it: what `shape(optional=True)` makes of a derived
    one. Nothing asks for a root field (`required`, `minProperties`, `dependentRequired`, nor those of a
    `then`/`else` or of `dependentSchemas`), in each root `allOf`/`anyOf`/`oneOf` branch and through a local
    `$ref`; for a list (`{"items": [...]}`) the same of its items, whose root keys `_select` keeps (as
    `schema.root_keys` offers them). The definitions stay as they are, for the other references to them.
    `listed`: `schema` may be such a list (the root, a branch of it), not a row of one."""
    root = schema if root is None else root
    row = list_row(schema, root) if listed and "$ref" not in schema else None
    if row is not None:
        properties = schema["properties"]
        rows = {**local(properties[ITEMS], root), "items": selectable(row, root, depth + 1, False)}
        return {**schema, "properties": {**properties, ITEMS: rows}}
    out = {k: v for k, v in schema.items() if k not in _REQUIRING}
    if depth > 8:  # (a chain of references this long is a cycle)
        return out
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [selectable(s, root, depth + 1, listed) if isinstance(s, dict) else s for s in out[key]]
    for key in ("then", "else"):  # (`if` stays: with fewer keys it would hold more often, and `then` with it)
        if isinstance(out.get(key), dict):
            out[key] = selectable(out[key], root, depth + 1, False)
    if isinstance(out.get("dependentSchemas"), dict):
        out["dependentSchemas"] = {name: selectable(s, root, depth + 1, False) if isinstance(s, dict) else s
                                   for name, s in out["dependentSchemas"].items()}
    target = local({"$ref": out["$ref"]}, root) if "$ref" in out else None
    if isinstance(target, dict) and "$ref" not in target:
        out = {**{k: v for k, v in out.items() if k != "$ref"}, **selectable(target, root, depth + 1, listed)}
    return out


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    if set(schema) <= {"type", "anyOf"} and isinstance(schema.get("anyOf"), list):
        return list(schema["anyOf"])
    return [schema]


def shape(
    item: dict[str, Any], many: bool | None, *, optional: bool = False, paginated: bool = False
) -> dict[str, Any]:
    """The output schema of an action whose results are `item`s: one, a list (`{"items": [...]}`, with the
    next page's `next_cursor` when paginated), or either."""
    if optional:
        item = _optional(item)
    properties: dict[str, Any] = {ITEMS: {"type": "array", "items": item}}
    if paginated:
        properties[NEXT_CURSOR] = {"type": ["string", "null"]}
    collection = {"type": "object", "properties": properties, "required": [ITEMS]}
    if many is True:
        return collection
    if many is False:
        return item
    return {"type": "object", "anyOf": [item, collection]}


def union(schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """One object schema accepting any of `schemas` (duplicates merged, their `$defs` moved to the root)."""
    unique: list[dict[str, Any]] = []
    defs: dict[str, Any] = {}
    for schema in schemas:
        for name, definition in schema.get("$defs", {}).items():
            defs.setdefault(name, definition)
        for branch in _branches({k: v for k, v in schema.items() if k != "$defs"}):
            if branch not in unique:
                unique.append(branch)
    out = unique[0] if len(unique) == 1 else {"type": "object", "anyOf": unique}
    return {**out, "$defs": defs} if defs else out


def _objects(node: Any, found: list[dict[str, Any]], top: bool = True) -> None:
    """Every object sub-schema (with properties) below the root, in document order."""
    if isinstance(node, dict):
        if not top and isinstance(node.get("properties"), dict) and node["properties"]:
            found.append(node)
        for key, value in node.items():
            if key in _NAME_MAPS and isinstance(value, dict):
                for sub in value.values():
                    _objects(sub, found, False)
            elif isinstance(value, dict | list) and key != "$defs":
                _objects(value, found, False)
    elif isinstance(node, list):
        for item in node:
            _objects(item, found, False)


def _replace(node: Any, target: str, ref: dict[str, str]) -> Any:
    if isinstance(node, dict):
        if json.dumps(node, sort_keys=True) == target:
            return dict(ref)
        return {k: _replace(v, target, ref) if k != "$defs" else v for k, v in node.items()}
    if isinstance(node, list):
        return [_replace(v, target, ref) for v in node]
    return node


def share(schema: dict[str, Any]) -> dict[str, Any]:
    """The same schema with every object sub-schema that appears more than once written once, in `$defs`
    (e.g. an embedded child as one item and as a list, or the parts two audiences' views have in common)."""
    defs: dict[str, Any] = dict(schema.get("$defs", {}))
    out = {k: v for k, v in schema.items() if k != "$defs"}
    while True:
        found: list[dict[str, Any]] = []
        _objects(out, found)
        for d in defs.values():
            _objects(d, found, top=False)
        keys = [json.dumps(node, sort_keys=True) for node in found]
        repeated = [k for k in dict.fromkeys(keys) if keys.count(k) > 1]
        if not repeated:
            break
        target = max(repeated, key=len)  # the largest first: what it contains goes with it
        name = next(f"s{i}" for i in range(1, len(defs) + 2) if f"s{i}" not in defs)
        ref = {"$ref": f"#/$defs/{name}"}
        out = _replace(out, target, ref)
        defs = {k: _replace(v, target, ref) for k, v in defs.items()}
        defs[name] = json.loads(target)
    if defs:
        out["$defs"] = defs
    return out


def wrap(data: Any) -> Any:
    """structuredContent for the data of a response (lists as `{"items": [...]}`)."""
    return {ITEMS: data} if isinstance(data, list) else data


def invalid_output(label: str) -> ToolError:
    return ToolError(
        INVALID_OUTPUT,
        f"{label} produced a result that does not match its output schema; it was not sent.",
        recovery="This is a server problem, not your call; retry later or try another action.",
    )


_WIRE_SCHEMAS: weakref.WeakKeyDictionary[Presenter, dict[str, Any]] = weakref.WeakKeyDictionary()


def _wire_schema(presenter: Presenter) -> dict[str, Any]:
    """`presenter.wire_schema()`, generated once per presenter: a presenter returned by several actions (five
    in a typical CRUD tool) is otherwise rebuilt for each at the first tools/list. Outputs are derived once,
    when first listed, so this keeps the same moment of truth. The schema kept is read, never changed (`bare`
    builds a new one from it)."""
    schema = _WIRE_SCHEMAS.get(presenter)
    if schema is None:
        schema = _WIRE_SCHEMAS[presenter] = presenter.wire_schema()
    return schema


_DerivedKey = tuple[tuple[Presenter, ...], bool | None, bool, bool, bool]
_Derived = tuple[dict[str, Any] | None, dict[str, Any] | None]

# Derived output schemas (before `share`, and after) by what they are derived from: the actions of a tool mostly
# answer the same presenter, one or a list of them, and `share` serializes each sub-schema again and again.
# Bounded as the declaration memos (`hints`); presenters are keyed by identity, as `_WIRE_SCHEMAS` keeps them.
_DERIVED: dict[_DerivedKey, _Derived] = {}
_DERIVED_SIZE = 4096


def _derived(key: _DerivedKey) -> _Derived:
    """The output schema derived from `key`'s presenters, before and after `share`: worked out once per key,
    each action given its own copies."""
    known = _DERIVED.get(key)
    if known is None:
        if len(_DERIVED) >= _DERIVED_SIZE:
            _DERIVED.clear()
        known = _DERIVED[key] = _derive(*key)
    inlined, schema = known
    copies: dict[int, Any] = {}
    return _copied(inlined, copies), _copied(schema, copies)


def _copied(node: Any, copies: dict[int, Any]) -> Any:
    """A copy of a JSON schema whose parts already copied (by identity, in `copies`) are the same copies:
    `share` keeps the parts it does not rewrite, so an action's two schemas share them as they did."""
    if not isinstance(node, dict | list):
        return node
    known = copies.get(id(node))
    if known is None:
        known = copies[id(node)] = {k: _copied(v, copies) for k, v in node.items()} if isinstance(node, dict) \
            else [_copied(v, copies) for v in node]
    return known


def _derive(sources: tuple[Presenter, ...], many: bool | None, optional: bool, paginated: bool,
            described: bool) -> _Derived:
    shapes = [bare(_wire_schema(p), described=described) for p in sources]
    if not shapes:
        return None, None
    derived = union([shape(s, many, optional=optional, paginated=paginated) for s in shapes])
    return derived, share(derived)


def contradiction(explicit: dict[str, Any], presenters: tuple[Presenter, ...], many: bool | None) -> str | None:
    """What makes the answers of `presenters` never valid against an explicit output schema (`output_schema=`
    beside `returns=<presenter>`), None when some answer may be: a key it requires that no answer holds, a key
    every answer holds that it forbids (`additionalProperties: false`), or a key typed apart. Read at the top
    level only (a schema that may fit is left to the check of each answer)."""
    derived, _ = _derive(presenters, many, False, True, False)
    if derived is None:
        return None
    wanted = explicit.get("properties") or {}
    required = [key for key in explicit.get("required") or () if isinstance(key, str)]
    closed = explicit.get("additionalProperties") is False
    reasons: list[str] = []
    for branch in derived.get("anyOf") or [derived]:
        given = branch.get("properties") or {}
        missing = [key for key in required if key not in given]
        extra = [key for key in branch.get("required") or () if key not in wanted] if closed else []
        clash = [key for key in required if key in given and key in wanted and _apart(wanted[key], given[key])]
        if not (missing or extra or clash):
            return None
        reasons.append("; ".join(
            ([f"it requires {', '.join(map(repr, missing))}, which the presenter never sends"] if missing else [])
            + ([f"it forbids {', '.join(map(repr, extra))}, which the presenter always sends"] if extra else [])
            + ([f"it types {', '.join(map(repr, clash))} apart from the presenter"] if clash else [])))
    return reasons[0]


_JSON_TYPES = {"integer": {"integer", "number"}, "number": {"number", "integer"}}


def _apart(wanted: Any, given: Any) -> bool:
    """Whether two property schemas state top-level types no value has both of (`integer` is a `number`)."""
    if not (isinstance(wanted, dict) and isinstance(given, dict)):
        return False
    first, second = wanted.get("type"), given.get("type")
    if first is None or second is None or "anyOf" in given or "anyOf" in wanted:
        return False
    ones = {first} if isinstance(first, str) else set(first)
    others = {second} if isinstance(second, str) else set(second)
    widened = set().union(*(_JSON_TYPES.get(kind, {kind}) for kind in ones))
    return not (widened & others)


class Output:
    """One action's output contract (built lazily: presenters may still be configured after the decorator).

    A plain slotted class, not a dataclass: one is made per action, and a dataclass compiles its generated
    methods when the module is imported (about 2M instructions of every process's start)."""

    __slots__ = ("label", "explicit", "firewall", "presenters", "many", "optional", "paginated", "inlined",
                 "_schema", "_built", "_validator")

    def __init__(self, label: str, explicit: dict[str, Any] | None = None, firewall: Presenter | None = None,
                 presenters: tuple[Presenter, ...] = (), many: bool | None = None, optional: bool = False,
                 paginated: bool = False) -> None:
        self.label = label
        self.explicit = explicit
        self.firewall = firewall
        self.presenters = presenters
        self.many = many
        self.optional = optional
        self.paginated = paginated
        self.inlined: dict[str, Any] | None = None  # the schema before `share`
        self._schema: dict[str, Any] | None = None
        self._built = False
        self._validator: Any = None

    def __repr__(self) -> str:
        return fields_repr(self, self.__slots__[:7])  # the dataclass's: the fields up to `paginated`

    @property
    def schema(self) -> dict[str, Any] | None:
        """The advertised `outputSchema` (None: the action is untyped); repeated parts shared in `$defs`."""
        if not self._built:
            if self.explicit is not None:
                # With `_select`, the fields asked for are all a result holds: required ones too.
                self.inlined = self._schema = selectable(self.explicit) if self.optional else self.explicit
            else:
                # An output model's field descriptions stay: no presenter sends them to the agent as rules.
                sources = (self.firewall,) if self.firewall else self.presenters
                key = (sources, self.many, self.optional, self.paginated, self.firewall is not None)
                self.inlined, self._schema = _derived(key)
            self._built = True
        return self._schema

    def check(self, response: ToolResponse, presenter: Presenter | None) -> ToolResponse:
        """Attach structuredContent to a successful response of a typed action, validated; raises on mismatch."""
        if response.is_error:
            return response
        schema = self._schema if self._built else self.schema
        if schema is None:
            return response
        data = response.view.data
        structured = wrap(data)
        if not isinstance(structured, dict):
            logger.error("%s: a typed action answered %s, not an object or a list", self.label, type(data).__name__)
            raise invalid_output(self.label)
        fits = (
            # Its presenter's output is valid by construction against the schema derived from it.
            presenter is not None
            and self.explicit is None
            and presenter in ((self.firewall,) if self.firewall else self.presenters)
            and not response.view.rewritten
            and (self.many is None or self.many == isinstance(data, list))
        )
        if not fits:
            # Checked as written: a client validates the JSON it receives (a nan there is null). A response the
            # handler built itself (`toon_success`, `success_structured`) passed its presenter by: say so.
            bypassed = presenter is None and bool(self.firewall or self.presenters)
            self._validate(as_written(structured), schema, _BYPASSED if bypassed else "")
        response.structured_content = structured
        return response

    def _validate(self, structured: dict[str, Any], schema: dict[str, Any], why: str = "") -> None:
        if self._validator is None:
            from jsonschema.validators import validator_for  # imported on first use: a cold-start cost

            cls = validator_for(schema)
            cls.check_schema(schema)
            # A schema derived from models or presenters is their firewall's: an answer built around it (a
            # handler's own success_structured) may not carry fields they strip, hidden ones above all.
            self._validator = cls(schema if self.explicit is not None else closed(schema))
        error = next(iter(self._validator.iter_errors(structured)), None)
        if error is not None:
            from jsonschema.exceptions import best_match

            worst = best_match(self._validator.iter_errors(structured)) or error
            # The path and the rule that failed, never the value (it may be what the schema keeps out).
            logger.error("%s: structured result does not match its output schema at %s (%s)%s",
                         self.label, masked_path(worst.absolute_path, declared_names(schema)), worst.validator, why)
            raise invalid_output(self.label)


_BYPASSED = ("; the handler returned a response it built itself (toon_success, success, success_structured), "
             "which is sent as written, never shaped by the action's presenter: return the data instead")


def masked_path(path: abc.Iterable[Any], declared: abc.Set[str]) -> str:
    """The JSON path of a failing value, with the keys the data chose rather than the schema declared shown
    as `[*]`: the key of a free-form mapping is data (an e-mail, any text, control characters)."""
    parts = ["$"]
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif part in declared:
            parts.append(f".{part}" if part.isidentifier() else f"[{part!r}]")
        else:
            parts.append("[*]")
    return "".join(parts)


def declared_names(schema: Any) -> set[str]:
    """Every property name a JSON schema declares, anywhere in it (`properties` of nested and `$defs` schemas)."""
    names: set[str] = set()
    pending = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            properties = node.get("properties")
            if isinstance(properties, dict):
                names.update(k for k in properties if isinstance(k, str))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return names
