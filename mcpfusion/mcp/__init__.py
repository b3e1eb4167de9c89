"""The MCP protocol engine and its transports (streamable HTTP on FastAPI routes, stdio).

The engine knows tools only through `ToolBackend` and never imports the rest of mcpfusion: the
composition (`mcpfusion.app`) hands it the tools, the per-call context factory and the stores.
"""

from .backend import ToolBackend
from .broker import Broker, InMemoryBroker
from .channel import Channel, InputRequired, NoBackChannel
from .engine import Call, Engine
from .events import EventStore, InMemoryEventStore
from .http import McpHttpTransport
from .jsonrpc import McpError, ProtocolSignal
from .sessions import InMemorySessionStore, Session, SessionStore
from .settings import TransportSettings
from .state import RequestStateSigner

__all__ = [
    "Broker",
    "Call",
    "Channel",
    "Engine",
    "EventStore",
    "InMemoryBroker",
    "InMemoryEventStore",
    "InMemorySessionStore",
    "InputRequired",
    "McpError",
    "McpHttpTransport",
    "NoBackChannel",
    "ProtocolSignal",
    "RequestStateSigner",
    "Session",
    "SessionStore",
    "ToolBackend",
    "TransportSettings",
]
