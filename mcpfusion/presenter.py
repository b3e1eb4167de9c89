"""Presenters: what the agent perceives of an entity, designed once (the V of Model-View-Agent).

Pipeline for one call: truncate to the limit -> validate/strip against the schema (a list degrades per item)
-> UI blocks on the full validated data -> rules and suggestions on the full data -> redaction (of the whole
data, so the guard knows every value it removed) -> `_select` -> serialize -> egress guard (`censor.py`).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import inspect
import logging
import operator
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import date, time, timedelta
from decimal import Decimal
from enum import Enum
from keyword import iskeyword
from pathlib import PurePath
from types import AsyncGeneratorType, CoroutineType, MappingProxyType, UnionType
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints
from uuid import UUID

from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    TypeAdapter,
    ValidationError,
    WrapSerializer,
    create_model,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_jsonable_python
from typing_extensions import is_typeddict

from . import censor as egress
from . import dictschema, markup
from . import ui as ui_helpers
from .content import scrubbed
from .model import Model
from .redaction import (
    DEFAULT_CENSOR,
    Node,
    RedactionError,
    Redactor,
    censors_of,
    compile_tree,
    parse_path,
    redact_schema,
    segments,
    unconstrained_strings,
    vocabulary,
    write_key,
)
from .response import Suggestion, ToolResponse, assemble, key_path, to_jsonable
from .schema import inline_refs, lean
from .select import select_keys
from .serializer import UNWRITABLE, json_bytes
from .stripping import stripping_annotation, stripping_model
from .ui import UIBlock
from .validatable import check_output_model, serialization_schema

logger = logging.getLogger("mcpfusion")


# What the callbacks return (typed so that a checker refuses an `async def` one: its coroutine is none of these).
_Lines = str | Sequence[str | None] | None
_Blocks = UIBlock | Sequence[UIBlock | None] | None
_Suggestions = Suggestion | Sequence[Suggestion | None] | None


class PresenterError(Exception):
    """The handler's data does not fit the presenter's schema (a server bug, never the agent's)."""


class CallbackError(PresenterError):
    """A presenter callback returned what no callback may (a coroutine: it is async): a server bug, answered
    as an internal error (the output schema is not what failed)."""


def _fields_of(exc: ValidationError, at: int) -> str:
    """The failing field names of a validation error, never its values."""
    fields = {str(e["loc"][at]) for e in exc.errors() if len(e["loc"]) > at}
    return ", ".join(sorted(fields)) or "root"


def _lines(items: Iterable[Any]) -> Iterable[Any]:
    """A list of texts as given, a single text as a list of one (not one item per character)."""
    return [items] if isinstance(items, str) else items


def _flexible(fn: Callable[..., Any], what: str, owner: str) -> Callable[[Any, Any], Any]:
    """Call `fn(data)` or `fn(data, ctx)`, whichever it accepts (decided once). `what`: the builder it was
    given to, `owner` the presenter's name, both named in the error when `fn` could not be called so (it would
    fail every call, not here)."""
    if not callable(fn):
        raise TypeError(f"presenter {owner!r}: Presenter.{what}() takes a function of (data[, ctx]), not "
                        f"{type(fn).__name__} {fn!r:.60}")
    if _is_async(fn):
        name = getattr(fn, "__qualname__", None) or type(fn).__name__
        raise TypeError(f"presenter {owner!r}: Presenter.{what}() takes a plain function (def), but {name} is "
                        "async: its result would be a coroutine, never awaited; write it as def (present what "
                        "the handler already loaded, or load it in the handler)")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: called with the data alone, as before
        signature = None
    params = [] if signature is None else [
        p for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
    ]
    if signature is not None:
        _check_arity(fn, signature, params, what, owner)
    if len(params) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in params):
        return fn
    adapter = lambda data, ctx: fn(data)  # noqa: E731 - marked below as taking one argument
    adapter.__mcpfusion_data_only__ = fn  # type: ignore[attr-defined]
    return adapter


def called_function(fn: Any) -> Any:
    """What calling the callable `fn` runs: itself for a function or method, its class's `__call__` for any
    other object, through `functools.partial`s (presenter callbacks and middleware are checked on it)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn if inspect.isroutine(fn) else type(fn).__call__


def _is_async(fn: Any) -> bool:
    """Whether calling `fn` gives a coroutine or an async generator (an `async def`, or an object whose
    `__call__` is one, or a `functools.partial` of one)."""
    call = called_function(fn)
    return inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call)


def _check_arity(fn: Callable[..., Any], signature: inspect.Signature, positional: list[inspect.Parameter],
                 what: str, owner: str) -> None:
    """Refuse a callback that cannot be called with (data) nor with (data, ctx)."""
    empty = inspect.Parameter.empty
    required = [p.name for p in positional if p.default is empty and p.kind is not p.VAR_POSITIONAL]
    keyword = [p.name for p in signature.parameters.values() if p.kind is p.KEYWORD_ONLY and p.default is empty]
    if positional and len(required) <= 2 and not keyword:
        return
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if keyword:
        why = f"takes the required keyword-only argument(s) {', '.join(keyword)}"
    else:
        why = f"takes {len(required)} required arguments ({', '.join(required)})" if required else "takes no argument"
    raise TypeError(f"presenter {owner!r}: Presenter.{what}() takes a function of (data) or (data, ctx), but "
                    f"{name}{signature} {why}: every call would fail")


def _text_lines(lines: Any, what: str, owner: str) -> list[str]:
    """The lines of `rules()` or `directives()` given as texts: one string, or strings (None left out)."""
    if not isinstance(lines, str) and not isinstance(lines, Iterable):
        raise TypeError(f"presenter {owner!r}: Presenter.{what}() takes a string, a list of strings or a function "
                        f"of (data[, ctx]), not {type(lines).__name__} {lines!r:.60}")
    found = [line for line in _lines(lines) if line is not None]
    wrong = next((line for line in found if not isinstance(line, str)), None)
    if wrong is not None:
        raise TypeError(f"presenter {owner!r}: Presenter.{what}() takes strings, but was given "
                        f"{type(wrong).__name__} {wrong!r:.60} among them")
    return [line for line in found if line]


#: The attribute a callback composed of several builder calls (`rules`, `ui`, `suggest`...) keeps them under:
#: the docs read what each one compares a field with from its own source, not the wrapper's.
_PARTS = "__mcpfusion_parts__"


def _chained_rules(first: Sequence[str] | Callable[[Any, Any], Any],
                   then: Sequence[str] | Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """The rules of two `rules()` calls, one of them a function, as one function of (data, ctx): the first
    call's rules, then the second's."""
    def rules(data: Any, ctx: Any) -> list[Any]:
        return [*(_as_list(first(data, ctx)) if callable(first) else first),
                *(_as_list(then(data, ctx)) if callable(then) else then)]

    setattr(rules, _PARTS, (first, then))
    return rules


def _added(earlier: Callable[[Any, Any], Any] | None, made: Callable[[Any, Any], Any],
           replace: bool) -> Callable[[Any, Any], Any]:
    """The callback of a `ui()`/`suggest()`-like call: `made`, or after an earlier one (unless `replace`) both
    as one function of (data, ctx), the earlier's answer first. Composed here, once: a presenter given one
    callback renders as before."""
    if earlier is None or replace:
        return made

    def both(data: Any, ctx: Any) -> list[Any]:
        return [*_as_list(earlier(data, ctx)), *_as_list(made(data, ctx))]

    setattr(both, _PARTS, (earlier, made))
    return both


def _field_name(key: str) -> bool:
    """Whether a pydantic model can have a field of this name (see `named_fields`)."""
    return key.isidentifier() and not iskeyword(key) and not key.startswith("_") and not hasattr(BaseModel, key)


def named_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields` (`create_model`'s definitions) under names a pydantic model can have: a key pydantic would take
    for a private attribute (`_id`, `_links`) or the config (`model_config`), one that shadows a BaseModel
    attribute (`json`, `copy`) or that is no name (a TypedDict's `"first-name"`) gets a name of its own, the
    key its alias: read and written as the key, as pydantic writes a dataclass or TypedDict (and FastAPI)."""
    out: dict[str, Any] = {}
    for key, definition in fields.items():
        if _field_name(key) or not (isinstance(definition, tuple) and len(definition) == 2):
            out[key] = definition
            continue
        own = re.sub(r"\W", "_", key).strip("_") or "field"
        own = f"{'f_' if own[0].isdigit() else ''}{own}_"
        while own in fields or own in out or hasattr(BaseModel, own):
            own += "_"
        hint, default = definition
        if isinstance(default, FieldInfo):  # its own aliases stay, the key fills in the others
            default = copy.copy(default)  # (pydantic reads every attribute of a model's field info as set: set them)
            for attribute in ("alias", "validation_alias", "serialization_alias"):
                if getattr(default, attribute) is None:
                    setattr(default, attribute, key)
        out[own] = (Annotated[hint, Field(alias=key)], default)
    return out


def _direct(fn: Callable[[Any, Any], Any] | None) -> tuple[Callable[..., Any], bool] | None:
    """A `_flexible` callback as the user wrote it, and whether it takes `ctx`: the flat path calls it
    straight, without the adapter's extra call."""
    if fn is None:
        return None
    inner = getattr(fn, "__mcpfusion_data_only__", None)
    return (fn, True) if inner is None else (inner, False)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if value.__class__ is list or isinstance(value, _SEQUENCES):
        return [*filter(_not_none, value)]
    if isinstance(value, _ASYNC_RESULTS):  # a callback that is async after all (declared checks miss a wrapper)
        if isinstance(value, CoroutineType):
            value.close()  # (never awaited: no warning, and nothing of it is sent)
        raise CallbackError(f"a presenter callback returned {type(value).__name__} (it is async): presenter "
                             "callbacks are plain functions; nothing of it was sent")
    return [value]


_ASYNC_RESULTS = (CoroutineType, AsyncGeneratorType)


_SEQUENCES = (list, tuple)  # a tuple: `isinstance(x, list | tuple)` builds the union at every call
_not_none = functools.partial(operator.is_not, None)

# A redaction path as the keys it goes through, None for `*`, its `[*]` steps left out (an embedded list's
# items carry the child's keys): `lines[*].card` -> ("lines", "card"), `lines[*]` -> ("lines", None).
_Mask = tuple[str | None, ...]
# Per embed key the paths reach: whether one hides its whole value, and the masks going on into it.
_Screens = dict[str, tuple[bool, tuple[_Mask, ...]]]


def _mask(path: str) -> _Mask:
    return tuple(name for kind, name in parse_path(path) if kind != "each")


def _screened(keys: Iterable[str], masks: Iterable[_Mask]) -> _Screens:
    """What `masks` do to the embed keys `keys` (see `_Screens`): a key none of them reaches is left out."""
    masks = list(masks)
    found: _Screens = {}
    for key in keys:
        reach = [mask for mask in masks if mask[0] is None or mask[0] == key]
        if reach:
            found[key] = (any(len(mask) == 1 for mask in reach), tuple(mask[1:] for mask in reach if len(mask) > 1))
    return found


class _Rendered:
    """What `render` made of the data (a plain class: two are made per call of a presenter with embeds, and
    a part of one, `_part`, per row of a list whose rows render apart)."""

    __slots__ = ("data", "ui_blocks", "embeds", "rules", "suggestions", "directives", "rules_block", "sources",
                 "truncated", "cuts")

    def __init__(self, embeds: list[str] | None = None) -> None:
        self.data: Any = None
        self.ui_blocks: list[UIBlock] = []
        self.embeds: list[str] = [] if embeds is None else embeds
        self.rules: list[str] = []
        self.suggestions: list[Suggestion] = []
        self.directives: list[str] = []
        self.rules_block: str | None = None  # `rules` as their block, when a flat render knew it beforehand
        self.sources: list[int] | None = None  # a list's index of each row kept, when some were left out
        self.truncated: tuple[int, int] | None = None  # rows sent, of how many the list had: a `limit` cut
        self.cuts: dict[tuple[str, ...], _Cut] | None = None  # the `limit` cuts of embedded lists, by key path


def _indices(rows: list[Any], kept: list[Any]) -> list[int]:
    """The index in `rows` of each of `kept` (the same objects, in order, some rows left out)."""
    found, at = [], 0
    for raw in kept:
        while rows[at] is not raw:
            at += 1
        found.append(at)
        at += 1
    return found


