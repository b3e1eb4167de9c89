"""The engine's view of the tools: a small protocol, so the engine never imports the perception layer.

`mcpfusion.app` adapts the core's `ToolRegistry` to it; tests can pass any object with these methods.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, Protocol

from starlette.requests import Request


class ToolBackend(Protocol):
    """A backend may also define `listing_key(request) -> Hashable | None`: when it returns a key (e.g. the
    caller's OAuth scopes), the engine asks `list_tools(key)` for that caller's view and caches it per key."""

    def list_tools(self, key: Any = None) -> list[dict[str, Any]]:
        """`tools/list` entries (name, description, inputSchema, optional outputSchema, annotations, title),
        as seen by callers of `listing_key` `key` (None: the whole listing)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any], request: Request, context: Any) -> dict[str, Any]:
        """Run a tool and return its `CallToolResult` dict; `context` is the engine's `make_context(call)`
        (the handlers' `Context`). An unknown tool raises
        `McpError(INVALID_PARAMS, ...)`; a failing tool returns `isError: true` instead of raising."""
        ...


class ResourceBackend(Protocol):
    """The engine's view of the resources (`mcpfusion.resources.ResourceRegistry`)."""

    @property
    def resources(self) -> Mapping[str, Any]:
        """Static resources by URI."""
        ...

    def __bool__(self) -> bool: ...

    def list(self, request: Request | None = None) -> list[dict[str, Any]]:
        """`resources/list` entries the caller of `request` may see."""
        ...

    def list_templates(self, request: Request | None = None) -> builtins.list[dict[str, Any]]:  # (`list`: above)
        """`resources/templates/list` entries the caller of `request` may see."""
        ...

    def template(self, uri_template: str, request: Request | None = None) -> Any:
        """The template registered under `uri_template` that the caller may see, or None."""
        ...

    def exists(self, uri: str, request: Request | None = None) -> bool:
        """Whether `uri` names a static resource or matches a template (subscriptions are refused otherwise)."""
        ...

    async def read(self, uri: Any, context: Any = None, request: Request | None = None) -> dict[str, Any]:
        """The `ReadResourceResult` of `uri`, or `McpError` for a bad or unknown one. `request` is the HTTP
        request the reader's FastAPI dependencies are solved against."""
        ...


class PromptBackend(Protocol):
    """The engine's view of the prompts (`mcpfusion.prompts.PromptRegistry`)."""

    @property
    def prompts(self) -> Mapping[str, Any]:
        """Prompts by name."""
        ...

    def __bool__(self) -> bool: ...

    def list(self, request: Request | None = None) -> list[dict[str, Any]]:
        """`prompts/list` entries the caller of `request` may see."""
        ...

    def find(self, name: str, request: Request | None = None) -> Any:
        """The prompt `name` if the caller of `request` may see it, else None."""
        ...

    async def get(self, name: Any, arguments: Any, context: Any = None, request: Request | None = None
                  ) -> dict[str, Any]:
        """The `GetPromptResult` of prompt `name`, or `McpError` for a bad or unknown one (dependencies solved
        against `request`)."""
        ...
