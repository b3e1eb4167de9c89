"""Dependency resolution: FastAPI's own machinery, run per call on every transport.

A handler's parameters split in two: tool arguments (in the input schema, validated by pydantic) and
FastAPI dependencies (`Depends`, `Security`, `Header`, `Request`, yield dependencies, `Context`), which
never appear in the schema and are solved with `fastapi.dependencies.utils.solve_dependencies`, so
`app.dependency_overrides` applies to MCP calls exactly as to REST. A `Context` is found by its type, on the
action and in its dependencies at any depth (FastAPI would read it as a query parameter): a dependency that
takes one is analysed through a stand-in whose `Context` parameter has its provider (see `analysable`).

FastAPI's solver re-derives, on every call and for every node of the tree, what never changes between calls
(each node's cache key, scope flags and kind of callable, four empty parameter lists, a `Response`). Most
actions' dependencies are plain `async def` functions of the request and of each other (the store, the
caller, the presenter choice): for those, `resolve` runs a `Plan` worked out once from FastAPI's own
`Dependant` (the same calls in the same order, each cached value shared as FastAPI shares it). Anything
else (yield dependencies, sync functions, parameters read from the request, security scopes, per-dependency
concurrency) and any call while `app.dependency_overrides` is set goes through `solve_dependencies`.

A dependency taking FastAPI's `Response` sets headers, cookies or a status on it as on a route's; only REST
answers with them (`collect_response`): an MCP call's JSON-RPC reply is no HTTP response of that call's own.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import types
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar, Token
from typing import Annotated, Any

from fastapi import params
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant, get_typed_signature, solve_dependencies
from fastapi.security import SecurityScopes
from fastapi.security.base import SecurityBase
from starlette.background import BackgroundTasks
from starlette.datastructures import UploadFile
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from .context import Context
from .hints import per_annotation, type_hints, type_name
from .memo import by_identity
from .pagination import SCOPE_SOLVE, Page, current_page

logger = logging.getLogger("mcpfusion")

CONTEXT_SCOPE_KEY = "mcpfusion.context"
PRESENTER_KEY = "__mcpfusion_presenter__"
_SPECIAL = (Request, HTTPConnection, WebSocket, Response, BackgroundTasks, SecurityScopes)
_FASTAPI_MARKERS = (params.Depends, params.Param, params.Body)


def current_context(request: Request) -> Context:
    """The MCP call's context (progress, logging, elicitation...); a detached one elsewhere."""
    ctx = request.scope.get(CONTEXT_SCOPE_KEY)
    return ctx if ctx is not None else Context.detached()


async def provide_context(request: Request) -> Context:
    """`current_context` as the dependency of a `Context` parameter: `async def`, because FastAPI runs a plain
    `def` dependency in its thread pool (a thread hand-over per call for a dictionary lookup)."""
    return current_context(request)


async def provide_page(request: Request) -> Page:
    """`current_page` as the dependency of a `Page` parameter (`async def`, like `provide_context`)."""
    return current_page(request)


def _is_special(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, _SPECIAL)


def _http_source(annotation: Any, default: Any) -> str | None:
    """The name of FastAPI's Query/Path/Body (Form, File) marker declaring a parameter, else None: they read
    parts of an HTTP request that a tool call does not have (Header, Cookie and Security still apply)."""
    markers = [default]
    if typing.get_origin(annotation) is Annotated:
        markers += typing.get_args(annotation)[1:]
    found = next((m for m in markers if isinstance(m, _HTTP_SOURCES)), None)
    return None if found is None else type(found).__name__


_HTTP_SOURCES = (params.Query, params.Path, params.Body)  # Form and File are Body's


def is_dependency(annotation: Any, default: Any) -> bool:
    """True when FastAPI (not the agent) provides this parameter."""
    return isinstance(default, _FASTAPI_MARKERS) or _provided(annotation)


@per_annotation
def _provided(annotation: Any) -> bool:
    """True when the annotation alone makes a parameter FastAPI's (a marker among its extras, a request, a
    `Context`...)."""
    if _is_special(annotation):
        return True
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        return any(isinstance(e, _FASTAPI_MARKERS) for e in extras) or _is_special(base) or _injected(base) is not None
    return _injected(annotation) is not None


def is_context(annotation: Any) -> bool:
    """True when `annotation` names a `Context` (or a subclass): bare, optional (`Context | None`,
    `Optional[Context]`) or inside `Annotated`, in any nesting of these."""
    base = _optional_of(annotation)
    return isinstance(base, type) and issubclass(base, Context)


