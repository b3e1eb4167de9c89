"""Calling user functions (resources, prompts, completions) with the arguments they declare."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


async def invoke(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Call a sync or async function; awaitable results are awaited."""
    value = fn(**kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


def accepted_kwargs(fn: Callable[..., Any], values: dict[str, Any]) -> dict[str, Any]:
    """The subset of `values` that `fn` accepts (all of them when it takes **kwargs)."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(values)
    return {k: v for k, v in values.items() if k in params}