def _merge_unique(target: list[Any], items: Iterable[Any]) -> None:
    for item in items:
        if item not in target:
            target.append(item)


def _suggest_each(target: list[Any], suggest: Callable[[Any, Any], Any], items: Iterable[Any], ctx: Any) -> None:
    """`_merge_unique(target, _as_list(suggest(item, ctx)))` for each item of a list, with the callback
    called as written (no adapter) and a suggestion already in `target` recognized by identity before any
    comparison: a list's rows mostly return the same few suggestion objects. Same result, same order."""
    direct = _direct(suggest)
    fn: Callable[..., Any] = suggest if direct is None else direct[0]
    with_ctx = direct is None or direct[1]
    kept = {id(s) for s in target}  # ids of objects `target` holds (alive as long as it holds them)
    # Past a few suggestions, a new object is looked up among those `target` holds in a set, not compared with
    # each: rows of distinct suggestions would cost their square. A few are compared (cheaper than hashing).
    seen: _Seen | None = None
    last: Any = None
    for item in items:
        value = fn(item, ctx) if with_ctx else fn(item)
        # Neighbouring rows often answer the same suggestions: an equal new answer adds nothing (a list compares
        # its items by identity first), nor does the same tuple again (it cannot have changed). The same list
        # again is looked through: it may have changed since.
        if value is None or (value == last if value is not last else value.__class__ is tuple):
            continue
        last = value
        for s in value if isinstance(value, _SEQUENCES) else (value,):
            if s is None or id(s) in kept:
                continue
            if seen is None:
                if s in target:
                    continue
            elif not seen.add(s, target):
                continue
            target.append(s)
            kept.add(id(s))
            if seen is None and len(target) > _FEW_SUGGESTIONS:
                seen = _Seen(target)


_FEW_SUGGESTIONS = 4  # (comparing a suggestion with a couple of others costs about what hashing it does)


class _Seen:
    """The values of a list, to tell whether a value equal to one is in it: the hashable ones in a set, the
    others (rare) compared one by one, as `in` compares them."""

    __slots__ = ("hashed", "loose")

    def __init__(self, values: list[Any]) -> None:
        self.hashed: set[Any] = set()
        self.loose: list[Any] = []
        for value in values:
            self._keep(value)

    def _keep(self, value: Any) -> None:
        try:
            self.hashed.add(value)
        except TypeError:  # unhashable
            self.loose.append(value)

    def add(self, value: Any, values: list[Any]) -> bool:
        """Whether `value` is new (equal to none of `values`, the list this was made of, as kept up to date
        by the caller), kept if so."""
        try:
            new = value not in self.hashed and (not self.loose or value not in self.loose)
        except TypeError:  # unhashable: compared with each, as `in` does
            new = value not in values
        if new:
            self._keep(value)
        return new


def _part() -> _Rendered:
    """An empty `_Rendered` holding what `_embed` writes (one per row of a list whose rows render apart)."""
    part: _Rendered = _new(_Rendered)
    part.embeds, part.rules, part.suggestions, part.directives, part.cuts = [], [], [], [], None
    return part


def _join(out: _Rendered, part: _Rendered) -> None:
    """What `_embed` put in `part` (`_part`) added to `out`, as if it had been put there."""
    if part.embeds:
        out.embeds.extend(part.embeds)
    _merge_notes(out, part)


def _merge_notes(out: _Rendered, part: _Rendered) -> None:
    """`part`'s cut notices, rules, suggestions and directives added after `out`'s own (its blocks aside)."""
    if part.cuts:
        _add_cuts(out, (), part.cuts)
    if part.rules:
        _merge_unique(out.rules, part.rules)
    if part.suggestions:
        _merge_unique(out.suggestions, part.suggestions)
    if part.directives:
        _merge_unique(out.directives, part.directives)


class _Cut:
    """The `limit` cuts of one embedded key, over the items of a response: said once (`_cut_notice`), not
    once per parent item."""

    __slots__ = ("parent", "limit", "items", "hidden")

    def __init__(self, parent: str, limit: int) -> None:
        self.parent, self.limit, self.items, self.hidden = parent, limit, 0, 0


def _add_cuts(out: _Rendered, prefix: tuple[str, ...], cuts: Mapping[tuple[str, ...], _Cut]) -> None:
    """`cuts` (of the child under `prefix`, or of a part of the same render) added to `out`'s."""
    mine = out.cuts if out.cuts is not None else {}
    out.cuts = mine
    for path, cut in cuts.items():
        found = mine.get(prefix + path)
        if found is None:
            found = mine[prefix + path] = _Cut(cut.parent, cut.limit)
        found.items += cut.items
        found.hidden += cut.hidden


def _cut_notice(path: tuple[str, ...], cut: _Cut) -> str:
    """The one notice of an embedded list's `limit`: which key, in how many items, and what to do (filters do
    not narrow an embedded list). The path is written as redaction paths are: a key may hold a dot."""
    written = key_path(path)
    return (f"⚠️ Embedded list truncated: {written!r} shows at most {cut.limit} per {cut.parent} item "
            f"({cut.items} {cut.parent} item(s) cut, {cut.hidden} entries hidden in all). Filters do not narrow "
            f"it: to see all of one {cut.parent}'s {written}, use an action that lists them for that {cut.parent}.")


def _merged(target: list[Any], items: Iterable[Any]) -> list[Any]:
    _merge_unique(target, items)
    return target


_new = object.__new__


class _Cache:
    """What the hot path computes once per presenter, kept apart from its configuration."""

    __slots__ = ("items_adapter", "lean_one", "lean_many", "plain", "trusted", "plan", "redact", "words", "screens",
                 "inherited")

    def __init__(self) -> None:
        self.items_adapter: TypeAdapter[list[Any]] | None = None
        # The schema as a dict schema (`dictschema.codec`), of one item and of a list; False: not made yet.
        self.lean_one: dictschema.Codec | None | bool = False
        self.lean_many: dictschema.Codec | None | bool = False
        self.plain: bool | None = None
        # Embed keys whose value this presenter's own validation already gave the child's shape (see `_trusted`).
        self.trusted: frozenset[str] = frozenset()
        # Frozen with a schema, static own rules, every embedded child plain with a schema: one object renders
        # from this plan, without child bookkeeping (`_flat_parts`).
        self.plan: _FlatPlan | None = None
        # The redaction of this presenter and its children as one function (`redaction.compile_tree`), made
        # on first use once frozen; False: not made yet.
        self.redact: Redactor | None | bool = False
        # The strings the wire schema fixes (enum members), which the egress guard keeps; None: not made yet.
        self.words: frozenset[str] | None = None
        # What the redaction paths do to each embed key (`_screens`); None: not made yet. `inherited`: the same
        # with the paths a parent's redaction brings into this presenter's values, by those paths.
        self.screens: _Screens | None = None
        self.inherited: dict[tuple[_Mask, ...], _Screens] = {}


# What a flat render makes (`Presenter._flat_parts`): data, UI blocks, suggestions, directives, rule set.
_FlatParts = tuple[Any, list[UIBlock], list[Suggestion], list[str], tuple[tuple[str, ...], str | None]]


class _FlatPlan:
    """What `_flat_parts` needs, worked out once at freeze."""

    __slots__ = ("embeds", "loose", "codecs", "rule_sets", "ui", "suggest")

    def __init__(self, presenter: Presenter) -> None:
        trusted = presenter._cache.trusted
        self.embeds: list[tuple[str, int, bool, Presenter]] = [
            (key, 1 << index, key in trusted, child) for index, (key, child) in enumerate(presenter.embeds.items())
        ]
        # The children validated apart (not trusted): with all of them present, as lists or objects, the item
        # and they are one dict schema (`dictschema.combined`), per set of list-valued keys; None: no such schema.
        self.loose = sum(bit for _, bit, trusted, _ in self.embeds if not trusted)
        self.codecs: dict[int, dictschema.Codec | None] = {}
        self.rule_sets: dict[int, tuple[tuple[str, ...], str | None]] = {}
        self.ui, self.suggest = _direct(presenter._ui), _direct(presenter._suggest)

    def codec(self, presenter: Presenter, lists: int) -> dictschema.Codec | None:
        """The item and its loose children in one dict schema, those of `lists` as lists (made on first use)."""
        codec = self.codecs.get(lists, False)
        if codec is False:
            assert presenter.item_model is not None
            children = [(key, child.item_model, bool(lists & bit)) for key, bit, trusted, child in self.embeds
                        if not trusted]
            codec = self.codecs[lists] = dictschema.combined(presenter.item_model, children)  # type: ignore[arg-type]
        return codec  # type: ignore[return-value]