def _optional_of(annotation: Any) -> Any:
    """`T` of `T`, `Annotated[T, ...]`, `T | None` and `Optional[T]` (nested alike); a union of several types
    is itself. An optional `Context` is injected as a bare one is: there is always a context to give."""
    while True:
        annotation = _split(annotation)[0]
        if typing.get_origin(annotation) not in (typing.Union, types.UnionType):
            return annotation
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            return annotation
        annotation = args[0]


def _injected(annotation: Any) -> Callable[..., Any] | None:
    """The provider of a parameter the framework injects by its type alone (`Context`, `Page`)."""
    if is_context(annotation):
        return provide_context
    if isinstance(annotation, type) and issubclass(annotation, Page):
        return provide_page
    return None


def takes_page(dependencies: list[inspect.Parameter]) -> bool:
    """True when one of these dependency parameters is annotated `Page`."""
    return any(_injected(_split(p.annotation)[0]) is provide_page for p in dependencies)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """Name of `fn`'s parameter annotated with `Context` (or a subclass), found by type."""
    try:
        hints = type_hints(fn)
    except Exception:  # unresolvable annotations: no context parameter we could inject
        return None
    for name, annotation in hints.items():
        if name != "return" and is_context(annotation):
            return name
    return None


#: A tool argument of a handler: (name, annotation, default or `inspect.Parameter.empty`).
Argument = tuple[str, Any, Any]


def split_parameters(
    fn: Callable[..., Any], hints: dict[str, Any] | None = None
) -> tuple[list[Argument], list[inspect.Parameter]]:
    """(tool arguments, dependency parameters as FastAPI solves them), annotations resolved (string annotations
    included); `hints` are `fn`'s type hints with extras when the caller has them already. Only a dependency
    becomes an `inspect.Parameter` (`build_dependant` hands it to FastAPI); an argument stays a tuple."""
    if hints is None:
        hints = type_hints(fn)
    arguments: list[Argument] = []
    dependencies: list[inspect.Parameter] = []
    for name, kind, annotation, default in _parameters(fn, hints):
        if kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{fn.__qualname__}: parameter {name!r} is positional-only, but every argument and "
                            "dependency is passed by name; drop the `/`")
        http = _http_source(annotation, default)
        if http is not None:
            kind_name = "int" if annotation is Any else type_name(annotation)  # (no annotation: Any)
            raise TypeError(f"{fn.__qualname__}: parameter {name!r} is declared with FastAPI's {http}(...), which "
                            "reads an HTTP request's own URL or body: an action's arguments come from the tool "
                            f"call. Declare it as a plain parameter ({name}: {kind_name} = ..., or "
                            f"Annotated[{kind_name}, Field(...)])")
        if isinstance(annotation, type) and issubclass(annotation, Response):
            raise TypeError(f"{fn.__qualname__}: parameter {name!r} is a {annotation.__name__}: a FastAPI route sets "
                            "headers, cookies or its status through it, but an action answers the agent (MCP and "
                            "REST alike) with its return value: return the data (set HTTP headers in the app's "
                            "own middleware, or on REST in a dependency that takes the Response)")
        _refuse_http_only(fn, name, annotation)
        if is_dependency(annotation, default):
            try:
                dependencies.append(_provided_as(inspect.Parameter(name, kind, annotation=annotation, default=default)))
            except TypeError as exc:  # (a dependency's parameter that cannot be provided: name the action too)
                raise TypeError(f"{fn.__qualname__}: parameter {name!r}: {exc}") from None
        else:
            arguments.append((name, annotation, default))
    return arguments, dependencies


def _refuse_http_only(fn: Callable[..., Any], name: str, annotation: Any) -> None:
    """Refuse a parameter only a FastAPI route can be given: a WebSocket, an uploaded file (every call would
    fail: a tool call is neither a WebSocket nor a multipart form)."""
    base = typing.get_args(annotation)[0] if typing.get_origin(annotation) is Annotated else annotation
    if isinstance(base, type) and issubclass(base, WebSocket):
        raise TypeError(f"{fn.__qualname__}: parameter {name!r} is a WebSocket, which only a FastAPI WebSocket "
                        "route receives: an action is called with one request and answers once; send progress or "
                        "log messages through Context instead (see docs/context.md)")
    if any(issubclass(cls, UploadFile) for cls in _classes_in(annotation)):
        raise TypeError(f"{fn.__qualname__}: parameter {name!r} is an UploadFile, which FastAPI reads from a "
                        "multipart form: an action's arguments come from the tool call as JSON, so no file is "
                        f"ever uploaded to it. Take the content as base64 text ({name}: pydantic.Base64Bytes) or "
                        "a URL to fetch it from")


