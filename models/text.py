"""Text the agent sends for the service to store: what the database can hold.

PostgreSQL text cannot hold a NUL character (a query carrying one fails), and SQLite would keep one that
Postgres never could. Text to store is `Text`: one holding NUL is a validation error naming its field, before
any confirmation is asked or any query runs, and the schemas say so (a `pattern`: the OpenAPI document and the
tools' input schemas stay true). An id is looked up, not stored: the store answers one holding NUL as unknown.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

NO_NUL = r"^[^\x00]*$"


def no_nul(value: str | None) -> str | None:
    """`value` unchanged, unless it holds a NUL character (then a ValueError: the field's validation error,
    clearer than a pattern's)."""
    if value is not None and "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000)")
    return value


class _SaysNoNul:
    """The rule in the field's JSON schema (a pattern applies to strings only: null stays valid). Metadata of
    the type, not a `Field`: the field's own `Field()` (an input model's copy of an entity's) cannot drop it."""

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return {**handler(schema), "pattern": NO_NUL}


_REFUSED, _SAID = AfterValidator(no_nul), _SaysNoNul()
Text = Annotated[str, _REFUSED, _SAID]
# For a field whose annotation stays `str | None` (an input model a declaration for the type checker mirrors).
OptionalText = Annotated[str | None, _REFUSED, _SAID]
