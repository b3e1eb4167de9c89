"""The engine's view of the tools: a small protocol, so the engine never imports the perception layer.

`mcpfusion.app` adapts the core's `ToolRegistry` to it; tests can pass any object with these methods.
"""

from __future__ import annotations

from typing import Any, Protocol

from starlette.requests import Request


class ToolBackend(Protocol):
    def list_tools(self) -> list[dict[str, Any]]:
        """`tools/list` entries (name, description, inputSchema, optional outputSchema, annotations, title)."""
        ...

    async def call_tool(self, name: str, arguments: dict[str, Any], request: Request, context: Any) -> dict[str, Any]:
        """Run a tool and return its `CallToolResult` dict; `context` is the engine's `make_context(call)`
        (the handlers' `Context`). An unknown tool raises
        `McpError(INVALID_PARAMS, ...)`; a failing tool returns `isError: true` instead of raising."""
        ...