def _classes_in(annotation: Any) -> list[type]:
    """The classes an annotation is made of (`list[UploadFile] | None` -> UploadFile, NoneType)."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return [annotation]
    return [cls for arg in typing.get_args(annotation) for cls in _classes_in(arg)]


_POSITIONAL, _KEYWORD = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
_CO_VARARGS, _CO_VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS


def _parameters(fn: Callable[..., Any], hints: dict[str, Any]) -> list[tuple[str, Any, Any, Any]]:
    """`inspect.signature(fn)`'s parameters as (name, kind, its hint or `Any`, default). A plain function's are
    read from its code object (what `inspect` reads, without its unwrapping, checks and a `Parameter` made for
    each: about a fifth of declaring an action)."""
    code = getattr(fn, "__code__", None)
    if (fn.__class__ is not types.FunctionType or code is None or code.co_posonlyargcount
            or "__wrapped__" in fn.__dict__ or "__signature__" in fn.__dict__):
        out = []
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"{fn.__qualname__}: *args/**kwargs cannot become tool parameters")
            out.append((param.name, param.kind, hints.get(param.name, Any), param.default))
        return out
    if code.co_flags & (_CO_VARARGS | _CO_VARKEYWORDS):
        raise TypeError(f"{fn.__qualname__}: *args/**kwargs cannot become tool parameters")
    positional, keyword = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    defaults = fn.__defaults__ or ()
    first_default = positional - len(defaults)
    kwdefaults = fn.__kwdefaults__ or {}
    empty = inspect.Parameter.empty
    out = [(name, _POSITIONAL, hints.get(name, Any), defaults[i - first_default] if i >= first_default else empty)
           for i, name in enumerate(names[:positional])]
    out += [(name, _KEYWORD, hints.get(name, Any), kwdefaults.get(name, empty))
            for name in names[positional:positional + keyword]]
    return out


def as_dependency(param: inspect.Parameter) -> inspect.Parameter | None:
    """`param` as FastAPI solves it (one injected by type, `Context` or `Page`, gets its provider as a
    `Depends`), or None when it is an argument of the caller's."""
    if not is_dependency(param.annotation, param.default):
        return None
    return _provided_as(param)


def _provided_as(param: inspect.Parameter, owner: str | None = None) -> inspect.Parameter:
    """A dependency parameter as FastAPI solves it: one injected by type (`Context`, `Page`) gets its provider
    as a `Depends`, and a dependency that takes a `Context` (at any depth) is solved through its stand-in
    (FastAPI alone takes a `Context` for a query parameter, and fails on its type). `owner` names the
    dependency whose parameter it is (None: the action's own)."""
    annotation, default = param.annotation, param.default
    base, extras = _split(annotation)
    marker = _marker(annotation, default)
    if isinstance(marker, params.Depends):
        dependency = marker.dependency if marker.dependency is not None else base  # `Depends()`: the class
        stand_in = analysable(dependency)
        if stand_in is dependency:
            return param
        replaced = dataclasses.replace(marker, dependency=stand_in)
        if marker is default:
            return param.replace(default=replaced)
        return param.replace(annotation=Annotated[(base, *[replaced if e is marker else e for e in extras])])
    provider = _injected(base)
    if provider is None:
        return param
    what = type_name(base)
    if owner is None:
        return param.replace(annotation=Annotated[(base, *extras, params.Depends(provider))])
    if marker is not None:  # Header(), Cookie()... on what the framework provides by its type
        raise TypeError(f"{owner}: parameter {param.name!r} is a {what}, which the framework provides by its type: "
                        f"drop the {type(marker).__name__}(...) ({param.name}: {what})")
    if provider is provide_page:
        raise TypeError(f"{owner}: parameter {param.name!r} is a Page, which is filled only once the dependencies "
                        "are solved (its size may come from the presenter a dependency chooses, its cursor is "
                        "checked against the caller): a dependency would read an empty page. Take the Page on the "
                        f"action itself ({param.name}: Page) and pass it on, e.g. to a method of what the "
                        "dependency returns")
    if param.kind is inspect.Parameter.POSITIONAL_ONLY:  # (FastAPI passes every value by name)
        raise TypeError(f"{owner}: parameter {param.name!r} ({what}) is positional-only, but FastAPI passes every "
                        "dependency value by name; drop the `/`")
    return param.replace(annotation=Annotated[(base, *extras, params.Depends(provider))])


