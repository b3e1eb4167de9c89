"""What a presenter does, for the docs: fields, rules, redaction, UI block types, suggestions, limit, embeds.

UI blocks, suggestions and function rules are only known by running the presenter's callbacks, so they are
rendered (read-only) on sample items built from the presenter's own schema. Samples cycle through enum
values, and through the values the callbacks compare a field with (`inv["status"] == "overdue"`), so
conditional blocks (e.g. a reminder suggested for `overdue` invoices) show up.

The docs are public and show what the agent would see: what is rendered passes the egress guard a call
passes (`mcpfusion.censor`), so a rule quoting a redacted field shows the censor; and a value read from a
callback's source is never planted into a field the redaction reaches (a literal of the code is no sample).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import linecache
import logging
import re
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from .. import censor as egress
from ..presenter import _PARTS, Presenter
from ..redaction import DEFAULT_CENSOR, Node, compile_tree, segments, write_key
from ..response import Suggestion
from ..ui import UIBlock
from . import samples
from .schema_table import rows

logger = logging.getLogger("mcpfusion.docs")
_MAX_VARIANTS = 6
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,129}")  # a suggestion's action the guard keeps (`censor._ACTION`)


def sample_item(presenter: Presenter, variant: int = 0, masks: tuple[str, ...] = ()) -> dict[str, Any]:
    """One raw item that fits the presenter's schema (embeds get a list of two child items); past variant 0,
    a field its callbacks test takes the values they test it against in turn, unless the redaction reaches
    it (its own paths, or `masks`: a parent's paths going on into this item): the docs are public, and a
    literal of the code (`e["email"] == "ceo@corp.example"`) is no sample of a redacted value."""
    paths = (*presenter.redact_paths, *masks)
    item: dict[str, Any] = {}
    if presenter.item_model is not None:
        schema = presenter.item_model.model_json_schema()
        misfits: list[tuple[str, Any]] = []
        passed: list[tuple[str, Any]] = []
        for _ in range(_MAX_REFUSALS):  # each try passes over the examples the model refused in the last
            used: list[tuple[str, Any]] = []
            item = samples.sample(schema, schema, variant=variant, misfits=misfits, passed=passed, used=used) or {}
            refused = [r for r in _refused_examples(presenter, item, used) if r not in passed]
            if not refused:
                break
            passed += refused
        _warn_misfits(presenter, misfits)
        _warn_misfits(presenter, passed, "is refused by the model's validators")
        if variant:
            hidden = _reached(presenter, paths)
            for key, values in tested_values(presenter).items():
                if key in item and key not in hidden and None not in hidden:
                    item[key] = values[(variant - 1) % len(values)]
    for key, child in presenter.embeds.items():
        item[key] = [sample_item(child, variant + i, _inside(paths, key)) for i in range(2)]
    return item


_WARNED: set[tuple[str, str, str]] = set()


def _warn_misfits(presenter: Presenter, misfits: list[tuple[str, Any]],
                  why: str = "does not fit the field") -> None:
    """One line per example of a field that does not fit the field, or that the model's validators refuse
    (`why`; the author's mistake, not a failure: the sample takes another value), once per process: every page
    and export samples the presenter again."""
    for field, example in misfits:
        key = (presenter.name, field, repr(example))
        if key not in _WARNED:
            _WARNED.add(key)
            logger.warning("presenter %r: field %r: example %r %s; the docs sample another value",
                           presenter.name, field, example, why)


#: How many times a sample is made again past the examples the model's validators refused (each time, one or
#: more of them more: a bound, not a count of fields).
_MAX_REFUSALS = 8


def _refused_examples(presenter: Presenter, item: dict[str, Any],
                      used: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """The examples of `used` the presenter's model refuses in `item` (a `field_validator` raising ValueError
    on a value its JSON schema allows): as (property name, example), by the errors' locations and inputs. A
    refusal of no example (a generated value, a model validator) is left to the render, which reports it."""
    model: Any = presenter.item_model
    try:
        model.__pydantic_validator__.validate_python(item, by_name=True)
    except ValidationError as exc:
        refused: list[tuple[str, Any]] = []
        for error in exc.errors(include_url=False):
            names = [part for part in error["loc"] if isinstance(part, str)]
            # (the innermost name the sample took an example under: a list's items sample under its own name)
            found = next(((n, error.get("input")) for n in reversed(names) if (n, error.get("input")) in used), None)
            if found is not None and found not in refused:
                refused.append(found)
        return refused
    except Exception:  # a validator raising something else: the render says it, as of any failing sample
        return []
    return []


def _reached(presenter: Presenter, paths: tuple[str, ...]) -> set[str | None]:
    """The item's keys the redaction paths reach (None: every key: `*`, or the item whole), each field under
    its name and its aliases (a path may name either)."""
    keys: set[str | None] = set()
    for path in paths:
        kind, name, lists = segments(path)[0] if path else ("none", None, 0)
        if kind == "key":
            keys.add(name)
        elif kind == "none" or lists or len(segments(path)) == 1:  # (`*.ssn` reaches only into objects)
            keys.add(None)
    fields = getattr(presenter.item_model, "model_fields", None) or {}
    for name, info in fields.items():
        names = {name, *(a for a in (info.alias, info.serialization_alias, info.validation_alias)
                         if isinstance(a, str))}
        if keys & names:
            keys |= names
    return keys


def _inside(paths: tuple[str, ...], key: str) -> tuple[str, ...]:
    """What of the redaction paths goes on into the items of the embed at `key` (`lines[*].card`: `card`;
    "": each item whole)."""
    inner: list[str] = []
    for path in paths:
        first, *rest = segments(path) if path else [("none", None, 0)]
        if first[0] == "any" or first[:2] == ("key", key):
            inner.append(".".join((write_key(n) if k == "key" and n is not None else "*" if k == "any" else "")
                                  + "[*]" * lists for k, n, lists in rest))
    return tuple(inner)


def _masking(masks: tuple[str, ...]) -> Callable[[Any, list[Any]], None] | None:
    """The parents' redaction going on into this presenter's data (`_inside`), as a function adding the values
    it takes out to `removed` (None: no parent redacts in here)."""
    if not masks:
        return None
    paths = [m for m in masks if m]
    tree = compile_tree(Node(paths, DEFAULT_CENSOR, True, ())) if paths else None

    def take(data: Any, removed: list[Any]) -> None:
        if tree is None or len(paths) < len(masks):  # a parent hides the item whole: every value of it
            removed.append(data)
        else:
            tree(data, removed, None)

    return take


def variants(presenter: Presenter) -> int:
    """How many distinct samples cover the enums of the schema and the tested values (at least 3)."""
    widest = max((len(v) + 1 for v in tested_values(presenter).values()), default=0)
    for row in rows(presenter.item_model.model_json_schema() if presenter.item_model else None):
        widest = max(widest, len(row["enum"] or ()))
    return max(3, min(widest, _MAX_VARIANTS))


def tested_values(presenter: Presenter) -> dict[str, list[Any]]:
    """Field -> the constants the presenter's callbacks compare it with (read from their source)."""
    found: dict[str, list[Any]] = {}
    for name in ("_rules", "_ui", "_suggest", "_collection_ui", "_collection_suggest", "_directives"):
        for callback in _parts(getattr(presenter, name, None)):
            for key, values in _compared(getattr(callback, "__mcpfusion_data_only__", callback)).items():
                found.setdefault(key, []).extend(v for v in values if v not in found.get(key, []))
    return found


def _parts(callback: Any) -> list[Any]:
    """The functions a callback is made of: the functions of each `rules()`, `ui()`, `suggest()`... call it
    composes (their source is what compares, not the wrapper's), else the callback itself; none for a list."""
    if not callable(callback):
        return []
    parts = getattr(callback, _PARTS, None)
    if not isinstance(parts, tuple):
        return [callback]
    return [found for part in parts for found in _parts(part)]


def _compared(fn: Any) -> dict[str, list[Any]]:
    """`x["key"] == const` (also `!=`, `in (...)`, `x.get("key")`) in the function's source."""
    code = getattr(fn, "__code__", None)
    try:
        tree = _module_ast(inspect.getsourcefile(fn) or "") if code is not None else None
    except (TypeError, OSError):  # a builtin or a callable object: nothing to read
        tree = None
    found: dict[str, list[Any]] = {}
    if tree is None or code is None:
        return found
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda | ast.FunctionDef | ast.AsyncFunctionDef) and _starts_at(node, code):
            for compare in (n for n in ast.walk(node) if isinstance(n, ast.Compare)):
                sides = [compare.left, *compare.comparators]
                for a, b in zip(sides, sides[1:], strict=False):
                    for key, const in ((_key(a), _constants(b)), (_key(b), _constants(a))):
                        if key is not None:
                            found.setdefault(key, []).extend(c for c in const if c not in found[key])
    return {k: v for k, v in found.items() if v}


