"""Text the agent sends for the service to store: what the database can hold.

PostgreSQL text cannot hold a NUL character (a query carrying one fails), and SQLite would keep one that
Postgres never could. Text to store is `Text`: one holding NUL is a validation error naming its field, before
any confirmation is asked or any query runs. The schemas do not carry the rule as a `pattern`: every agent
would pay its tokens on every tools/list for a character no real text holds, and the refusal is already a
clear, self-healing error. An id is looked up, not stored: the store answers one holding NUL as unknown.

A field's own length limits (`Annotated[Text, Field(min_length=3)]`) are a string's: "String should have at
least 3 characters", checked before the NUL rule, and `None` of an `OptionalText` passes them.
"""

from __future__ import annotations

import sys
from functools import partial
from types import FrameType
from typing import Annotated, Any

from annotated_types import MaxLen, MinLen
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticKnownError, core_schema


def no_nul(value: str | None) -> str | None:
    """`value` unchanged, unless it holds a NUL character (then a ValueError: the field's validation error)."""
    if value is not None and "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000)")
    return value


def _checked(value: str, low: int | None, high: int | None) -> str | None:
    """`value` within the field's length limits (a string's errors), then without NUL (`no_nul`)."""
    if low is not None and len(value) < low:
        raise PydanticKnownError("string_too_short", {"min_length": low})
    if high is not None and len(value) > high:
        raise PydanticKnownError("string_too_long", {"max_length": high})
    return no_nul(value)


def _beside(schema: CoreSchema, handler: GetJsonSchemaHandler, keys: list[str]) -> JsonSchemaValue:
    """The JSON schema the tools advertised before (their lock): the limits declared after an `OptionalText`
    beside its `anyOf`, where pydantic wrote them when it applied them around the NUL check."""
    json_schema = handler(schema)
    for branch in json_schema.get("anyOf", ()):
        if branch.get("type") == "string":
            json_schema.update({key: branch.pop(key) for key in keys if key in branch})
    return json_schema


class _Refused:
    """The NUL refusal of `Text`, with the string length limits the field declares after it.

    A validator wraps the string's schema, so pydantic applies a length limit that follows it (`Annotated[Text,
    Field(min_length=3)]`) to the wrapper as it would to any sized value: "Value should have at least 3 items
    after validation", and `len(None)` (a TypeError: an internal error) for an `OptionalText` sent as null.
    Those limits are checked here first, as the string's own; pydantic's generic check after them then never
    fails. The limits are read from the annotations pydantic is applying around this one (the handlers of its
    `_apply_annotations`, on the stack): no public hook tells a marker what follows it. Where none is found
    (another pydantic), the limits are pydantic's generic ones, as before.
    """

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        low, high = self._limits_after()
        schema = handler(source)
        check = partial(_checked, low=low, high=high)
        if schema["type"] != "nullable":
            return core_schema.no_info_after_validator_function(check, schema)
        # Nullable outside: pydantic applies the limits that follow to what it holds, so None skips them.
        hoisted = [key for key, limit in (("minLength", low), ("maxLength", high)) if limit is not None]
        return core_schema.nullable_schema(core_schema.no_info_after_validator_function(check, schema["schema"]),
                                           metadata={"pydantic_js_functions": [partial(_beside, keys=hoisted)]})

    def _limits_after(self) -> tuple[int | None, int | None]:
        """The largest `min_length` and smallest `max_length` among the annotations that wrap this one."""
        low: int | None = None
        high: int | None = None
        # (this method, then `__get_pydantic_core_schema__`: its caller applies this one)
        frame: FrameType | None = sys._getframe(2)
        if frame is None or frame.f_code.co_name != "new_handler" or frame.f_locals.get("annotation") is not self:
            return low, high
        frame = frame.f_back
        while frame is not None and frame.f_code.co_name in ("__call__", "new_handler"):
            annotation = frame.f_locals.get("annotation") if frame.f_code.co_name == "new_handler" else None
            if isinstance(annotation, MinLen):
                low = annotation.min_length if low is None else max(low, annotation.min_length)
            elif isinstance(annotation, MaxLen):
                high = annotation.max_length if high is None else min(high, annotation.max_length)
            frame = frame.f_back
        return low, high


_REFUSED = _Refused()
Text = Annotated[str, _REFUSED]
# For a field whose annotation stays `str | None` (an input model a declaration for the type checker mirrors).
OptionalText = Annotated[str | None, _REFUSED]
