"""Tools and actions, declared like FastAPI routes: `@tool.action` on a typed function."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import functools
import inspect
import re
import string
import types
import typing
import warnings
from collections import abc
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypeVar, overload

from fastapi.dependencies.models import Dependant
from pydantic import BaseModel, ConfigDict, RootModel, ValidationError, create_model
from pydantic.fields import FieldInfo
from starlette.responses import Response

from . import dictschema, inputschema, toon
from . import exposition as expo
from .argschema import Arguments, arguments, check_listable
from .booleans import mistyped, numbers_plan
from .content import declared_types
from .dependencies import (
    build_dependant,
    check_dependency_parameters,
    is_empty,
    security_scopes,
    split_parameters,
    takes_page,
)
from .errors import (
    MAX_FIELDS_SHOWN,
    MISSING_DISCRIMINATOR,
    UNKNOWN_ACTION,
    ToolError,
    ValidationFailed,
    field_path,
    secret_at,
    sent_value,
)
from .hints import per_annotation, type_hints, type_name
from .model import READ_SCHEMA_OF, Model
from .output import Output, bare, cardinality, contradiction, holds_records, model_of, shape
from .pagination import CURSOR_ADVERTISED, CURSOR_PARAM, CURSOR_SCHEMA
from .presenter import Presenter, called_function
from .schema import copied, root_keys
from .scopes import declared_scopes
from .select import SELECT_PARAM, select_schema
from .slots import fields_repr
from .stripping import models_in
from .unknown_fields import accepted, holds_models, model_at, unknown_fields
from .validatable import check_output_model, check_validatable

Exposition = Literal["grouped", "flat", "profiles"]
F = TypeVar("F", bound=Callable[..., Any])
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
#: The longest MCP tool name (MCP 2025-11-25: names SHOULD be 1 to 128 characters).
MCP_NAME_MAX = 128
DISCRIMINATOR = "action"
#: Framework parameters advertised in a form of their own (their full schema stays the one that validates).
ADVERTISED_PARAMS: dict[str, Any] = {CURSOR_PARAM: CURSOR_ADVERTISED}
# Shared by the actions and tools with none (most of them): every `frozenset()` is a new object (a tracked one,
# which the garbage collector walks), three per action otherwise.
_NONE: frozenset[str] = frozenset()


def _first_line(text: str | None) -> str:
    """The first paragraph of a docstring, on one line (a summary: confirmations, OpenAPI's `summary`)."""
    if not text:
        return ""
    if "\n" not in text:  # a one-line docstring: what cleandoc would make of it, without its line bookkeeping
        return text.expandtabs().strip()
    return inspect.cleandoc(text).split("\n\n")[0].replace("\n", " ").strip()


def _docstring(text: str | None) -> str:
    """A docstring as the agent reads it: all of it (guidance after the first paragraph matters to it),
    cleaned as FastAPI cleans a route's (`inspect.cleandoc`)."""
    if not text:
        return ""
    if "\n" not in text:  # a one-line docstring: what cleandoc would make of it, without its line bookkeeping
        return text.expandtabs().strip()
    # Each line's trailing blanks and the blank lines around it left out too: Python 3.11's cleandoc keeps a
    # last line of spaces (`"""Other.\n    """`), which later versions drop; one description on every version.
    return "\n".join(line.rstrip() for line in inspect.cleandoc(text).split("\n")).strip("\n")


def _one_line(text: str) -> str:
    """`text` on one line (a grouped description has one line per action): paragraphs joined by spaces."""
    return " ".join(text.split()) if "\n" in text else text


def _flatten_model(annotation: Any) -> type[BaseModel] | None:
    """A pydantic model whose fields become the action's own parameters (e.g. a Model input profile)."""
    base = annotation
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extras = typing.get_args(annotation)
        if any(e is Flatten or isinstance(e, Flatten) for e in extras):
            if isinstance(base, type) and issubclass(base, BaseModel):
                return base
            raise TypeError(f"Flatten spreads a pydantic model's fields into the action's parameters; {base!r} is "
                            "not one (an optional model cannot be flattened: make its fields optional instead)")
    if isinstance(base, type) and issubclass(base, BaseModel) and getattr(base, "__mcpfusion_flatten__", False):
        return base
    return None


#: `confirm.CONFIRM_PARAM` (that module imports this one).
_CONFIRM_PARAM = "_confirm"


def _reserved_names(paginate: Any, confirm: Any) -> dict[str, str]:
    """The argument names the framework reads for itself in this action's calls, with what they are for: an
    argument sent under one of them would never reach the handler (or break the grouped schema)."""
    reserved = {DISCRIMINATOR: "the discriminator of a grouped tool", SELECT_PARAM: "the field selector"}
    if paginate:
        reserved[CURSOR_PARAM] = "the page cursor of a paginated action"
    if confirm:
        reserved[_CONFIRM_PARAM] = "the confirmation token of a confirm= action"
    return reserved


def _sent_names(name: str, info: Any) -> list[str]:
    """The top-level keys the agent sends a field under: its validation alias(es) (the first step of each
    path), else its alias, else its name."""
    alias = info.validation_alias
    if alias is None:
        return [info.alias or name]
    if isinstance(alias, str):
        return [alias]
    names: list[str] = []
    for path in getattr(alias, "choices", [alias]):  # AliasChoices, or one AliasPath
        steps = path.path if hasattr(path, "path") else [path]
        names += [step for step in steps[:1] if isinstance(step, str)]
    return names


def _aliases(name: str, annotation: Any, default: Any) -> list[str]:
    """The keys a plain parameter is sent under when a `Field(...)` gives it an alias (none otherwise: its own
    name, already checked)."""
    # Each `Field(...)` as given (in `Annotated` or as the default), read as it is: merging them into one
    # FieldInfo, as pydantic does, costs more than the check; any alias among them is a name sent.
    infos = [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, FieldInfo)]
    if isinstance(default, FieldInfo):
        infos.append(default)
    return [sent for info in infos for sent in _sent_names(name, info) if sent != name]


def _read_schema_in(annotation: Any) -> str | None:
    """The name of a `Model` whose read schema appears in a parameter's annotation (guarded fields inside)."""
    # Only classes carry the mark (asking a typing form for it costs an AttributeError raised and caught), and
    # a class has no type arguments to look into.
    if isinstance(annotation, type):
        owner = getattr(annotation, READ_SCHEMA_OF, None)
        return owner if isinstance(owner, str) else None
    for arg in typing.get_args(annotation):
        found = _read_schema_in(arg)
        if found:
            return found
    return None


@per_annotation
def _function_name(fn: Any) -> str:
    """The name an action takes from its handler, which must be a function (or a method) with one."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise TypeError(f"{fn!r}: an action's handler is a function or method (def / async def); wrap a "
                        "functools.partial or a callable object in one")
    return fn.__name__


def _argument_kind(annotation: Any) -> tuple[str | None, type[BaseModel] | None]:
    """(the `Model` whose read schema the annotation holds, the model it flattens), worked out once per
    annotation object: a server's actions repeat their parameters."""
    return _read_schema_in(annotation), _flatten_model(annotation)


def _has_extras(annotation: Any) -> bool:
    """An `Annotated` anywhere in `annotation` (a class has no type arguments: nothing to look into)."""
    if isinstance(annotation, type):
        return False
    if typing.get_origin(annotation) is typing.Annotated:
        return True
    return any(_has_extras(a) for a in typing.get_args(annotation))


