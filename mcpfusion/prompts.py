"""MCP prompts: a decorated function whose parameters are the prompt's arguments.

    @fusion.prompt(description="Review code")
    def review(code: str, language: str = "python") -> str: ...

A return value of `str` is one user text message; a dict with `role`/`content` is one message; a list
holds several (strings become user messages); a dict with `messages` is the whole `GetPromptResult`. A result
MCP cannot carry (a dict without a role, a `system` role) is refused: -32603, logged.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Annotated, Any, get_args, get_origin

from pydantic import TypeAdapter
from starlette.requests import Request

from mcpfusion.errors import sent_value
from mcpfusion.hints import type_name
from mcpfusion.injection import Injected, call_injected
from mcpfusion.mcp import jsonrpc
from mcpfusion.mcp.jsonrpc import McpError
from mcpfusion.resources import charge_request
from mcpfusion.scopes import Granted, declared_scopes, visible
from mcpfusion.slots import fields_repr


class Prompt:
    """One declared prompt (a plain class: a dataclass would compile its methods at every process's start)."""

    _FIELDS = ("name", "fn", "title", "description", "arguments", "injected", "scopes")

    def __init__(self, name: str, fn: Callable[..., Any], title: str | None = None, description: str | None = None,
                 arguments: list[dict[str, Any]] | None = None, injected: Injected | None = None,
                 scopes: Iterable[str] = ()) -> None:
        self.name = name
        self.scopes = declared_scopes(scopes, f"prompt {name!r}")
        self.fn = fn
        self.title = title
        self.description = description
        self.arguments: list[dict[str, Any]] = [] if arguments is None else arguments
        self.injected = injected

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], name: str | None = None, description: str | None = None,
        title: str | None = None, scopes: Iterable[str] = (),
    ) -> Prompt:
        """The prompt's arguments are `fn`'s parameters; its dependencies (`Depends`, `Context`...) are not."""
        injected = Injected(fn)
        args: list[dict[str, Any]] = []
        for param in injected.arguments:
            _check_text_argument(name or fn.__name__, param)
            arg: dict[str, Any] = {"name": param.name, "required": param.default is inspect.Parameter.empty}
            desc = _description(param.annotation)
            if desc:
                arg["description"] = desc
            args.append(arg)
        doc = inspect.getdoc(fn)
        return cls(name=name or fn.__name__, fn=fn, title=title, description=description or doc,
                   arguments=args, injected=injected, scopes=scopes)

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = self.arguments
        return out

    async def render(self, arguments: dict[str, Any], context: Any = None, request: Request | None = None
                     ) -> dict[str, Any]:
        """The `GetPromptResult`; dependencies are solved against `request` exactly as an action's."""
        missing = [a["name"] for a in self.arguments if a["required"] and a["name"] not in arguments]
        if missing:
            raise McpError(jsonrpc.INVALID_PARAMS, f"Prompt {self.name!r} is missing required argument(s): "
                           + ", ".join(missing))
        known = {a["name"] for a in self.arguments}
        values = {k: v for k, v in arguments.items() if k in known}
        injected = self.injected if self.injected is not None else Injected(self.fn)
        return await call_injected(injected, values, context, request, self._result)  # type: ignore[no-any-return]

    def _result(self, value: Any) -> dict[str, Any]:
        result = value if isinstance(value, dict) and "messages" in value else {"messages": _messages(value)}
        if self.description and "description" not in result:
            result = {"description": self.description, **result}
        _check_result(self.name, result)
        return result


def _check_result(name: str, result: dict[str, Any]) -> None:
    """Refuse a prompt result MCP cannot carry (a `system` role, an unknown content block): the client's
    SDK would reject it; the error names the prompt and what was wrong (paths, never values)."""
    from mcp_types import GetPromptResult
    from pydantic import ValidationError

    try:
        GetPromptResult.model_validate(result)
    except ValidationError as exc:
        wrong = sorted({".".join(map(str, e["loc"][:3])) for e in exc.errors()})
        logging.getLogger("mcpfusion").error("prompt %r returned a result MCP cannot carry at %s", name, wrong)
        raise McpError(jsonrpc.INTERNAL_ERROR, f"Prompt {name!r} returned messages MCP cannot carry (at "
                       f"{', '.join(wrong[:5])}): a message's role is user or assistant and its content a text, "
                       "image, audio or resource block") from None


