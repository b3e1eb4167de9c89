"""The garbage collector of a serving process: what start-up built is moved out of its sight.

A server's import and start-up leave a large heap that lives as long as the process (modules, routes, pydantic
schemas, presenters: ~90k tracked objects for the reference service). CPython's full collection walks all of it,
and runs once enough objects have outlived two younger collections: objects that a request keeps a little while
(finished spans waiting in a batch span processor's queue, cached pages) bring it on every few thousand
requests, a pause of tens of milliseconds each. `gc.freeze()` once start-up is done moves that heap to the
permanent generation: the collector still finds every cycle made afterwards, and never walks the start-up
objects again (the objects themselves are freed as usual when their last reference goes).

On with `MCPFUSION_GC_FREEZE=1` (`mcpfusion serve` sets it unless it is set), or `MCPFusion(gc_freeze=True)`.
"""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

ENV = "MCPFUSION_GC_FREEZE"


def wanted(setting: bool | None) -> bool:
    """`setting` if given, else `MCPFUSION_GC_FREEZE` (1, true, yes, on)."""
    if setting is not None:
        return setting
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


def freezing(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The app's lifespan `inner`, then the start-up heap frozen (after one collection, so that no garbage of
    start-up is kept); thawed again at shutdown."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state:
            gc.collect()
            gc.freeze()
            try:
                yield state
            finally:
                gc.unfreeze()

    return lifespan


__all__ = ["ENV", "freezing", "wanted"]