def _return_annotation(fn: Callable[..., Any], hints: dict[str, Any]) -> Any:
    """The return annotation without `Annotated` extras, from `fn`'s hints with extras (evaluated once: the
    string annotations' evaluation is most of declaring an action)."""
    annotation = hints.get("return")
    if _return_has_extras(annotation):
        return typing.get_type_hints(fn).get("return")
    return annotation


_return_has_extras = per_annotation(_has_extras)


def _is_async(fn: Callable[..., Any]) -> bool:
    """`inspect.iscoroutinefunction(fn)`, read from the code flags first for a plain `async def`."""
    code = getattr(fn, "__code__", None) if fn.__class__ is types.FunctionType else None
    return (code is not None and bool(code.co_flags & inspect.CO_COROUTINE)) or inspect.iscoroutinefunction(fn)


class MiddlewareLike(Protocol):
    """What `middleware=` takes (`mcpfusion.middleware.Middleware`, read without importing it: that module
    reads this one): an async callable of (call, call_next)."""

    def __call__(self, call: Any, call_next: Any, /) -> Awaitable[Any]: ...


def checked_middleware(middleware: Any, where: str) -> tuple[Any, ...]:
    """`middleware=` as declared, checked: a list of callables that take `(call, call_next)` (an instance
    of a guard, not its class). Each mistake is refused here, naming `where`: else every call of the actions
    it wraps would fail as an internal error."""
    if isinstance(middleware, (str, bytes)) or not isinstance(middleware, Iterable):
        raise TypeError(f"{where}: middleware= takes a list of middleware, e.g. middleware=[{middleware!r}]")
    found = tuple(middleware)
    for mw in found:
        if isinstance(mw, type):
            raise TypeError(f"{where}: middleware {mw.__qualname__} is a class: give an instance of it "
                            f"({mw.__qualname__}(...)), which is called with (call, call_next)")
        if not callable(mw):
            raise TypeError(f"{where}: middleware {mw!r} is not callable: a middleware is an async function (or "
                            "an object with an async __call__) taking (call: ActionCall, call_next: CallNext)")
        name = getattr(mw, "__qualname__", type(mw).__qualname__)
        try:
            signature: inspect.Signature | None = inspect.signature(mw)
        except (TypeError, ValueError):  # (a builtin without a readable signature: its arity is not known)
            signature = None
        if signature is not None:
            try:
                signature.bind(None, None)
            except TypeError:
                raise TypeError(f"{where}: middleware {name}{signature} cannot be called with (call, call_next), "
                                "so every call would fail: a middleware takes exactly those two arguments, e.g. "
                                "async def audit(call: ActionCall, call_next: CallNext) -> ToolResponse") from None
        if not _awaitable_middleware(mw):
            raise TypeError(f"{where}: middleware {name} is no async function, so every call would fail (what a "
                            "middleware returns is awaited): a middleware is an async function (or an object with "
                            "an async __call__) taking (call, call_next), e.g. async def audit(call: ActionCall, "
                            "call_next: CallNext) -> ToolResponse")
    return found


def _awaitable_middleware(mw: Any) -> bool:
    """Whether calling `mw` gives a coroutine, as far as its declaration says: an `async def` (a bound method
    or a `functools.partial` of one too), an object whose class's `__call__` is one, or a wrapper that
    `functools.wraps` made of one (a sync decorator passing an async middleware's coroutine on). A builtin
    (`print`) or a plain `def` gives no coroutine."""
    target = called_function(mw)
    try:
        unwrapped = inspect.unwrap(target)
    except ValueError:  # (a `__wrapped__` cycle)
        unwrapped = target
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(unwrapped)


class Flatten:
    """`Annotated[MyModel, Flatten]`: the model's fields become top-level parameters of the action."""


# Arguments: unknown fields refused, and nan or inf never a number (JSON has none; 1e400 parses as inf).
_ARGUMENTS_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


