"""Call examples for an action: the MCP JSON-RPC `tools/call` body and a REST `curl`."""

from __future__ import annotations

import json
import shlex
from typing import Any

from ..listing import discriminated, mcp_name
from ..tool import DISCRIMINATOR, Action
from . import samples


def rest_path(action: Action) -> str:
    return f"/api/{action.tool.name}/{action.name}"


def example_arguments(action: Action) -> dict[str, Any]:
    """The action's required parameters with sample values (what the try-it form starts from)."""
    return samples.arguments(action.input_schema)


def mcp_call(action: Action, arguments: dict[str, Any]) -> dict[str, Any]:
    args = dict(arguments)
    if discriminated(action):
        args = {DISCRIMINATOR: action.name, **args}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": mcp_name(action), "arguments": args}}


def curl(path: str, arguments: dict[str, Any], base_url: str) -> str:
    """`curl` for `POST {base_url}{path}` with `arguments` as the JSON body."""
    url = base_url.rstrip("/") + path
    body = json.dumps(arguments, ensure_ascii=False)
    return (
        f"curl -X POST {shlex.quote(url)} \\\n"
        '  -H "Authorization: Bearer $TOKEN" \\\n'
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(body)}"
    )