class Presenter:
    """Builder of an entity's perception: schema, rules, redaction, UI, suggestions, limit, embeds.

    Each builder call sets one aspect, replacing what an earlier call set for it (`embed` sets the child of
    one key), but for `redact_pii` and `rules`, which add to the earlier calls' paths and rules (a variant
    built on a copy never drops the original's redaction; `rules(..., replace=True)` drops its rules), and
    `ui`, `collection_ui`, `suggest` and `collection_suggest`, which add their callback's blocks or
    suggestions after the earlier ones' (`replace=True` drops those).
    Registering the presenter with an action, or presenting with it, freezes it and its embedded children:
    from then on it cannot change under the actions that share it; `copy()` gives an unfrozen variant to
    build on.
    """

    _frozen = False

    def __init__(self, name: str, *, pretty: bool = False) -> None:
        self.name = name
        self.pretty = pretty
        self.item_model: type[BaseModel] | None = None
        self.hidden_fields: frozenset[str] = frozenset()  # what the schema's `Model` hides: never embedded
        self.auto_rules: list[str] = []
        self._rules: list[str] | Callable[[Any, Any], Any] = []
        self._static_rules: list[str] | None = []  # auto + explicit rules when none is a function
        self.redact_paths: tuple[str, ...] = ()
        self.redactions: tuple[tuple[str, Any, bool], ...] = ()  # (path, its censor, guarded) of each path
        self.censor: Any = DEFAULT_CENSOR
        self.guard_blocks = True
        self._ui: Callable[[Any, Any], Any] | None = None
        self._collection_ui: Callable[[Any, Any], Any] | None = None
        self._suggest: Callable[[Any, Any], Any] | None = None
        self._collection_suggest: Callable[[Any, Any], Any] | None = None
        self._attach: Callable[[Any, Any], Any] | None = None
        self._directives: list[str] | Callable[[Any, Any], Any] = []
        self.max_items: int | None = None
        self.embeds: Mapping[str, Presenter] = {}
        self._cache = _Cache()

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise PresenterError(
                f"presenter {self.name!r} is frozen: it serves registered actions, which must not change under "
                f"them; build a variant from presenter.copy()"
            )
        object.__setattr__(self, name, value)

    # -- freezing ----------------------------------------------------------------------------------
    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> Presenter:
        """Make this presenter and its embedded children immutable (registration does it); returns it."""
        if self._frozen:
            return self
        self._check_embeds()
        for child in self.embeds.values():
            child.freeze()
        self.embeds = MappingProxyType(dict(self.embeds))
        self.auto_rules = tuple(self.auto_rules)  # type: ignore[assignment]
        if not callable(self._rules):
            self._rules = tuple(self._rules)  # type: ignore[assignment]
        if self._static_rules is not None:
            self._static_rules = tuple(self._static_rules)  # type: ignore[assignment]
        if not callable(self._directives):
            self._directives = tuple(self._directives)  # type: ignore[assignment]
        cache = self._cache
        cache.plain = self._compute_plain()
        cache.trusted = frozenset(k for k, c in self.embeds.items() if _trusted(self.item_model, k, c))
        if (self._static_rules is not None and self.item_model is not None
                and all(c._plain and c.item_model is not None for c in self.embeds.values())):
            cache.plan = _FlatPlan(self)
        object.__setattr__(self, "_frozen", True)
        return self

    def _check_embeds(self) -> None:
        """An embed never brings back what the schema keeps out, nor sits under a name the data does not use."""
        model = self.item_model
        for key in self.embeds:
            if key in self.hidden_fields:
                raise PresenterError(f"presenter {self.name!r}: embed({key!r}) names a field its Model hides, and a "
                                     "hidden field never leaves the server: build this presenter without that "
                                     "embed")
            for name, field in model.model_fields.items() if model is not None else ():
                wire = field.serialization_alias or field.alias or name
                # (a key no field can be named, `_links`, is a field's alias: it is written under the key)
                if key in (name, field.alias, field.serialization_alias) and wire != name and not (
                        key == wire and not _field_name(key)):
                    raise PresenterError(f"presenter {self.name!r}: embed({key!r}) names the field {name!r}, which "
                                         f"the data writes as {wire!r} (its alias): an embedded field must be "
                                         "written under its own name (drop the alias, or do not embed it)")
                if key == name and field.exclude:
                    raise PresenterError(f"presenter {self.name!r}: embed({key!r}) names a field its schema "
                                         "excludes from the data: do not embed it")
                if key == name and _scalar(field.annotation):
                    raise PresenterError(f"presenter {self.name!r}: embed({key!r}) names the field {name!r}, which "
                                         f"its schema types as {_type_name(field.annotation)}: an embedded presenter "
                                         "renders an object or a list. Type the field as the child's model (or a "
                                         "list of it, dict, Any), or embed under another key")

    def copy(self, name: str | None = None) -> Presenter:
        """An unfrozen copy (optionally renamed) to build a variant on; embedded children are shared."""
        new = copy.copy(self)
        object.__setattr__(new, "_frozen", False)
        new.embeds = dict(self.embeds)
        new.auto_rules = list(self.auto_rules)
        new._cache = _Cache()
        if name is not None:
            new.name = name
        return new

    # -- builder -----------------------------------------------------------------------------------
    def schema(self, spec: Model | type[BaseModel] | Mapping[str, Any]) -> Presenter:
        """The fields that exist for the agent; everything else is stripped."""
        hidden: frozenset[str] = frozenset()
        keys: dict[str, str] = {}  # a field renamed from its key (`named_fields`) -> the key, as the agent sees it
        if isinstance(spec, Model):
            model, hidden = spec.schema, spec.hidden
        elif isinstance(spec, type) and issubclass(spec, RootModel):
            raise TypeError(f"presenter {self.name!r}: schema() takes the model of one item, not a RootModel "
                            f"({spec.__name__}): give the item's model (a list is presented item by item)")
        elif isinstance(spec, type) and issubclass(spec, BaseModel):
            model = stripping_model(spec)
        elif not isinstance(spec, Mapping):
            given = getattr(spec, "__name__", type(spec).__name__)
            raise TypeError(f"presenter {self.name!r}: schema() takes a pydantic model, an mcpfusion Model or a "
                            f"mapping of field names to types, not {given!s:.80} (a dataclass or TypedDict: "
                            "declare it as a pydantic BaseModel)")
        else:
            fields: dict[str, Any] = {}
            for name, value in spec.items():
                if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
                    value = (value[0], Field(description=value[1]))
                elif not isinstance(value, tuple):
                    value = (value, ...)
                fields[name] = (stripping_annotation(value[0]), *value[1:])  # nested models keep no extra key
            named = named_fields(fields)
            keys = {own: key for own, key in zip(named, fields, strict=True) if own != key}
            model = create_model(
                self.name, __config__=ConfigDict(extra="ignore", from_attributes=True), **named
            )
        check_output_model(model, f"presenter {self.name!r}")
        self.item_model = model
        self.hidden_fields = hidden
        self._cache = _Cache()
        # An excluded field never reaches the data: its description is no rule of what the agent sees.
        self.auto_rules = [f"{keys.get(n, n)}: {f.description}" for n, f in model.model_fields.items()
                           if f.description and not f.exclude]
        self._prepare_rules()
        self._check_paths()
        return self

    def rules(self, rules: Iterable[str | None] | Callable[..., _Lines], *, replace: bool = False) -> Presenter:
        """System rules sent with every response: a list (a single string is one rule), or a function of
        (data[, ctx]). A later call adds its rules after the earlier ones (a variant built on a copy keeps the
        original's rules); `replace=True` drops the earlier ones."""
        made = _flexible(rules, "rules", self.name) if callable(rules) else _text_lines(rules, "rules", self.name)
        earlier = self._rules
        if replace or not earlier:
            self._rules = made
        elif callable(earlier) or callable(made):
            self._rules = _chained_rules(earlier, made)
        else:
            self._rules = [*earlier, *made]  # (a new list: a copy may share the earlier one)
        self._prepare_rules()
        return self

    def _prepare_rules(self) -> None:
        if callable(self._rules):
            self._static_rules = None
        else:
            self._static_rules = []
            _merge_unique(self._static_rules, self.auto_rules)
            _merge_unique(self._static_rules, self._rules)

    def directives(self, lines: Iterable[str | None] | Callable[..., _Lines]) -> Presenter:
        """`<llm_directives>` lines: a list (a single string is one line), or a function of (data[, ctx])."""
        self._directives = (_flexible(lines, "directives", self.name) if callable(lines)
                            else _text_lines(lines, "directives", self.name))
        return self

    @classmethod
    def firewall(cls, model: Model | type[BaseModel]) -> Presenter:
        """Only the schema firewall of a typed return: validate, apply casts, strip undeclared and hidden
        fields (no rules, UI or suggestions)."""
        presenter = cls(model.name if isinstance(model, Model) else model.__name__).schema(model)
        presenter.auto_rules = []
        presenter._prepare_rules()
        return presenter

    def redact_pii(self, paths: Iterable[str], censor: Any = DEFAULT_CENSOR, *, guard_blocks: bool = True) -> Presenter:
        """Censor these paths just before serialization (callbacks still see real values).

        The egress guard then keeps the removed values out of every other block (see `mcpfusion.censor`);
        `guard_blocks=False` is the explicit opt-out for blocks meant for a human operator. A single string
        is one path. A field is named by its name or an alias; a key that is no name is quoted as a JSON string
        in brackets (`meta["user.email"]`, `["@email"]`). A later call adds its paths to the earlier ones, each
        path keeping the censor and guard it was given with (a path given again takes the later ones); the
        guard writes the latest censor over the copies it finds.
        """
        given = list(_lines(paths))
        for path in given:
            parse_path(path)
        # A later call adds its paths (a variant built on a copy keeps the original's): a path given again
        # takes this call's censor and guard, every other path keeps its own.
        earlier = [entry for entry in self.redactions if entry[0] not in given]
        before = (self.redactions, self.redact_paths, self.censor, self.guard_blocks)
        self.redactions = (*earlier, *((path, censor, bool(guard_blocks)) for path in dict.fromkeys(given)))
        self.redact_paths = tuple(path for path, _, _ in self.redactions)
        self.censor = censor  # the guard's censor for copies in other blocks: the latest given
        # False as soon as one path opted out: the blocks of this presenter may show a redacted value.
        self.guard_blocks = all(guarded for _, _, guarded in self.redactions)
        try:
            self._check_paths()
        except ValueError:
            self.redactions, self.redact_paths, self.censor, self.guard_blocks = before  # nothing half declared
            raise
        return self

    def ui(self, fn: Callable[..., _Blocks], *, replace: bool = False) -> Presenter:
        """UI blocks for one item: `fn(item[, ctx]) -> UIBlock | list[UIBlock | None]`. A later call adds its
        blocks after the earlier ones' (a variant built on a copy keeps the original's); `replace=True`
        drops them. So do `collection_ui`, `suggest` and `collection_suggest`."""
        self._ui = _added(self._ui, _flexible(fn, "ui", self.name), replace)
        return self

    def collection_ui(self, fn: Callable[..., _Blocks], *, replace: bool = False) -> Presenter:
        """UI blocks for a whole list: `fn(items[, ctx])`."""
        self._collection_ui = _added(self._collection_ui, _flexible(fn, "collection_ui", self.name), replace)
        return self

    def suggest(self, fn: Callable[..., _Suggestions], *, replace: bool = False) -> Presenter:
        """Next actions for one item: `fn(item[, ctx]) -> list[Suggestion | None]`."""
        self._suggest = _added(self._suggest, _flexible(fn, "suggest", self.name), replace)
        return self

    def collection_suggest(self, fn: Callable[..., _Suggestions], *, replace: bool = False) -> Presenter:
        """Next actions for a whole list, worked out once: `fn(items[, ctx]) -> list[Suggestion | None]`.
        A list is then answered from it instead of `suggest` per item (one item still uses `suggest`)."""
        made = _flexible(fn, "collection_suggest", self.name)
        self._collection_suggest = _added(self._collection_suggest, made, replace)
        return self

    def attach(self, fn: Callable[..., Any]) -> Presenter:
        """Content after the text blocks (images, documents, links): `fn(data[, ctx])` returns content helpers
        (or None). It sees the data *as presented* (after the schema firewall and redaction, before `_select`:
        a document may draw on a field the agent did not select), so a document drawn from it never carries a
        redacted value; text it copies anyway is censored too, and so are the redacted values of rows the
        presenter did not send (beyond `limit`, or not fitting the schema)."""
        self._attach = _flexible(fn, "attach", self.name)
        return self

    def limit(self, n: int) -> Presenter:
        """At most `n` items of a list reach the agent; the rest is announced, not sent."""
        if n.__class__ is not int or n < 1:  # (a bool is no count either)
            raise ValueError(f"Presenter.limit() takes a whole number of items, at least 1, not {n!r:.60}")
        self.max_items = n
        return self

    def embed(self, key: str, child: Presenter) -> Presenter:
        """`data[key]` is rendered by `child`: its blocks go to the embeds section, its rules merge here. The
        key may be a field of the schema (one that holds an object or a list) or a key the schema leaves out."""
        if not isinstance(key, str):
            raise TypeError(f"presenter {self.name!r}: embed() takes the key of the data to render, a string, "
                            f"not {type(key).__name__} {key!r:.60}")
        if not isinstance(child, Presenter):
            raise TypeError(f"presenter {self.name!r}: embed({key!r}) takes the Presenter that renders data[{key!r}], "
                            f"not {type(child).__name__} {child!r:.60}")
        if child is self or self in _embedded_in(child):
            raise ValueError(f"presenter {self.name!r}: embed({key!r}, {child.name!r}) would make it embed itself, "
                             "directly or through its children, and render without end: embed another presenter "
                             "for the nested data")
        self.embeds = {**self.embeds, key: child}
        if self.item_model is not None:
            self._check_embeds()  # (else at freeze, once the schema is known)
        return self

    @property
    def _plain(self) -> bool:
        """No callback, limit or embed: rendering is validation plus static rules (known once frozen)."""
        plain = self._cache.plain
        return self._compute_plain() if plain is None else plain

    def _compute_plain(self) -> bool:
        return (
            self._static_rules is not None
            and not self._directives
            and self._ui is None
            and self._collection_ui is None
            and self._suggest is None
            and self._collection_suggest is None
            and self.max_items is None
            and not self.embeds
        )

    # -- introspection -----------------------------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        names = list(self.item_model.model_fields) if self.item_model else []
        return names + [k for k in self.embeds if k not in names]

    @property
    def wire_names(self) -> list[str]:
        """The root keys of an item as the data has them: each field under its (serialization) alias, the
        computed fields, then the embeds (what `_select` names)."""
        model = self.item_model
        names = [f.serialization_alias or f.alias or key for key, f in model.model_fields.items()
                 if not f.exclude] if model else []
        if model is not None:
            names += [f.alias or key for key, f in model.model_computed_fields.items()]
        return names + [k for k in self.embeds if k not in names]

    def item_schema(self) -> dict[str, Any]:
        """JSON schema of one item as the agent receives it."""
        schema: dict[str, Any] = self.item_model.model_json_schema() if self.item_model else {"type": "object"}
        for key, child in self.embeds.items():
            schema.setdefault("properties", {})[key] = {
                "anyOf": [child.item_schema(), {"type": "array", "items": child.item_schema()}]
            }
        return schema

    def wire_schema(self) -> dict[str, Any]:
        """JSON schema of one item exactly as it leaves the server: serialization mode, references inlined,
        embeds as their children's wire schemas, redacted paths typed as the censor."""
        if self.item_model is None:
            schema: dict[str, Any] = {"type": "object"}
        else:
            schema = lean(inline_refs(serialization_schema(self.item_model)))
        for key, child in self.embeds.items():
            properties = schema.setdefault("properties", {})
            properties[key] = _embedded(child.wire_schema(), properties.get(key))
        for paths, censor, _ in self._redaction_groups():
            schema = redact_schema(schema, paths, censor)
        if not self._redaction_node().empty():
            # The egress guard censors a redacted value wherever the data quotes it: any string may then be
            # rewritten, and a pattern or a length it had to meet no longer holds.
            schema = unconstrained_strings(schema)
        return schema

    def _check_paths(self) -> None:
        """Refuse, at declaration, a redaction path that can reach no value of the schema (a typo, a renamed
        field, a step through a scalar or a list: it would redact nothing, or fail every call) or that goes
        through a serializer writing the data its own way. The whole path is followed through the nested
        models (`_follow`); under Any, an untyped dict or an embed's key it cannot be checked, and passes."""
        if not self.item_model or not self.redact_paths:
            return
        for path in self.redact_paths:
            written, problem, writer = _follow(self.item_model, path, self.embeds)
            if problem is not None:
                raise ValueError(f"presenter {self.name!r}: redaction path {path!r} {problem}")
            if writer is not None:
                raise ValueError(f"presenter {self.name!r}: redaction path {path!r} goes through {writer}, which "
                                 "may write the data under keys the redactor cannot know: censor the value in "
                                 "that serializer, or drop the serializer")
            for way in written:  # (quoted as needed: this holds; checked here, never at a call or a listing)
                try:
                    parse_path(way)
                except ValueError as exc:
                    raise ValueError(f"presenter {self.name!r}: redaction path {path!r} is written {way!r} in "
                                     f"the data, which no redaction path can name: {exc}") from None

    # -- pipeline ----------------------------------------------------------------------------------
    def _validate(self, raws: Sequence[Any], notices: list[str] | None = None) -> tuple[list[Any], Sequence[Any]]:
        """Validate and strip items against the schema, in one pydantic call for a whole list.

        `notices` is None for one object: a mismatch raises. For a list, the items that do not fit are left
        out, logged, and announced in `notices`; the rest is answered (one bad row never fails a list).
        Returns the items and the raw values they came from.
        """
        if self.item_model is None:
            # No schema: work on a copy so that redaction never touches the caller's objects.
            return [copy.deepcopy(to_jsonable(raw)) for raw in raws], raws
        try:
            if notices is None:
                return [self._dump_one(raws[0])], raws
            return self._dump_many(raws), raws
        except ValidationError as exc:
            if notices is None:
                raise PresenterError(
                    f"presenter {self.name!r}: data does not fit its schema ({_fields_of(exc, 0)})"
                ) from None
        return self._validate_each(raws, notices)

    def _dump_one(self, raw: Any) -> Any:
        """One item validated, stripped and dumped as JSON values; `ValidationError` when it does not fit.
        A dict goes through the schema as a dict schema when it converts (see `dictschema`): no model
        instance is built. Anything else, or a dict it refuses, is the model's (the same values, or the
        model's own error)."""
        if raw.__class__ is dict:
            lean = self._lean()
            if lean is not None:
                try:
                    return dictschema.dump(lean, raw)
                except ValidationError as exc:
                    if dictschema.not_finite(exc):
                        raise
        model: Any = self.item_model
        # Aliased fields (nested ones too) read by either name, written by alias: see `stripping_model`.
        one = model.__pydantic_validator__.validate_python(raw, from_attributes=True, by_name=True)
        try:
            return model.__pydantic_serializer__.to_python(one, mode="json", by_alias=True)
        except (UnicodeDecodeError, PydanticSerializationError) as exc:  # e.g. bytes that are not UTF-8
            raise self._unwritable(exc) from None

    def _dump_many(self, raws: Sequence[Any]) -> list[Any]:
        """`_dump_one` of a list, in one call."""
        if raws.__class__ is list:
            lean = self._lean(many=True)
            if lean is not None:
                try:
                    return dictschema.dump(lean, raws)  # type: ignore[no-any-return]
                except ValidationError as exc:
                    if dictschema.not_finite(exc):
                        raise
        adapter = self._items_adapter()
        items = adapter.validator.validate_python(raws, from_attributes=True, by_name=True)
        try:
            return adapter.serializer.to_python(items, mode="json", by_alias=True)  # type: ignore[no-any-return]
        except (UnicodeDecodeError, PydanticSerializationError) as exc:
            raise self._unwritable(exc) from None

    def _unwritable(self, exc: Exception) -> PresenterError:
        """A value that passed the schema but that JSON cannot carry as it is typed: the answer is not sent."""
        return PresenterError(f"presenter {self.name!r}: a value cannot be written as JSON ({type(exc).__name__})")

    def _lean(self, many: bool = False) -> dictschema.Codec | None:
        """The schema (as a list with `many`) as a dict schema, made on first use; None when it does not
        convert."""
        cache = self._cache
        lean = cache.lean_many if many else cache.lean_one
        if lean is False:
            assert self.item_model is not None
            lean = dictschema.codec(self.item_model, many=many)
            if many:
                cache.lean_many = lean
            else:
                cache.lean_one = lean
        return lean  # type: ignore[return-value]

    def _items_adapter(self) -> TypeAdapter[list[Any]]:
        """The schema as a list, made on first use (a TypeAdapter costs milliseconds, most never need one)."""
        adapter = self._cache.items_adapter
        if adapter is None:
            adapter = self._cache.items_adapter = TypeAdapter(list[self.item_model])  # type: ignore[name-defined]
        return adapter

    def _validate_each(self, raws: Sequence[Any], notices: list[str]) -> tuple[list[Any], Sequence[Any]]:
        items, kept, bad = [], [], []
        for index, raw in enumerate(raws):
            try:
                items.append(self._dump_one(raw))
            except ValidationError as exc:
                bad.append(f"#{index} ({_fields_of(exc, 0)})")
                continue
            kept.append(raw)
        self._announce(len(raws), bad, notices)
        return items, kept

    def _announce(self, total: int, bad: list[str], notices: list[str]) -> None:
        logger.warning("presenter %r: %d of %d item(s) do not fit its schema and were left out: %s",
                       self.name, len(bad), total, ", ".join(bad))
        notices.append(
            f"⚠️ {len(bad)} of {total} item(s) could not be shown: stored data that does not fit the "
            f"{self.name} schema (reported to the server's log). The other items are complete."
        )

    def _screens(self, inherited: tuple[_Mask, ...] = ()) -> _Screens:
        """What this presenter's redaction paths (and `inherited`, those of its parents going on into its
        values) do to its embed keys (see `_Screens`), made once per set of paths when frozen."""
        cache = self._cache
        found = cache.inherited.get(inherited) if inherited else cache.screens
        if found is None:
            own = [_mask(path) for path in self.wire_paths()]
            found = _screened(self.embeds, [*own, *inherited])
            if self._frozen:
                if inherited:
                    cache.inherited[inherited] = found
                else:
                    cache.screens = found
        return found

    def _embed(self, raw: Any, item: Any, ctx: Any, out: _Rendered, screens: _Screens) -> None:
        """Render `raw`'s embedded children into `item`; their blocks, rules and suggestions go to `out`.
        A child whose value the redaction hides whole (`screens`) sends no block, notice nor cut count: the
        agent sees the censor, not how many entries it stands for."""
        for key, child in self.embeds.items():
            value = raw.get(key) if isinstance(raw, Mapping) else getattr(raw, key, None)
            if value is None:
                continue
            screen = screens.get(key) if screens else None
            if child._plain:
                # Schema, static rules and redaction only: no render bookkeeping (hot path of list embeds).
                if key in self._cache.trusted:
                    pass  # this presenter's own validation made item[key] what the child would make of it
                elif isinstance(value, _SEQUENCES):
                    notices: list[str] = []
                    item[key] = child._validate(value if value.__class__ is list else list(value), notices)[0]
                    if notices and not (screen and screen[0]):
                        out.embeds.extend([ui_helpers.summary(n).render() for n in notices])
                else:
                    item[key] = child._validate([value])[0][0]
                if child._static_rules:
                    _merge_unique(out.rules, child._static_rules)
                continue
            rendered = child.render(value, ctx, embedded=True, masks=screen[1] if screen else ())
            item[key] = rendered.data
            if screen is None or not screen[0]:
                if rendered.truncated is not None:
                    cut = _Cut(self.name, child.max_items)  # type: ignore[arg-type]  # (a cut has a limit)
                    cut.items, cut.hidden = 1, rendered.truncated[1] - cut.limit
                    _add_cuts(out, (), {(key,): cut})
                if rendered.cuts:
                    _add_cuts(out, (key,), rendered.cuts)
                out.embeds.extend(block.render() for block in rendered.ui_blocks)
                out.embeds.extend(rendered.embeds)
            _merge_unique(out.rules, rendered.rules)
            _merge_unique(out.suggestions, rendered.suggestions)
            _merge_unique(out.directives, rendered.directives)

    def _validate_all(
        self, raws: Sequence[Any], ctx: Any, out: _Rendered | None, notices: list[str] | None = None,
        sift: Callable[[Any], str | None] | None = None, sources: list[Any] | None = None,
        masks: tuple[_Mask, ...] = (),
    ) -> list[Any]:
        """The items presented of `raws`; `sources`, when given, is filled with the raw of each. `masks`: the
        redaction paths of the parents going on into these items (see `_screens`)."""
        items, raws = self._validate(raws, notices)
        if sources is not None:
            sources[:] = raws
        if out is None and sift is None:
            return items
        screens = self._screens(masks) if out is not None else {}
        if notices is None:
            assert out is not None  # (`sift` is for lists only)
            self._embed(raws[0], items[0], ctx, out, screens)
            return items
        # A row's children render apart when the row may still be left out after one of them wrote to it (a
        # later child does not fit, or `sift`): what they add (blocks, rules, suggestions, cut counts) joins
        # `out` only if the row is kept. One child alone writes nothing when it fails: no part to pay for.
        apart = out is not None and (sift is not None or len(self.embeds) > 1)
        kept, kept_raws, bad = [], [], []
        for index, (raw, item) in enumerate(zip(raws, items, strict=True)):
            part = _part() if apart else None
            try:
                if out is not None:
                    self._embed(raw, item, ctx, out if part is None else part, screens)
            except PresenterError as exc:  # an embedded child that does not fit: leave this item out
                bad.append(f"#{index} ({exc})")
                continue
            why = None if sift is None else sift(item)
            if why is not None:
                bad.append(f"#{index} ({why})")
                continue
            if part is not None and out is not None:
                _join(out, part)
            kept.append(item)
            kept_raws.append(raw)
        if bad:
            self._announce(len(items), bad, notices)
        if sources is not None:
            sources[:] = kept_raws
        return kept

    def render(self, data: Any, ctx: Any = None, *, embedded: bool = False, masks: tuple[_Mask, ...] = ()) -> _Rendered:
        """Everything but `_select`, redaction and serialization (used for embeds, too: `embedded`, where a
        `limit` cut is noted in `cuts` for the parent to announce once, not as a block per parent item;
        `masks`, the parents' redaction paths going on into the data, see `_screens`)."""
        plan = self._cache.plan
        if plan is not None and not isinstance(data, _SEQUENCES):
            parts = self._flat_parts(plan, data, ctx)
            if parts is not None:
                full, ui_blocks, suggestions, directives, (rules, rules_block) = parts
                # Made without `__init__`'s empty lists, every field set once.
                out: _Rendered = _new(_Rendered)
                out.data, out.ui_blocks, out.embeds, out.rules, out.suggestions, out.directives = (
                    full, ui_blocks, [], list(rules), suggestions, directives)
                out.rules_block = rules_block
                out.truncated = out.cuts = None
                return out
        return self._render_general(data, ctx, embedded=embedded, masks=masks)

    def _render_general(self, data: Any, ctx: Any, sift: Callable[[Any], str | None] | None = None,
                        embedded: bool = False, masks: tuple[_Mask, ...] = ()) -> _Rendered:
        """`render` without the flat plan: lists, children with their own blocks, callback rules. `sift`: why
        a row of a list cannot be sent (see `_unsendable`), to leave it out before any callback sees it."""
        out = _Rendered()
        # Embedded children's rules, suggestions and directives come after this presenter's own.
        children = _Rendered(out.embeds) if self.embeds else None
        if isinstance(data, _SEQUENCES):
            items = list(data)
            total = len(items)
            limit = self.max_items
            if limit is not None and total > limit:
                items = items[:limit]
            notices: list[str] = []
            kept: list[Any] = []
            full: Any = self._validate_all(items, ctx, children, notices, sift, kept, masks)
            if len(full) < len(items):  # (a page an egress limit cuts resumes after the handler's row sent last)
                out.sources = _indices(items, kept)
            if len(items) < total:
                # Counted once the rows are validated: the rows sent (a row left out is in its own notice),
                # the rows the limit held back. Embedded, the parent says it once for all its items.
                out.truncated = (len(full), total)
                if not embedded:
                    out.ui_blocks.append(ui_helpers.summary(
                        f"⚠️ Dataset truncated. {len(full)} shown, {total - len(items)} hidden. "
                        "Use filters to narrow results."))
            out.ui_blocks.extend(ui_helpers.summary(n) for n in notices)
            if self._collection_ui is not None:
                out.ui_blocks.extend(_as_list(self._collection_ui(full, ctx)))
            elif self._ui is not None:
                for item in full:
                    out.ui_blocks.extend(_as_list(self._ui(item, ctx)))
            if self._collection_suggest is not None:
                _merge_unique(out.suggestions, _as_list(self._collection_suggest(full, ctx)))
            elif self._suggest is not None:
                _suggest_each(out.suggestions, self._suggest, full, ctx)
        else:
            full = self._validate_all([data], ctx, children, masks=masks)[0]
            if self._ui is not None:
                out.ui_blocks.extend(_as_list(self._ui(full, ctx)))
            if self._suggest is not None:
                _merge_unique(out.suggestions, _as_list(self._suggest(full, ctx)))
        out.data = full
        if self._static_rules is not None:
            out.rules = list(self._static_rules)
        else:
            _merge_unique(out.rules, self.auto_rules)
            rules = self._rules  # a function here: static rules were merged once, at declaration
            if callable(rules):
                _merge_unique(out.rules, [r for r in _as_list(rules(full, ctx)) if r])
        if self._directives:
            directives = self._directives(full, ctx) if callable(self._directives) else self._directives
            _merge_unique(out.directives, [d for d in _as_list(directives) if d])
        if children is not None:  # (its blocks went straight into `out.embeds`)
            _merge_notes(out, children)
        return out

    def _flat_parts(self, plan: _FlatPlan, data: Any, ctx: Any) -> _FlatParts | None:
        """`render` of one object by a frozen flat presenter (see `_Cache.plan`), from what `_FlatPlan`
        worked out at freeze: one validation per child value (none for a trusted key), the rules and their
        block per set of children present. None when a value does not validate: `render`'s general path
        then decides (it degrades a list, or raises the same `PresenterError`); no callback has run yet.
        Its parts, which the caller owns: the data, UI blocks, suggestions, directives and the rule set."""
        full = None
        present = 0
        raw_get = data.get if data.__class__ is dict or isinstance(data, Mapping) else None
        if plan.embeds:
            lists = shaped = 0  # embedded values that are lists, that are lists or dicts
            for key, bit, _, _ in plan.embeds:
                value = raw_get(key) if raw_get is not None else getattr(data, key, None)
                if value is not None:
                    present |= bit
                    cls = value.__class__
                    if cls is list:
                        lists |= bit
                        shaped |= bit
                    elif cls is dict:
                        shaped |= bit
            loose = plan.loose
            if loose and shaped & loose == loose and data.__class__ is dict:
                shape = lists & loose
                codec = plan.codecs[shape] if shape in plan.codecs else plan.codec(self, shape)
                if codec is not None:
                    try:
                        full = dictschema.dump(codec, data)
                    except ValidationError:
                        full = None  # the parts' own schemas decide, as below
        try:
            if full is None:
                full = self._dump_one(data)
                for key, _, trusted, child in plan.embeds:
                    value = None if trusted else raw_get(key) if raw_get is not None else getattr(data, key, None)
                    if value is None:
                        continue
                    cls = value.__class__
                    # A list's items in one call, as the child's own list path validates them.
                    full[key] = child._dump_many(value) if cls is list or cls is tuple else child._dump_one(value)
        except ValidationError:
            return None
        rule_set = plan.rule_sets.get(present)
        if rule_set is None:
            rule_set = plan.rule_sets[present] = self._rule_set(present)
        ui_blocks: list[UIBlock] = []
        if plan.ui is not None:
            fn, with_ctx = plan.ui
            blocks = fn(full, ctx) if with_ctx else fn(full)
            if blocks is not None:  # `_as_list`, a list of one block (the common case) inline
                one = blocks.__class__ is list and len(blocks) == 1 and blocks[0] is not None
                ui_blocks = [blocks[0]] if one else _as_list(blocks)
        suggestions: list[Suggestion] = []
        if plan.suggest is not None:
            fn, with_ctx = plan.suggest
            made = fn(full, ctx) if with_ctx else fn(full)
            one = made.__class__ is list and len(made) == 1 and made[0] is not None
            suggestions = [made[0]] if one else _as_list(made)
            if len(suggestions) > 1:
                suggestions = _merged([], suggestions)
        directives: list[str] = []
        if self._directives:
            lines = self._directives(full, ctx) if callable(self._directives) else self._directives
            _merge_unique(directives, [d for d in _as_list(lines) if d])
        return full, ui_blocks, suggestions, directives, rule_set

    def _rule_set(self, present: int) -> tuple[tuple[str, ...], str | None]:
        """The rules of a flat render whose embedded values present are the bits of `present` (own rules,
        then each present child's, in embed order, as `render` merges them), and their block."""
        rules = list(self._static_rules or ())
        for index, child in enumerate(self.embeds.values()):
            if present & (1 << index):
                _merge_unique(rules, child._static_rules or ())
        return tuple(rules), markup.bullet_block("domain_rules", rules) if rules else None

    def redact(self, data: Any, removed: list[Any] | None = None) -> None:
        """Apply this presenter's (and its embeds') redaction in place; fails closed. The real values it
        censors are appended to `removed` (unless this presenter opted out of the egress guard). One
        function for the whole tree (`redaction.compile_tree`), made once for a frozen presenter."""
        tree = self._cache.redact if self._frozen else False
        if tree is False:
            tree = self._redactor()
        if tree is not None:
            tree(data, removed)  # type: ignore[operator]

    def _redactor(self) -> Redactor | None:
        """The redaction of this presenter's tree as one function (None: nothing to censor), kept once frozen."""
        node = self._redaction_node()
        tree = None if node.empty() else _compiled(node)
        if self._frozen:
            self._cache.redact = tree
        return tree

    def _redaction_node(self) -> Node | _Groups:
        groups = self._redaction_groups()
        children: list[Any] = [(key, child._redaction_node()) for key, child in self.embeds.items()]
        if len(groups) > 1:  # paths of several censors or guards: applied in turn (`_compiled`)
            return _Groups(groups, self.censor, children)
        paths, censor, guarded = groups[0] if groups else ((), self.censor, self.guard_blocks)
        return Node(paths, censor, guarded, children)

    def _redaction_groups(self) -> list[tuple[tuple[str, ...], Any, bool]]:
        """The redaction paths as the data writes them (`wire_paths`), grouped by censor and guard, in order."""
        groups: list[tuple[list[str], Any, bool]] = []
        for path, censor, guarded in self.redactions:
            group = next((g for g in groups if g[2] is guarded and _same(g[1], censor)), None)
            if group is None:
                group = ([], censor, guarded)
                groups.append(group)
            for found in (path, *_aliased_paths(self.item_model, path)):
                if found not in group[0]:
                    group[0].append(found)
        return [(tuple(paths), censor, guarded) for paths, censor, guarded in groups]

    def _words(self) -> frozenset[str]:
        """The strings this presenter's wire schema fixes (enum and const members), made once."""
        words = self._cache.words
        if words is None:
            words = self._cache.words = vocabulary(self.wire_schema())
        return words

    def wire_paths(self) -> tuple[str, ...]:
        """The redaction paths as the data is written: a field with an alias is written under it (FastAPI's
        way, and the output schema's), so its path is followed under both names."""
        paths: list[str] = []
        for path in self.redact_paths:
            for found in (path, *_aliased_paths(self.item_model, path)):
                if found not in paths:
                    paths.append(found)
        return tuple(paths)

    def present(self, data: Any, ctx: Any = None, *, select: Collection[str] | None = None,
                given: Sequence[Any] | None = None) -> ToolResponse:
        """The full response for `data`: the six blocks in order, plus the structured view for tests.

        Redaction runs on the whole data before `_select`, so that the egress guard knows every real value
        it removed, even of fields `_select` leaves out. `given`: all the rows the handler gave, when the
        caller presents only some of them (a page it cut): a document attached to the response afterwards is
        censored of their redacted values too.
        """
        if data is None:
            raise PresenterError(f"presenter {self.name!r}: nothing to present (the handler returned None)")
        if not self._frozen:
            self.freeze()
        return self._respond(data, ctx, select, None, given)

    def _respond(self, data: Any, ctx: Any, select: Collection[str] | None,
                 sift: Callable[[Any], str | None] | None, given: Sequence[Any] | None = None) -> ToolResponse:
        """`present` of frozen data. A list whose redaction or JSON writing fails is presented again with
        `sift`, which leaves out the rows that cannot be sent (one bad row never fails a list)."""
        cache = self._cache
        plan = cache.plan
        try:
            # A flat render's parts go straight into the response (no `_Rendered` in between: the hot path).
            parts = self._flat_parts(plan, data, ctx) if plan is not None and not isinstance(data, _SEQUENCES) else None
            if parts is None:
                rendered = self._render_general(data, ctx, sift)
        except egress.CARRIED as exc:  # a callback's error may quote the real values it saw: never sent
            _scrub_raised(self, exc, data)
            raise
        cuts: dict[tuple[str, ...], _Cut] | None = None
        if parts is not None:
            full, ui_blocks, suggestions, directives, (static_rules, rules_block) = parts
            embeds: list[str] = []
            rules = list(static_rules)
        else:
            full, ui_blocks, suggestions, directives = (rendered.data, rendered.ui_blocks, rendered.suggestions,
                                                        rendered.directives)
            embeds, rules, rules_block = rendered.embeds, rendered.rules, rendered.rules_block
            cuts = rendered.cuts
            if cuts and select:  # a key `_select` leaves out is not sent: nor is its cut
                cuts = {path: cut for path, cut in cuts.items() if path[0] in select}
            if cuts:  # the embedded lists a `limit` cut: one notice each, after the children's blocks
                embeds.extend(ui_helpers.summary(_cut_notice(path, cut)).render() for path, cut in cuts.items())
        for block in ui_blocks:
            if not isinstance(block, UIBlock):
                raise PresenterError(f"presenter {self.name!r}: its ui callback returned a {type(block).__name__}, "
                                     "not a UI block (build blocks with mcpfusion.ui: ui.markdown(text), ...)")
        for made in suggestions:
            if not isinstance(made, Suggestion):
                which = "collection_suggest" if self._collection_suggest is not None and isinstance(
                    data, _SEQUENCES) else "suggest"
                raise PresenterError(f"presenter {self.name!r}: its {which} callback returned a "
                                     f"{type(made).__name__}, not a suggestion (build them with suggest(action, "
                                     "reason))")
        removed: list[Any] = []
        # The values of embedded children that opted out of the guard for their own blocks: guarded everywhere
        # else (this presenter's blocks, the data) when this one did not opt out.
        loose: list[Any] | None = [] if self.embeds and self.guard_blocks else None
        tree = cache.redact
        if tree is False:
            tree = self._redactor()
        if tree is not None:
            try:
                tree(full, removed, loose)  # type: ignore[operator]
            except RedactionError:
                if sift is None and isinstance(data, _SEQUENCES):
                    return self._respond(data, ctx, select, functools.partial(self._unsendable, select), given)
                raise
        wire = select_keys(full, select) if select else full
        # Its view is the data as on the wire, plus rules, UI blocks, suggestions (render's lists, which hold
        # no None: the response takes them over).
        try:
            response = assemble(wire, self.pretty, ui_blocks, embeds, directives, rules, suggestions, rules_block)
        except UNWRITABLE as exc:  # e.g. a lone surrogate in a string (from a JSON column): JSON cannot carry it
            if sift is None and isinstance(data, _SEQUENCES):
                return self._respond(data, ctx, select, functools.partial(self._unsendable, select), given)
            raise self._unwritable(exc) from None
        if select:  # a handler's `attach` callable sees the data before `_select`, as `self._attach` does
            response.view.presented = full
        if parts is None:
            response.view.sources = rendered.sources
            if rendered.truncated is not None:  # REST says it in its `Truncated` header, as for an egress cut
                response.view.truncated = (*rendered.truncated, "rows")
            if cuts:  # and an embedded list's cut in its `Truncated-Embedded` header
                response.view.embedded_truncated = {path: (cut.limit, cut.items, cut.hidden)
                                                    for path, cut in cuts.items()}
        every = removed
        if loose:
            start = 1 + len(ui_blocks)  # the children's own blocks: after the data and this one's UI blocks
            end = start + len(embeds)
            own = response.texts[start:end]
            every = removed + loose
            egress.guard(response, every, self.censor, pretty=self.pretty, keep=self._words)
            response.texts[start:end] = egress.scrub_blocks(own, removed, self.censor) if removed else own
        elif removed:
            egress.guard(response, removed, self.censor, pretty=self.pretty, keep=self._words)
        # For documents attached afterwards: a document the handler built from its own data writes its values
        # its own way (`str(datetime)`, the int it read) and may copy rows (or embedded items) this presenter
        # left out (`limit`, a row that does not fit), whose values no redaction removed here; `_Unsent` works
        # them out when a document is scrubbed. (`every` holds only what the tree removed: none without one.)
        if tree is not None:
            unsent = given is not None or parts is None and (
                bool(self.embeds) or rendered.sources is not None or rendered.truncated is not None)
            response.view.scrub = _Unsent(self, data if given is None else given, every, unsent)
        if self._attach is not None:
            # The data as presented before `_select`: a document may draw on a field the agent did not select.
            try:
                made = self._attach(full if select else response.view.data, ctx)
            except egress.CARRIED as exc:  # it may quote the real values it looked up, as any callback
                _scrub_raised(self, exc, data)
                raise
            items = [item for item in _as_list(made) if item is not None]
            scrub = response.view.scrub
            response.content = tuple(scrubbed(item, scrub) if scrub else item for item in items)
        return response

    def _unsendable(self, select: Collection[str] | None, item: Any) -> str | None:
        """Why one validated row of a list cannot be sent (None: it can): its redaction fails closed, or its
        data cannot be written as JSON. Tried on a copy, as `present` redacts and writes it."""
        sent = copy.deepcopy(item)
        tree = self._redactor() if self._cache.redact is False else self._cache.redact
        try:
            if tree is not None:
                tree(sent, None)  # type: ignore[operator]
        except RedactionError:
            return "a redacted path does not fit it"
        try:
            json_bytes(select_keys(sent, select) if select else sent)
        except UNWRITABLE:
            return "a value cannot be written as JSON"
        return None

    def __repr__(self) -> str:
        return f"Presenter({self.name!r})"