class Action:
    """One operation of a tool: a handler, its argument model, its dependencies and its presenter.

    A plain class with the fields of the dataclass it was (same order, defaults and repr; compared by identity):
    a dataclass compiles its generated methods when its module is imported, a cost of every process's start."""

    _FIELDS = ("tool", "name", "fn", "description", "readonly", "destructive", "idempotent", "open_world",
               "presenter", "presenter_dependency", "presenter_candidates", "output", "title", "argument_fields",
               "flattened", "plain_args", "dependant", "dependency_free", "guarded", "hidden", "is_async", "paginate",
               "middleware", "confirm", "content_types", "json_schema", "json_validator", "own_scopes", "content_only")

    def __init__(
        self,
        tool: Tool,
        name: str,
        fn: Callable[..., Any],
        description: str,
        readonly: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
        presenter: Presenter | None,
        presenter_dependency: Callable[..., Any] | None,
        presenter_candidates: tuple[Presenter, ...],
        output: Output,
        title: str | None,
        argument_fields: dict[str, Any],
        flattened: dict[str, tuple[type[BaseModel], tuple[str, ...]]],
        plain_args: tuple[str, ...],
        dependant: Dependant,
        dependency_free: bool,
        guarded: frozenset[str],
        hidden: frozenset[str],
        is_async: bool,
        paginate: int | bool | None = None,
        middleware: tuple[Any, ...] = (),
        confirm: bool | str = False,
        content_types: frozenset[str] | None = None,
        json_schema: dict[str, Any] | None = None,
        json_validator: Any = None,
        own_scopes: frozenset[str] = _NONE,
        content_only: bool = False,
    ) -> None:
        self.tool = tool
        self.name = name
        self.fn = fn
        self.description = description
        self.readonly = readonly
        self.destructive = destructive
        self.idempotent = idempotent
        self.open_world = open_world
        self.presenter = presenter
        self.presenter_dependency = presenter_dependency
        self.presenter_candidates = presenter_candidates
        self.output = output
        self.title = title
        self.argument_fields = argument_fields  # name -> (annotation, default or FieldInfo): the argument model's
        self.flattened = flattened
        self.plain_args = plain_args
        self.dependant = dependant
        self.dependency_free = dependency_free
        self.guarded = guarded
        self.hidden = hidden
        self.is_async = is_async
        self.paginate = paginate  # page size, or True: the presenter's limit
        self.middleware = middleware
        self.confirm = confirm
        self.content_types = content_types  # MIME types of the content it may send (images, documents)
        self.json_schema = json_schema  # a hand-written input schema (`input_schema=`)
        self.json_validator = json_validator
        self.own_scopes = own_scopes  # `scopes=` of the action itself (its tool's are added)
        self.content_only = content_only  # every answer its content alone: REST sends the document itself

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    @property
    def scopes(self) -> frozenset[str]:
        """The OAuth scopes a caller needs for this action: its tool's and its own (see `mcpfusion.authorization`)."""
        own = self.own_scopes
        return self.tool.scopes | own if own else self.tool.scopes

    @property
    def label(self) -> str:
        return f"{self.tool.name}/{self.name}"

    @property
    def summary(self) -> str:
        """The first paragraph of its description, on one line: where a line is read (a confirmation,
        OpenAPI's `summary`); the agent gets the whole description."""
        return _first_line(self.description)

    @functools.cached_property
    def args_model(self) -> type[BaseModel]:
        """The pydantic model of the arguments (strict: unknown fields refused), made on first use (a call,
        tools/list, REST): declaring hundreds of actions stays cheap, and an action never used costs nothing."""
        return create_model(f"{self.tool.name}_{self.name}_arguments", __config__=_ARGUMENTS_CONFIG,
                            **self.argument_fields)

    @functools.cached_property
    def arguments(self) -> Arguments:
        """The argument model's lean schema and required fields, worked out once: tools/list, REST routes and
        the lockfile all read it; put together from fields other actions already had when it can, so that
        listing does not make the model (see `mcpfusion.argschema`)."""
        return arguments(self.argument_fields, lambda: self.args_model)

    @functools.cached_property
    def numbers(self) -> Any:
        """Where the arguments hold numbers or dates, to refuse a boolean or a number there that lax validation
        would misread (`mcpfusion.booleans`); None: nowhere."""
        return numbers_plan(self.declared_schema())

    @property
    def qualified_name(self) -> str:
        return f"{self.tool.name}.{self.name}"

    @property
    def input_schema(self) -> dict[str, Any]:
        if self.json_schema is not None:
            schema: dict[str, Any] = {**self.json_schema, "properties": dict(self.json_schema.get("properties", {}))}
        else:
            schema = copied(self.arguments.schema)
        schema.setdefault("properties", {})
        if self.tool.select:
            schema["properties"][SELECT_PARAM] = select_schema(self.tool.select_keys())
        if self.paginate:
            schema["properties"][CURSOR_PARAM] = dict(CURSOR_SCHEMA)
        return schema

    def read_input_schema(self) -> dict[str, Any]:
        """`input_schema` for a reader that changes nothing (the grouped schema's merge): the declared schema
        itself, not a copy, when the framework adds no parameter to it."""
        return self.input_schema if self.tool.select or self.paginate else self.declared_schema()

    def advertised_input_schema(self) -> dict[str, Any]:
        """Its input schema as `tools/list` shows it on its own (flat): compact, see `mcpfusion.exposition`;
        its `_select` names its own fields (a grouped tool's names every action's)."""
        schema = self.input_schema
        if self.tool.select:
            own = self.output_keys()
            if own:
                schema["properties"][SELECT_PARAM] = select_schema(own)
            else:
                del schema["properties"][SELECT_PARAM]
        return expo.action_input_schema(schema, advertised=ADVERTISED_PARAMS)

    @property
    def required(self) -> list[str]:
        """The required parameters under the names the agent sends (the input schema's, aliases included):
        what the descriptions list next to `input_schema`'s properties."""
        return list(self.declared_schema().get("required", []))

    def declared_schema(self) -> dict[str, Any]:
        """`input_schema` without the framework's parameters (`_select`, the cursor), not copied: read it,
        never change it."""
        return self.json_schema if self.json_schema is not None else self.arguments.schema

    def signature(self, values: dict[str, str] | None = None) -> str:
        """Its parameters as the grouped description lists them: `id,message?` (`_select` left out: the
        same for every action, its schema says it), with the `values` it takes of some (`status:not overdue`,
        see `exposition.narrowed`). The names of `input_schema`'s properties, read without copying it."""
        names = list(self.declared_schema().get("properties", {}))
        if self.paginate and CURSOR_PARAM not in names:
            names.append(CURSOR_PARAM)
        return toon.params_cell([n for n in names if n != SELECT_PARAM], self.required, values)

    @property
    def presenters(self) -> tuple[Presenter, ...]:
        return ((self.presenter,) if self.presenter else ()) + self.presenter_candidates

    @property
    def output_schema(self) -> dict[str, Any] | None:
        """The advertised `outputSchema` (None: an untyped action)."""
        return self.output.schema

    def declared_output(self) -> dict[str, Any] | None:
        """Its output schema before repeated parts are shared in `$defs` (what `exposition.output_schema`
        merges), None for an untyped action."""
        schema = self.output_schema
        return self.output.inlined if schema is not None and self.output.explicit is None else schema

    def advertised_output_schema(self) -> dict[str, Any] | None:
        """Its `outputSchema` as `tools/list` shows it on its own (flat): compact, see `mcpfusion.exposition`."""
        schema = self.declared_output()
        return expo.output_schema([schema]) if schema is not None else None

    def output_keys(self) -> list[str]:
        keys: list[str] = []
        firewall = (self.output.firewall,) if self.output.firewall else ()
        for presenter in self.presenters + firewall:
            keys += [k for k in presenter.wire_names if k not in keys]
        if self.output.explicit is not None:
            keys += [k for k in root_keys(self.output.explicit) if k not in keys]
        return keys

    def page_size(self, presenter: Presenter | None) -> int:
        """Rows per page with this call's presenter: the declared size, capped by the presenter's limit (so
        that the presenter never truncates a page and no row is skipped)."""
        limit = presenter.max_items if presenter is not None else None
        if self.paginate is True:
            if limit is None:
                raise RuntimeError(f"{self.label}: paginate=True needs a presenter with a limit()")
            return limit
        return min(int(self.paginate or 0), limit or int(self.paginate or 0))

    def annotations(self) -> dict[str, Any]:
        return {
            "readOnlyHint": self.readonly,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Strictly validated keyword arguments for the handler (flattened models rebuilt)."""
        if self.json_validator is not None:
            return self._validate_json(arguments)
        if not arguments and self.takes_nothing:
            return {}  # (no model to build: about a microsecond of a short call)
        if len(arguments) > MAX_FIELDS_SHOWN:  # (only so many keys can hold more unknown ones than are listed)
            accepted = self.accepted_keys
            unknown = [key for key in arguments if key not in accepted]
            if len(unknown) > MAX_FIELDS_SHOWN:
                raise ValidationFailed(self.label, self._unknown_flood(arguments, unknown))
        numbers = self.numbers
        if numbers is not None:
            wrong = mistyped(numbers, arguments)
            if wrong:
                raise ValidationFailed(self.label, wrong)
        fields = self.field_validator
        if fields is not None:
            try:
                valid = fields.validate_python(arguments)
            except ValidationError:
                pass  # the model's own verdict, below, is the one answered (its error, its reading)
            else:
                return {name: valid[name] for name in self.plain_args}
        try:
            model = self.args_model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as exc:
            raise ValidationFailed(self.label, self._explain(exc)) from None
        if self.nested_models:  # (a nested model ignores unknown keys: refused here, as the root's are)
            strays = unknown_fields(arguments, model)
            if strays:
                shown = [(field_path(loc), self._nested_unknown(loc, reader))
                         for loc, reader in strays[:MAX_FIELDS_SHOWN]]
                # (ValidationFailed lists the first fields and counts the others: those left unbuilt are counted)
                raise ValidationFailed(self.label, shown + [shown[-1]] * (len(strays) - len(shown)))
        values = {name: getattr(model, name) for name in self.plain_args}
        for param, (flat_model, fields) in self.flattened.items():
            present = {f: getattr(model, f) for f in fields if f in model.model_fields_set}
            try:  # by field name: the agent sent the aliases, already read into the argument model
                values[param] = flat_model.model_validate(present, by_name=True)
            except ValidationError as exc:  # the model's own validators (a field against another)
                raise ValidationFailed(self.label, self._explain(exc)) from None
        return values

    @functools.cached_property
    def takes_nothing(self) -> bool:
        """Whether the agent has nothing to fill (an action of dependencies alone): no argument is then the one
        valid input, and the handler gets no keyword from the agent."""
        model = self.args_model
        return not model.model_fields and not model.__pydantic_decorators__.model_validators \
            and not self.plain_args and not self.flattened

    @functools.cached_property
    def field_validator(self) -> Any:
        """The argument model's validation into a dict, without building the model (`dictschema`), for arguments
        read field by field: None when a flattened model or a model below the root reads the model itself, or
        the model's validation could tell the difference. What it refuses goes to the model for its verdict."""
        model = self.args_model
        if self.flattened or self.nested_models or model.__pydantic_decorators__.model_validators:
            return None
        found = dictschema.codec(model)
        return None if found is None else found[0]

    @functools.cached_property
    def nested_models(self) -> bool:
        """Whether the arguments may hold a model below the root (whose unknown keys pydantic ignores)."""
        return any(holds_models(field.annotation) for field in self.args_model.model_fields.values())

    @staticmethod
    def _nested_unknown(loc: tuple[Any, ...], model: type[BaseModel] | None) -> str:
        """What to tell of a key the object at `loc[:-1]` (of `model`, when known) does not take."""
        where = field_path(loc[:-1])
        if model is None or not model.model_fields:
            return f"Unknown field: {where} does not take it. Remove it."
        return f"Unknown field: {where} takes {accepted(model)}. Remove it."

    def _validate_json(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """`input_schema=`: the hand-written JSON Schema judges; the handler gets the parameters it names."""
        found = inputschema.faults(self.json_validator, arguments)
        if found:
            raise ValidationFailed(self.label, found)
        return {name: arguments[name] for name in self.plain_args if name in arguments}

    @functools.cached_property
    def accepted_keys(self) -> frozenset[str]:
        """Every top-level key the argument model may take (names and aliases: more than it accepts is fine,
        the model still judges them); any other key is refused."""
        keys = set()
        for name, field in self.args_model.model_fields.items():
            keys.add(name)
            for alias in (field.alias, field.validation_alias):
                if isinstance(alias, str):
                    keys.add(alias)
                elif alias is not None:  # AliasChoices / AliasPath: the first step of each path
                    for path in getattr(alias, "choices", [alias]):
                        steps = path.path if hasattr(path, "path") else [path]
                        keys.update(step for step in steps[:1] if isinstance(step, str))
        return frozenset(keys)

    def _unknown_flood(self, arguments: dict[str, Any], unknown: list[str]) -> list[tuple[str, str]]:
        """The invalid fields of arguments with more unknown keys than an error lists (100,000 keys in 4 MB):
        the model judges the known keys alone, and the unknown ones past those listed are only counted
        (pydantic would build an error for every one of them, a second of CPU for nothing)."""
        try:
            self.validate({key: value for key, value in arguments.items() if key in self.accepted_keys})
            fields: list[tuple[str, str]] = []
        except ValidationFailed as exc:
            fields = exc.fields
        valid = self._valid_names()
        fields += [(field_path((key,)) or "(arguments)", self._unknown_message((key,), valid))
                   for key in unknown[:MAX_FIELDS_SHOWN]]
        # ValidationFailed lists the first fields and counts the others: those left unbuilt are counted too.
        return fields + [fields[-1]] * (len(unknown) - MAX_FIELDS_SHOWN)

    def _valid_names(self) -> str:
        """What the agent may send: its fields (by the names it sends them), then the framework's own."""
        names = [f.alias or n for n, f in self.args_model.model_fields.items()]
        names += [p for p, on in ((CURSOR_PARAM, self.paginate), (SELECT_PARAM, self.tool.select)) if on]
        return ", ".join(names)

    def _unknown_message(self, loc: tuple[Any, ...], valid: str) -> str:
        """What to tell of a key the arguments (or an object inside them, `loc` longer than one) do not take."""
        root = str(loc[0]) if loc else ""
        if root in self.guarded:
            return "This field is guarded: it cannot be written by the agent. Remove it."
        # A hidden field is answered as any unknown key: a message of its own would tell which names the model
        # hides (fields that never leave the server), where the schema and every answer keep them out of sight.
        if len(loc) > 1:  # inside an object: the action's own fields would mislead, that object's are named
            return self._nested_unknown(loc, model_at(self.args_model, loc[:-1]))
        if not valid:
            return "Unknown field: this action takes no arguments. Remove it."
        return f"Unknown field. This action accepts: {valid}."

    def _explain(self, exc: ValidationError) -> list[tuple[str, str]]:
        valid = self._valid_names()
        fields = []
        for err in exc.errors(include_url=False):
            name = field_path(err["loc"]) or "(arguments)"
            if err["type"] == "missing":
                message = "Field required."
            elif err["type"] == "extra_forbidden":
                message = self._unknown_message(tuple(err["loc"]), valid)
            elif secret_at(self.declared_schema(), err["loc"]):  # (a SecretStr: never quoted back)
                message = f"{err['msg'].rstrip('.')}."
            else:
                message = f"{err['msg'].rstrip('.')}. You sent: {sent_value(err.get('input'))}."
            fields.append((name, message))
        return fields


class Tool:
    """A group of actions, exposed as one MCP tool (grouped) or one tool per action (flat)."""

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        tags: Iterable[str] = (),
        exposition: Exposition = "grouped",
        select: bool = False,
        toon_description: bool = False,
        title: str | None = None,
        middleware: Sequence[MiddlewareLike] = (),
        profile_hints: Sequence[str] = expo.PROFILE_HINTS,
        scopes: Iterable[str] = (),
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"tool name {name!r} must match {_NAME.pattern}")
        if exposition not in ("grouped", "flat", "profiles"):
            raise ValueError("exposition must be 'grouped', 'flat' or 'profiles'")
        unknown = set(profile_hints) - set(expo.MCP_DEFAULT_HINTS)
        if unknown:
            raise ValueError(f"profile_hints {sorted(unknown)} are not MCP hints: {list(expo.MCP_DEFAULT_HINTS)}")
        self.name = name
        self.description = description
        self.tags = list(tags)
        self.exposition: Exposition = exposition
        self.select = select
        self.toon_description = toon_description
        self.profile_hints = tuple(profile_hints)
        self.title = title
        self.middleware = checked_middleware(middleware, f"tool {name!r}")  # around every action of this tool
        self.scopes = declared_scopes(scopes, f"tool {name!r}")  # needed by every action of this tool
        self.actions: dict[str, Action] = {}
        self.source: str | None = None  # set by discovery: the file that defined it

    @overload
    def action(self, name: F, /) -> F: ...

    @overload
    def action(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        readonly: bool = False,
        destructive: bool | None = None,
        idempotent: bool = False,
        open_world: bool | None = None,
        returns: Presenter | Callable[..., Any] | type[BaseModel] | None = None,
        presenters: Sequence[Presenter] = (),
        output_schema: dict[str, Any] | type[BaseModel] | Any | None = None,
        title: str | None = None,
        paginate: int | bool | None = None,
        middleware: Sequence[MiddlewareLike] = (),
        confirm: bool | str = False,
        content_types: Iterable[str] | None = None,
        input_schema: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        content_only: bool = False,
    ) -> Callable[[F], F]: ...

    def action(
        self,
        name: Any = None,
        *,
        description: str | None = None,
        readonly: bool = False,
        destructive: bool | None = None,
        idempotent: bool = False,
        open_world: bool | None = None,
        returns: Any = None,
        presenters: Sequence[Presenter] = (),
        output_schema: Any = None,
        title: str | None = None,
        paginate: int | bool | None = None,
        middleware: Sequence[MiddlewareLike] = (),
        confirm: bool | str = False,
        content_types: Iterable[str] | None = None,
        input_schema: dict[str, Any] | None = None,
        scopes: Iterable[str] = (),
        content_only: bool = False,
    ) -> Any:
        """Register a handler as an action; its signature becomes the input schema. Works bare
        (`@tool.action`) and called (`@tool.action("name", readonly=True, returns=view)`).

        Annotations follow the MCP defaults: an action that does not say otherwise is advertised as
        destructive (unless `readonly=True`) and open-world, so nothing looks safer than declared.
        `returns=` takes a presenter, a dependency returning one (declare its choices in `presenters=`),
        or a pydantic model (the output firewall); so does the return annotation (`-> Invoice`).
        `paginate=N` (or True: the presenter's `limit()`) answers lists one page at a time with a signed
        `cursor` (see `mcpfusion.pagination`). `middleware` wrap this action only (inside the app's and the
        tool's). `confirm=True` (or a message template such as "Void {id}?") asks the user to confirm these
        exact arguments before it runs.
        `content_types` lists the MIME types of the images, audio or documents it sends (see
        `mcpfusion.content`; anything else is refused before it leaves); `content_only=True` says each answer is
        that content alone (`attach(..., data_block=False)`, checked): REST sends the document itself and
        OpenAPI documents only those types. `input_schema` replaces the signature's
        schema by a hand-written JSON Schema, validated the same way (the handler's parameters must be among its
        properties). `scopes` are the OAuth scopes a caller needs (with the tool's own, and those of any
        `Security(dependency, scopes=[...])` among its dependencies): a caller without them does not see the
        action on MCP and gets 403 on REST (see `mcpfusion.authorization`).
        """
        if callable(name) and not isinstance(name, str):
            fn = name
            self.actions_add(self._build(fn, _function_name(fn), None, False, None, False, None, None, (), None,
                                         None))
            return fn

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            action = self._build(
                fn, name or _function_name(fn), description, readonly, destructive, idempotent, open_world,
                returns, tuple(presenters), output_schema, title, paginate, input_schema, confirm,
            )
            action.middleware = checked_middleware(middleware, f"action {action.label}")
            if isinstance(confirm, str):
                check_confirm_template(confirm, action.declared_schema().get("properties") or {}, action.label)
                check_confirm_formats(confirm, action)
            action.confirm = confirm
            own = declared_scopes(scopes, f"{self.name}.{action.name}")
            if own:
                action.own_scopes |= own
            if content_types is not None:
                action.content_types = declared_types(content_types, f"action {action.label}")
            if content_only:
                if not action.content_types:
                    raise ValueError(f"action {action.label}: content_only=True answers content alone, so it "
                                     "declares content_types=[...] too (the MIME types of what it sends)")
                action.content_only = True
            self.actions_add(action)
            return fn

        return register

    def actions_add(self, action: Action) -> None:
        if action.name in self.actions:
            raise ValueError(f"tool {self.name!r} already has an action {action.name!r}")
        if self.exposition != "grouped" and len(self.name) + 1 + len(action.name) > MCP_NAME_MAX:
            # flat (and profiles, for an action alone in its group): the MCP tool is named `{tool}_{action}`
            raise ValueError(f"tool {self.name!r}, action {action.name!r}: under the {self.exposition} exposition "
                             f"its MCP tool name {self.name}_{action.name} would be longer than {MCP_NAME_MAX} "
                             "characters (MCP's limit; many model APIs refuse longer ones): shorten the tool's "
                             "or the action's name")
        self.actions[action.name] = action

    def _build(
        self,
        fn: Callable[..., Any],
        name: str,
        description: str | None,
        readonly: bool,
        destructive: bool | None,
        idempotent: bool,
        open_world: bool | None,
        returns: Any,
        candidates: tuple[Presenter, ...],
        output_schema: Any,
        title: str | None,
        paginate: int | bool | None = None,
        input_schema: dict[str, Any] | None = None,
        confirm: bool | str = False,
    ) -> Action:
        _function_name(fn)
        where = f"{fn.__module__}.{fn.__qualname__}"
        if inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
            raise TypeError(f"{where}: a generator cannot be an action (the agent would get the generator object, "
                            "not what it yields); return the list, or send progress through Context")
        if not _NAME.match(name) or name == DISCRIMINATOR:
            raise ValueError(f"action name {name!r} is not valid")
        if readonly and destructive:
            raise ValueError(f"{where}: an action cannot be both readonly and destructive")
        if description is None and not (fn.__doc__ or "").strip():
            warnings.warn(f"{where}: no docstring, so the action {self.name}.{name} has an empty description; "
                          "add a docstring or description=...", UserWarning, stacklevel=4)
        try:
            hints = type_hints(fn)
        except Exception as exc:
            raise TypeError(f"{where}: its annotations cannot be evaluated ({type(exc).__name__}: {exc}); every name "
                            "they use must be importable from the function's module at declaration") from exc
        arguments, dependencies = split_parameters(fn, hints)
        named = f"{where} (action {self.name}.{name})"
        json_validator = None
        if input_schema is not None:
            json_validator = _json_validator(fn, input_schema, [arg[0] for arg in arguments])
            arguments = []  # the hand-written schema is the contract; the parameters are passed by name
        fields: dict[str, Any] = {}
        flattened: dict[str, tuple[type[BaseModel], tuple[str, ...]]] = {}
        plain: list[str] = []
        guarded: set[str] = set()
        hidden: set[str] = set()
        reserved = _reserved_names(paginate, confirm)
        sent_as: dict[str, str] = {}  # each key the agent sends, and the parameter (or flattened field) it sets

        def send(key: str, what: str) -> None:
            other = sent_as.setdefault(key, what)
            if other != what:
                raise TypeError(f"{where}: {what} is sent as {key!r}, and so is {other}: one key cannot set two "
                                "parameters (both would get the same value); rename one or give it another alias")

        for prop in (input_schema or {}).get("properties") or ():
            if prop in reserved:
                raise ValueError(f"{fn.__qualname__}: input_schema property {prop!r} is reserved ({reserved[prop]}); "
                                 "rename it")
        for arg, annotation, default in arguments:
            if arg in (DISCRIMINATOR, SELECT_PARAM) or (paginate and arg == CURSOR_PARAM):
                raise ValueError(f"{fn.__qualname__}: parameter name {arg!r} is reserved")
            if arg not in hints:  # not annotated
                raise TypeError(f"{where}: parameter {arg!r} has no type annotation, so the agent would get "
                                f"a schema without a type; annotate it (e.g. {arg}: str)")
            try:
                owner, flat = _argument_kind(annotation)
            except TypeError as exc:  # a Flatten of something else than a model
                raise TypeError(f"{where}: parameter {arg!r}: {exc}") from None
            if owner is not None:
                raise TypeError(f"{where}: parameter {arg!r} uses {owner}'s read schema as input, which would "
                                f"make its guarded fields writable; use {owner}.input_model('<operation>') instead")
            if flat is not None:
                for field_name, info in flat.model_fields.items():
                    for sent in _sent_names(field_name, info):
                        if sent in reserved:
                            shown = "" if sent == field_name else f" is sent as {sent!r} (its alias), which"
                            raise ValueError(f"{fn.__qualname__}: {flat.__name__}'s field {field_name!r}, flattened "
                                             f"into the action's parameters,{shown} is reserved ({reserved[sent]}): "
                                             "rename the field or give it another alias, or do not flatten it")
                    if field_name in fields:
                        raise TypeError(f"{where}: {flat.__name__}'s field {field_name!r}, flattened into the action's "
                                        "parameters, clashes with another parameter of that name; rename one")
                    for sent in _sent_names(field_name, info):
                        send(sent, f"{flat.__name__}'s field {field_name!r} (flattened)")
                    fields[field_name] = (info.annotation, info)
                check_listable(flat, f"{named}: parameter {arg!r}")
                flattened[arg] = (flat, tuple(flat.model_fields))
                guarded |= getattr(flat, "__mcpfusion_guarded__", frozenset())
                hidden |= getattr(flat, "__mcpfusion_hidden__", frozenset())
                continue
            if arg in fields:
                raise TypeError(f"{where}: parameter {arg!r} clashes with a field of a flattened model; rename one")
            if arg.startswith("_"):
                raise ValueError(f"{named}: parameter {arg!r} starts with an underscore, which pydantic keeps for "
                                 "private attributes: it would be left out of the input schema and never passed. "
                                 f"Rename it ({arg.lstrip('_') or 'value'}), or give the new name the alias "
                                 f"(Annotated[..., Field(alias={arg!r})]) if the agent must send {arg!r}")
            aliases = _aliases(arg, annotation, default)
            for sent in aliases:
                if sent in reserved:
                    raise ValueError(f"{fn.__qualname__}: parameter {arg!r} is sent as {sent!r} (its alias), which is "
                                     f"reserved ({reserved[sent]}): give it another alias")
            for sent in aliases or (arg,):
                send(sent, f"parameter {arg!r}")
            check_validatable(annotation, f"{where}: parameter {arg!r}")
            check_listable(annotation, f"{named}: parameter {arg!r}")
            fields[arg] = (annotation, ... if default is inspect.Parameter.empty else default)
            plain.append(arg)
        presenter, presenter_dependency, candidates, output = self._output(
            fn, where, f"{self.name}/{name}", returns, candidates, output_schema, _return_annotation(fn, hints)
        )
        output.paginated = bool(paginate)
        dependant = build_dependant(dependencies, presenter_dependency)
        check_dependency_parameters(dependant, named)
        _check_paging(fn, paginate, takes_page(dependencies), (presenter, *candidates) if presenter else candidates,
                      presenter_dependency is not None, _return_annotation(fn, hints))
        return Action(
            tool=self,
            name=name,
            fn=fn,
            description=description if description is not None else _docstring(fn.__doc__),
            readonly=readonly,
            destructive=(not readonly) if destructive is None else destructive,
            idempotent=idempotent,
            open_world=True if open_world is None else open_world,
            presenter=presenter,
            presenter_dependency=presenter_dependency,
            presenter_candidates=candidates,
            output=output,
            title=title,
            argument_fields=fields,
            flattened=flattened,
            plain_args=tuple(plain) if input_schema is None else _named_properties(fn, input_schema),
            dependant=dependant,
            dependency_free=is_empty(dependant) and not paginate,
            guarded=frozenset(guarded) if guarded else _NONE,
            hidden=frozenset(hidden) if hidden else _NONE,
            is_async=_is_async(fn),
            paginate=paginate,
            json_schema=dict(input_schema) if input_schema is not None else None,
            json_validator=json_validator,
            own_scopes=declared_scopes(security_scopes(dependant), where),  # `Security(dep, scopes=[...])` counts too
        )

    def _output(
        self, fn: Callable[..., Any], where: str, label: str, returns: Any, candidates: tuple[Presenter, ...],
        output_schema: Any, annotation: Any,
    ) -> tuple[Presenter | None, Callable[..., Any] | None, tuple[Presenter, ...], Output]:
        """(static presenter, presenter dependency, its declared choices, the output contract); `annotation`
        is the handler's return annotation."""
        explicit: dict[str, Any] | None = None
        model, many = None, None
        if isinstance(annotation, type) and issubclass(annotation, Response):
            raise TypeError(f"{where}: returns a {annotation.__name__}, but an action answers the agent (MCP and REST "
                            "alike) with data: return the data itself (a dict, a model, a ToolResponse from "
                            "success_structured / toon_success / response()), not an HTTP response")
        if isinstance(output_schema, dict):
            explicit = check_output_schema(output_schema, where)
        elif output_schema is not None:
            model, many = _model_named(output_schema, where)
            if model is None:
                raise TypeError(f"{where}: output_schema= takes a JSON schema (dict) or a pydantic model, dataclass "
                                f"or TypedDict (or a list of one), not {output_schema!r}")
        named: Any = None
        if returns is not None and not isinstance(returns, Presenter):
            named, named_many = _model_named(returns, where)
            _check_returns_spec(returns, named, where)
            if named is not None:  # `returns=SomeModel`: the output model, not a dependency
                if output_schema is not None:
                    raise TypeError(f"{where}: returns={type_name(returns)} and output_schema= both declare the "
                                    "output model; keep one of them")
                model, many = named, named_many
                shown = f"returns={type_name(returns)}"
                returns = None
        if returns is None and candidates:
            if len(candidates) > 1:
                raise ValueError(f"{where}: presenters= lists the presenters a returns= dependency chooses from; "
                                 "add returns=<dependency returning one of them>")
            returns, candidates = candidates[0], ()  # one presenter, declared as a list: it applies
        presenter = returns if isinstance(returns, Presenter) else None
        dependency = returns if returns is not None and presenter is None else None
        if model is None and presenter is None and dependency is None and explicit is None:
            model, many = _model_named(annotation, where)
            if model is None and (models_in(annotation) or holds_records(annotation)):
                # (a dataclass or TypedDict is as much a contract as a model: never silently no firewall)
                raise TypeError(f"{where}: the return annotation {type_name(annotation)} holds pydantic models, "
                                "dataclasses or TypedDicts, and the schema firewall applies to one of those, a "
                                "list of one or an optional one: return one of those (a model may hold a dict or "
                                "list of models), or declare returns= / output_schema=")
        if model is not None:
            check_output_model(model.schema if isinstance(model, Model) else model, where)
        if presenter is not None and presenter.item_model is not None:
            _check_returns_fit(f"{where} (action {label})", f"returns=<presenter {presenter.name!r}>",
                               presenter.item_model, None, annotation)
        elif named is not None and model is not None:
            _check_returns_fit(f"{where} (action {label})", shown, model.schema if isinstance(model, Model) else model,
                               many, annotation)
        declared = ((presenter,) if presenter else ()) + candidates
        for registered in declared:
            registered.freeze()  # the action answers with it: it must not change under the action
        if explicit is not None and declared and model is None:
            wrong = contradiction(explicit, declared, cardinality(annotation))
            if wrong is not None:
                raise TypeError(f"{where} (action {label}): output_schema= contradicts what its presenter answers "
                                f"({wrong}), so every call would fail its output check: leave output_schema= out "
                                "(the presenter's schema is advertised) or make it describe the presenter's output")
        if model is not None and (declared or dependency is not None):
            # A model next to presenters only documents their output: advertised, and checked as a schema.
            explicit = shape(bare(Presenter.firewall(model).wire_schema()), many, optional=self.select)
            model = None
        if dependency is not None and not candidates and explicit is None:
            warnings.warn(f"{where}: returns= is a dependency without presenters=[...], so the action advertises "
                          "no output schema; list the presenters it may return", UserWarning, stacklevel=5)
        output = Output(
            label,
            explicit=explicit,
            firewall=Presenter.firewall(model).freeze() if model is not None else None,
            presenters=declared,
            many=many if model is not None else cardinality(annotation),
            optional=self.select,
        )
        return presenter, dependency, candidates, output

    # -- exposition --------------------------------------------------------------------------------
    def select_keys(self) -> list[str]:
        keys: list[str] = []
        for action in self.actions.values():
            keys += [k for k in action.output_keys() if k not in keys]
        return keys

    def annotations(self) -> dict[str, Any]:
        """Aggregated: readOnly if all are, destructive if any is, idempotent if all are, openWorld if any."""
        actions = list(self.actions.values())
        return {
            "readOnlyHint": all(a.readonly for a in actions),
            "destructiveHint": any(a.destructive for a in actions),
            "idempotentHint": all(a.idempotent for a in actions),
            "openWorldHint": any(a.open_world for a in actions),
        }

    def grouped_description(self, schema: dict[str, Any] | None = None) -> str:
        """The description, then one line per action: `get(id,note?): Get one.` (the action's name, the value
        of the `action` discriminator, called with its parameters; `?` marks an optional one, `:` the values
        it takes of a parameter `schema`, the grouped input schema, merges with wider ones). Cheaper than the
        TOON table (`toon_description=True`), which adds its header and quotes a description with a colon."""
        if self.toon_description:
            return self.toon_text(schema)
        lines = [self.description.strip()] if self.description.strip() else []
        lines.extend(f"{a.name}({params}): {_one_line(a.description)}" for a, params in self._signatures(schema))
        return "\n".join(lines)

    def _signatures(self, schema: dict[str, Any] | None) -> list[tuple[Action, str]]:
        """Each action with its signature in the grouped description (see `Action.signature`)."""
        actions = list(self.actions.values())
        merged = schema if schema is not None else self.grouped_input_schema()
        values = expo.narrowed([a.declared_schema() for a in actions], merged)
        return [(a, a.signature(v)) for a, v in zip(actions, values, strict=True)]

    def grouped_input_schema(self) -> dict[str, Any]:
        """`action` enum + the union of the actions' parameters, compact (see `mcpfusion.exposition`)."""
        return expo.grouped_input_schema(
            DISCRIMINATOR,
            [(a.name, a.read_input_schema()) for a in self.actions.values()],  # read, never changed
            reserved=(SELECT_PARAM,),
            advertised=ADVERTISED_PARAMS,
        )

    def grouped_output_schema(self) -> dict[str, Any] | None:
        """One schema for the grouped tool, when every action has one: what any of them answers, compact
        (see `mcpfusion.exposition.output_schema`)."""
        schemas = [a.declared_output() for a in self.actions.values()]
        if not schemas or any(s is None for s in schemas):
            return None
        return expo.output_schema([s for s in schemas if s is not None])

    def toon_text(self, schema: dict[str, Any] | None = None) -> str:
        """The TOON description (what `toon_description=True` advertises), whatever the tool's setting."""
        rows = [(a.name, _one_line(a.description), params) for a, params in self._signatures(schema)]
        return toon.describe(self.description, rows)

    def __repr__(self) -> str:
        return f"Tool({self.name!r}, actions={list(self.actions)})"


def _check_paging(fn: Callable[..., Any], paginate: int | bool | None, takes_page: bool,
                  presenters: Sequence[Presenter], chosen: bool, returns: Any = None) -> None:
    """Refuse a pagination declaration that could not work, naming the function and the fix."""
    where = fn.__qualname__
    if takes_page and not paginate:
        raise ValueError(f"{where} takes a Page: declare the page size with @tool.action(paginate=N)")
    one = typing.get_origin(returns) or returns
    if paginate and isinstance(one, type) and issubclass(one, (dict, BaseModel, str, bytes, int, float)):
        raise ValueError(f"{where} is paginated but returns one {one.__name__}: a paginated action returns a "
                         "list of rows (or page.keyset(...)); drop paginate= or return the list")
    if paginate is True:
        if not presenters or any(p.max_items is None for p in presenters):
            hint = " and list its candidates in presenters=[...]" if chosen else ""
            raise ValueError(f"{where}: paginate=True takes the page size from the presenter's limit(); give a "
                             f"presenter with a limit{hint}, or paginate=N")
    elif paginate is not None and paginate is not False and (not isinstance(paginate, int) or paginate < 1):
        raise ValueError(f"{where}: paginate must be True or a page size of at least 1")


def _model_named(spec: Any, where: str) -> tuple[Model | type[BaseModel] | None, bool | None]:
    """`model_of(spec)`, its refusal of a dataclass or TypedDict naming the action."""
    try:
        return model_of(spec)
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from None


def _check_returns_spec(returns: Any, named: Any, where: str) -> None:
    """Refuse a `returns=` that is neither a presenter, a dependency returning one, nor a model of the data
    (a builtin type, a typing form, pydantic's own base classes): it would fail later, less clearly."""
    if named in (BaseModel, RootModel):
        raise TypeError(f"{where}: returns={type_name(returns)} names pydantic's base class, not a model of the "
                        "data: give the model itself (class Invoice(BaseModel): ...), or leave returns= out")
    if named is None and (isinstance(returns, type) and not issubclass(returns, Presenter)
                          or typing.get_origin(returns) is not None or not callable(returns)):
        # (a class called as a dependency gives an instance of itself, never a presenter)
        raise TypeError(f"{where}: returns= takes a presenter, a dependency returning one (with presenters=[...]), "
                        f"or a pydantic model, dataclass or TypedDict (or a list of one), not {type_name(returns)}; "
                        "for an untyped result leave returns= out, and give a JSON schema as output_schema=")


_LISTED_ABCS = (abc.Sequence, abc.MutableSequence, abc.Set, abc.MutableSet)


def _check_returns_fit(where: str, shown: str, item: type[BaseModel], many: bool | None, annotation: Any) -> None:
    """Refuse a `returns=` (its item model `item`, a list of them when `many`, either when None) that the
    handler's return annotation clearly contradicts: every call would fail INVALID_OUTPUT. Only what cannot
    fit is refused: a richer model than the one returns= narrows it to, a dict, Any or a union all may."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        if type(None) in args and len(args) == 2:
            annotation = next(a for a in args if a is not type(None))  # `-> X | None`: None is NOT_FOUND
            origin = typing.get_origin(annotation)
    kind = origin or annotation
    if not isinstance(kind, type):
        return
    def wrong() -> str:  # (named only when refused: writing the annotation's name costs more than the check)
        return f"{where}: {shown} contradicts the return annotation -> {type_name(annotation)}"

    if issubclass(kind, (str, bytes, bytearray, int, float)):
        raise TypeError(f"{wrong()}: it answers objects of {item.__name__}, and the handler returns a "
                        f"{kind.__name__}. Return the data of {item.__name__} (a model or a dict), or drop returns=")
    # Concrete classes and the ABCs themselves: asking an ABC about a class not seen since the last `register`
    # anywhere walks its subclasses (tens of µs per action at import, when many classes are new).
    listed = issubclass(kind, (list, tuple, set, frozenset)) or kind in _LISTED_ABCS
    if many is False and listed:
        raise TypeError(f"{wrong()}: it answers one {item.__name__}, and the handler returns a list. Declare "
                        f"returns=list[{item.__name__}], or return one")
    try:
        own, _ = model_of(annotation)
    except TypeError:  # a dataclass no model is made of: nothing to compare (the presenter is the firewall)
        own = None
    if many is True and own is not None and not listed:
        raise TypeError(f"{wrong()}: it answers a list of {item.__name__}, and the handler returns one. Declare "
                        f"returns={item.__name__}, or return a list")
    if not isinstance(own, type) or issubclass(own, RootModel) or _open(own) or _derives(item):
        return
    missing = [name for name, field in item.model_fields.items()
               if field.is_required() and not _provided(own).intersection([name, *_sent_names(name, field)])]
    if missing:
        raise TypeError(f"{wrong()}: {own.__name__} has no field {', '.join(map(repr, missing[:MAX_FIELDS_SHOWN]))}, "
                        f"which {item.__name__} requires, so no result would fit. Make them agree: give returns= a "
                        f"schema whose required fields {own.__name__} has (a subset of them narrows the output), or "
                        "fix the annotation")


def _open(model: type[BaseModel]) -> bool:
    """Whether a model's instances may have attributes it does not declare (extra fields, its own `__getattr__`)."""
    return model.model_config.get("extra") == "allow" or getattr(model, "__getattr__", None) is not getattr(
        BaseModel, "__getattr__", None)


def _derives(model: type[BaseModel]) -> bool:
    """Whether a model's validators see the raw data before its fields do (they may make a field of others)."""
    validators = model.__pydantic_decorators__.model_validators.values()
    return any(v.info.mode in ("before", "wrap") for v in validators)


def _provided(model: type[BaseModel]) -> set[str]:
    """Every name a model's instance may give a field through (read by name or alias, from its attributes)."""
    names = set(dir(model)) | set(model.model_fields) | set(model.model_computed_fields)
    for name, field in model.model_fields.items():
        names.update(n for n in (field.alias, field.serialization_alias, *_sent_names(name, field)) if n)
    return names


def missing_discriminator(tool: Tool) -> ToolError:
    return ToolError(
        MISSING_DISCRIMINATOR,
        f'Tool "{tool.name}" needs the `action` parameter.',
        recovery=f"Call {tool.name} again with action set to one of: {', '.join(tool.actions)}.",
        available_actions=[a.qualified_name for a in tool.actions.values()],
    )


def unknown_action(tool: Tool, name: Any, recovery: str | None = None) -> ToolError:
    return ToolError(
        UNKNOWN_ACTION,
        f'Tool "{tool.name}" has no action {sent_value(name)}.',
        recovery=recovery or f"Call {tool.name} again with action set to one of: {', '.join(tool.actions)}.",
        available_actions=[a.qualified_name for a in tool.actions.values()],
    )


def _named_properties(fn: Callable[..., Any], schema: dict[str, Any]) -> tuple[str, ...]:
    """The properties the handler takes: those it names, or all of them with `**kwargs`."""
    parameters = inspect.signature(fn).parameters
    every = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    return tuple(name for name in (schema.get("properties") or {}) if every or name in parameters)


def check_confirm_template(template: str, parameters: Iterable[str], where: str) -> None:
    """Refuse a `confirm="..."` template naming something the action does not take (the user would be
    asked the literal `{name}`), or one `str.format` cannot read."""
    try:
        named = {field.split(".", 1)[0].split("[", 1)[0] for _, field, _, _ in string.Formatter().parse(template)
                 if field is not None}
    except ValueError as exc:
        raise ValueError(f"{where}: confirm={template!r} is not a valid template ({exc})") from None
    unknown = sorted(named - set(parameters))
    if unknown:
        raise ValueError(f"{where}: confirm={template!r} names {', '.join('{' + u + '}' for u in unknown)}, which "
                         f"the action does not take (it takes {', '.join(sorted(parameters)) or 'no parameters'})")


def input_name(name: str, field: Any) -> str:
    """The input schema's name of an argument model's field (its alias, when it has one)."""
    alias = field.validation_alias
    return alias if isinstance(alias, str) else field.alias or name


def check_confirm_formats(template: str, action: Action) -> None:
    """Refuse a `confirm="..."` template whose conversion or format spec its field's values cannot take
    (`{amount:,}` of a str): the question is `str.format` of the validated arguments, of the declared types."""
    samples = _format_samples(action)
    formatter = string.Formatter()
    for _, field, spec, conversion in formatter.parse(template):
        if field is None:
            continue
        shown = "{" + field + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        try:
            formatter.convert_field("", conversion)
            for sample in samples.get(field, ()) if "{" not in (spec or "") else ():  # (a nested spec: at the call)
                format(formatter.convert_field(sample, conversion), spec or "")
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{action.label}: confirm={template!r}: {shown} cannot show a value of {field}'s "
                             f"declared type ({exc})") from None


