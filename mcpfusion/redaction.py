"""PII redaction: field paths compiled once into a function that censors values in place.

Paths: `customer.email`, `*.ssn` (any key at that level), `lines[*].card` (every list item); a key that is
no name (`@email`, `2nd_email`, `E-mail Address`, `user.email`, `*`) is written as a JSON string in brackets:
`contact["user.email"]`, `["@email"]` (`write_key` writes a key so).
Fail closed: when an explicit path meets a value it cannot look into (a string where an object was
declared, an object where a list was declared) the call fails instead of sending what it could not check.
A censor an earlier path of the same tree put there is passed by instead (recognized by identity, never by
its text): a path under one that hid its value whole (`customer` then `customer.email`, a parent redacting an
embed key whose child redacts inside it) has nothing left to censor, in whichever order they run.
A `*` segment is a filter, not a declaration: the next segment applies to the matched values that can take
it (objects, or lists of objects, for a key) and other siblings are skipped (`*.ssn` beside a list of strings).

The redactor hands back the real values it removed, so that the egress guard (`censor.py`) can keep them out
of every other block of the response; `redact_schema` types the same paths as the censor in a JSON schema.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

DEFAULT_CENSOR = "[REDACTED]"
_NAME = re.compile(r"[A-Za-z_][\w-]*")
# A path's pieces: a name, `*`, `[*]`, a quoted key `["..."]` (a JSON string), the dot between segments.
_PIECE = re.compile(r'(?P<name>[A-Za-z_][\w-]*)|(?P<star>\*)|(?P<each>\[\*\])'
                    r'|\[(?P<quoted>"(?:[^"\\]|\\.)*")\]|(?P<dot>\.)')

Steps = tuple[tuple[str, str | None], ...]
Segment = tuple[str, str | None, int]  # ("key", its key | "any" for `*` | "none" for `[*]` alone, None, its `[*]`s)
# redact(data, removed, loose): the real values censored go to `removed`, those of presenters that opted out of
# the egress guard for their own blocks to `loose` (either may be None: not kept)
Redactor = Callable[..., None]


class RedactionError(Exception):
    """A redaction path could not be applied to the data; nothing may be sent."""


def write_key(key: str) -> str:
    """A key as a path segment: a name as it is, any other key quoted (`["user.email"]`)."""
    if _NAME.fullmatch(key):
        return key
    return f"[{json.dumps(key, ensure_ascii=False)}]"


def segments(path: str) -> list[Segment]:
    """`lines[*].card` -> [("key", "lines", 1), ("key", "card", 0)]; `a["b.c"]` -> [("key", "a", 0), ("key",
    "b.c", 0)]. A segment is a name, `*`, a quoted key or nothing, then any number of `[*]`; a quoted key may
    also follow a segment without the dot. ValueError for anything else."""
    if not isinstance(path, str):
        raise TypeError(f"a redaction path is a string, not {type(path).__name__} {path!r:.60}")
    found: list[list[Any]] = []
    position, head = 0, True  # head: a segment starts here (at the start, after a dot)
    while position < len(path):
        piece = _PIECE.match(path, position)
        if piece is None or (head and piece["dot"]) or (not head and (piece["name"] or piece["star"])):
            raise ValueError(f"invalid redaction path {path!r}: unexpected {path[position:position + 20]!r} at "
                             f"{position} (segments are names, `*`, `[*]` or a quoted key `[\"...\"]`, "
                             "joined by dots)")
        position = piece.end()
        if piece["dot"]:
            head = True
            continue
        if piece["each"]:
            if head:
                found.append(["none", None, 0])
            found[-1][2] += 1
        elif piece["quoted"]:
            try:
                key = json.loads(piece["quoted"])
            except ValueError:
                raise ValueError(f"invalid redaction path {path!r}: bad quoted key {piece['quoted']!r} (a JSON "
                                 "string)") from None
            found.append(["key", key, 0])
        else:
            found.append(["any", None, 0] if piece["star"] else ["key", piece["name"], 0])
        head = False
    if head:
        raise ValueError(f"invalid redaction path {path!r}: " + ("empty" if not path else "ends with a dot"))
    return [(kind, name, lists) for kind, name, lists in found]


def parse_path(path: str) -> Steps:
    """`lines[*].card` -> (("key", "lines"), ("each", None), ("key", "card")). A path ending in `[*]`
    (`phones[*]`, `shares[*]`) ends on its `each` step: each item censored whole, whatever it holds, as `.*`
    censors each value of a dict; `shares[*].*` goes on into each item (every value, its keys kept)."""
    steps: list[tuple[str, str | None]] = []
    for kind, name, lists in segments(path):
        if kind != "none":
            steps.append((kind, name))
        steps.extend(("each", None) for _ in range(lists))
    return tuple(steps)


def _fits(value: Any, kind: str) -> bool:
    """Whether a value matched by `*` can take the next step (else the wildcard skips it)."""
    if kind == "each":
        return isinstance(value, list)
    if kind == "key":
        return isinstance(value, dict) or (isinstance(value, list) and any(isinstance(v, dict) for v in value))
    return isinstance(value, dict | list)


def _placed(value: Any, censors: Sequence[Any]) -> bool:
    """Whether `value` is one of `censors` itself (a redaction put it there: it hides nothing more)."""
    return any(value is censor for censor in censors)


def _walk(node: Any, steps: Steps, i: int, censor: Any, path: str, removed: list[Any] | None,
          placed: Sequence[Any]) -> None:
    # A censor put here is passed by before anything looks inside it: a mapping or list censor is one object
    # shared by every call (and by the presenter it came from), never a value to edit.
    if node is None or _placed(node, placed):
        return
    kind, name = steps[i]
    last = i == len(steps) - 1
    if kind == "key":
        if isinstance(node, list) and i and steps[i - 1][0] == "any":
            for item in node:  # `*.ssn` on a list of objects: every object's ssn
                if isinstance(item, dict):
                    _walk(item, steps, i, censor, path, removed, placed)
            return
        if not isinstance(node, dict):
            raise RedactionError(f"redaction path {path!r} expected an object at {name!r}")
        if name not in node:
            return
        if last:
            if _placed(node[name], placed):
                return  # hidden whole by a path over it (`lines[*]` before `lines[*].card`): it stays so
            if removed is not None:
                removed.append(node[name])
            node[name] = censor
        else:
            _walk(node[name], steps, i + 1, censor, path, removed, placed)
    elif kind == "each":
        if not isinstance(node, list):
            raise RedactionError(f"redaction path {path!r} expected a list")
        for index, item in enumerate(node):
            if not last:
                _walk(item, steps, i + 1, censor, path, removed, placed)
            elif item is not None and not _placed(item, placed):
                # `phones[*]`, `shares[*]`: each item whole, a mapping or a list as a scalar (a mapping's keys
                # go to `removed` with it, as for a key path); a null item stays null, a censor stays.
                if removed is not None:
                    removed.append(item)
                node[index] = censor
    else:  # any: every value of an object or item of a list
        if isinstance(node, dict):
            if last:
                if removed is not None:
                    removed.extend(node.values())
                for key in node:
                    node[key] = censor
            else:
                after = steps[i + 1][0]
                for value in node.values():
                    if _fits(value, after):
                        _walk(value, steps, i + 1, censor, path, removed, placed)
        elif isinstance(node, list):
            if last:
                raise RedactionError(f"redaction path {path!r} ends on a list")
            after = steps[i + 1][0]
            for item in node:
                if _fits(item, after):
                    _walk(item, steps, i + 1, censor, path, removed, placed)


def _steps_path(path: str, steps: Steps, censor: Any,
                placed: Sequence[Any] = ()) -> Callable[[Any, list[Any] | None], None]:
    """`path` applied alone; a censor of `placed` (and its own) met where it looks inside is passed by."""
    censors = (censor, *(c for c in placed if c is not censor))

    def apply(node: Any, removed: list[Any] | None) -> None:
        _walk(node, steps, 0, censor, path, removed, censors)

    return apply


# -- a presenter tree's redaction as one function -------------------------------------------------------


class Node:
    """What a presenter redacts (its paths, censor, whether its removed values go to the egress guard) and
    its embedded children by key: the input of `compile_tree`."""

    __slots__ = ("paths", "censor", "guarded", "children")

    def __init__(self, paths: Sequence[str], censor: Any, guarded: bool, children: Sequence[tuple[str, Node]]) -> None:
        self.paths, self.censor, self.guarded, self.children = tuple(paths), censor, guarded, tuple(children)

    def empty(self) -> bool:
        """Nothing to censor here or below (such a subtree is left out: walking it changes nothing)."""
        return not self.paths and all(child.empty() for _, child in self.children)


def compile_tree(node: Node, placed: Sequence[Any] = ()) -> Redactor:
    """`redact(data, removed)` of a presenter and its embedded children as one generated function: the
    paths of plain keys (`customer.email`, the common case) written out step by step, a list of leaf
    children's items in one loop, the other paths (`*`, `[*]`) through `_walk`. The same result, order of
    removed values and errors as applying each presenter's paths in turn (own paths first, then each
    child's value by embed key: a list item by item, its lists as nested lists, a dict as itself). A censor
    of the tree (or of `placed`: the other parts of a tree compiled in parts) met where a path looks inside
    is passed by (see the module's docstring)."""
    censors = censors_of(node, placed)
    source = _Source(censors)
    name = source.tree(node)
    namespace = dict(source.names, RedactionError=RedactionError, _object=functools.partial(_object, placed=censors))
    exec(compile("\n".join(source.lines), f"<redaction tree {name}>", "exec"), namespace)  # noqa: S102
    return namespace[name]  # type: ignore[no-any-return]


def censors_of(node: Any, placed: Sequence[Any] = ()) -> tuple[Any, ...]:
    """The censors of a redaction tree (a `Node`; a presenter's several censors as `groups` of (paths,
    censor, guarded)) and of `placed`, each once (by identity); None left out (a path passes a None by)."""
    found: list[Any] = []
    censors = list(placed)
    todo = [node]
    while todo:
        item = todo.pop()
        censors += [item.censor, *(censor for _, censor, _ in getattr(item, "groups", ()))]
        todo += [child for _, child in item.children]
    for censor in censors:
        if censor is not None and not any(censor is c for c in found):
            found.append(censor)
    return tuple(found)


class _Source:
    """Writes `compile_tree`'s functions: one per presenter with embeds or met as a non-leaf child."""

    def __init__(self, placed: tuple[Any, ...] = ()) -> None:
        self.placed = placed  # the censors a path passes by (`censors_of`)
        self.lines: list[str] = []
        self.names: dict[str, Any] = {}
        self._count = 0
        # Globals naming them: every censor (a leaf holding one is left as it is), and those a path could look
        # inside (a mapping or a list: passed by before that). Usually strings, so no test of a node is added.
        self._censors = [self._bind("placed", censor) for censor in placed]
        self._containers = [name for name in self._censors if isinstance(self.names[name], dict | list)]

    def _not_placed(self, var: str, names: list[str]) -> str:
        """` and var is not c1 and ...`: the test of `var` being none of the censors `names` ("" for none)."""
        return "".join(f" and {var} is not {name}" for name in names)

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def _bind(self, prefix: str, value: Any) -> str:
        """A global of the generated code holding `value` (a censor, an applier, an error message)."""
        name = self._name(prefix)
        self.names[name] = value
        return name

    def tree(self, node: Node) -> str:
        """Define the function of `node`'s subtree; returns its name."""
        name = self._name("tree")
        body: list[str] = []
        self._apply(node, "data", body, "    ")
        # `x.__class__ is not dict and ...` before `isinstance`: the validated data is made of plain dicts,
        # and the class test costs less than the call.
        # Removed values with nobody to take them go to a list of this call alone (one test here, none per leaf).
        entry = []
        if self._containers:  # a censor a parent put at this embed's key: nothing to look into
            entry = [f"    if data is {' or data is '.join(self._containers)}:", "        return"]
        lines = [f"def {name}(data, removed, loose=None):", *entry,
                 "    if data.__class__ is not dict and isinstance(data, list):", "        for item in data:",
                 f"            {name}(item, removed, loose)", "        return", "    if removed is None:",
                 "        removed = []", "    if loose is None:", "        loose = []", *body]
        self.lines += [*lines, ""]
        return name

    def _apply(self, node: Node, var: str, out: list[str], pad: str) -> None:
        """Statements applying `node`'s own paths, then its children's, to `var` (not a list)."""
        censor = self._bind("censor", node.censor)
        run: list[tuple[str, list[str]]] = []  # consecutive key paths with the same parents: one walk
        for path in node.paths:
            steps = parse_path(path)
            if all(kind == "key" for kind, _ in steps):
                names = [str(key) for _, key in steps]
                if run and run[0][1][:-1] != names[:-1]:
                    self._keys(run, var, censor, node.guarded, out, pad)
                    run = []
                run.append((path, names))
                continue
            if run:
                self._keys(run, var, censor, node.guarded, out, pad)
                run = []
            applier = self._bind("path", _steps_path(path, steps, node.censor, self.placed))
            out.append(f"{pad}{applier}({var}, {'removed' if node.guarded else 'loose'})")
        if run:
            self._keys(run, var, censor, node.guarded, out, pad)
        children = [(key, child) for key, child in node.children if not child.empty()]
        if not children:
            return
        passed = self._not_placed(var, self._containers)
        out.append(f"{pad}if ({var}.__class__ is dict or isinstance({var}, dict)){passed}:")
        inner = pad + "    "
        for key, child in children:
            value, item = self._name("value"), self._name("item")
            if child.paths and not child.children:
                # A list of leaf children (invoice lines): their paths written into one loop.
                sub = self.tree(child)
                out += [f"{inner}{value} = {var}.get({key!r})",
                        f"{inner}if {value}.__class__ is list{self._not_placed(value, self._containers)}:",
                        f"{inner}    for {item} in {value}:", f"{inner}        if {item}.__class__ is list:",
                        f"{inner}            {sub}({item}, removed, loose)", f"{inner}        else:"]
                self._apply(child, item, out, inner + "            ")
                out += [f"{inner}elif {value} is not None:", f"{inner}    {sub}({value}, removed, loose)"]
            else:
                sub = self.tree(child)
                out += [f"{inner}{value} = {var}.get({key!r})", f"{inner}if {value} is not None:",
                        f"{inner}    {sub}({value}, removed, loose)"]

    def _keys(self, run: list[tuple[str, list[str]]], var: str, censor: str, guarded: bool, out: list[str],
              pad: str) -> None:
        """`_walk`'s steps for key paths of the same parents from `var`, written out: the parents walked once
        (what the first path meets there, the next ones meet too: only a leaf changes in between, and a
        JSON tree holds no cycle), then each leaf in turn."""
        first, names = run[0]
        current = var
        for index, name in enumerate(names):
            error = self._bind("error", f"redaction path {first!r} expected an object at {name!r}")
            # A plain dict in one test; None skipped; anything else but a dict refused (`_object`).
            # A mapping censor is passed by (`_object` says so) before anything looks inside it.
            plain = f"{current}.__class__ is dict{self._not_placed(current, self._containers)}"
            out.append(f"{pad}if {plain} or {current} is not None and _object({current}, {error}):")
            if index == len(names) - 1:
                break
            step = self._name("node")
            out += [f"{pad}    if {name!r} in {current}:", f"{pad}        {step} = {current}[{name!r}]"]
            pad += "        "
            current = step
        for _, path_names in run:
            leaf = path_names[-1]
            found = self._name("leaf")
            # A leaf a path over it hid whole (a censor there already) stays as it is, in whichever order.
            out.append(f"{pad}    if {leaf!r} in {current}:")
            out.append(f"{pad}        {found} = {current}[{leaf!r}]")
            out.append(f"{pad}        if True{self._not_placed(found, self._censors)}:")
            out.append(f"{pad}            {'removed' if guarded else 'loose'}.append({found})")
            out.append(f"{pad}            {current}[{leaf!r}] = {censor}")


def _object(value: Any, message: str, placed: Sequence[Any] = ()) -> bool:
    """True for a dict (`compile_tree`'s code has found it is not a plain one, or a censor's), False for a
    censor of `placed` (nothing left to look into, a mapping censor included); `RedactionError` otherwise."""
    if _placed(value, placed):
        return False
    if not isinstance(value, dict):
        raise RedactionError(message)
    return True


# -- the same paths on a JSON schema ----------------------------------------------------------------------


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema itself, or its anyOf/oneOf branches (Optional fields, embeds of item-or-list)."""
    for union in ("anyOf", "oneOf"):
        if isinstance(schema.get(union), list):
            return [b for s in schema[union] if isinstance(s, dict) for b in _branches(s)]
    return [schema]


def _censored(schema: dict[str, Any], censor: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"const": censor}
    if isinstance(censor, str):
        out["type"] = "string"
    if schema.get("description"):
        out["description"] = f"{schema['description']} (redacted)"
    return out


def _walk_schema(schema: dict[str, Any], steps: Steps, i: int, censor: Any) -> None:
    kind, name = steps[i]
    last = i == len(steps) - 1
    for branch in _branches(schema):
        if kind == "key":
            if i and steps[i - 1][0] == "any" and isinstance(branch.get("items"), dict):
                _walk_schema(branch["items"], steps, i, censor)
            props = branch.get("properties")
            if isinstance(props, dict) and isinstance(props.get(name), dict):
                if last:
                    props[name] = _censored(props[name], censor)
                else:
                    _walk_schema(props[name], steps, i + 1, censor)
            extra = branch.get("additionalProperties")
            if isinstance(extra, dict):  # a dict[str, X]: any key may be the one named
                if last:
                    branch["additionalProperties"] = {"anyOf": [extra, _censored(extra, censor)]}
                else:
                    _walk_schema(extra, steps, i + 1, censor)
        elif kind == "each":
            items = branch.get("items")
            if isinstance(items, dict):
                if last:
                    # `phones[*]`, `shares[*]`: each item censored whole (a null item stays null)
                    censored = _censored(items, censor)
                    nullable = any(b.get("type") == "null" for b in _branches(items))
                    branch["items"] = {"anyOf": [censored, {"type": "null"}]} if nullable else censored
                else:
                    _walk_schema(items, steps, i + 1, censor)
        else:
            targets = [s for s in (branch.get("properties") or {}).values() if isinstance(s, dict)]
            if isinstance(branch.get("additionalProperties"), dict):
                targets.append(branch["additionalProperties"])
            if isinstance(branch.get("items"), dict) and not last:
                targets.append(branch["items"])
            if last:
                for key, sub in list((branch.get("properties") or {}).items()):
                    branch["properties"][key] = _censored(sub, censor)
                if isinstance(branch.get("additionalProperties"), dict):
                    branch["additionalProperties"] = _censored(branch["additionalProperties"], censor)
            else:
                for sub in targets:
                    _walk_schema(sub, steps, i + 1, censor)


def redact_schema(schema: dict[str, Any], paths: Sequence[str], censor: Any = DEFAULT_CENSOR) -> dict[str, Any]:
    """A copy of an (inlined, `$ref`-free) JSON schema where every redacted path is typed as the censor."""
    out = copy.deepcopy(schema)
    for path in paths:
        _walk_schema(out, parse_path(path), 0, censor)
    return out


_STRING_RULES = ("minLength", "maxLength", "pattern", "format")


def unconstrained_strings(schema: Any) -> Any:
    """A copy of a JSON schema without the rules a string's content must meet (length, pattern, format)."""
    if isinstance(schema, dict):
        return {k: unconstrained_strings(v) for k, v in schema.items()
                if k not in _STRING_RULES or not isinstance(v, int | str)}
    if isinstance(schema, list):
        return [unconstrained_strings(v) for v in schema]
    return schema


def vocabulary(schema: Any) -> frozenset[str]:
    """The strings a JSON schema fixes (`enum` and `const` members, at any depth): the schema's own words,
    which the egress guard leaves in the data (a censored enum member would no longer fit the schema)."""
    words: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("const"), str):
                words.add(node["const"])
            if isinstance(node.get("enum"), list):
                words.update(v for v in node["enum"] if isinstance(v, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return frozenset(words)