def _split(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """(type, extras) of an annotation: `Annotated[T, x, y]` -> (T, (x, y)); `T` -> (T, ())."""
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        return base, tuple(extras)
    return annotation, ()


def _marker(annotation: Any, default: Any) -> Any:
    """The FastAPI marker (`Depends`, `Header()`...) FastAPI reads a parameter by: the last one among its
    `Annotated` extras, else its default's; None when it has neither."""
    found = [e for e in _split(annotation)[1] if isinstance(e, _FASTAPI_MARKERS)]
    if found:
        return found[-1]
    return default if isinstance(default, _FASTAPI_MARKERS) else None


_STANDS_FOR = "__mcpfusion_stands_for__"


# The dependencies `analysable` is working out, outermost first (per thread and task: declarations may run in
# several at once): one met again while it is worked out depends on itself.
_ANALYSING: ContextVar[tuple[Any, ...]] = ContextVar("mcpfusion.analysing", default=())


@by_identity
def analysable(dependency: Any) -> Any:
    """`dependency` itself, or, when it takes a `Context` (itself or through its own dependencies), its
    stand-in: a function of the same parameters, a `Context` given its provider as a `Depends`, that FastAPI
    analyses and calls in its place (its values are cached and its overrides looked up as the dependency's,
    see `stands_for`). Worked out once per dependency, when the first action that needs it is declared.

    A dependency that depends on itself (directly or through others) is a `TypeError` naming the cycle: FastAPI
    would recurse until Python's recursion limit, with a bare `RecursionError`."""
    path = _ANALYSING.get()
    if any(known is dependency for known in path):
        raise TypeError(_circular(path, dependency))
    token = _ANALYSING.set((*path, dependency))
    try:
        return _analyse(dependency)
    finally:
        _ANALYSING.reset(token)


def _circular(path: tuple[Any, ...], dependency: Any) -> str:
    cycle = [*path[next(i for i, known in enumerate(path) if known is dependency):], dependency]
    return (f"its dependencies are circular ({' -> '.join(map(_name, cycle))}): FastAPI would recurse forever "
            "to solve them (a RecursionError). A dependency cannot depend on itself, even through others: break "
            "the cycle")


def _analyse(dependency: Any) -> Any:
    """`analysable`'s work, for a dependency not being worked out already."""
    try:
        signature = get_typed_signature(dependency)
    except Exception:  # not a callable FastAPI can read: it says so itself, in its own words
        return dependency
    owner = f"the dependency {_name(dependency)}"
    old = list(signature.parameters.values())
    new = [_provided_as(param, owner) for param in old]
    if all(a is b for a, b in zip(old, new, strict=True)):
        return dependency

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        return dependency(*args, **kwargs)

    stand_in.__signature__ = inspect.Signature(new)  # type: ignore[attr-defined]
    # FastAPI tells a coroutine, a generator, a class through `__wrapped__`: the stand-in is run as it would be.
    stand_in.__wrapped__ = dependency  # type: ignore[attr-defined]
    stand_in.__name__ = getattr(dependency, "__name__", None) or type(dependency).__name__
    stand_in.__qualname__ = _name(dependency)  # (what errors about the dependency name it by)
    stand_in.__dict__[_STANDS_FOR] = dependency
    return stand_in


def stands_for(call: Any) -> Any:
    """The dependency `call` is the stand-in of (see `analysable`), else None."""
    return call.__dict__.get(_STANDS_FOR) if type(call) is types.FunctionType else None


def _original(call: Any) -> Any:
    """`call`, or the dependency it stands in for."""
    found = stands_for(call)
    return call if found is None else found


class _Overrides:
    """`app.dependency_overrides` as FastAPI's solver reads it while one is set (it analyses every dependency
    anew then): looked up by the dependency a stand-in stands for, and an override that takes a `Context`
    given as its own stand-in."""

    __slots__ = ("overrides",)

    def __init__(self, overrides: Any) -> None:
        self.overrides = overrides

    @property
    def dependency_overrides(self) -> _Overrides:
        return self

    def __bool__(self) -> bool:
        return True

    def get(self, call: Any, default: Any = None) -> Any:
        chosen = self.overrides.get(_original(call))
        return call if chosen is None else analysable(chosen)


def build_dependant(
    dependencies: list[inspect.Parameter], presenter_dependency: Callable[..., Any] | None
) -> Dependant:
    """One FastAPI `Dependant` holding every dependency of an action (and its presenter choice)."""
    if not dependencies and presenter_dependency is None:
        return _no_dependencies()  # most actions: nothing for FastAPI to analyse
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in dependencies]
    if presenter_dependency is not None:
        try:  # (analysed as any dependency: a `Context` given, a cycle named)
            chosen = analysable(presenter_dependency)
        except TypeError as exc:
            raise TypeError(f"returns={_name(presenter_dependency)}: {exc}") from None
        parameters.append(
            inspect.Parameter(PRESENTER_KEY, inspect.Parameter.KEYWORD_ONLY, default=params.Depends(chosen))
        )

    async def collect(**values: Any) -> dict[str, Any]:
        return values

    collect.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return get_dependant(path="", call=collect)