# A value of each class a format spec may be tried on (subclasses before their base: bool, datetime).
_SAMPLES: tuple[tuple[type, Any], ...] = (
    (bool, False), (int, 0), (float, 0.0), (decimal.Decimal, decimal.Decimal(0)),
    (dt.datetime, dt.datetime(2000, 1, 1)), (dt.date, dt.date(2000, 1, 1)), (dt.time, dt.time()), (str, ""),
)
_JSON_SAMPLES: dict[str, tuple[Any, ...]] = {
    "integer": (0,), "number": (0, 0.0), "string": ("",), "boolean": (False,), "array": ([],), "object": ({},),
}


def _format_samples(action: Action) -> dict[str, list[Any]]:
    """Values of each input property's type to try its template field on."""
    if action.json_schema is not None:
        properties = action.json_schema.get("properties") or {}
        return {name: _json_samples(sub) for name, sub in properties.items() if isinstance(sub, dict)}
    return {input_name(name, field): _samples_of(field.annotation)
            for name, field in action.args_model.model_fields.items()}


def _json_samples(schema: dict[str, Any]) -> list[Any]:
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds if isinstance(kinds, list) else []
    return [sample for kind in kinds if isinstance(kind, str) for sample in _JSON_SAMPLES.get(kind, ())]