def _aliased_paths(model: Any, path: str) -> list[str]:
    """`path` with each field name written as the data has it (its serialization alias), following the types
    down as the redactor follows the data (see `_follow`: a dict's values and a list's items too, under `*`,
    `[*]` or a literal key; in a union, every member): one path per way of writing it, when members of a
    union write the same field under different names."""
    return _follow(model, path)[0]


def _own_writer(model: Any, path: str) -> str | None:
    """What writes the data along `path` its own way (a custom `model_serializer` of a model the path goes
    through, a serializer of a field it goes through to reach a deeper key), named; None: the data is written
    as the schema declares it, so the redactor finds the path (fail closed: it cannot follow a serializer)."""
    return _follow(model, path)[2]


def _same(one: Any, other: Any) -> bool:
    """Whether two censors are the same value (one group of paths)."""
    if one is other:
        return True
    try:
        return one.__class__ is other.__class__ and bool(one == other)
    except Exception:  # noqa: BLE001 - a censor whose comparison fails: its own group
        return False


class _Groups:
    """A presenter's redaction whose paths have several censors or guards (`redact_pii` called again with
    another censor): `compile_tree` takes one censor per presenter, so `_compiled` applies each group in turn,
    then the children. Duck-types `Node` for `empty`."""

    __slots__ = ("groups", "censor", "children")

    def __init__(self, groups: list[tuple[tuple[str, ...], Any, bool]], censor: Any,
                 children: Sequence[tuple[str, Any]]) -> None:
        self.groups, self.censor, self.children = groups, censor, tuple(children)

    def empty(self) -> bool:
        return all(not paths for paths, _, _ in self.groups) and all(child.empty() for _, child in self.children)


