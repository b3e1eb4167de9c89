"""Calling user functions (resources, prompts, completions) with the arguments they declare."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def context_param(fn: Callable[..., Any]) -> str | None:
    """Name of the parameter annotated `Context` (by class name, so this module imports nothing)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    for name, param in sig.parameters.items():
        ann = param.annotation
        ann_name = ann if isinstance(ann, str) else getattr(ann, "__name__", "")
        if ann_name == "Context":
            return name
    return None


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