def _starts_at(node: ast.AST, code: Any) -> bool:
    lines = {getattr(node, "lineno", -1), *(d.lineno for d in getattr(node, "decorator_list", []))}
    return code.co_firstlineno in lines


@functools.lru_cache(maxsize=64)
def _module_ast(filename: str) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return None


def _key(node: ast.AST) -> str | None:
    """The field a node reads: `item["key"]` or `item.get("key")`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.args[0].value
    return None


def _constants(node: ast.AST) -> list[Any]:
    if isinstance(node, ast.Constant) and node.value is not None:
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value is not None]
    return []


def sample_items(presenter: Presenter, count: int | None = None, masks: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [sample_item(presenter, i, masks) for i in range(count if count is not None else variants(presenter))]


def many(action: Any) -> bool | None:
    """Whether `action` answers a list (True), one object (False) or either (None): what to sample."""
    return True if action.paginate else action.output.many


def _renders(presenter: Presenter, ctx: Any, many: bool | None,
             masks: tuple[str, ...] = ()) -> tuple[list[Any], str | None]:
    """The presenter rendered (and guarded) on samples of the shape the action returns (either shape when
    unknown): every render that worked, and the first error's class when no shape rendered whole (a callback
    needing real data); the error itself is logged. `masks`: a parent's redaction paths going on into it."""
    items = sample_items(presenter, masks=masks)
    inherited = _masking(masks)
    samples: dict[bool, list[Any]] = {False: items, True: [items[: presenter.max_items or None]]}
    done: list[Any] = []
    error: str | None = None
    whole = False
    for shape in ([many] if many is not None else [False, True]):
        failed = False
        for data in samples[shape]:
            try:
                done.append(_guarded(presenter, presenter.render(data, ctx), inherited))
            except Exception as exc:  # a callback that needs real dependencies: say so rather than fail the page
                # The text stays in the server's log: it may hold a secret (a database URL), and the page is public.
                logger.log(logging.DEBUG if error else logging.WARNING,
                           "presenter %s could not render a sample for the docs", presenter.name, exc_info=True)
                error, failed = error or sample_failure(exc), True
        whole = whole or not failed
    return done, None if whole else error