_UNREACHABLE = (("query_params", "a query parameter"), ("path_params", "a path parameter"),
                ("body_params", "a field of the request body"))


def check_dependency_parameters(dependant: Dependant, where: str) -> None:
    """Refuse a dependency parameter FastAPI would read from the URL or the body (FastAPI's "common
    parameters" dependency): a tool call has neither, so its value could never be given, as `Query()` on an
    action cannot. Headers, cookies and sub-dependencies still apply."""
    for sub in dependant.dependencies:
        for field, what in _UNREACHABLE:
            params_of = getattr(sub, field)
            if params_of:
                owner = getattr(sub.call, "__qualname__", repr(sub.call))
                name = params_of[0].name
                raise TypeError(f"{where}: the dependency {owner} takes {name!r}, which FastAPI reads as {what}; a "
                                "tool call has no URL or body of its own, so nothing could set it. Declare it on the "
                                "action (a plain parameter, or the fields of a pydantic model spread with "
                                "Annotated[Model, Flatten]) and pass it on, or give it a Header() or a Depends()")
        check_dependency_parameters(sub, where)


def security_scopes(dependant: Dependant) -> frozenset[str]:
    """The OAuth scopes declared with FastAPI's `Security(dependency, scopes=[...])` anywhere among an action's
    dependencies: the action needs them too (see `mcpfusion.authorization`)."""
    found = set(dependant.own_oauth_scopes or ())
    for sub in dependant.dependencies:
        found |= security_scopes(sub)
    return frozenset(found)


def security_schemes(dependant: Dependant, scopes: tuple[str, ...] = ()) -> dict[str, tuple[Any, list[str]]]:
    """The security schemes (`HTTPBearer()`, `OAuth2PasswordBearer(...)`, `APIKeyHeader(...)`) among an action's
    dependencies, by scheme name: each scheme's OpenAPI model and the scopes asked of it, as FastAPI documents a
    route that depends on them."""
    scopes = (*scopes, *(dependant.own_oauth_scopes or ()))
    found: dict[str, tuple[Any, list[str]]] = {}
    call = _original(dependant.call)
    if isinstance(call, SecurityBase):
        found[call.scheme_name] = (call.model, list(dict.fromkeys(scopes)))
    for sub in dependant.dependencies:
        for name, (model, asked) in security_schemes(sub, scopes).items():
            known = found.setdefault(name, (model, []))[1]
            known += [scope for scope in asked if scope not in known]
    return found


@functools.cache
def _no_dependencies() -> Dependant:
    """The `Dependant` of every action without dependencies (empty: `resolve` never solves it), made once."""

    async def collect() -> dict[str, Any]:
        return {}

    return get_dependant(path="", call=collect)


class Plan:
    """The calls of a dependency tree made only of plain `async def` dependencies of the request and of each
    other, flattened once: each distinct cached dependency is called once per call, in the order FastAPI's
    solver calls them (depth first), and is handed the values it needs by name."""

    __slots__ = ("steps", "names")

    def __init__(self, steps: list[tuple[Callable[..., Any], tuple[tuple[str, int], ...]]],
                 names: tuple[tuple[str, int], ...]) -> None:
        self.steps = steps  # (dependency, ((parameter, step it comes from, or -1 for the request), ...))
        self.names = names  # the top level's values: (name, step or -1)

    async def run(self, request: Request) -> dict[str, Any]:
        # Loops, not comprehensions: a few values each, and a comprehension is a function call of its own.
        done: list[Any] = []
        for call, needs in self.steps:
            given: dict[str, Any] = {}
            for name, at in needs:
                given[name] = request if at < 0 else done[at]
            done.append(await call(**given))
        values: dict[str, Any] = {}
        for name, at in self.names:
            values[name] = request if at < 0 else done[at]
        return values


def _plain_node(node: Dependant) -> bool:
    """True when FastAPI would just `await node.call(**sub_values)`, caching its value by its call alone."""
    call = _original(node.call)
    coroutine = inspect.iscoroutinefunction(call) or (
        callable(call) and not isinstance(call, type) and inspect.iscoroutinefunction(type(call).__call__)
    )
    return coroutine and node.scope is None and node.concurrency is None and _plain_params(node)


