"""Reading a grouped tool's action lines as an agent does: `get(id,status?:not c maxLength=5): ...` or the TOON
table's `params` column (see `mcpfusion.exposition.narrowed`)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import toon_format

_ROW = re.compile(r"^(\w+)\((.*?)\): ", re.MULTILINE)
_PART = re.compile(r'(?:"(?:[^"\\]|\\.)*"|[^\s"])+')
_KEYWORD = re.compile(r"^([A-Za-z]+)=(.*)$")


@dataclass
class Param:
    """One parameter of an action's line: required, and what the line adds to the merged schema."""

    required: bool
    values: list[Any] | None = None  # the values it takes (None: as the schema says)
    not_values: list[Any] | None = None  # or the schema's values but these
    keywords: dict[str, Any] = field(default_factory=dict)  # type, bounds, format, default


def _value(text: str) -> Any:
    """A value as the line writes it: JSON, or a bare word (a string)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _values(text: str) -> list[Any]:
    return [_value(v) for v in re.findall(r'"(?:[^"\\]|\\.)*"|[^|]+', text)]


def param(text: str) -> tuple[str, Param]:
    """`status?:not c maxLength=5` -> ("status", Param(False, not_values=["c"], keywords={"maxLength": 5}))."""
    head, _, note = text.partition(":")
    found = Param(required=not head.endswith("?"))
    parts = _PART.findall(note)
    if parts and parts[0] == "not":
        found.not_values, parts = _values(parts[1]), parts[2:]
    elif parts and not _KEYWORD.match(parts[0]):
        found.values, parts = _values(parts[0]), parts[1:]
    for part in parts:
        match = _KEYWORD.match(part)
        assert match, f"not a keyword=value: {part!r} in {text!r}"
        key, raw = match.groups()
        found.keywords[key] = raw.split("|") if key == "type" else _value(raw)
    return head.rstrip("?"), found


def _split(params: str) -> list[str]:
    """The parameters of a line, split at the commas outside JSON strings."""
    return [p for p in re.findall(r'(?:"(?:[^"\\]|\\.)*"|[^,"])+', params) if p]


def lines(entry: dict[str, Any]) -> dict[str, dict[str, Param]]:
    """Each action of a grouped entry: its parameters as its line says them."""
    text = entry["description"]
    if "]{action|desc|required}:" in text:
        rows = [(r["action"], r["required"]) for r in toon_format.decode(text.rsplit("\n\n", 1)[-1], strict=True)]
    else:
        rows = _ROW.findall(text)
    return {action: dict(param(p) for p in _split(params)) for action, params in rows}


def told(schema: dict[str, Any], found: Param) -> dict[str, Any]:
    """The schema an agent reads for one action: the merged parameter schema narrowed by the line."""
    extra: dict[str, Any] = {k: v for k, v in found.keywords.items() if k not in ("default", "type")}
    if "type" in found.keywords:
        extra["type"] = [*found.keywords["type"], "null"]  # the line says the type, `null` aside
    if found.values is not None:
        extra["enum"] = [*found.values, None]
    if found.not_values is not None:
        extra["not"] = {"enum": found.not_values}
    return {"allOf": [schema, extra]} if extra else schema


def described(text: str | None, actions: list[str]) -> dict[str, str | None]:
    """What each of `actions` (those taking one parameter of a grouped entry) reads in the parameter's
    description: all of it, or the parts `a,b: text` naming it (none when no part does)."""
    names = "|".join(re.escape(a) for a in sorted(actions, key=len, reverse=True))
    parts = re.split(rf"(?:^| )((?:{names})(?:,(?:{names}))*): ", text or "")
    if len(parts) == 1:
        return dict.fromkeys(actions, text)
    assert parts[0] == "", f"text before the first named part: {text!r}"
    read: dict[str, str | None] = dict.fromkeys(actions)
    for scope, part in zip(parts[1::2], parts[2::2], strict=True):
        for action in scope.split(","):
            assert read[action] is None, f"{action} named twice in {text!r}"
            read[action] = part
    return read