def _guarded(presenter: Presenter, rendered: Any,
             inherited: Callable[[Any, list[Any]], None] | None = None) -> Any:
    """The render with the real values the presenter's redaction takes out of its data censored out of its
    rules, UI blocks, suggestions and directives, as the egress guard censors a call's blocks
    (`Presenter._respond`: its own guarded paths' values, and its embeds' that opted out when it did not);
    and those a parent's redaction takes out of it (`inherited`), as the parent's guard does."""
    removed: list[Any] = []
    loose: list[Any] | None = [] if presenter.embeds and presenter.guard_blocks else None
    if inherited is not None:
        inherited(rendered.data, removed)
    tree = presenter._redactor() if presenter._cache.redact is False else presenter._cache.redact
    if callable(tree):
        tree(rendered.data, removed, loose)  # (the sample's own copy: the docs read no data from it)
    every = removed + (loose or [])
    if not every:
        return rendered

    def scrub(texts: list[str]) -> list[str]:
        return egress.scrub_blocks(texts, every, presenter.censor) if texts else texts

    rendered.rules = scrub(rendered.rules)
    rendered.directives = scrub(rendered.directives)
    titles = scrub([b.title for b in rendered.ui_blocks if b.title is not None])
    rendered.ui_blocks = [b if b.title is None else _titled(b, titles.pop(0)) for b in rendered.ui_blocks]
    reasons = scrub([s.reason for s in rendered.suggestions])
    # An action that is no name was built from data (`suggest(f"mail.{email}", ...)`): guarded like a reason.
    actions = [s.action if _NAME.fullmatch(s.action) else scrub([s.action])[0] for s in rendered.suggestions]
    rendered.suggestions = [Suggestion(a, r) for a, r in zip(actions, reasons, strict=True)]
    return rendered


