"""Testing helpers: call actions in-process and read the structured view, never re-parsing the text.

    from mcpfusion.testing import ToolTester
    tester = ToolTester([billing], app=app)          # app: for app.dependency_overrides (optional)
    tester = ToolTester(fusion)                       # through the app the fusion is served by, if any
    tester = ToolTester(app, server="crm")            # an app serving several MCPFusion servers: which one
    result = await tester.call("billing", "get_invoice", {"id": "inv_1"}, headers={"authorization": "Bearer x"})
    assert result.data["id"] == "inv_1" and not result.is_error
    await tester.call("billing", "void_invoice", {...}, auth={"sub": "u1", "scope": "billing:read"})

A call is authenticated as over HTTP: `auth=` is what the authentication would have kept (claims, or the
app's principal), else the registry's `ProtectedResource(authenticate=...)` runs on the headers. Actions the
caller's scopes do not allow are answered as on MCP: like unknown ones.

Add `pytest_plugins = ["mcpfusion.testing"]` to a conftest to get the `tool_tester` fixture.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, HTTPException
from starlette.requests import Request

from .context import Context
from .dependencies import CONTEXT_SCOPE_KEY, LIFESPAN_STATE, background_done
from .dispatch import ToolRegistry
from .errors import FORBIDDEN, UNAUTHORIZED, ToolError
from .identity import AUTH_SCOPE_KEY
from .response import Suggestion, ToolResponse, error_response, tool_error
from .serializer import as_written
from .tool import DISCRIMINATOR, Tool
from .ui import UIBlock


@dataclass(frozen=True)
class ToolResult:
    """One call's outcome as tests want it."""

    raw: ToolResponse

    @property
    def data(self) -> Any:
        return self.raw.view.data

    @property
    def system_rules(self) -> list[str]:
        return self.raw.view.system_rules

    @property
    def ui_blocks(self) -> list[UIBlock]:
        return self.raw.view.ui_blocks

    @property
    def suggestions(self) -> list[Suggestion]:
        return self.raw.view.suggestions

    @property
    def is_error(self) -> bool:
        return self.raw.is_error

    @property
    def error_code(self) -> str | None:
        return self.raw.error_code

    @property
    def text(self) -> str:
        return self.raw.text

    @property
    def structured_content(self) -> dict[str, Any] | None:
        """`structuredContent` as a client reads it (a NaN is null there, a date its ISO text); `raw` keeps
        the values the action returned."""
        content = self.raw.structured_content
        return None if content is None else as_written(content)


def lifespan_state(app: Any) -> dict[str, Any]:
    """A request's `state`: a shallow copy of the app's running lifespan state, as a server gives each request
    (Starlette's `request.state.pool`); empty when no lifespan runs."""
    state = getattr(getattr(app, "state", None), LIFESPAN_STATE, None)
    return dict(state) if isinstance(state, Mapping) else {}


def served_fusions(app: Any) -> list[Any]:
    """The `MCPFusion` servers mounted on `app`, in mount order (`app.state.mcpfusions`; an app that records
    one only, in `app.state.mcpfusion`, serves that one); empty for any other app."""
    state = getattr(app, "state", None)
    every = getattr(state, "mcpfusions", None)
    if isinstance(every, list) and every:
        return list(every)
    one = getattr(state, "mcpfusion", None)
    return [] if one is None else [one]


def _serves(fusion: Any, tool: str) -> bool:
    """Whether `fusion` serves `tool`, by its name or one of its MCP tool names."""
    registry = fusion.registry
    return tool in registry.tools or tool in registry.mcp_names()


def _listed(fusions: list[Any]) -> str:
    return ", ".join(f"{f.name!r} at {f.settings.path}" for f in fusions)


