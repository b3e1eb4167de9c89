"""MCP resources: static resources, URI templates (RFC 6570 level 1 `{var}`) and subscriptions.

    @fusion.resource("file:///readme.txt", name="readme", mime_type="text/plain")
    def readme() -> str: ...                # str -> text, bytes -> blob, dict/list -> JSON text
                                            # (mcp.types ReadResourceResult, Text/BlobResourceContents as they are)

    @fusion.resource_template("users://{id}/profile")
    async def profile(id: str) -> dict: ...

A template's variables reach its dependencies as FastAPI's path parameters do (`def load(id: str)` under
`Depends(load)` gets the `{id}` of the URI read, converted to its type); a dependency parameter that nothing
could set (one FastAPI would read from the query string or the body, required) is refused at declaration.
"""

from __future__ import annotations

import base64
import builtins
import re
import sys
from collections.abc import Callable, Iterable
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from starlette.requests import Request

from mcpfusion.dependencies import is_empty
from mcpfusion.injection import Injected, call_injected
from mcpfusion.mcp import jsonrpc
from mcpfusion.mcp.jsonrpc import McpError
from mcpfusion.scopes import Granted, declared_scopes, visible
from mcpfusion.serializer import dumps
from mcpfusion.slots import fields_repr

_VAR = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Resource:
    """One static resource (a plain class: a dataclass would compile its methods at every process's start)."""

    _FIELDS = ("uri", "fn", "name", "title", "description", "mime_type", "size", "annotations", "meta", "scopes")

    def __init__(self, uri: str, fn: Callable[..., Any], name: str, title: str | None = None,
                 description: str | None = None, mime_type: str | None = None, size: int | None = None,
                 annotations: dict[str, Any] | None = None, meta: dict[str, Any] | None = None,
                 scopes: Iterable[str] = ()) -> None:
        self.uri = uri
        self.fn = fn
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.size = size
        self.annotations = annotations
        self.meta = meta
        self.scopes = declared_scopes(scopes, f"resource {uri!r}")
        self.injected = Injected(fn)
        _check_reachable(self.injected.dependant, f"resource {uri!r}")

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type, size=self.size,
             annotations=self.annotations, _meta=self.meta)
        return out