def _grouped(node: Any) -> bool:
    return isinstance(node, _Groups) or any(_grouped(child) for _, child in node.children)


def _compiled(node: Any, placed: tuple[Any, ...] | None = None) -> Redactor:
    """`compile_tree(node)`; a tree holding a presenter of several censors (`_Groups`, rare) as functions
    applied in turn: each group of paths compiled alone, then each child's value by embed key, in the order
    and with the errors `compile_tree`'s code has. Each part passes by the censors of the whole tree
    (`placed`), as one compiled tree does."""
    if not _grouped(node):
        return compile_tree(node, () if placed is None else placed)
    if placed is None:
        placed = censors_of(node)
    groups = node.groups if isinstance(node, _Groups) else [(node.paths, node.censor, node.guarded)]
    own = [compile_tree(Node(paths, censor, guarded, ()), placed) for paths, censor, guarded in groups if paths]
    children = [(key, _compiled(child, placed)) for key, child in node.children if not child.empty()]
    # A list or mapping censor a parent put here: nothing to look into, never edited (as `compile_tree`'s code).
    containers = tuple(censor for censor in placed if isinstance(censor, dict | list))

    def redact(data: Any, removed: list[Any] | None, loose: list[Any] | None = None) -> None:
        if containers and any(data is censor for censor in containers):
            return
        if data.__class__ is not dict and isinstance(data, list):
            for item in data:
                redact(item, removed, loose)
            return
        for tree in own:
            tree(data, removed, loose)
        if isinstance(data, dict):
            for key, sub in children:
                value = data.get(key)
                if value is not None:
                    sub(value, removed, loose)

    return redact