def _plain_params(node: Dependant) -> bool:
    """No value of this node comes from anything but its sub-dependencies and the request itself."""
    return not (
        node.path_params or node.query_params or node.header_params or node.cookie_params or node.body_params
        or node.websocket_param_name or node.http_connection_param_name or node.response_param_name
        or node.background_tasks_param_name or node.security_scopes_param_name
        or node.own_oauth_scopes or node.parent_oauth_scopes
    )


# The `Dependant` fields `_plain_node` and `_plain_params` know the meaning of. A FastAPI that adds one (a new
# kind of parameter or dependency option) gets no plans until they are reviewed: its solver answers instead.
KNOWN_FIELDS = frozenset({
    "path_params", "query_params", "header_params", "cookie_params", "body_params", "dependencies", "name", "call",
    "request_param_name", "websocket_param_name", "http_connection_param_name", "response_param_name",
    "background_tasks_param_name", "security_scopes_param_name", "own_oauth_scopes", "parent_oauth_scopes",
    "use_cache", "path", "scope", "concurrency",
})
_PLANNABLE = {f.name for f in dataclasses.fields(Dependant)} <= KNOWN_FIELDS


def make_plan(dependant: Dependant) -> Plan | None:
    """The `Plan` of `dependant`, or None when some node needs FastAPI's solver."""
    if not _PLANNABLE or not _plain_params(dependant):
        return None
    steps: list[tuple[Callable[..., Any], tuple[tuple[str, int], ...]]] = []
    cached: dict[Any, int] = {}

    def needs(node: Dependant) -> tuple[tuple[str, int], ...] | None:
        found: list[tuple[str, int]] = []
        for sub in node.dependencies:
            if sub.name is None or not _plain_node(sub):
                return None
            sub_needs = needs(sub)  # FastAPI solves the sub-tree even when the value is cached: same order
            if sub_needs is None:
                return None
            if sub.use_cache and sub.call in cached:
                at = cached[sub.call]
            else:
                at = len(steps)
                steps.append((typing.cast(Callable[..., Any], _original(sub.call)), sub_needs))
                cached.setdefault(sub.call, at)
            found.append((sub.name, at))
        if node.request_param_name:
            found.append((node.request_param_name, -1))
        return tuple(found)

    names = needs(dependant)
    return None if names is None else Plan(steps, names)


# `make_plan(dependant)`, worked out on its first call (dependants live as long as their actions).
plan_of: Callable[[Dependant], Plan | None] = by_identity(make_plan)


class DependencyErrors(Exception):
    """FastAPI reported parameter errors (e.g. a missing header)."""

    def __init__(self, errors: list[Any]) -> None:
        super().__init__("dependency errors")
        self.errors = errors


def is_empty(dependant: Dependant) -> bool:
    """Most actions have no dependency at all: skip FastAPI's solver for them (hot path)."""
    return not (
        dependant.dependencies
        or dependant.path_params
        or dependant.query_params
        or dependant.header_params
        or dependant.cookie_params
        or dependant.body_params
        or dependant.request_param_name
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    )


def planned(dependant: Dependant, request: Request) -> Plan | None:
    """The flattened plan `resolve` runs for this request, if it runs one (no dependency overrides): its
    dependencies yield nothing, so the call needs no exit stack."""
    plan = plan_of(dependant)
    if plan is not None and getattr(request.scope.get("app"), "dependency_overrides", None):
        return None
    return plan


async def resolve(dependant: Dependant, request: Request, stack: AsyncExitStack) -> dict[str, Any]:
    """Solve the dependencies for one call; yield dependencies are closed with `stack`."""
    if is_empty(dependant):
        return {}
    scope = request.scope
    plan = planned(dependant, request)
    if plan is not None:
        return await plan.run(request)
    queued = _queued.get()
    if queued is None:  # a resource or a prompt: its tasks start once its exit stack closed without an error
        queued = _CallQueue()
        stack.push_async_exit(_start_after(queued, scope))  # (first in, last out: after every teardown)
    scope_solve = getattr(dependant.call, SCOPE_SOLVE, False)
    saved = scope.get("fastapi_inner_astack"), scope.get("fastapi_function_astack")
    scope["fastapi_inner_astack"] = scope["fastapi_function_astack"] = stack
    app = scope.get("app")
    overrides = getattr(app, "dependency_overrides", None)
    try:
        solved = await solve_dependencies(
            request=request,
            dependant=dependant,
            dependency_overrides_provider=_Overrides(overrides) if overrides else app,
            dependency_cache=None if scope_solve else _take_seed(queued, request),
            async_exit_stack=stack,
            embed_body_fields=False,
        )
    finally:
        scope["fastapi_inner_astack"], scope["fastapi_function_astack"] = saved
    if solved.errors:
        raise DependencyErrors(list(solved.errors))
    if scope_solve and not overrides and isinstance(queued, _CallQueue) and not _yields(dependant):
        queued.seed = (request, solved.dependency_cache)
    if solved.background_tasks is not None:
        queued.append(solved.background_tasks)  # started once the whole call has succeeded
    collected = _collected.get()
    if collected is not None:  # (a failed solve's are dropped, as FastAPI drops them with its 422)
        collected.raw_headers.extend(solved.response.raw_headers)
        if solved.response.status_code:
            collected.status_code = solved.response.status_code
    return solved.values


