"""The egress guard's cost against the rows of a list presented with `redact_pii` (each row removes a value
the guard looks for in the whole response), and where its one-scan path pays (`censor._FEW`, `_LONG`).

1. `present()` of n contacts, the email redacted: without redaction, with it (the guard), with it and a
   table of the list, with it and the email copied into a UI block per row and into another field. The
   per-row cost should stay flat as n grows (it grew with n: 187 µs a row at 16,000 rows).
2. Around the threshold: n needles looked for in a text of L characters that holds none of them, with the
   loop (one `in` per needle) and the one scan (building the automaton included).

Run: `python bench/censor_scale.py` (a minute or so; not part of `make bench`).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

from mcpfusion import Presenter, censor, ui

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import best  # noqa: E402


def contacts(n: int) -> list[dict[str, str]]:
    return [{"id": f"c{i}", "name": f"Customer number {i}", "email": f"person{i}@example.com",
             "note": f"reach me at person{i}@example.com"} for i in range(n)]


def table(items: list[dict[str, Any]]) -> Any:
    return ui.table(["id", "name"], [[i["id"], i["name"]] for i in items])


def presenters() -> dict[str, Presenter]:
    schema = {"id": str, "name": str, "email": str}
    return {
        "no redaction": Presenter("plain").schema(schema),
        "redact email": Presenter("redacted").schema(schema).redact_pii(["email"]),
        "redact + table": Presenter("table").schema(schema).redact_pii(["email"]).collection_ui(table),
        "redact + copies": (Presenter("copies").schema({**schema, "note": str}).redact_pii(["email"])
                            .ui(lambda c: ui.summary(f"Contact {c['email']}"))),
    }


def rows() -> None:
    print("present() of n rows, µs a row (best of 3)")
    for label, presenter in presenters().items():
        figures = []
        for n in (2000, 8000, 16000):
            data = contacts(n)
            figures.append(f"n={n}: {best(lambda: presenter.present([dict(r) for r in data]), 3) / n * 1e6:6.1f}")  # noqa: B023
        print(f"  {label:16s} " + "  ".join(figures))


def threshold() -> None:
    print(f"n needles in L characters holding none, ms (loop / one scan); the scan from n >= {censor._FEW} "
          f"in L >= {censor._LONG}")
    for n in (8, 32, 128, 1024):
        needles = [f"person{i}@example.com" for i in range(n)]
        cells = []
        for chars in (1024, 16384, 131072, 1048576):
            text = ("Customer number 12 [REDACTED] " * (chars // 30 + 1))[:chars]
            loop = statistics.median(best(lambda: any(x in text for x in needles), 3) for _ in range(3))  # noqa: B023
            scan = statistics.median(best(lambda: censor._Search(needles).any(text), 3) for _ in range(3))  # noqa: B023
            mark = "*" if censor._many(n, chars) else " "
            cells.append(f"L={chars:>7}: {loop * 1e3:7.3f} / {scan * 1e3:7.3f}{mark}")
        print(f"  n={n:5d} " + "  ".join(cells))
    print("  (* the guard takes the one scan)")


if __name__ == "__main__":
    rows()
    threshold()
