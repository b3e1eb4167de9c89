"""Text the agent sends for the service to store: what the database can hold.

PostgreSQL text cannot hold a NUL character (a query carrying one fails), and SQLite would keep one that
Postgres never could. Text to store is `Text`: one holding NUL is a validation error naming its field, before
any confirmation is asked or any query runs. The schemas do not carry the rule as a `pattern`: every agent
would pay its tokens on every tools/list for a character no real text holds, and the refusal is already a
clear, self-healing error. An id is looked up, not stored: the store answers one holding NUL as unknown.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator


def no_nul(value: str | None) -> str | None:
    """`value` unchanged, unless it holds a NUL character (then a ValueError: the field's validation error)."""
    if value is not None and "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000)")
    return value


NO_NUL = AfterValidator(no_nul)
"""The NUL rule, last of a field that has length limits: `Annotated[str, Field(min_length=3), NO_NUL]`. Its
limits are then a string's ("String should have at least 3 characters") and None of an optional one passes
them; declared after it (`Annotated[Text, Field(min_length=3)]`), pydantic checks them as a generic length on
the validator's result ("at least 3 items after validation", and `len(None)` fails)."""
Text = Annotated[str, NO_NUL]
# For a field whose annotation stays `str | None` (an input model a declaration for the type checker mirrors).
OptionalText = Annotated[str | None, NO_NUL]


# Letters drawn as blanks (Hangul fillers, the blank Braille pattern): printable, yet nothing shows.
_DRAWN_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def shows(char: str) -> bool:
    """Whether a character shows on its own: a letter, a digit, a punctuation mark or a symbol (not a space, a
    control, a format character such as a zero-width space or a BOM, a combining mark or variation selector,
    which draw nothing alone), and not a letter drawn blank."""
    return unicodedata.category(char)[0] in "LNPS" and char not in _DRAWN_BLANK


def not_blank(value: str | None) -> str | None:
    """`value` unchanged, unless it holds nothing that shows (then a ValueError: the field's validation error):
    spaces alone, or what copies and pastes as blank (zero-width spaces, a BOM, no-break spaces, controls).
    A text the service keeps for people to read (a void's reason) must say something."""
    if value is not None and not any(map(shows, value)):
        raise ValueError("must say something: only spaces or invisible characters (such as U+200B) were sent; "
                         "write the text in words")
    return value


NOT_BLANK = AfterValidator(not_blank)
"""The rule of a text people read, after its length limits, beside `NO_NUL`: `Annotated[str, Field(min_length=3),
NO_NUL, NOT_BLANK]` (its limits stay a string's)."""