def takes_response(dependant: Dependant) -> bool:
    """Whether a dependency of the tree takes FastAPI's `Response` (to set headers, cookies or a status)."""
    return bool(dependant.response_param_name) or any(map(takes_response, dependant.dependencies))


# The `Response` the dependencies of the REST call running in this context set headers, cookies and a status on
# (None: no call collects them; an MCP reply, JSON-RPC, has no HTTP headers of one call's). A tree taking a
# `Response` has no plan (`_plain_params`): FastAPI's solver in `resolve` fills it.
_collected: ContextVar[Response | None] = ContextVar("mcpfusion.dependency_response", default=None)


def collect_response() -> tuple[Response, Token[Response | None]]:
    """Start collecting what the dependencies of the call about to run set on their `Response`: that response
    (FastAPI's blank one: no status, no content-length), and the token that ends the collection
    (`end_response_collection`)."""
    response = Response()
    del response.headers["content-length"]
    response.status_code = None  # type: ignore[assignment]  # (FastAPI's "none set")
    return response, _collected.set(response)


def end_response_collection(token: Token[Response | None]) -> None:
    _collected.reset(token)


class _CallQueue(list[BackgroundTasks]):
    """The `BackgroundTasks` one call queued, and what its cursor scope's solve (a confirmation's, solved
    before the action's dependencies: `SCOPE_SOLVE`) left for the next solve of the call: FastAPI's dependency
    cache, so that a dependency both need (the tenant) runs once, as within a FastAPI request, and the headers
    it sets on the `Response` are sent once."""

    seed: tuple[Request, dict[Any, Any]] | None = None


def _take_seed(queued: list[BackgroundTasks], request: Request) -> dict[Any, Any] | None:
    """The cache the cursor scope's solve left for this call's next solve of the same request (taken: an
    attempt the middleware makes again solves the scope again)."""
    if not isinstance(queued, _CallQueue) or queued.seed is None:
        return None
    (seeded, cache), queued.seed = queued.seed, None
    return cache if seeded is request else None


def _yields(dependant: Dependant) -> bool:
    """Whether a dependency of the tree is a yield one: its value is closed with the scope's solve, before the
    confirmation is asked, so the action's solve must make its own."""
    call = _original(dependant.call)
    fn = call if call is None or inspect.isroutine(call) or inspect.isclass(call) else type(call).__call__
    return (inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)
            or any(map(_yields, dependant.dependencies)))


BACKGROUND_KEY = "mcpfusion.background"  # the scope's list of the background tasks its calls started
BACKGROUND_TIMEOUT = 30.0  # seconds a shutdown waits for the background tasks still running
# The `BackgroundTasks` queued by the action call running in this context (None: no call collects them). A
# context variable rather than the request scope: concurrent calls may share a scope, and a middleware may
# run the rest of its call in a task of its own (which sees the same list).
_queued: ContextVar[list[BackgroundTasks] | None] = ContextVar("mcpfusion.background_queued", default=None)


def collect_background() -> tuple[list[BackgroundTasks], Token[list[BackgroundTasks] | None]]:
    """Start collecting the `BackgroundTasks` of the call about to run: the list they go to, and the token that
    ends the collection (`_queued.reset`, see `end_collection`)."""
    queued = _CallQueue()
    return queued, _queued.set(queued)


def end_collection(token: Token[list[BackgroundTasks] | None]) -> None:
    _queued.reset(token)


def queued_background() -> list[BackgroundTasks] | None:
    """The `BackgroundTasks` the call running in this context has queued so far (None outside a call)."""
    return _queued.get()


