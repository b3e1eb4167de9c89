"""mcpfusion: MCP servers the FastAPI way: tools as typed actions, presenters for what the agent sees."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import ui
from .app import MCPFusion
from .authorization import ProtectedResource
from .content import Audio, EmbeddedResource, Image, ResourceLink, attach, audio, document, image, link
from .context import Context
from .dispatch import CallContext, ToolRegistry
from .errors import ToolError, UnknownToolError
from .middleware import ActionCall, CallNext, Middleware
from .model import Model
from .pagination import Page, Paged, Paging
from .presenter import Presenter, PresenterError
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
from .tool import Action, Flatten, Tool
from .ui import UIBlock
from .version import __version__
from .visible import visible_name

if TYPE_CHECKING:
    from .audit import Audit
    from .egress import EgressLimit
    from .guards import Concurrency, Timeout
    from .ratelimit import RateLimit
    from .telemetry import Telemetry

# Exported on first use (PEP 562): the optional middleware and telemetry are not imported with the package,
# a cost every server paid at start whether it used them or not. name -> its module
_LAZY = {"Audit": "audit", "EgressLimit": "egress", "Concurrency": "guards", "Timeout": "guards",
         "RateLimit": "ratelimit", "Telemetry": "telemetry"}


def __getattr__(name: str) -> Any:
    if name in _LAZY.values():  # `mcpfusion.telemetry`, as importing the package used to bind it
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_LAZY.values()})

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
    "visible_name",
]

