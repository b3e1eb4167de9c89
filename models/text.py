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


_REFUSED = AfterValidator(no_nul)
Text = Annotated[str, _REFUSED]
# For a field whose annotation stays `str | None` (an input model a declaration for the type checker mirrors).
OptionalText = Annotated[str | None, _REFUSED]
