"""Text as a reader sees it: the characters that would not show as themselves (controls, bidi overrides,
format characters) written as escapes (`\u202e`). A leaf every layer may use: the protocol engine's errors, the
REST problems, the docs page and the CLI quote what a caller or an application wrote through it.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from urllib.parse import quote

# Shown as `\u202e`, never as themselves: a C0/C1 control (NUL is an HTML parse error, ESC a terminal escape)
# and the bidi embeddings, overrides and isolates (U+202E shows the rest of a text reversed: a file name or an
# amount spoofed where a reader trusts it). Tabs and line breaks are kept: descriptions have lines.
_UNSEEN = str.maketrans({c: f"\\u{c:04x}" for c in (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20),
                                                      *range(0x7F, 0xA0), *range(0x202A, 0x202F),
                                                      *range(0x2066, 0x206A))})


def visible(text: str) -> str:
    """`text` with its control and bidi control characters written as escapes (`\u0000`, `\u202e`): the docs
    page and `mcpfusion inspect` show descriptions so."""
    return text if text.isprintable() else text.translate(_UNSEEN)


def visible_name(name: str) -> str:
    """A name the caller sent (an argument key, an action, a tool), as an error quotes it back: what `visible`
    escapes, and every other character not seen as itself, escaped the same way (`\u200b`, `\U000e0041`):
    tabs and line breaks (a name has no lines), format characters (bidi marks, zero-width spaces and joiners,
    tags) and lone surrogates. Letters of every script are kept (é, 中)."""
    return name if name.isprintable() else name.translate(_hidden())


def visible_path(path: str) -> str:
    """A request path as an error quotes it (a REST problem's `instance`, a URI reference): the characters
    `visible_name` escapes written as a URI writes them (`%E2%80%AE`), as the client may have sent them."""
    return path if path.isprintable() else path.translate(_hidden_in_uri())


@cache
def _hidden() -> dict[int, str]:
    """The escape of each character `visible_name` escapes (controls, format characters, surrogates, line and
    paragraph separators), read from `unicodedata` when a name first holds one: 20 ms not spent at import.
    Only planes 0, 1 and 14 hold characters of these categories (a test checks every plane)."""
    categories = ("Cc", "Cf", "Cs", "Zl", "Zp")
    return {c: f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"
            for plane in (0x00000, 0x10000, 0xE0000) for c in range(plane, plane + 0x10000)
            if unicodedata.category(chr(c)) in categories}


@cache
def _hidden_in_uri() -> dict[int, str]:
    return {c: quote(chr(c), safe="", errors="surrogatepass") for c in _hidden()}
