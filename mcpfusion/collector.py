"""The garbage collector of a serving process: the start-up heap moved out of its sight, and a young generation
sized for requests.

A server's import and start-up leave a large heap that lives as long as the process (modules, routes, pydantic
schemas, presenters: ~90k tracked objects for the reference service). CPython's full collection walks all of it,
and runs once enough objects have outlived two younger collections. Objects that a request keeps a little
while (finished spans waiting in a batch span processor's queue, cached pages) do: with CPython's young
generation of 700 objects they are walked by a young collection every few calls, promoted, walked again, and
bring on a full collection every few thousand calls, a pause of tens of milliseconds each.

The serving profile, once the app has started:

- `gc.freeze()` moves the start-up heap to the permanent generation: cycles made afterwards are still found,
  the start-up objects are never walked again (they are still freed as usual when their last reference goes);
- the young generation holds 7,000 objects (ten times CPython's default): a request's own objects die by
  reference count as before, and what it keeps a little while is usually gone before the collector looks.

Both are undone at shutdown. On with `MCPFUSION_GC_TUNING=1` (`mcpfusion serve` sets it unless it is set), or
`MCPFusion(gc_tuning=True)`; `MCPFUSION_GC_TUNING=0` switches it off.
"""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

ENV = "MCPFUSION_GC_TUNING"
YOUNG = 7000


def wanted(setting: bool | None) -> bool:
    """`setting` if given, else `MCPFUSION_GC_TUNING` (1, true, yes, on)."""
    if setting is not None:
        return setting
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def serving(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The app's lifespan `inner`, then the serving profile (after one collection, so that no garbage of
    start-up is kept); the start-up heap thawed and the thresholds put back at shutdown."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state:
            thresholds = gc.get_threshold()
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(YOUNG, thresholds[0]), *thresholds[1:])
            try:
                yield state
            finally:
                gc.set_threshold(*thresholds)
                gc.unfreeze()

    return lifespan


__all__ = ["ENV", "YOUNG", "serving", "wanted"]