def _check_text_argument(prompt: str, param: inspect.Parameter) -> None:
    """Refuse a prompt argument whose type no text can be (a list, an object): MCP sends a prompt's arguments
    as strings, converted to the parameter's type as a query string is (`Injected`), so such a prompt could
    never be got. A type without a JSON schema is left to that conversion."""
    annotation = param.annotation
    if annotation is str or annotation is Any or annotation is inspect.Parameter.empty:
        return
    try:
        schema = TypeAdapter(annotation).json_schema()
    except Exception:  # (no JSON schema: nothing to tell from here)
        return
    if not _from_text(schema, schema.get("$defs") or {}):
        raise TypeError(f"prompt {prompt!r}: argument {param.name!r} has the type {type_name(annotation)}, which no "
                        "text can be: MCP sends prompt arguments as strings. Take a str (and parse it), or a "
                        "type written as one word (a number, a bool, a date, an enum or Literal)")


def _from_text(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> bool:
    """Whether some text converts to a value of `schema` (a scalar, an enum; one member of a union)."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < 20:
        return _from_text(defs.get(ref.rsplit("/", 1)[-1]) or {}, defs, depth + 1)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return any(_from_text(member, defs, depth + 1) for member in schema[union])
    if "allOf" in schema:
        return all(_from_text(member, defs, depth + 1) for member in schema["allOf"])
    if "enum" in schema or "const" in schema:
        return True
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return kind is None or any(k in ("string", "integer", "number", "boolean") for k in kinds)


def _description(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            desc = getattr(extra, "description", None)
            if isinstance(desc, str):
                return desc
    return None


def _messages(value: Any) -> list[dict[str, Any]]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append({"role": "user", "content": {"type": "text", "text": item}})
        elif isinstance(item, dict):
            # A message as it is (its text content as a block): one without a role ("rol", or plain data) is
            # refused by `_check_result`, never sent as a repr the client would take for the prompt's text.
            content = item.get("content")
            if isinstance(content, str):
                item = {**item, "content": {"type": "text", "text": content}}
            out.append(item)
        elif hasattr(item, "model_dump"):
            out.append(item.model_dump(mode="json", by_alias=True, exclude_none=True))
        else:
            out.append({"role": "user", "content": {"type": "text", "text": str(item)}})
    return out


class PromptRegistry:
    """The prompts of one server; those declared with scopes exist only for callers holding them (`granted`,
    as for resources)."""

    def __init__(self) -> None:
        self.prompts: dict[str, Prompt] = {}
        self.granted: Granted | None = None
        self.limits: Any = None  # the app whose rate limits count the requests (as `ResourceRegistry.limits`)

    def __bool__(self) -> bool:
        return bool(self.prompts)

    def add(self, prompt: Prompt) -> None:
        if prompt.name in self.prompts:  # as tools: a second declaration is a mistake, never a silent swap
            raise ValueError(f"duplicate prompt name {prompt.name!r} (remove_prompt() it first to replace it)")
        self.prompts[prompt.name] = prompt

    def visible(self, request: Request | None) -> list[Prompt]:
        return [p for p in self.prompts.values() if visible(p.scopes, self.granted, request)]

    def find(self, name: str, request: Request | None = None) -> Prompt | None:
        prompt = self.prompts.get(name)
        return prompt if prompt is not None and visible(prompt.scopes, self.granted, request) else None

    def list(self, request: Request | None = None) -> list[dict[str, Any]]:
        return [p.descriptor() for p in self.visible(request)]

    async def charge(self, request: Request | None, method: str) -> None:
        """Count one request (`prompts/get`, a completion) against the app's rate limits (`charge_request`)."""
        await charge_request(self.limits, request, method)

    async def get(self, name: Any, arguments: Any, context: Any = None, request: Request | None = None
                  ) -> dict[str, Any]:
        if not isinstance(name, str):
            raise McpError(jsonrpc.INVALID_PARAMS, "prompts/get needs a string 'name'")
        prompt = self.find(name, request)
        if prompt is None:
            raise McpError(jsonrpc.INVALID_PARAMS, f"Unknown prompt {sent_value(name)}. Available prompts: "
                           + (", ".join(p.name for p in self.visible(request)) or "none"))
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise McpError(jsonrpc.INVALID_PARAMS, "prompts/get 'arguments' must be an object")
        return await prompt.render(arguments, context, request)