def choose_fusion(fusions: list[Any], *, server: str | None = None, tool: str | None = None,
                  how: str = "server=NAME") -> Any:
    """Which of the `MCPFusion` servers of one app to use: the one `server` names (by name or MCP path), else
    the only one, else the only one serving `tool`. Never a silent pick: a `ValueError` lists them when
    nothing tells which (`how` says how the caller names one)."""
    if server is not None:
        named = [f for f in fusions if server in (f.name, f.settings.path)]
        if len(named) == 1:
            return named[0]
        if named:  # (two fusions of one name: their paths tell them apart)
            raise ValueError(f"several MCPFusion servers are named {server!r} ({_listed(named)}): name one by "
                             "its MCP path")
        raise ValueError(f"no MCPFusion named {server!r}: the app serves {_listed(fusions)}")
    if len(fusions) == 1:
        return fusions[0]
    serving = [f for f in fusions if tool is not None and _serves(f, tool)]
    if len(serving) == 1:
        return serving[0]
    found = f", {len(serving)} of them serving a tool {tool!r}" if serving else (
        f", none of them serving a tool {tool!r}" if tool is not None else "")
    raise ValueError(f"the app serves several MCPFusion servers ({_listed(fusions)}){found}: choose one with {how}")


def mcp_path(app: Any) -> str:
    """The path of the MCP endpoint of the `MCPFusion` the app serves (`/mcp` without one)."""
    fusion = getattr(getattr(app, "state", None), "mcpfusion", None)
    path = getattr(getattr(fusion, "settings", None), "path", None)
    return path if isinstance(path, str) else "/mcp"


def make_request(app: Any, headers: Mapping[str, str] | None = None, context: Context | None = None,
                 path: str | None = None) -> Request:
    """A request scope like the one an HTTP transport would give the dependencies: to the MCP endpoint (`path`,
    by default the one the app serves), with the app's lifespan state."""
    path = path or mcp_path(app)
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "client": ("127.0.0.1", 0),
        "server": ("127.0.0.1", 0),
        "app": app,
        "state": lifespan_state(app),
        CONTEXT_SCOPE_KEY: context or Context.detached(),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    return Request(scope, receive)


