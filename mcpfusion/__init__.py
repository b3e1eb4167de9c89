"""mcpfusion: MCP servers the FastAPI way: tools as typed actions, presenters for what the agent sees."""

from . import ui
from .app import MCPFusion
from .audit import Audit
from .authorization import ProtectedResource
from .content import Audio, EmbeddedResource, Image, ResourceLink, attach, audio, document, image, link
from .context import Context
from .dispatch import CallContext, ToolRegistry
from .egress import EgressLimit
from .errors import ToolError, UnknownToolError
from .guards import Concurrency, Timeout
from .middleware import ActionCall, CallNext, Middleware
from .model import Model
from .pagination import Page, Paged, Paging
from .presenter import Presenter, PresenterError
from .ratelimit import RateLimit
from .redaction import RedactionError
from .response import (
    ResponseBuilder,
    Suggestion,
    ToolResponse,
    error,
    response,
    success,
    success_structured,
    suggest,
    tool_error,
    toon_success,
)
from .telemetry import Telemetry
from .tool import Action, Flatten, Tool
from .ui import UIBlock
from .version import __version__

__all__ = [
    "Action",
    "ActionCall",
    "Audit",
    "CallContext",
    "CallNext",
    "Concurrency",
    "Audio",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "attach",
    "audio",
    "document",
    "image",
    "link",
    "Context",
    "EgressLimit",
    "Flatten",
    "MCPFusion",
    "Middleware",
    "Model",
    "Page",
    "Paged",
    "Paging",
    "Presenter",
    "PresenterError",
    "ProtectedResource",
    "RateLimit",
    "RedactionError",
    "ResponseBuilder",
    "Suggestion",
    "Telemetry",
    "Timeout",
    "Tool",
    "ToolError",
    "ToolRegistry",
    "ToolResponse",
    "UIBlock",
    "UnknownToolError",
    "__version__",
    "error",
    "response",
    "success",
    "success_structured",
    "suggest",
    "tool_error",
    "toon_success",
    "ui",
]