def _samples_of(annotation: Any) -> list[Any]:
    """Values of `annotation` (none for None, which a question shows as "none", nor for a class formatting its
    own way)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _samples_of(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [sample for arg in typing.get_args(annotation) for sample in _samples_of(arg)]
    if origin is typing.Literal:
        return [value for value in typing.get_args(annotation) if value is not None]
    cls = origin or annotation
    if not isinstance(cls, type) or cls is type(None):
        return []
    if issubclass(cls, enum.Enum):
        return list(cls)[:1]
    for kind, sample in _SAMPLES:
        if issubclass(cls, kind):
            return [sample]
    # A list, a dict, a model: `object.__format__` takes no spec at all.
    return [object()] if cls.__format__ is object.__format__ else []


def check_output_schema(schema: dict[str, Any], where: str) -> dict[str, Any]:
    """A hand-written output schema, refused at declaration when it is not a valid JSON schema or not an
    object schema (MCP's outputSchema and structuredContent are objects)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"{where}: output_schema is not a valid JSON schema ({exc.message})") from None
    if schema.get("type") != "object":
        raise ValueError(f"{where}: output_schema must be an object schema (\"type\": \"object\"): MCP's "
                         "structuredContent is an object (a list goes out as {\"items\": [...]})")
    return schema


def _json_validator(fn: Callable[..., Any], schema: dict[str, Any], parameters: list[str]) -> Any:
    """A validator of a hand-written input schema (an object schema whose properties name the parameters),
    its patterns matched in linear time (see `mcpfusion.inputschema`)."""
    validator = inputschema.input_validator(schema, fn.__qualname__)
    unknown = [p for p in parameters if p not in (schema.get("properties") or {})]
    if unknown:
        raise ValueError(f"{fn.__qualname__}: parameter(s) {', '.join(unknown)} are not properties of input_schema")
    return validator
