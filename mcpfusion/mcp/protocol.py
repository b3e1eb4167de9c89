"""The protocol constants the engine reads from `mcp_types` (versions, `_meta` keys), loaded on first use.

Importing any part of `mcp_types` runs its package `__init__`, which builds every model of the protocol:
about a third of importing mcpfusion. A process pays it on its first MCP request (which validates against
those models anyway); one serving no MCP request (REST only, the CLI, `mcpfusion lock`) never does.
`mcp_types` stays the source of every value: read them as `protocol.NAME` at use, never `from ... import`
at module level (that would load `mcp_types` at import again).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_types import (
        CLIENT_CAPABILITIES_META_KEY,
        CLIENT_INFO_META_KEY,
        LOG_LEVEL_META_KEY,
        PROTOCOL_VERSION_META_KEY,
        SERVER_INFO_META_KEY,
    )
    from mcp_types.version import (
        HANDSHAKE_PROTOCOL_VERSIONS,
        LATEST_HANDSHAKE_VERSION,
        MODERN_PROTOCOL_VERSIONS,
        is_version_at_least,
    )

    SERVED_PROTOCOL_VERSIONS: tuple[str, ...]

__all__ = [
    "CLIENT_CAPABILITIES_META_KEY",
    "CLIENT_INFO_META_KEY",
    "HANDSHAKE_PROTOCOL_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LOG_LEVEL_META_KEY",
    "MODERN_PROTOCOL_VERSIONS",
    "OLDEST_SERVED_VERSION",
    "PROTOCOL_VERSION_META_KEY",
    "SERVED_PROTOCOL_VERSIONS",
    "SERVER_INFO_META_KEY",
    "is_version_at_least",
    "lazy_names",
]


def lazy_names(namespace: dict[str, Any], sources: dict[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` (PEP 562) reading each name of `sources` (name -> module) from its module on
    first access and keeping it in `namespace`, so later reads are plain module attributes."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's own name
        source = sources.get(name)
        if source is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    return __getattr__


OLDEST_SERVED_VERSION = "2025-06-18"
"""The oldest handshake revision served. Older ones (2025-03-26, 2024-11-05) require JSON-RPC batches, which
this server does not take: an `initialize` asking for one is answered with the latest revision (the
specification's version negotiation), and they are neither advertised nor accepted in headers."""

_lazy = lazy_names(globals(), {
    **dict.fromkeys(("CLIENT_CAPABILITIES_META_KEY", "CLIENT_INFO_META_KEY", "LOG_LEVEL_META_KEY",
                     "PROTOCOL_VERSION_META_KEY", "SERVER_INFO_META_KEY"), "mcp_types"),
    **dict.fromkeys(("LATEST_HANDSHAKE_VERSION", "MODERN_PROTOCOL_VERSIONS", "is_version_at_least"),
                    "mcp_types.version"),
})


def __getattr__(name: str) -> Any:
    """`lazy_names`, and `HANDSHAKE_PROTOCOL_VERSIONS`: those of `mcp_types` this server serves;
    `SERVED_PROTOCOL_VERSIONS`: every version served, on either wire (what `server/discover` advertises and
    an unsupported-version error lists, so that a client may pick one of them and retry)."""
    if name == "SERVED_PROTOCOL_VERSIONS":
        every = globals()[name] = (*__getattr__("HANDSHAKE_PROTOCOL_VERSIONS"), *_lazy("MODERN_PROTOCOL_VERSIONS"))
        return every
    if name != "HANDSHAKE_PROTOCOL_VERSIONS":
        return _lazy(name)
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS as known
    from mcp_types.version import is_version_at_least as at_least

    served = globals()[name] = tuple(v for v in known if at_least(v, OLDEST_SERVED_VERSION))
    return served