def _embedded_in(presenter: Presenter) -> set[Presenter]:
    """Every presenter `presenter` embeds, at any depth."""
    found: set[Presenter] = set()
    todo = list(presenter.embeds.values())
    while todo:
        child = todo.pop()
        if child not in found:
            found.add(child)
            todo.extend(child.embeds.values())
    return found


_PLAIN_VALUES = (str, bytes, int, float, Decimal, UUID, date, time, timedelta, Enum, PurePath)  # (bool: an int)


def _scalar(annotation: Any) -> bool:
    """Whether a field of this type holds only plain values (a text, a number, a date...), never an object or
    a list an embedded presenter could render: `str`, `int | None`, `Literal["a", "b"]`..."""
    if get_origin(annotation) is Annotated:
        return _scalar(get_args(annotation)[0])
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return bool(kinds) and all(map(_scalar, kinds))
    if get_origin(annotation) is Literal:
        return True
    return isinstance(annotation, type) and issubclass(annotation, _PLAIN_VALUES)


def _type_name(annotation: Any) -> str:
    return annotation.__name__ if isinstance(annotation, type) else repr(annotation).replace("typing.", "")


def _trusted(model: type[BaseModel] | None, key: str, child: Presenter) -> bool:
    """Whether `model` declares `key` as the model a plain `child` presents with (or a list of it, optionally
    None) and nothing of `model` rewrites it: then validating the item already made `item[key]` exactly what
    the child would make of the same raw value, and the child skips a second validation (invoice lines
    declared on the invoice). The child's model ignores extra keys; the declared one ignores or forbids them,
    so whatever passes the item's validation passes the child's, to the same fields."""
    target = child.item_model
    if model is None or target is None or not child._plain:
        return False
    field = model.model_fields.get(key)
    if field is None:
        return False
    if any(type(m).__module__ != "annotated_types" for m in field.metadata):
        return False  # a cast (BeforeValidator) or anything else that may rewrite the value
    decorators = model.__pydantic_decorators__
    if decorators.model_validators or decorators.model_serializers or decorators.root_validators:
        return False
    decorated: list[Any] = [*decorators.field_validators.values(), *decorators.field_serializers.values(),
                            *decorators.validators.values()]
    if any(key in d.info.fields or "*" in d.info.fields for d in decorated):
        return False
    annotation = field.annotation
    if isinstance(annotation, UnionType) or get_origin(annotation) is Union:
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) != 1:
            return False
        annotation = rest[0]
    if get_origin(annotation) is list:
        annotation = get_args(annotation)[0] if get_args(annotation) else None
    if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return False
    if annotation.model_config.get("extra") not in (None, "ignore", "forbid"):
        return False
    return target is annotation or (target.__bases__ == (annotation,) and target is stripping_model(annotation))


def _embedded(one: dict[str, Any], declared: dict[str, Any] | None) -> dict[str, Any]:
    """An embed's wire schema: a list of the child's items or one item, as the item model declares the field
    (its values passed that validation before the child renders them), `null` where it allows it; any of
    the three when the model does not say."""
    branches = declared.get("anyOf", [declared]) if isinstance(declared, dict) else []
    kinds = {b.get("type") for b in branches if isinstance(b, dict)}
    if kinds and kinds <= {"array", "null"} and "array" in kinds:
        shapes = [{"type": "array", "items": one}]
    elif kinds and kinds <= {"object", "null"} and "object" in kinds:
        shapes = [one]
    else:
        return {"anyOf": [one, {"type": "array", "items": one}, {"type": "null"}]}
    if "null" in kinds:
        shapes.append({"type": "null"})
    return shapes[0] if len(shapes) == 1 else {"anyOf": shapes}



# -- redaction paths followed through the schema's types (at declaration) ----------------------------------

_SCALARS = (str, bytes, bytearray, int, float, complex, Decimal, date, time, timedelta, UUID, Enum, PurePath)
_Way = tuple[str, Any, bool, str]  # (the path so far as the data writes it, the type there, reached by `*`, its name)


def _members(annotation: Any) -> list[Any]:
    """The types a value of `annotation` may have: a union's members, `Annotated` and `NewType` unwrapped, a
    RootModel as its root (how it is written); None left out (the redactor passes a None by)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin is Union or isinstance(annotation, UnionType):
        return [member for arg in get_args(annotation) for member in _members(arg)]
    if annotation is None or annotation is type(None):
        return []
    if hasattr(annotation, "__supertype__"):  # a NewType
        return _members(annotation.__supertype__)
    if isinstance(annotation, type) and issubclass(annotation, RootModel):
        return _members(annotation.model_fields["root"].annotation)
    return [annotation]


def _kind(member: Any) -> str:
    """What the redactor meets in the data for a value of this type: a 'model' (an object of known keys: a
    pydantic model, a dataclass, a TypedDict), a 'mapping', a 'list', a 'scalar', or 'unknown' (Any, object,
    anything the types say nothing of)."""
    origin = get_origin(member)
    if origin is Literal:
        return "scalar"
    cls = member if origin is None else origin
    if not isinstance(cls, type):
        return "unknown"
    if issubclass(cls, BaseModel):
        return "model" if origin is None else "unknown"
    if _record(cls):
        return "model"
    if issubclass(cls, _SCALARS):
        return "scalar"
    if issubclass(cls, Mapping):
        return "mapping"
    if issubclass(cls, Sequence | AbstractSet):
        return "list"
    return "unknown"


def _record(cls: Any) -> bool:
    """A dataclass or a TypedDict: pydantic writes it as an object of its fields, as it writes a model."""
    return is_typeddict(cls) or (dataclasses.is_dataclass(cls) and isinstance(cls, type))


def _values_of(mapping: Any) -> Any:
    """The type of a mapping's values (Any when it does not say)."""
    args = get_args(mapping)
    return args[1] if len(args) == 2 else Any


def _items_of(sequence: Any) -> list[Any]:
    """The types of a list's (tuple's, set's) items (Any when it does not say)."""
    args = [arg for arg in get_args(sequence) if arg is not Ellipsis]
    if get_origin(sequence) is tuple:
        return args or [Any]  # each position's type
    return args[:1] or [Any]