class ToolTester:
    """Calls actions in-process through the same path as every transport."""

    def __init__(self, tools: Iterable[Tool] | ToolRegistry | Any, *, app: FastAPI | None = None,
                 server: str | None = None) -> None:
        """`tools`: the tools, a registry, an `MCPFusion` or the FastAPI app it built. Given the app (here, as
        `app=`, or as the app the `MCPFusion` is served by), calls go through the registry it serves, with its
        middleware, authorization, `dependency_overrides` and `state`, exactly as on MCP and REST; a bare list
        of tools gets a registry of its own (no app-level middleware). An app serving several `MCPFusion`
        servers: `server=` names the one to call (its name or MCP path), else each call goes to the one
        serving its tool."""
        self._fusion: Any = None  # an MCPFusion given without app=: its app is looked up on each call
        self._path: str | None = None  # the MCP path of the MCPFusion given (else: the app's)
        self._app = app
        self._unserved: FastAPI | None = None  # stands for the app while there is none
        self._each: list[tuple[Any, ToolTester]] = []  # an app's several fusions, each with its own tester
        self._registry: ToolRegistry | None = None
        if isinstance(tools, FastAPI):
            app = self._app = tools
            fusions = served_fusions(tools)
            if not fusions:
                raise TypeError("ToolTester(app): this FastAPI app serves no MCPFusion (build it with "
                                "MCPFusion.build_app() or mount())")
            if server is None and len(fusions) > 1:
                self._each = [(fusion, ToolTester(fusion, app=tools)) for fusion in fusions]
                return
            tools = choose_fusion(fusions, server=server, how="ToolTester(app, server=NAME)")
        elif server is not None and server not in (getattr(tools, "name", None),
                                                   getattr(getattr(tools, "settings", None), "path", None)):
            raise ValueError(f"ToolTester(..., server={server!r}): server= chooses one of the MCPFusion servers "
                             "of an app, ToolTester(app, server=NAME); this is not that server")
        served = getattr(tools, "registry", None)  # an MCPFusion
        if isinstance(served, ToolRegistry):
            self._fusion = tools if app is None else None
            self._path = getattr(getattr(tools, "settings", None), "path", None)
            tools = served
        if not isinstance(tools, ToolRegistry):
            tools = list(tools)
            # The registry of the app's fusion serving these very tools: its middleware apply to the test too.
            for fusion in served_fusions(app):
                registry = getattr(fusion, "registry", None)
                if isinstance(registry, ToolRegistry) and all(registry.tools.get(t.name) is t for t in tools):
                    tools, self._path = registry, fusion.settings.path
                    break
        elif self._path is None:  # a registry: the path of the app's fusion serving it, if one does
            self._path = next((f.settings.path for f in served_fusions(app) if f.registry is tools), None)
        self._registry = tools if isinstance(tools, ToolRegistry) else ToolRegistry(tools)

    @property
    def registry(self) -> ToolRegistry:
        """The registry the calls go through (an app serving several fusions has one each: name one with
        `ToolTester(app, server=NAME)`)."""
        if self._registry is None:
            raise ValueError(f"ToolTester(app): the app serves several MCPFusion servers "
                             f"({_listed([f for f, _ in self._each])}): choose one with ToolTester(app, server=NAME)")
        return self._registry

    @property
    def app(self) -> FastAPI:
        """The app whose `dependency_overrides` and `state` the calls see: the one given, else the one the
        `MCPFusion` is served by (built or mounted, even after the tester was made), else a blank one."""
        served = self._app or getattr(self._fusion, "app", None)
        if isinstance(served, FastAPI):
            return served
        if self._unserved is None:
            self._unserved = FastAPI()
        return self._unserved

    @property
    def dependency_overrides(self) -> dict[Any, Any]:
        return self.app.dependency_overrides

    async def call(
        self,
        tool: str,
        action: str | None = None,
        arguments: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        context: Context | None = None,
        auth: Any = None,
    ) -> ToolResult:
        """Call `tool` (MCP name) with `action` as discriminator for grouped tools, or an action directly;
        as the caller `auth` (see the module's docstring)."""
        if self._each:  # the fusion of the app serving `tool`; a tool none serves is answered by the first's
            fusions = [fusion for fusion, _ in self._each]  # UNKNOWN_TOOL, as REST answers it under /api
            tester = self._each[0][1]
            if any(_serves(fusion, tool) for fusion in fusions):
                chosen = choose_fusion(fusions, tool=tool, how="ToolTester(app, server=NAME)")
                tester = next(each for fusion, each in self._each if fusion is chosen)
            return await tester.call(tool, action, arguments, headers=headers, context=context, auth=auth)
        args = dict(arguments or {})
        request = make_request(self.app, headers, context, self._path)
        try:
            auth = auth if auth is not None else await self._authenticate(request)
        except HTTPException as exc:
            return ToolResult(tool_error(UNAUTHORIZED if exc.status_code == 401 else FORBIDDEN, str(exc.detail)))
        if auth is not None:
            request.scope[AUTH_SCOPE_KEY] = auth
        target = self.registry.tools.get(tool)
        try:
            if action is not None and target is not None and target.exposition != "grouped":
                # flat or profiles: the action is reached by its tool and name, whatever MCP tool serves it
                response = await self.registry.call_action(
                    self.registry.find(tool, action, self.registry.granted(request)), args, request,
                    raise_http=False, transport="tester")
            else:
                if action is not None:  # (no action takes an argument sent as `action`: it is reserved)
                    args[DISCRIMINATOR] = action
                response = await self.registry.call(tool, args, request, raise_http=False, transport="tester")
        except ToolError as exc:  # an unknown tool or action: the error MCP answers, as a result to look at
            response = error_response(exc)
        await background_done(request)  # its BackgroundTasks have run when it returns, as with TestClient
        return ToolResult(response)

    async def _authenticate(self, request: Request) -> Any:
        """What the registry's protected resource authenticates the request as (None without one)."""
        authenticate = getattr(self.registry.authorization, "authenticate", None)
        return None if authenticate is None else await authenticate(request)


try:
    import pytest

    @pytest.fixture
    def tool_tester() -> Any:
        """Factory fixture: `tool_tester([billing], app=app)` -> ToolTester."""
        return ToolTester

except ImportError:  # pragma: no cover - pytest is a test extra
    pass
