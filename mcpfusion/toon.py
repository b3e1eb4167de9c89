"""TOON encoding (pipe-delimited) for payloads and tool descriptions.

Encoding uses the Rust-backed `toons` (about 5x faster than `json.dumps` on uniform rows, measured in
bench/presenter.py); the official `toon-format` package is the strict decoder the tests check against.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import toons

DELIMITER = "|"
BOM = "\ufeff"
# A parameter name written bare in a cell (as `exposition` writes a value bare): anything else (`x,y?`, `a:b`,
# a blank) is quoted, or `,` `?` and `:` would read as the cell's own marks.
_BARE_NAME = re.compile(r"[\w.-]+")


def encode(data: Any) -> str:
    """`data` as TOON with the pipe delimiter: uniform collections collapse to one header and rows."""
    text = toons.dumps(data, delimiter=DELIMITER)
    if text[:1] == BOM:
        # A root string `toons` left bare: a decoder drops a document's leading BOM (and reads a lone one as
        # an empty object), so it is quoted. Bare means it needed no escape.
        text = f'"{text}"'
    return text


def param_name(name: str) -> str:
    """A parameter's name as a cell writes it: bare, or quoted as JSON when it holds a mark of the cell."""
    return name if _BARE_NAME.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def params_cell(params: Sequence[str], required: Sequence[str], values: Mapping[str, str] | None = None) -> str:
    """An action's parameters in one cell: `id,note?` (a `?` marks an optional one), empty for none; `values`
    adds what some of them take after a colon (`status:draft|sent`). A name that is not a plain word is
    quoted (`"x,y"?`, see `param_name`)."""
    needed, notes = set(required), values or {}
    return ",".join(param_name(p) + ("" if p in needed else "?") + (f":{notes[p]}" if p in notes else "")
                    for p in params)


def action_table(rows: Sequence[tuple[str, str, str]]) -> str:
    """The root TOON table `[N|]{action|desc|required}:` of a grouped tool description: one row per action,
    its description, and what it takes (`required`, as `params_cell` writes it: the parameters to send, an
    optional one marked `?`), so the input schema need not repeat per parameter which action takes it.

    Every row carries all three keys so the table stays uniform and tabular.
    """
    return encode([{"action": a, "desc": d, "required": p} for a, d, p in rows])


def describe(description: str, rows: Sequence[tuple[str, str, str]]) -> str:
    """`{description}. Select operation via the `action` parameter.` + blank line + the action table."""
    head = description.strip().rstrip(".")
    lead = f"{head}. {SELECT_OPERATION}" if head else SELECT_OPERATION
    return f"{lead}\n\n{action_table(rows)}"


SELECT_OPERATION = "Select operation via the `action` parameter."