# (name, info, type, key as the data writes it, the names a path may give it)
_Field = tuple[str, Any, Any, str, tuple[str, ...]]
# Per dataclass and TypedDict class: per field, each (key as written, names) it is written with
_Records = dict[Any, dict[str, list[tuple[str, tuple[str, ...]]]]]


class _Unread:
    """The type of a dataclass's or TypedDict's field whose annotation could not be resolved here."""


def _fields(member: Any, records: _Records) -> list[_Field] | None:
    """The fields and computed fields of a model, a dataclass or a TypedDict, as the data writes them;
    None when the keys of a dataclass or a TypedDict cannot be told (refused: the path cannot be followed)."""
    if isinstance(member, type) and issubclass(member, BaseModel):
        found: list[tuple[str, Any, Any]] = [(key, info, info.annotation) for key, info in member.model_fields.items()]
        found += [(key, info, info.return_type) for key, info in member.model_computed_fields.items()]
        out: list[_Field] = []
        for key, info, annotation in found:
            wire = getattr(info, "serialization_alias", None) or info.alias or key
            names = _names(key, wire, info.alias, getattr(info, "validation_alias", None))
            out.append((key, info, annotation, wire, names))
        return out
    cls = get_origin(member) or member
    written = records.get(cls) or _standalone(member).get(cls)
    if not written:
        return None
    types = _record_types(member)
    unread: tuple[Any, Any] = (None, _Unread)
    return [(key, *types.get(key, unread), wire, names) for key, ways in written.items() for wire, names in ways]


def _names(key: str, wire: str, *aliases: Any) -> tuple[str, ...]:
    """The names a path may give a field: its own, its aliases (a validation alias's plain names too)."""
    names = [key, wire]
    for alias in aliases:
        if isinstance(alias, str):
            names.append(alias)
        else:  # AliasChoices (core schema: a list of paths), AliasPath: only a one-key name
            choices = getattr(alias, "choices", None) or (alias if isinstance(alias, list) else [])
            for choice in choices:
                path = getattr(choice, "path", choice)
                if isinstance(choice, str):
                    names.append(choice)
                elif isinstance(path, list) and len(path) == 1 and isinstance(path[0], str):
                    names.append(path[0])
    return tuple(dict.fromkeys(names))


_RECORDS: dict[Any, _Records] = {}  # `_written_records` of each model, once its schema is built


def _written_records(model: Any) -> _Records:
    """The keys pydantic writes each dataclass's and TypedDict's fields under inside `model`, read from its
    core schema: a dataclass or a TypedDict without a config of its own takes the enclosing model's (its
    alias generator), so the same class may be written two ways in two models."""
    found = _RECORDS.get(model)
    if found is None:
        try:
            core = model.__pydantic_core_schema__
        except Exception:  # noqa: BLE001 - a schema not built yet: each class is read alone (`_standalone`)
            return {}
        if not isinstance(core, dict):  # (pydantic's stand-in for a schema still to be built)
            return {}
        found = _RECORDS[model] = _records_in(core, {})
    return found


@functools.cache
def _standalone(member: Any) -> _Records:
    """`_written_records` of a dataclass or a TypedDict on its own (met where no enclosing schema says)."""
    try:
        return _records_in(TypeAdapter(member).core_schema, {})
    except Exception:  # noqa: BLE001 - pydantic cannot build it here: nothing is known, the path is refused
        return {}


def _records_in(node: Any, out: _Records) -> _Records:
    """Collect the `typed-dict` and `dataclass` schemas of a core schema, at any depth."""
    if isinstance(node, list):
        for item in node:
            _records_in(item, out)
        return out
    if not isinstance(node, dict):
        return out
    kind = node.get("type")
    if kind in ("typed-dict", "dataclass") and node.get("cls") is not None:
        body: Any = node
        while kind == "dataclass" and isinstance(body, dict) and body.get("type") != "dataclass-args":
            body = body.get("schema")  # (a dataclass's fields are in its `dataclass-args`, maybe wrapped)
        if isinstance(body, dict):
            fields = body.get("fields")
            entries = list(fields.items()) if isinstance(fields, dict) else [(f.get("name"), f) for f in fields or ()]
            written = out.setdefault(node["cls"], {})
            for key, entry in entries:
                wire = entry.get("serialization_alias") or key
                way = (wire, _names(key, wire, entry.get("validation_alias")))
                if way not in written.setdefault(key, []):
                    written[key].append(way)
            for entry in body.get("computed_fields") or ():
                key = entry.get("property_name")
                wire = entry.get("alias") or key
                way = (wire, _names(key, wire))
                if way not in written.setdefault(key, []):
                    written[key].append(way)
    for value in node.values():
        if isinstance(value, dict | list):
            _records_in(value, out)
    return out


@functools.cache
def _record_types(member: Any) -> dict[str, tuple[Any, Any]]:
    """(info, type) of each field of a dataclass or a TypedDict, a generic one's parameters given."""
    cls = get_origin(member) or member
    found: dict[str, tuple[Any, Any]] = {}
    own = getattr(cls, "__pydantic_fields__", None)  # a pydantic dataclass: its fields as pydantic reads them
    if isinstance(own, dict):
        found = {key: (info, info.annotation) for key, info in own.items()}
    else:
        try:
            hints = get_type_hints(cls, include_extras=True)
        except Exception:  # noqa: BLE001 - a name not resolvable here: its fields stay unread (`_Unread`)
            hints = {}
        for key, hint in hints.items():
            info = FieldInfo.from_annotation(hint)  # Annotated, Required, NotRequired, ReadOnly unwrapped
            found[key] = (info, info.annotation)
    decorators = getattr(cls, "__pydantic_decorators__", None)
    for key, computed in (decorators.computed_fields.items() if decorators is not None else ()):
        found[key] = (computed.info, computed.info.return_type)
    given = dict(zip(getattr(cls, "__parameters__", ()), get_args(member), strict=False))
    if given:
        found = {key: (info, _substituted(of, given)) for key, (info, of) in found.items()}
    return found


def _substituted(annotation: Any, given: dict[Any, Any]) -> Any:
    """A generic's field type with its parameters given (`list[T]` of `Box[int]` -> `list[int]`)."""
    if isinstance(annotation, TypeVar):
        return given.get(annotation, Any)
    parameters = getattr(annotation, "__parameters__", ())
    if not parameters:
        return annotation
    try:
        return annotation[tuple(given.get(p, Any) for p in parameters)]
    except TypeError:
        return Any


def _config(member: Any) -> Any:
    """The pydantic config of a model, a dataclass or a TypedDict (`{}` when it has none)."""
    cls = get_origin(member) or member
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return cls.model_config
    return getattr(cls, "__pydantic_config__", None) or {}


def _label(member: Any) -> str:
    return str(getattr(get_origin(member) or member, "__name__", member))


class _PathWalk:
    """What `_follow` met on its way: whether the types ran out somewhere (`unknown`: a value there may hold
    anything, so nothing further is refused), the first reason a way reaches no value (`miss`), the first
    serializer that writes the data its own way (`writer`), the first type it cannot see into although the
    data may write keys it does not know of (`blind`: refused, as a serializer is). `records`: how the
    dataclasses and TypedDicts of the schema are written (`_written_records`)."""

    __slots__ = ("unknown", "miss", "writer", "blind", "records")

    def __init__(self, records: _Records) -> None:
        self.unknown = False
        self.miss: str | None = None
        self.writer: str | None = None
        self.blind: str | None = None
        self.records = records

    def missed(self, reason: str) -> None:
        if self.miss is None:
            self.miss = reason

    def kind(self, member: Any, label: str) -> str:
        """`_kind`, noting a field whose type could not be read: a path going into it is refused."""
        if member is _Unread and self.blind is None:
            self.blind = (f"goes into the field {label!r}, whose type could not be resolved here (declare it "
                          "with types importable from its module, or as a pydantic model)")
        return _kind(member)

    def fields(self, member: Any) -> list[_Field]:
        """`_fields` of a model, a dataclass or a TypedDict; one whose keys cannot be told is noted (`blind`)."""
        found = _fields(member, self.records)
        if found is None:
            if self.blind is None:
                self.blind = (f"goes through {_label(member)}, whose keys as pydantic writes them could not be "
                              "worked out here (declare it as a pydantic model)")
            self.unknown = True
            return []
        return found

    def model(self, model: Any) -> None:
        decorators = getattr(get_origin(model) or model, "__pydantic_decorators__", None)
        if self.writer is None and decorators is not None and decorators.model_serializers:
            kind = "dataclass" if dataclasses.is_dataclass(get_origin(model) or model) else "model"
            self.writer = f"{kind} {_label(model)}'s custom model_serializer"
        if _config(model).get("extra") == "allow":
            self.unknown = True  # keys beyond its fields may be written

    def field(self, model: Any, key: str, info: Any) -> None:
        """A field the path goes through to a deeper key: a serializer of it may write other keys."""
        decorators = getattr(get_origin(model) or model, "__pydantic_decorators__", None)
        serializers = decorators.field_serializers.values() if decorators is not None else ()
        if self.writer is None and (
                any(key in s.info.fields or "*" in s.info.fields for s in serializers)
                or any(isinstance(m, PlainSerializer | WrapSerializer) for m in getattr(info, "metadata", ()))):
            self.writer = f"the serializer of {_label(model)}.{key}"

    def key(self, annotation: Any, name: str, star: bool, label: str, through: bool,
            root: bool) -> list[tuple[str, Any, str]]:
        """Where the key `name` leads from a value of `annotation`: (the key as written, its type, its name).
        Reached by `*` (`star`), a value that cannot take a key is passed by, as the redactor does, and a
        list's key is its objects' (`_walk`)."""
        out: list[tuple[str, Any, str]] = []
        for member in _members(annotation):
            kind = self.kind(member, label)
            if kind == "model":
                self.model(member)
                found = [(key, info, of, wire) for key, info, of, wire, names in self.fields(member)
                         if name in names]
                for key, info, of, wire in found:
                    if through:
                        self.field(member, key, info)
                    out.append((wire, of, key))
                if not found and _config(member).get("extra") == "allow":
                    out.append((name, Any, name))  # an extra key, written as named
                elif not found and not self.blind:
                    self.missed("names no field of its schema" if root else
                                f"names no field of {_label(member)!r} ({name!r} is none of its fields)")
            elif kind == "mapping":
                out.append((name, _values_of(member), name))  # a dict's key, as written
            elif kind == "list":
                if star:
                    for item in _items_of(member):
                        out += self.key(item, name, True, label, through, False)
                else:
                    self.missed(f"goes through the list {label!r} as through an object (write "
                                f"'{label}[*]' for its items)")
            elif kind == "scalar":
                if not star:
                    self.missed(f"goes through the scalar field {label!r}")
            else:
                self.unknown = True
                out.append((name, Any, name))  # followed on as written, unchecked
        return out

    def each(self, annotation: Any, star: bool, label: str) -> list[Any]:
        """The types of the items `[*]` leads to from a value of `annotation`."""
        out: list[Any] = []
        for member in _members(annotation):
            kind = self.kind(member, label)
            if kind == "list":
                out += _items_of(member)
            elif kind == "unknown":
                self.unknown = True
                out.append(Any)
            elif not star:
                self.missed(f"reads {label!r} as a list ([*]), which its schema does not declare")
        return out

    def every(self, annotation: Any, star: bool, label: str, through: bool) -> list[tuple[Any, str]]:
        """Where `*` leads from a value of `annotation`: every field of a model, every value of a mapping,
        every item of a list (its objects, for a key after it); (type, name) of each."""
        out: list[tuple[Any, str]] = []
        for member in _members(annotation):
            kind = self.kind(member, label)
            if kind == "model":
                self.model(member)
                for key, info, of, _, _ in self.fields(member):
                    if through:
                        self.field(member, key, info)
                    out.append((of, key))
            elif kind == "mapping":
                out.append((_values_of(member), label))
            elif kind == "list":
                if not through:
                    if not star:
                        self.missed(f"ends on the list {label!r} (write '{label}[*]' for its items)")
                else:
                    out += [(item, label) for item in _items_of(member)]
            elif kind == "scalar":
                if not star:
                    self.missed(f"goes through the scalar field {label!r}")
            else:
                self.unknown = True
                out.append((Any, label))
        return out


