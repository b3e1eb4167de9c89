"""TOON encoding (pipe-delimited) for payloads and tool descriptions.

Encoding uses the Rust-backed `toons` (about 5x faster than `json.dumps` on uniform rows, measured in
bench/presenter.py); the official `toon-format` package is the strict decoder the tests check against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import toons

DELIMITER = "|"


def encode(data: Any) -> str:
    """`data` as TOON with the pipe delimiter: uniform collections collapse to one header and rows."""
    return toons.dumps(data, delimiter=DELIMITER)


def action_table(rows: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """The root TOON table `[N|]{action|desc|required}:` of a grouped tool description.

    Every row carries all three keys (empty strings included) so the table stays uniform and tabular.
    """
    return encode([{"action": a, "desc": d, "required": ",".join(r)} for a, d, r in rows])


def describe(description: str, rows: Sequence[tuple[str, str, Sequence[str]]]) -> str:
    """`{description}. Select operation via the `action` parameter.` + blank line + the action table."""
    head = description.strip().rstrip(".")
    lead = f"{head}. " if head else ""
    return f"{lead}Select operation via the `action` parameter.\n\n{action_table(rows)}"
