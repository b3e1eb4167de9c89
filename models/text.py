"""Text the agent sends for the service to store: what the database can hold.

PostgreSQL text cannot hold a NUL character (a query carrying one fails), and SQLite would keep one that
Postgres never could. Text to store is `Text`: one holding NUL is a validation error naming its field, before
any confirmation is asked or any query runs. The schemas do not carry the rule as a `pattern`: every agent
would pay its tokens on every tools/list for a character no real text holds, and the refusal is already a
clear, self-healing error. An id is looked up, not stored: the store answers one holding NUL as unknown.
"""

from __future__ import annotations

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