class BackgroundRuns:
    """The background tasks of one app's calls: started once their call has succeeded as a whole (its yield
    dependencies closed, its middleware and egress guard passed), kept until they end, and awaited at
    shutdown (`drain`), as uvicorn waits for a FastAPI response's tasks before it stops."""

    def __init__(self, timeout: float = BACKGROUND_TIMEOUT) -> None:
        self.timeout = timeout  # how long `drain` waits before it cancels what still runs
        self.running: set[asyncio.Task[None]] = set()  # (the event loop keeps only weak references)

    def start(self, queued: list[BackgroundTasks], scope: MutableMapping[str, Any]) -> None:
        """Run the `queued` tasks of a call that succeeded, without delaying its answer. Inside another call
        (an action calling an action), they wait for that call's outcome instead."""
        outer = _queued.get()
        if outer is not None:
            outer.extend(queued)
            return
        names = ", ".join(_name(task.func) for tasks in queued for task in tasks.tasks)
        task = asyncio.get_running_loop().create_task(_run_background(queued), name=f"background: {names}")
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        scope.setdefault(BACKGROUND_KEY, []).append(task)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait for the running tasks (and those started meanwhile) for at most `timeout` seconds (default
        `self.timeout`); then cancel the rest, naming them in the log."""
        if not self.running:
            return
        loop = asyncio.get_running_loop()
        timeout = self.timeout if timeout is None else timeout
        logger.info("shutdown: waiting up to %g s for %d background task(s)", timeout, len(self.running))
        deadline = loop.time() + timeout
        while self.running and (left := deadline - loop.time()) > 0:
            await asyncio.wait(set(self.running), timeout=left)
        late = set(self.running)
        if not late:
            return
        logger.error("shutdown: %d background task(s) still running after %g s were cancelled: %s", len(late),
                     timeout, "; ".join(sorted(t.get_name() for t in late)))
        for task in late:
            task.cancel()
        await asyncio.wait(late, timeout=1)  # let them run their `finally` blocks


def runs_of(app: Any) -> BackgroundRuns | None:
    """The `BackgroundRuns` of the MCPFusion `app` serves (None when it serves none)."""
    fusion = getattr(getattr(app, "state", None), "mcpfusion", None)
    runs = getattr(getattr(fusion, "registry", None), "background", None)
    return runs if isinstance(runs, BackgroundRuns) else None


_unowned = BackgroundRuns()  # the tasks of a resource or prompt called outside a served app (a unit test)


async def drain_background(app: Any, timeout: float | None = None) -> None:
    """Wait (at most `timeout` seconds, default the runs' own) for the background tasks of the calls `app`
    served: what a transport that stops without a lifespan shutdown of its own calls before it exits."""
    runs = runs_of(app)
    if runs is not None:
        await runs.drain(timeout)


#: Where the app keeps what its running lifespan yielded (`yield {"pool": ...}`), for calls made in process.
LIFESPAN_STATE = "mcpfusion_lifespan_state"


def draining(runs: BackgroundRuns, inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The app's lifespan `inner`, whose shutdown first waits for the background tasks still running (before
    the app's own shutdown closes the pools they may use)."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state:
            # Kept where in-process calls (the tester, `mcpfusion call`) find it: a server keeps the lifespan
            # state itself and gives each request a copy; those calls have no server.
            setattr(app.state, LIFESPAN_STATE, state)
            try:
                yield state
            finally:
                await runs.drain()
                setattr(app.state, LIFESPAN_STATE, None)

    return lifespan


def _start_after(queued: list[BackgroundTasks], scope: MutableMapping[str, Any]) -> Callable[..., Awaitable[bool]]:
    """The exit callback that starts the `queued` tasks of a resource or prompt that succeeded."""

    async def start(exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if exc_type is None and queued:
            (runs_of(scope.get("app")) or _unowned).start(queued, scope)
        return False  # an exception goes on: the tasks of a failed call never run

    return start


def _name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)


async def _run_background(queued: list[BackgroundTasks]) -> None:
    """Run the `queued` tasks in order (starlette's way: a failing one stops the rest of its call's); a
    failure is logged, never reported to the caller, whose call was answered already."""
    for tasks in queued:
        for task in tasks.tasks:
            try:
                await task()
            except Exception:
                logger.exception("background task %s failed (the call that queued it had succeeded)",
                                 _name(task.func))
                break


async def background_done(request: Request) -> None:
    """Wait for the background tasks the calls of `request` started (the tester waits for them, as FastAPI's
    `TestClient` waits for a response's)."""
    started = request.scope.get(BACKGROUND_KEY)
    if started:
        await asyncio.wait(started)