class ResourceTemplate:
    """One URI template (a plain class: a dataclass would compile its methods at every process's start)."""

    _FIELDS = ("uri_template", "fn", "name", "title", "description", "mime_type", "annotations", "pattern",
               "variables", "scopes")

    def __init__(self, uri_template: str, fn: Callable[..., Any], name: str, title: str | None = None,
                 description: str | None = None, mime_type: str | None = None,
                 annotations: dict[str, Any] | None = None, scopes: Iterable[str] = ()) -> None:
        self.uri_template = uri_template
        self.fn = fn
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations = annotations
        self.scopes = declared_scopes(scopes, f"resource template {uri_template!r}")
        self.injected = Injected(fn)
        self.variables = _VAR.findall(self.uri_template)
        collect = self.injected.dependant.call
        if collect is not None and not is_empty(self.injected.dependant):
            # Analysed again with the variables as its path's: FastAPI then reads them from `path_params`.
            path = "".join(f"/{{{name}}}" for name in self.variables)
            self.injected.dependant = get_dependant(path=path, call=collect)
        self.reads_variables = _reads_path(self.injected.dependant)
        _check_reachable(self.injected.dependant, f"resource template {uri_template!r}")
        regex, pos = "", 0
        for m in _VAR.finditer(self.uri_template):
            regex += re.escape(self.uri_template[pos : m.start()]) + f"(?P<{m.group(1)}>[^/?#]+)"
            pos = m.end()
        regex += re.escape(self.uri_template[pos:])
        self.pattern = re.compile(f"^{regex}$")

    def __repr__(self) -> str:
        return fields_repr(self, self._FIELDS)

    def match(self, uri: str) -> dict[str, str] | None:
        m = self.pattern.match(uri)
        return m.groupdict() if m else None

    def descriptor(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uriTemplate": self.uri_template, "name": self.name}
        _put(out, title=self.title, description=self.description, mimeType=self.mime_type,
             annotations=self.annotations)
        return out


class _TemplateRequest(Request):
    """The request a template's dependencies see: the URI's variables are its path parameters, as a route's
    are; everything else is the MCP request's (the same scope)."""

    def __init__(self, request: Request, variables: dict[str, str]) -> None:
        super().__init__(request.scope, request.receive)
        self._variables = variables

    @property
    def path_params(self) -> dict[str, Any]:
        return self._variables


def _reads_path(dependant: Dependant) -> bool:
    """Whether a dependency of `dependant`, at any depth, takes a path parameter (a template variable)."""
    return any(sub.path_params or _reads_path(sub) for sub in dependant.dependencies)


def _check_reachable(dependant: Dependant, where: str) -> None:
    """Refuse a required dependency parameter FastAPI would read from the query string or the body: a read
    has neither, so every read would fail (actions refuse them too: `check_dependency_parameters`)."""
    for sub in dependant.dependencies:
        for field in (*sub.query_params, *sub.body_params):
            if field.field_info.is_required():
                owner = getattr(sub.call, "__qualname__", repr(sub.call))
                raise TypeError(f"{where}: the dependency {owner} takes {field.name!r}, which nothing could set (a "
                                "resource read has no query string or body; a template's variables are given to "
                                "the parameters named like them). Rename it after a variable of the URI template, "
                                "give it a default, a Header() or a Depends()")
        _check_reachable(sub, where)


def _put(out: dict[str, Any], **values: Any) -> None:
    for key, value in values.items():
        if value is not None:
            out[key] = value


def result_of(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    """The `resources/read` result of what a resource function returned: an `mcp.types.ReadResourceResult`
    as it is (its contents and `_meta`), anything else as `contents_of` makes it."""
    types = sys.modules.get("mcp_types")  # (not loaded: the function cannot have returned one of its objects)
    if types is not None and isinstance(value, types.ReadResourceResult):
        result: dict[str, Any] = value.model_dump(mode="json", by_alias=True, exclude_none=True,
                                                  include={"contents", "meta"})
        return result
    return {"contents": contents_of(uri, value, mime_type)}


def contents_of(uri: str, value: Any, mime_type: str | None) -> list[dict[str, Any]]:
    """Turn what a resource function returned into `ResourceContents` entries: `mcp.types` Text/Blob
    ResourceContents (one, or a non-empty list of them) as they are; str -> text, bytes -> blob, any other
    value -> JSON text, dicts and lists whatever their keys (plain data is never taken for contents)."""
    types = sys.modules.get("mcp_types")
    if types is not None:
        kinds = (types.TextResourceContents, types.BlobResourceContents)
        items = [value] if isinstance(value, kinds) else value if isinstance(value, list) else []
        if items and all(isinstance(item, kinds) for item in items):
            return [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
    if isinstance(value, bytes | bytearray):
        entry = {"uri": uri, "blob": base64.b64encode(bytes(value)).decode("ascii")}
        entry["mimeType"] = mime_type or "application/octet-stream"
        return [entry]
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    # Written as every answer is (ISO dates, Decimals as text, NaN and infinities null: JSON has no number for
    # them); a value JSON cannot hold is refused, never written as its str() or repr (which may hold what must
    # not leave).
    text = dumps(value)
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": text}]


class ResourceRegistry:
    """The resources and templates of one server, and which URIs have a reader. Those declared with scopes
    exist only for callers holding them (`granted`: the server's view of a request's scopes): unlisted, and
    read or subscribed to as an unknown URI, as an action the caller may not call is an unknown tool."""

    def __init__(self) -> None:
        self.resources: dict[str, Resource] = {}
        self.templates: list[ResourceTemplate] = []
        self.granted: Granted | None = None
        # The app (`MCPFusion`, set by it) whose rate limits count the reads as its action calls.
        self.limits: Any = None

    def __bool__(self) -> bool:
        return bool(self.resources or self.templates)

    def add(self, resource: Resource) -> None:
        self.resources[resource.uri] = resource

    def add_template(self, template: ResourceTemplate) -> None:
        self.templates.append(template)

    def list(self, request: Request | None = None) -> list[dict[str, Any]]:
        return [r.descriptor() for r in self.resources.values() if visible(r.scopes, self.granted, request)]

    def list_templates(self, request: Request | None = None) -> builtins.list[dict[str, Any]]:
        return [t.descriptor() for t in self.templates if visible(t.scopes, self.granted, request)]

    def template(self, uri_template: str, request: Request | None = None) -> ResourceTemplate | None:
        return next((t for t in self.templates if t.uri_template == uri_template
                     and visible(t.scopes, self.granted, request)), None)

    def exists(self, uri: str, request: Request | None = None) -> bool:
        return self._find(uri, request) is not None

    def _find(self, uri: str, request: Request | None) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        """The resource (or template, with its variables) serving `uri` to the caller of `request`."""
        resource = self.resources.get(uri)
        if resource is not None:
            return (resource, {}) if visible(resource.scopes, self.granted, request) else None
        for template in self.templates:
            variables = template.match(uri)
            if variables is not None and visible(template.scopes, self.granted, request):
                return template, variables
        return None

    async def charge(self, request: Request | None, method: str) -> None:
        """Count one request (`resources/read`, a completion) against the app's rate limits (`charge_request`)."""
        await charge_request(self.limits, request, method)

    async def read(self, uri: Any, context: Any = None, request: Request | None = None) -> dict[str, Any]:
        """The contents at `uri`; the function's dependencies are solved against `request` like an action's."""
        if not isinstance(uri, str) or not uri:
            raise McpError(jsonrpc.INVALID_PARAMS, "resources/read needs a non-empty string 'uri'")
        found = self._find(uri, request)
        if found is None:
            # -32602 with data.uri: what 2026-07-28 requires (SEP-2164); harmless on older wires.
            raise McpError(jsonrpc.INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        served, variables = found
        if isinstance(served, ResourceTemplate) and served.reads_variables:
            if request is None:  # (as `call_injected` would make it)
                from .testing import make_request

                request = make_request(None, context=context)
            request = _TemplateRequest(request, variables)
        return await self._read(served.injected, {**variables, "uri": uri}, uri, served.mime_type, context, request)

    @staticmethod
    async def _read(injected: Injected, values: dict[str, Any], uri: str, mime_type: str | None, context: Any,
                    request: Request | None) -> dict[str, Any]:
        # Contents are built before yield dependencies close (a lazy value may still need its session).
        result: dict[str, Any] = await call_injected(
            injected, values, context, request, lambda value: result_of(uri, value, mime_type))
        return result


async def charge_request(app: Any, request: Request | None, method: str) -> None:
    """Count one MCP request of `app` that is no action call against the app's `RateLimit`s, in the buckets of
    the caller's action calls (`mcpfusion.ratelimit.charge_request`): -32010 over the limit."""
    limits = sys.modules.get("mcpfusion.ratelimit")  # (not loaded: no RateLimit anywhere, nothing to count)
    if limits is not None and app is not None and request is not None:
        registry = app.registry  # (the app's middleware and guards, as its action calls meet them)
        await limits.charge_request(request, method, registry.middleware, registry.guards)
