"""The MCP protocol engine and its transports (streamable HTTP on FastAPI routes, stdio).

The engine knows tools only through `ToolBackend` and never imports the perception layer. Names are
loaded lazily so that `mcpfusion.context` can import `mcpfusion.mcp.channel` without a cycle.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ToolBackend": "backend",
    "Broker": "broker",
    "InMemoryBroker": "broker",
    "Channel": "channel",
    "InputRequired": "channel",
    "NoBackChannel": "channel",
    "CONTEXT_SCOPE_KEY": "engine",
    "Call": "engine",
    "Engine": "engine",
    "EventStore": "events",
    "InMemoryEventStore": "events",
    "McpHttpTransport": "http",
    "McpError": "jsonrpc",
    "InMemorySessionStore": "sessions",
    "Session": "sessions",
    "SessionStore": "sessions",
    "TransportSettings": "settings",
    "RequestStateSigner": "state",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