def _titled(block: UIBlock, title: str) -> UIBlock:
    return block if block.title == title else dataclasses.replace(block, title=title)


def sample_failure(exc: BaseException) -> str:
    """What the docs say of a callback that failed on sample data: the exception's class, never its text."""
    return f"{type(exc).__name__} (details in the server log)"


def describe(presenter: Presenter, ctx: Any = None, many: bool | None = None,
             masks: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON-able description of `presenter` (and, recursively, of its embedded children), sampled as the
    action answers: one object (`many` False), a list (True), or both (None). `masks`: the redaction paths of
    its parents going on into its data (`_inside`), guarded as its own."""
    paths = (*presenter.redact_paths, *masks)
    info: dict[str, Any] = {
        "name": presenter.name,
        "fields": rows(presenter.item_schema()),
        "automatic_rules": list(presenter.auto_rules),
        "rules": [],
        "redacted_paths": list(presenter.redact_paths),
        "censor": presenter.censor if isinstance(presenter.censor, str | int | float | None) else "(custom)",
        "guard_blocks": presenter.guard_blocks,  # False: its UI blocks may show the redacted values
        "ui_blocks": [],
        "suggestions": [],
        "directives": [],
        "limit": presenter.max_items,
        "embeds": [{"key": k, "presenter": describe(c, ctx, masks=_inside(paths, k))}
                   for k, c in presenter.embeds.items()],
        "sample_error": None,
    }
    inherited = {r for e in info["embeds"] for r in e["presenter"]["automatic_rules"] + e["presenter"]["rules"]}
    inherited_suggestions = {(s["action"], s["reason"]) for e in info["embeds"] for s in e["presenter"]["suggestions"]}
    renders, info["sample_error"] = _renders(presenter, ctx, many, masks)
    seen_blocks: set[tuple[str, str | None]] = set()
    for rendered in renders:
        for rule in rendered.rules:
            if rule not in presenter.auto_rules and rule not in inherited and rule not in info["rules"]:
                info["rules"].append(rule)
        for block in rendered.ui_blocks:
            if (block.type, block.title) not in seen_blocks:
                seen_blocks.add((block.type, block.title))
                info["ui_blocks"].append({"type": block.type, "title": block.title})
        for s in rendered.suggestions:
            entry = {"action": s.action, "reason": s.reason}
            if (s.action, s.reason) not in inherited_suggestions and entry not in info["suggestions"]:
                info["suggestions"].append(entry)
        for d in rendered.directives:
            if d not in info["directives"]:
                info["directives"].append(d)
    return info
