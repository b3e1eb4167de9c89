"""Call examples for an action: the MCP JSON-RPC `tools/call` body and a REST `curl`."""

from __future__ import annotations

import json
import shlex
from typing import Any

from ..errors import ValidationFailed
from ..listing import discriminated, mcp_name
from ..tool import DISCRIMINATOR, Action
from . import samples


def rest_path(action: Action) -> str:
    return f"/api/{action.tool.name}/{action.name}"


def action_faults(action: Action) -> samples.Faults:
    """The fields the action refuses in a call with some arguments (`samples.arguments` keeps an example
    only when the action itself takes it: its model's validators, `PastDate`, decimal places...)."""
    def faults(arguments: dict[str, Any]) -> list[str]:
        try:
            action.validate(dict(arguments))
        except ValidationFailed as exc:
            return [name for name, _ in exc.fields]
        except Exception:  # a validator that fails otherwise: no example rather than one that may fail
            return ["(arguments)"]
        return []
    return faults


def example_arguments(action: Action) -> dict[str, Any]:
    """The action's required parameters with sample values that the action itself accepts (what the try-it
    form starts from); a parameter no accepted value was found for is left out."""
    return samples.arguments(action.input_schema, faults=action_faults(action))


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