def _follow(model: Any, path: str, loose: Collection[str] = ()) -> tuple[list[str], str | None, str | None]:
    """A redaction path followed through the types of `model`'s data, step by step as `redaction._walk`
    follows the data: (the path as the data writes it, one per way of writing it; why it can reach no value,
    or None; what writes the data along it its own way, named, or None). A field's key becomes the key it is
    written under (its alias, quoted when it is no name: `["@email"]`); `*` and a dict's literal key stay as
    written. Where the types say nothing (Any, an untyped dict, an embedded child's key in `loose`, the root's
    `*`, which may reach a child embedded later) nothing is refused; a dataclass or a TypedDict whose keys or
    types cannot be told is."""
    is_model = isinstance(model, type) and issubclass(model, BaseModel)
    walk = _PathWalk(_written_records(model) if is_model else {})
    ways: list[_Way] = [("", model, False, "")]
    parts = segments(path)
    for position, (kind, name, lists) in enumerate(parts):
        brackets = "[*]" * lists
        through = position < len(parts) - 1
        if position == 0 and (kind == "any" or name in loose):
            walk.unknown = True
        moved: dict[tuple[str, int, bool, str], _Way] = {}
        for head, annotation, star, label in ways:
            steps: list[_Way]
            if kind == "any":
                steps = [(_joined(head, "*", position), of, True, key)
                         for of, key in walk.every(annotation, star, label, through or bool(lists))]
            elif kind == "key":
                steps = [(_joined(head, write_key(wire), position), of, False, key)
                         for wire, of, key in walk.key(annotation, str(name), star, label, through, position == 0)]
            else:  # a segment that is `[*]` alone
                steps = [(_joined(head, "", position), annotation, star, label)]
            for _ in range(lists):
                steps = [(written, item, False, key) for written, of, star_, key in steps
                         for item in walk.each(of, star_, key)]
            for written, of, star_, key in steps:
                moved.setdefault((written + brackets, id(of), star_, key), (written + brackets, of, star_, key))
        ways = list(moved.values())
        if not ways:
            break
    problem = walk.blind or (None if ways or walk.unknown else walk.miss or "reaches no value its schema declares")
    return list(dict.fromkeys(written for written, *_ in ways)), problem, walk.writer


def _joined(head: str, segment: str, position: int) -> str:
    return f"{head}.{segment}" if position else segment


# -- an error a presenter's callback raised ----------------------------------------------------------------


def _scrub_raised(presenter: Presenter, exc: Exception, data: Any) -> None:
    """Censor out of an error a callback raised (`censor.CARRIED`) the values the presenter's redaction
    removes from `data`, as validated and as the handler gave them (`_plain`: `str(datetime)`, the int it
    read): callbacks see the real values, and an error leaves without the egress guard. They are worked out
    again from the data (schemas and redaction, no callback): only a call that raised pays."""
    tree = presenter._cache.redact
    if tree is False:
        tree = presenter._redactor()
    if tree is None:
        return
    removed: list[Any] = []
    for raw in data if isinstance(data, _SEQUENCES) else [data]:
        item = _validated(presenter, raw)
        if item is None:
            continue  # it does not fit the schema: no callback saw it
        try:
            tree(item, removed, removed)  # type: ignore[operator]
        except RedactionError:
            removed.append(item)  # the redaction cannot say what it would remove: every value of it is kept out
        _raw_removed(presenter, tree, raw, removed, removed)
    egress.scrub_error(exc, removed, presenter.censor)


def _validated(presenter: Presenter, raw: Any, unfit: bool = False) -> Any:
    """`raw` as the callbacks saw it: validated by the schema, its embedded values by their children's
    schemas; None when it does not fit (no callback saw it then), or with `unfit` its plain copy
    (`_as_given`)."""
    try:
        item = presenter._validate([raw])[0][0]
    except PresenterError:
        return _as_given(presenter, raw) if unfit else None
    if presenter.embeds and isinstance(item, dict):
        for key, child in presenter.embeds.items():
            value = raw.get(key) if isinstance(raw, Mapping) else getattr(raw, key, None)
            if isinstance(value, _SEQUENCES):
                item[key] = [found for found in (_validated(child, v, unfit) for v in value) if found is not None]
            elif value is not None:
                item[key] = _validated(child, value, unfit)
    return item


def _as_given(presenter: Presenter, raw: Any) -> Any:
    """A value that does not fit the schema as plain JSON values (a copy) the redactor can look into
    (`_plain`)."""
    return to_jsonable_python(_plain(presenter, raw), fallback=repr)


# -- a row as the handler gave it, for the redactor -----------------------------------------------------------

_MISSING = object()
# What `_plain` made of each object of one row (by its id and the model it read it by), beside the object (kept
# alive: a property's fresh value must not leave its id to the next one). An object met again is read once
# (shared), or None when met inside itself (a cycle of an ORM's relationships): the copy is a tree.
_Made = dict[tuple[int, int], tuple[Any, Any]]


def _plain(presenter: Presenter, raw: Any, made: _Made | None = None) -> Any:
    """`raw` as the redactor can walk it (dicts and lists), its leaves the handler's own values (a datetime,
    the int it read): a mapping with its keys as given, a model or a dataclass by its fields, any other
    object by the schema's fields; each field of the schema written under every name a path may give it
    (its name, alias and serialization alias), read under every name the schema reads it (its validation
    alias, `AliasChoices`, `AliasPath`), from a mapping's keys or an object's attributes (`from_attributes`).
    Embedded values by their children's schemas."""
    made = {} if made is None else made
    item = _read(presenter.item_model, raw, made)
    if presenter.embeds and isinstance(item, dict):
        for key, child in presenter.embeds.items():
            value = _lookup(raw, (key,))
            if isinstance(value, _SEQUENCES):
                item[key] = [_plain(child, v, made) for v in value]
            elif value is not None and value is not _MISSING:
                item[key] = _plain(child, value, made)
    return item


def _read(model: Any, raw: Any, made: _Made) -> Any:
    """`raw` read by `model`'s fields (see `_plain`); a copy of it as it is without a model."""
    if model is None or raw is None or isinstance(raw, _SCALARS):
        return _copied(raw, made)
    seen = (id(raw), id(model))
    if seen in made:
        return made[seen][1]
    made[seen] = (raw, None)  # (until it is read: a cycle back to it ends there)
    if isinstance(raw, list | tuple | set | frozenset):
        item: Any = [_read(model, one, made) for one in raw]
    else:
        found = _copied(raw, made)
        item = found if isinstance(found, dict) else {}
        for key, field in model.model_fields.items():
            for way in _read_ways(key, field):
                value = _lookup(raw, way)
                if value is not _MISSING:
                    nested = _nested_model(field.annotation)
                    value = _copied(value, made) if nested is None else _read(nested, value, made)
                    item.update(dict.fromkeys(_written(key, field), value))
                    break
        if not item and found is raw:
            item = raw  # an object with none of the fields: as it is
    made[seen] = (raw, item)
    return item


def _written(key: str, field: FieldInfo) -> list[str]:
    """The names a path may give a field: its own, its alias, its serialization alias (the data's)."""
    return [name for name in (key, field.alias, field.serialization_alias) if name]


def _read_ways(key: str, field: FieldInfo) -> list[tuple[str | int, ...]]:
    """The keys (a path of them for `AliasPath`) the schema reads a field under, in the order it tries them."""
    ways: list[tuple[str | int, ...]] = []
    for alias in (field.validation_alias, field.alias, key):
        for choice in alias.choices if isinstance(alias, AliasChoices) else [alias]:
            if isinstance(choice, str):
                ways.append((choice,))
            elif isinstance(choice, AliasPath):
                ways.append(tuple(choice.path))
    return list(dict.fromkeys(ways))


def _lookup(raw: Any, way: tuple[str | int, ...]) -> Any:
    """The value at `way` in `raw`: a mapping's key, a list's index, an object's attribute; `_MISSING`."""
    value = raw
    for step in way:
        try:
            if isinstance(value, Mapping):
                value = value.get(step, _MISSING)
            elif isinstance(step, int):
                value = value[step] if isinstance(value, _SEQUENCES) and -len(value) <= step < len(value) \
                    else _MISSING
            else:
                value = getattr(value, step, _MISSING)
        except Exception:  # noqa: BLE001 - an attribute that fails to load (an ORM's) holds nothing to read
            return _MISSING
        if value is _MISSING:
            return value
    return value


def _nested_model(annotation: Any) -> Any:
    """The pydantic model a field's value is read by (`Address`, of `list[Address] | None` too), or None."""
    if isinstance(annotation, type):
        return annotation if issubclass(annotation, BaseModel) else None
    for arg in get_args(annotation):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def _copied(value: Any, made: _Made) -> Any:
    """`value` with its mappings, sequences, models and dataclasses as dicts and lists (a copy the redactor
    may edit), any other value as it is."""
    if value is None or isinstance(value, _SCALARS):
        return value
    seen = (id(value), 0)
    if seen in made:
        return made[seen][1]
    made[seen] = (value, None)  # (until it is copied: a cycle back to it ends there)
    copied: Any = value
    if isinstance(value, list | tuple | set | frozenset):
        copied = [_copied(v, made) for v in value]
    elif isinstance(value, Mapping):
        copied = {k: _copied(v, made) for k, v in value.items()}
    elif isinstance(value, BaseModel):  # by its fields, under each name a path may give them
        copied = {}
        for key, field in type(value).model_fields.items():
            copied.update(dict.fromkeys(_written(key, field), _copied(getattr(value, key, None), made)))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        copied = {field.name: _copied(getattr(value, field.name, None), made) for field in dataclasses.fields(value)}
    made[seen] = (value, copied)
    return copied


def _raw_removed(presenter: Presenter, tree: Any, raw: Any, removed: list[Any], loose: list[Any] | None) -> None:
    """The values the redaction removes from `raw` as the handler gave it (`_plain`), to `removed`: the forms
    its own values write (`str(datetime)`, the int it read), which a copy it made may hold. What it cannot
    walk so adds nothing more: the validated values are censored already. Given as their leaves (a mapping's
    keys too): a row as given may share or loop where JSON cannot."""
    plain = _plain(presenter, raw)
    if not isinstance(plain, dict | list):
        return
    found: list[Any] = []
    with contextlib.suppress(RedactionError):
        tree(plain, found, None if loose is None else found)
    seen: set[int] = set()
    while found:
        value = found.pop()
        if isinstance(value, dict | list):
            if id(value) not in seen:
                seen.add(id(value))
                # (a removed mapping's keys as the guard takes them: short ones are words)
                found.extend(value if isinstance(value, list) else [
                    *value.values(), *(k for k in value if isinstance(k, str) and len(k) >= egress.MIN_LENGTH)])
        else:
            removed.append(value)


def _given(presenter: Presenter, data: Any, unsent: bool = True) -> list[Any]:
    """The values the presenter's redaction removes (as `_respond` gathers them) from every row (and embedded
    item) of the handler's `data` as the handler gave it (`_raw_removed`) and, with `unsent` (some may not have
    been sent: cut by a `limit`, left out), as validated; one that does not fit is looked into as given, and
    whole when its redaction fails (every value of it kept out)."""
    tree = presenter._cache.redact
    if tree is False:
        tree = presenter._redactor()
    found: list[Any] = []
    if tree is None:
        return found
    loose = found if presenter.embeds and presenter.guard_blocks else None
    for raw in data if isinstance(data, _SEQUENCES) else [data]:
        if unsent:
            item = _validated(presenter, raw, unfit=True)
            try:
                tree(item, found, loose)  # type: ignore[operator]
            except RedactionError:
                found.append(item)
        _raw_removed(presenter, tree, raw, found, loose)
    return found


class _Unsent(egress.Scrubber):
    """The scrubber (`censor.Scrubber`) of a presenter's response: it censors, besides the values removed
    from the data sent, those of every row the handler gave as it gave them (`_given`), worked out on first
    use: most responses attach no document."""

    __slots__ = ("presenter", "data", "unsent")

    def __init__(self, presenter: Presenter, data: Any, removed: list[Any], unsent: bool) -> None:
        # (`Scrubber.__init__`'s fields set here: one call less on every response that redacts)
        self._removed, self._censor, self._needles = removed, presenter.censor, None
        self.presenter, self.data, self.unsent = presenter, data, unsent

    def more(self) -> list[Any]:
        data, self.data = self.data, None  # (not kept alive by the response any longer)
        return _given(self.presenter, data, self.unsent)
