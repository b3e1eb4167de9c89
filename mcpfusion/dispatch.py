"""The tools/call path as one straight line: route -> validate -> middleware and guards -> confirmation ->
resolve dependencies -> handler -> present (firewall, ui, rules, suggestions, `_select`, limit, redaction,
egress guard) -> validate output -> one response object. Transports (MCP, REST, stdio, tests) all come
through `ToolRegistry.call` / `call_action`."""

from __future__ import annotations

import asyncio
import copy
import logging
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, nullcontext
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import TYPE_CHECKING, Any
from uuid import UUID

from fastapi.exceptions import RequestValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException  # (FastAPI's is a subclass: both are HTTP errors)
from starlette.requests import Request

from .authorization import ScopesOf, insufficient_scope, scopes_of
from .censor import CARRIED, clean_error
from .confirm import give_back, pop_token, require_confirmation
from .content import DEFAULT_MAX_BYTES, Attached, Content, ContentError, ContentTooLarge, content_items, scrubbed
from .context import Context
from .dependencies import (
    CONTEXT_SCOPE_KEY,
    PRESENTER_KEY,
    BackgroundRuns,
    DependencyErrors,
    collect_background,
    end_collection,
    planned,
    queued_background,
    resolve,
)
from .errors import (
    CONTENT_REFUSED,
    FORBIDDEN,
    INTERNAL_ERROR,
    NOT_FOUND,
    RATE_LIMITED,
    ToolError,
    UnknownToolError,
    ValidationFailed,
    field_path,
    sent_value,
    shortened,
)
from .identity import AUTH_SCOPE_KEY
from .listing import Exposed, entries, exposed, how_to_call, mcp_name, restricted, serving
from .mcp.jsonrpc import ProtocolSignal
from .middleware import CLOSING_KEY, ActionCall, CallNext, GuardState, Middleware, applies, chain, describe
from .output import NEXT_CURSOR, invalid_output
from .pagination import (
    CURSOR_PARAM,
    MAX_CURSOR_LENGTH,
    PAGE_SCOPE_KEY,
    SCOPE_VALUE,
    Page,
    PageCall,
    Paging,
    authorization_scope,
    fingerprint,
)
from .presenter import CallbackError, Presenter, PresenterError
from .problem import http_code, http_detail, is_error_status, retry_after_of, waited
from .redaction import RedactionError
from .response import ToolResponse, error_response, success, to_jsonable, tool_error
from .select import SELECT_PARAM, check_audience, select_keys, unselectable
from .tool import DISCRIMINATOR, Action, Tool, checked_middleware, missing_discriminator, unknown_action

if TYPE_CHECKING:
    from .authorization import ProtectedResource
    from .telemetry import Telemetry

logger = logging.getLogger("mcpfusion")
_UNTRACED = nullcontext()  # (stateless: one for every untraced phase, and every call with nothing to close)

_GRANTED_KEY = "mcpfusion.granted"  # the request's (auth, granted scopes), worked out once per request


def no_phase(name: str) -> AbstractContextManager[None]:
    """A phase of an untraced call (`Telemetry` gives traced ones): nothing to do."""
    return _UNTRACED


@dataclass(slots=True)
class CallContext:
    """What presenter callbacks receive as `ctx`: the action, its resolved dependencies, the MCP context."""

    action: Action
    dependencies: dict[str, Any] = field(default_factory=dict)
    context: Context | None = None

    def __getattr__(self, name: str) -> Any:
        try:
            return self.dependencies[name]
        except KeyError:
            raise AttributeError(name) from None


class ToolRegistry:
    """All registered tools and the MCP names they are exposed under."""

    def __init__(
        self, tools: Iterable[Tool] = (), *, paging: Paging | None = None, output_schemas: bool = True,
        middleware: Sequence[Middleware] = (), signing_key: bytes | str | None = None,
    ) -> None:
        self.tools: dict[str, Tool] = {}
        self.paging = paging or Paging()  # signs the cursors of paginated actions
        self.output_schemas = output_schemas  # False: tools/list advertises no outputSchema (token budget)
        self.middleware = checked_middleware(middleware, "the app")  # around every action (mcpfusion.middleware)
        self.guards = GuardState(signing_key)
        self._pipelines: dict[Action, CallNext | None] = {}
        self._routes: dict[str, tuple[Tool, Action | None]] = {}
        self._routed: dict[str, int] = {}  # each tool's number of actions when its routes were made
        self._hidden: dict[frozenset[str], frozenset[str]] = {}  # see `hidden_names`
        self._how_to_call: dict[Action, str] = {}  # for page notices, worked out on an action's first page
        # The caller's granted OAuth scopes, from what authenticated the request (None: not enforced).
        self.scopes_of: ScopesOf = scopes_of
        self.authorization: ProtectedResource | None = None  # names the resource metadata in 403 challenges
        self.telemetry: Telemetry | None = None
        self.max_content_bytes = DEFAULT_MAX_BYTES  # largest image, audio clip or document an action may send
        self.background = BackgroundRuns()  # the calls' background tasks, awaited at shutdown
        # The MCP tool names served beside the actions (the fusion's raw tools): a suggestion may name them.
        self.raw_names: set[str] = set()
        self._warned_strays: set[str] = set()  # suggestions of no action already logged (once per name)
        # The names a suggestion may give (actions' qualified and MCP tool names), remade when the count of
        # actions and routes changes (actions added after build).
        self._suggestable: frozenset[str] = frozenset()
        self._suggestable_count = -1
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"duplicate tool name {tool.name!r}")
        routes = {e.name: (e.tool, e.action) for e in exposed(tool)}
        clash = set(routes) & set(self._routes)
        if clash:
            raise ValueError(f"MCP tool name(s) {sorted(clash)} of tool {tool.name!r} are already registered")
        self.tools[tool.name] = tool
        self._routes.update(routes)
        self._routed[tool.name] = len(tool.actions)
        self._hidden.clear()

    def _route_late_actions(self) -> bool:
        """Route the actions added to a tool after it was registered (tools/list already lists them); True
        when any was. Looked at only when a name is not found: never on a good call's path."""
        grown = [tool for name, tool in self.tools.items() if len(tool.actions) != self._routed.get(name)]
        for tool in grown:
            # Its names: a flat or profiles name is served by a view of the tool (a copy), not the tool itself.
            mine = {n for n, (t, _) in self._routes.items() if any(a.tool is tool for a in t.actions.values())}
            routes = {e.name: (e.tool, e.action) for e in exposed(tool)}
            clash = (set(routes) - mine) & set(self._routes)
            if clash:  # another tool serves that name: it keeps it (the new action stays unrouted, logged)
                logger.error("tool %r: MCP tool name(s) %s of its new actions are another tool's", tool.name,
                             sorted(clash))
                routes = {n: r for n, r in routes.items() if n not in clash}
            for name in mine - set(routes):
                del self._routes[name]
            self._routes.update(routes)
            self._routed[tool.name] = len(tool.actions)
        if grown:
            self._hidden.clear()
        return bool(grown)

    def mcp_names(self) -> frozenset[str]:
        """The MCP tool names the registry's actions are served under."""
        return frozenset(self._routes)

    def mcp_tools(self, granted: frozenset[str] | None = None) -> list[dict[str, Any]]:
        """`tools/list` entries of every tool (built on each call; the engine caches the server's listing), as
        a caller with the `granted` scopes sees them (None: everything)."""
        listed = entries(self.tools.values(), None if granted is None else _allows(granted))
        if not self.output_schemas:
            listed = [{k: v for k, v in e.items() if k != "outputSchema"} for e in listed]
        return listed

    def granted(self, request: Request) -> frozenset[str] | None:
        """The scopes granted to the caller of `request`, or None when nothing authenticated it (then no
        scope is enforced: a server without authentication works as without scopes)."""
        scope = request.scope
        auth = scope.get(AUTH_SCOPE_KEY)
        if auth is None:
            return None
        # Once per request: a tools/call asks for them to check its headers, to route and to authorize.
        known = scope.get(_GRANTED_KEY)
        if known is not None and known[0] is auth:
            return known[1]  # type: ignore[no-any-return]
        found = self.scopes_of(auth)
        granted = None if found is None else frozenset(found)
        scope[_GRANTED_KEY] = (auth, granted)
        return granted

    def actions(self) -> Iterable[Action]:
        for tool in self.tools.values():
            yield from tool.actions.values()

    def route(self, name: str, arguments: dict[str, Any], granted: frozenset[str] | None = None
              ) -> tuple[Action, dict[str, Any]]:
        """The action an MCP tool name (+ discriminator) points at, and its remaining arguments. With `granted`
        scopes, what the caller may not call is answered as if it did not exist."""
        try:
            tool, action = self._routes[name]
        except KeyError:
            if not (self._route_late_actions() and name in self._routes):
                raise UnknownToolError(name, self.visible_names(granted)) from None
            tool, action = self._routes[name]
        # The caller's restricted view of the tool is built only for an error's wording, never on a good call.
        if action is not None:
            if granted is not None and not action.scopes <= granted:
                raise UnknownToolError(name, self.visible_names(granted))
            return action, arguments
        chosen = arguments.get(DISCRIMINATOR)
        found = tool.actions.get(chosen) if isinstance(chosen, str) else None
        if found is not None and (granted is None or found.scopes <= granted):  # a good call: nothing else to see
            arguments = dict(arguments)
            del arguments[DISCRIMINATOR]
            return found, arguments
        if granted is not None and not any(a.scopes <= granted for a in tool.actions.values()):
            raise UnknownToolError(name, self.visible_names(granted))
        if chosen is None:  # absent, or null (what agents send for "no value")
            raise missing_discriminator(self._seen(name, tool, granted))
        # No such action, or one the caller's scopes hide.
        raise unknown_action(self._seen(name, tool, granted), chosen, self._served_elsewhere(name, chosen, granted))

    def _seen(self, name: str, tool: Tool, granted: frozenset[str] | None) -> Tool:
        """A grouped tool as a caller with `granted` scopes sees it (the whole tool when nothing is enforced)."""
        return tool if granted is None else self._visible(Exposed(name, tool, None), granted)

    def visible_names(self, granted: frozenset[str] | None) -> list[str]:
        """The MCP tool names a caller with `granted` scopes sees."""
        if granted is None:
            return list(self._routes)
        allows = _allows(granted)
        return [n for n, (t, a) in self._routes.items() if (allows(a) if a else any(map(allows, t.actions.values())))]

    def _visible(self, entry: Exposed, granted: frozenset[str]) -> Tool:
        """The tool behind `entry` with only the actions `granted` allows, or `UnknownToolError` when none."""
        view = restricted(entry, _allows(granted))
        if view is None:
            raise UnknownToolError(entry.name, self.visible_names(granted))
        return view

    def hidden(self, action: Action, granted: frozenset[str]) -> ToolError:
        """What MCP answers for an action the caller lacks scopes for: exactly what it answers for an
        unknown tool or action (the caller cannot tell that it exists)."""
        name = mcp_name(action)
        try:
            view = self._visible(Exposed(name, *self._routes[name]), granted)
        except ToolError as exc:
            return exc
        return unknown_action(view, action.name, self._served_elsewhere(name, action.name, granted))

    def _served_elsewhere(self, name: str, chosen: Any, granted: frozenset[str] | None = None) -> str | None:
        """Under the profiles exposition, the recovery for an action of the same tool in another group."""
        tool = self._routes[name][0]
        origin = self.tools.get(next(iter(tool.actions.values())).tool.name) if tool.actions else None
        if origin is None or origin is tool or not isinstance(chosen, str) or chosen not in origin.actions:
            return None
        if granted is not None and not origin.actions[chosen].scopes <= granted:
            return None
        serving = next(e for e in exposed(origin) if chosen in e.tool.actions)
        return f"{chosen} is served by the tool {serving.name}" + (" (with this action)." if serving.action is None
                                                                   else ".")

    def find(self, tool_name: str, action_name: str, granted: frozenset[str] | None = None) -> Action:
        """The action `tool/action` (REST addressing), or a self-healing error naming only what a caller with
        `granted` scopes may see (None: everything)."""
        tool = self.tools.get(tool_name)
        action = None if tool is None else tool.actions.get(action_name)
        if action is None or granted is not None and not any(map(_allows(granted), action.tool.actions.values())):
            raise self.unknown(tool_name, action_name, granted)
        return action  # (one `granted` hides: REST's `authorize` refuses it 403, the tester's as unknown)

    def unknown(self, tool_name: str, action_name: str, granted: frozenset[str] | None = None) -> ToolError:
        """What tool/action addressing answers for an action its tool lacks, or one the caller's `granted`
        scopes hide: the same words, naming only what the caller may see."""
        tool = self.tools.get(tool_name)
        allows = None if granted is None else _allows(granted)
        seen = tool if tool is None or allows is None else restricted(Exposed(tool_name, tool, None), allows)
        if tool is None or seen is None:
            return UnknownToolError(tool_name, [name for name, t in self.tools.items()
                                                if allows is None or any(map(allows, t.actions.values()))])
        return unknown_action(seen, action_name)

    # -- middleware and guards ---------------------------------------------------------------------------

    def layers(self, action: Action) -> list[Any]:
        """The middleware around `action`, outermost first: the app's, then its tool's, then its own."""
        return [*self.middleware, *action.tool.middleware, *action.middleware]

    def guards_of(self, action: Action) -> list[str]:
        """One line per middleware around `action` (and its confirmation), for the docs."""
        lines = [describe(mw) for mw in self.layers(action)]
        if action.confirm:
            lines.append("confirmation: asks the user before it runs (elicitation, or a _confirm token)")
        return lines

    def _pipeline(self, action: Action) -> CallNext | None:
        """The composed chain of `action` (None when it has no middleware: the plain path, no extra cost)."""
        layers = [mw for mw in self.layers(action) if applies(mw, action)]
        found = chain(layers, self._endpoint, _failure_of, self._own_answer) if layers or action.confirm else None
        self._pipelines[action] = found
        return found

    async def _endpoint(self, call: ActionCall) -> ToolResponse:
        """The innermost step of a chain: the confirmation, then dependencies, handler and presenter. An
        attempt that fails drops the background tasks it queued (a middleware may try again); a write done
        keeps them (`call.done`: what fails after it is answered as completed, and its tasks run)."""
        queued = queued_background()
        attempt = len(queued) if queued else 0
        response = None
        confirmed = None
        try:
            if call.action.confirm:
                confirmed = await require_confirmation(call, await self._confirm_scope(call))
            response = await self._run(call.action, dict(call.arguments), call.request, call.select, call.cursor,
                                       call.phase, call)
            if confirmed is not None and response.is_error:  # an error returned (`tool_error(...)`), not raised
                await give_back(call, confirmed, response.view.error)
        except Exception as exc:
            if confirmed is not None:  # "nothing was done, make the same call again": that call is confirmed
                await give_back(call, confirmed, exc)
            if _for_the_app(exc, call.request, call.transport):
                raise
            response = _failure(call.action, self._hints_for(exc, call.request), call.raise_http, call.transport)
        finally:
            if response is not None and (not response.is_error or completed(response)):
                if not call.action.readonly:  # (its answer, or `AfterRun`'s: its dependencies closed as after a
                    call.done = True          # success)
            elif queued:
                del queued[attempt:]
        call.answered = response  # (checked: a middleware returning it as it is costs nothing more)
        return response

    def _own_answer(self, call: ActionCall, response: ToolResponse) -> ToolResponse:
        """A response a middleware gave in place of its call_next's (a cache's `success(...)` or kept answer, a
        guard's cut of one): held to the contract of the handler's answer for this caller, as a handler's
        `ToolResponse` is (`_select`, then `_checked`: suggestions of what this caller may call, content,
        outputSchema, texts), whatever it carries; a typed action's that does not fit is `INVALID_OUTPUT`. Done
        on a copy: the middleware may give the same object again, to this caller or another."""
        response = _copied(response)
        given = response.structured_content
        if call.select:
            _selected(response, call.select)
        response = self._checked(call.action, response, None, call.request)
        if given is not None and call.action.paginate:
            _kept_cursor(call.action, response, given)
        return response

    async def _confirm_scope(self, call: ActionCall) -> str:
        """What a confirmation is bound to besides the action, its arguments and the caller: the fingerprint of
        the app's `cursor_scope` dependency's value (the tenant a header chose, say), resolved before the
        confirmation as a paginated action's is; "" when the app set none (the Authorization header is bound
        already, as the caller)."""
        paging = self.paging
        if paging.scope is authorization_scope:
            return ""
        dependant = paging.scope_dependant()
        plan = planned(dependant, call.request)
        if plan is not None:
            values = await plan.run(call.request)
        else:  # (a yield dependency, or overrides: FastAPI's solver, closed before the confirmation is asked)
            async with AsyncExitStack() as stack:
                values = await resolve(dependant, call.request, stack)
        scope = values["scope"]
        return paging.scope_print(scope if scope.__class__ is str else _checked_scope(paging, scope, call.action))

    # -- calls ----------------------------------------------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any] | None, request: Request, *, raise_http: bool = True,
        transport: str = "mcp",
    ) -> ToolResponse:
        """One MCP `tools/call`. Unknown tools (and tools the caller's scopes hide) raise `UnknownToolError`
        (a protocol error on MCP)."""
        granted = self.granted(request)
        try:
            action, arguments = self.route(name, arguments or {}, granted)
        except ToolError as exc:
            # A call all the same (rate limits), and a refused write when the caller's scopes hide its action.
            limited = await self._charge_unknown(request, transport)
            await self._audit_hidden(name, arguments or {}, request, transport, granted,
                                     RATE_LIMITED if limited else FORBIDDEN)
            if isinstance(exc, UnknownToolError):
                raise
            return error_response(exc)
        return await self.call_action(action, arguments, request, raise_http=raise_http, transport=transport)

    async def call_action(
        self, action: Action, arguments: dict[str, Any], request: Request, *, raise_http: bool = True,
        transport: str = "mcp",
    ) -> ToolResponse:
        """Validate, run the middleware, resolve, run and present one action; every failure becomes a
        self-healing result. `transport` ("mcp", "rest", "tester") is what middleware see. Its
        `BackgroundTasks` start only once the whole call has succeeded (yield dependencies closed, middleware
        and egress guard passed)."""
        if action.dependency_free:  # nothing could queue a background task (the hot path)
            if self.telemetry is None:
                return await self._call_action(action, arguments, request, raise_http, transport, no_phase)
            return await self._traced_call(action, arguments, request, raise_http, transport)
        queued, token = collect_background()
        try:
            if self.telemetry is None:
                response = await self._call_action(action, arguments, request, raise_http, transport, no_phase)
            else:
                response = await self._traced_call(action, arguments, request, raise_http, transport)
        finally:
            end_collection(token)
        if queued and (not response.is_error or completed(response)):  # (a write done: its mail goes out)
            self.background.start(queued, request.scope)
        return response

    async def _traced_call(self, action: Action, arguments: dict[str, Any], request: Request, raise_http: bool,
                           transport: str) -> ToolResponse:
        telemetry = self.telemetry
        if telemetry is None:
            return await self._call_action(action, arguments, request, raise_http, transport, no_phase)
        trace = telemetry.action(action, request)
        response = None
        try:
            response = await self._call_action(action, arguments, request, raise_http, transport, trace.phase)
            return response
        finally:
            trace.finish(response)

    async def _call_action(
        self, action: Action, arguments: dict[str, Any], request: Request, raise_http: bool, transport: str,
        phase: Callable[[str], AbstractContextManager[Any]],
    ) -> ToolResponse:
        # What the caller sent (`raw_arguments`: the audit's fields and digest) is the same dict whether the call
        # is refused or runs: `_select`, `cursor` and `_confirm` are taken out of a copy only.
        sent = arguments
        arguments = dict(arguments)
        try:
            if action.own_scopes or action.tool.scopes:  # (no set built on the hot path of unscoped actions)
                self.authorize(action, request, transport)
            select = _pop_select(action, arguments) if SELECT_PARAM in arguments else None
            cursor = _pop_cursor(action, arguments) if action.paginate else None
            try:
                pipeline = self._pipelines[action]
            except KeyError:
                pipeline = self._pipeline(action)
            if pipeline is None:
                return await self._run(action, action.validate(arguments), request, select, cursor, phase)
            confirmation = pop_token(action, arguments) if action.confirm else None
            call = ActionCall(action, action.validate(arguments), sent, request, transport, self.guards, phase)
            call.select, call.cursor, call.confirmation, call.raise_http = select, cursor, confirmation, raise_http
            return await pipeline(call)
        except asyncio.CancelledError as exc:
            if not _stray(request):
                raise  # the call itself is cancelled (the client, a Timeout, the server stopping)
            # A middleware's await cancelled elsewhere (the handler's is turned into `StrayCancellation` in `_run`).
            return _failure(action, StrayCancellation(action.label, exc), raise_http, transport)
        except Exception as exc:
            if _for_the_app(exc, request, transport):
                raise
            # Refused before the middleware: a call all the same, for the rate limits, and for the audit trail.
            allowed = self.allows(action, request)
            if not allowed and transport != "rest":  # answered as unknown: charged as an unknown name is
                limited = await self._charge_unknown(request, transport)
                await self._audit_refused(action, sent, request, transport, RATE_LIMITED if limited else FORBIDDEN)
                return _failure(action, self._hints_for(exc, request), raise_http, transport)
            if not allowed or isinstance(exc, ToolError | ValidationFailed):  # (REST's 403 is an HTTPException)
                exc = await self._charge_refused(action, sent, request, transport, phase, exc)
            if isinstance(exc, ToolError) and exc.code == RATE_LIMITED:
                await self._audit_refused(action, sent, request, transport, RATE_LIMITED)
            elif isinstance(exc, ToolError | HTTPException) and not allowed:
                await self._audit_refused(action, sent, request, transport, FORBIDDEN)
            return _failure(action, self._hints_for(exc, request), raise_http, transport)

    async def _charge_refused(self, action: Action, arguments: dict[str, Any], request: Request, transport: str,
                              phase: Callable[[str], AbstractContextManager[Any]], exc: Exception) -> Exception:
        """Charge a call refused before its middleware ran (invalid arguments, or REST's 403 for the caller's
        scopes) to the rate limits around its action: what to answer, `exc` or `RATE_LIMITED` once over the
        limit. (A RateLimit exists only once its module is loaded: a server without one never imports it.)"""
        limits = sys.modules.get("mcpfusion.ratelimit")
        if limits is None:
            return exc
        try:
            await limits.charge_refused(self._refused(action, arguments, request, transport, phase),
                                        [mw for mw in self.layers(action) if applies(mw, action)])
        except ToolError as limited:
            return limited
        return exc

    async def _charge_unknown(self, request: Request, transport: str) -> bool:
        """Charge a call answered as an unknown tool or action (no such name, or one the caller's scopes hide)
        to the app's rate limits; True once over the limit. Hidden or missing, the charge is the same (one
        stand-in action, the app's limits only: a tool's limit would tell which tool a hidden name is of) and
        so is the answer over the limit (the unknown one: `RATE_LIMITED` names the action), so neither the
        answer nor what is left of the caller's allowance tells that a hidden action exists."""
        limits = sys.modules.get("mcpfusion.ratelimit")
        if limits is None:
            return False
        try:
            call = ActionCall(_UNKNOWN, {}, {}, request, transport, self.guards, no_phase)
            await limits.charge_refused(call, self.middleware)
        except ToolError:
            return True
        return False

    def allows(self, action: Action, request: Request) -> bool:
        """Whether the caller's scopes allow `action` (always, when nothing authenticated it)."""
        needed = action.scopes
        if not needed:
            return True
        granted = self.granted(request)
        return granted is None or needed <= granted

    async def _audit_refused(self, action: Action, arguments: dict[str, Any], request: Request, transport: str,
                             code: str) -> None:
        """Record a call its middleware never saw (refused for the caller's scopes, or over its rate limit) in
        the `Audit` among them: an attempted write is audited even when it was refused (an Audit exists only
        once its module is loaded)."""
        audits = sys.modules.get("mcpfusion.audit")
        if audits is not None:
            await audits.audit_refused(self._refused(action, arguments, request, transport, no_phase),
                                       [mw for mw in self.layers(action) if applies(mw, action)], code)

    def _refused(self, action: Action, sent: dict[str, Any], request: Request, transport: str,
                 phase: Callable[[str], AbstractContextManager[Any]]) -> ActionCall:
        """What the rate limits and the audit see of a call refused before its middleware ran: its arguments as
        sent (`_select`, `cursor`, `_confirm` included), as a call that runs shows them (`_call_action`)."""
        return ActionCall(action, {}, sent, request, transport, self.guards, phase)

    async def _audit_hidden(self, name: str, arguments: dict[str, Any], request: Request, transport: str,
                            granted: frozenset[str] | None, code: str = FORBIDDEN) -> None:
        """Audit a call MCP answered as unknown although its action exists: the caller's scopes hide it (`code`:
        `FORBIDDEN`, or `RATE_LIMITED` once the caller is over its limit)."""
        if granted is None or "mcpfusion.audit" not in sys.modules:
            return
        tool, action = self._routes.get(name, (None, None))
        if tool is not None and action is None:
            chosen = arguments.get(DISCRIMINATOR)
            action = tool.actions.get(chosen) if isinstance(chosen, str) else None
        if action is not None and not action.scopes <= granted:
            sent = {k: v for k, v in arguments.items() if k != DISCRIMINATOR}
            await self._audit_refused(action, sent, request, transport, code)

    def _hints_for(self, exc: Exception, request: Request) -> Exception:
        """An error's `available_actions` without those the caller's scopes hide (their names never leak)."""
        if not isinstance(exc, ToolError) or not exc.available_actions:
            return exc
        hidden = self.hidden_names(self.granted(request))
        if hidden:
            exc.available_actions = [a for a in exc.available_actions if a not in hidden]
        return exc

    def _callable_suggestions(self, response: ToolResponse, request: Request) -> None:
        """Suggest only what the caller may call: a suggestion naming an action its scopes hide is left out
        (the agent would be told of an action that, for it, does not exist), and so is one naming no action
        at all (a typo, or an action built from data: the egress guard spares an action's name as the wire
        format's markup, so it must be one), logged without its text. Known names: each action's qualified
        name (`tool.action`) and MCP tool name, worked out once and again only when an action was added, and
        the raw tools' names (`raw_names`)."""
        known = self._suggestable
        raw = self.raw_names

        def unknown(action: Any) -> bool:  # (reads `known` as refreshed below)
            return action.__class__ is not str or (action not in known and action not in raw)

        strays = [s.action for s in response.view.suggestions if unknown(s.action)]
        if strays:
            count = sum(len(tool.actions) for tool in self.tools.values()) + len(self._routes)
            if count != self._suggestable_count:
                known = frozenset([*(a.qualified_name for a in self.actions()), *self._routes])
                self._suggestable, self._suggestable_count = known, count
                strays = [action for action in strays if unknown(action)]
        if strays:
            # Once per name (bounded): a presenter's mistake repeats on every call, and a log line per call of
            # a busy server is a flood (and its writes cost more than the call).
            warned = self._warned_strays
            new = [a for a in strays if a.__class__ is not str or a not in warned]
            if new:
                if len(warned) >= 1024:
                    warned.clear()
                warned.update(a for a in new if a.__class__ is str)
                logger.warning("%d suggestion(s) named no registered action and were left out (suggest() takes "
                               "'tool.action', a registered action's name, or a raw tool's); their lengths: %s "
                               "(said once per name)", len(new),
                               ", ".join(str(len(a)) if isinstance(a, str) else type(a).__name__ for a in new))
        hidden = self.hidden_names(self.granted(request))
        if hidden or strays:
            response.drop_suggestions(lambda action: unknown(action) or action in hidden)

    def hidden_names(self, granted: frozenset[str] | None) -> frozenset[str]:
        """Qualified names of the actions a caller with `granted` scopes may not see (none when nothing is
        enforced); worked out once per set of scopes."""
        if granted is None:
            return frozenset()
        found = self._hidden.get(granted)
        if found is None:
            if len(self._hidden) >= 1024:
                self._hidden.clear()
            found = self._hidden[granted] = frozenset(
                a.qualified_name for a in self.actions() if not a.scopes <= granted)
        return found

    def authorize(self, action: Action, request: Request, transport: str) -> None:
        """Refuse a call the caller's scopes do not allow: REST answers 403 `insufficient_scope` naming the
        scopes needed; the other transports answer as for an unknown action (they never list it), MCP for the
        MCP tool the caller named, the tester for the tool/action it named."""
        granted = self.granted(request)
        if granted is None or action.scopes <= granted:
            return
        if transport == "rest":
            raise insufficient_scope(action.scopes, request, self.authorization, what=action.label)
        if transport == "tester":  # addressed as tool/action (ToolTester, `mcpfusion call`), not by MCP name
            raise self.unknown(action.tool.name, action.name, granted)
        raise self.hidden(action, granted)

    async def _run(self, action: Action, kwargs: dict[str, Any], request: Request, select: list[str] | None,
                   cursor: str | None, phase: Callable[[str], AbstractContextManager[Any]],
                   call: ActionCall | None = None) -> ToolResponse:
        """Resolve the dependencies, run the handler, present its result (yield dependencies close after);
        `phase` times each step for telemetry. With its middleware's `call`, what they hold for a write's
        closing (`CLOSING_KEY`: a `Timeout`'s clock) stops while its yield dependencies close."""
        pages = self._page_call(action, kwargs, request) if action.paginate else None
        # A page's cursor scope is one more dependency of the action's (see `Paging._merged`).
        dependant = None if action.dependency_free else \
            action.dependant if pages is None else self.paging.with_scope(action.dependant)
        plan = None if dependant is None else planned(dependant, request)
        # Nothing to close (no dependency, or only plain `async def` ones): no exit stack (the hot path).
        failed: BaseException | None = None
        async with _UNTRACED if dependant is None or plan is not None else AsyncExitStack() as stack:
            # A write's yield dependencies close (commit) uncut once its handler returned: what its middleware
            # hold for that (a `Timeout`'s clock) stops then, and resumes once they all closed (first in, last
            # out). (No exit stack: nothing to close; no middleware: nothing held.)
            closing = False
            if stack is not None and call is not None and not action.readonly:
                closing = True
                stack.push_async_callback(_resume_held, call)
            try:
                dependencies: dict[str, Any] = {}
                if dependant is not None:
                    with phase("dependencies"):
                        if plan is not None:
                            dependencies = await plan.run(request)
                        else:
                            assert stack is not None  # (no plan: FastAPI's solver, on an exit stack)
                            dependencies = await resolve(dependant, request, stack)
                scope = dependencies.pop(SCOPE_VALUE) if pages is not None else None
                if pages is not None and scope.__class__ is not str:
                    scope = _checked_scope(self.paging, scope, action)
                presenter = action.presenter if action.presenter_dependency is None else \
                    _presenter(action, dependencies)
                if select is not None and presenter is not None and action.presenter_dependency is not None:
                    check_audience(action.label, select, presenter.wire_names)
                kwargs.update(dependencies)
                if pages is not None:
                    pages.open(cursor, self.paging.scope_print(scope), action.page_size(presenter))
                with phase("handler"):
                    if action.is_async:
                        result = await action.fn(**kwargs)
                    else:
                        result = await run_in_threadpool(action.fn, **kwargs)
                    if result.__class__ is not dict and result.__class__ is not list and isinstance(result, _ROWS):
                        result = await _read_rows(result, action.is_async)
                if closing:
                    _stop_held(call)
                try:
                    result, next_key = pages.take(result) if pages is not None else (result, None)
                    ctx = CallContext(action, dependencies, request.scope.get(CONTEXT_SCOPE_KEY))
                    with phase("present"):
                        response, presenter = present(action, result, presenter, ctx, select,
                                                      None if pages is None else pages.given)
                        response = self._checked(action, response, presenter, request)
                    if pages is not None:
                        pages.finish(response, next_key)
                    return response
                except Exception as exc:
                    # A write returned, then its answer failed (output check, content, presenter): its effect
                    # happened. Its yield dependencies close as after a success (a session commits what was
                    # done) and the answer says so (`AfterRun`), never "nothing was done, call again". A write
                    # returning None was found with nothing to do (`nothing_found`): answered as before.
                    if action.readonly or result is None or isinstance(exc, ProtocolSignal):
                        raise
                    failed = AfterRun(action.label, exc)
            except asyncio.CancelledError as exc:
                if not _stray(request):
                    failed = exc
                    raise
                # Not this call's cancellation: a failure like any other (its yield dependencies see it as one).
                failed = StrayCancellation(action.label, exc)
                raise failed from exc
            except BaseException as exc:
                failed = exc  # seen before the yield dependencies close: one of them may swallow it
                raise
        if isinstance(failed, AfterRun):  # (a write's answer failed: its dependencies closed as after a success)
            raise failed
        # Reached only when a yield dependency caught what failed and did not raise it again.
        return _swallowed(action, failed)

    def _checked(self, action: Action, response: ToolResponse, presenter: Presenter | None, request: Request
                 ) -> ToolResponse:
        """What every answer passes before it leaves, the handler's (presented) or one a middleware gave
        (`_own_answer`): suggestions only of what the caller may call, content that may be sent, a typed
        action's structuredContent checked against its outputSchema, a write's texts that a wire can carry."""
        if response.view.suggestions:  # (what the caller may call, and only registered actions)
            self._callable_suggestions(response, request)
        if response.content:
            check_content(action, response.content, self.max_content_bytes)
        if action.content_only and not response.is_error and not response.data_left_out:
            # (what REST sends and OpenAPI documents of it: the document, never a JSON body)
            raise PresenterError("answered its data, but it declares content_only=True: return attach(data, "
                                 "content, data_block=False)")
        if response.view.data is not None or not response.content:
            response = action.output.check(response, presenter)
            if response.view.data_left_out and response.structured_content is not None:
                self._data_left_out(action, response, request)  # attach(..., data_block=False)
        elif not response.is_error and action.output.schema is not None:
            # Content alone from a typed action: its outputSchema promises structuredContent (a client refuses
            # the answer without it); the data goes with the content: `attach`.
            raise PresenterError("answered content alone, but its output schema promises structured data: return "
                                 "attach(data, ...) (or declare no returns=)")
        if not action.readonly and not response.is_error:
            _check_texts(action, response.texts)  # (here, not at the wire: answered as done)
        return response

    def _page_call(self, action: Action, filters: dict[str, Any], request: Request) -> PageCall:
        """The page of this call (its handler's `Page` dependency reads it from the request scope)."""
        page = Page()
        request.scope[PAGE_SCOPE_KEY] = page
        how = self._how_to_call.get(action)
        if how is None:  # the tool's exposition, built once per action rather than twice per page
            how = self._how_to_call[action] = how_to_call(action)
        return PageCall(self.paging, action.qualified_name, how, fingerprint(filters), page)

    def _data_left_out(self, action: Action, response: ToolResponse, request: Request) -> None:
        """`attach(..., data_block=False)`: only the content is sent, on every wire. structuredContent stays only
        when the caller's `tools/list` shows an outputSchema for the MCP tool serving `action`: the spec then
        requires it in every result (a client refuses one without it)."""
        if self.output_schemas:
            entry = serving(action)
            if entry.action is not None:  # its own MCP tool: advertised when typed (it is: it was checked)
                return
            granted = self.granted(request)
            view = entry.tool if granted is None else restricted(entry, _allows(granted))
            if view is not None and view.grouped_output_schema() is not None:
                return
        response.structured_content = None


class _UnknownAction:
    """What the app's rate limits see of a call answered as an unknown tool or action (`call.action` and
    `call.tool`): one stand-in for every such call, whatever name it gave (see `ToolRegistry._charge_unknown`)."""

    name = qualified_name = label = "(unknown tool)"
    description = ""
    readonly = True  # (no write happened)
    destructive = idempotent = open_world = confirm = False
    paginate = None
    middleware: tuple[Any, ...] = ()
    scopes: frozenset[str] = frozenset()
    actions: dict[str, Any] = {}

    @property
    def tool(self) -> _UnknownAction:
        return self


_UNKNOWN: Any = _UnknownAction()  # (duck-typed: what a rate limit reads of an action)


def _allows(granted: frozenset[str]) -> Callable[[Action], bool]:
    """Whether a caller with the `granted` scopes may see and call an action."""
    return lambda action: action.scopes <= granted


class StrayCancellation(Exception):
    """The handler, a dependency or a middleware got a `CancelledError` although its call was not cancelled: a
    task or future it awaited was cancelled by something else (a shared refresh whose owner gave up). A failure
    of the call's code like any other: an internal error, not a cancellation to pass on (the server would
    answer a bare 500, and stdio nothing at all)."""

    def __init__(self, label: str, cancelled: asyncio.CancelledError) -> None:
        super().__init__(f"{label} awaited something that was cancelled elsewhere (asyncio.CancelledError), "
                         "although the call itself was not cancelled")
        self.__cause__ = cancelled  # (the log's traceback shows where the await was)


class AfterRun(Exception):
    """What failed once the handler of a write had returned (its answer: output check, content, presenter): the
    action was done, only its answer cannot be shown (`completed_error`). Raised by `_run` once the call's
    yield dependencies closed as after a success; `_failure` answers it."""

    def __init__(self, label: str, cause: Exception) -> None:
        super().__init__(f"{label} ran, then its answer failed: {type(cause).__name__}")
        self.cause = cause
        self.__cause__ = cause  # (the log's traceback shows what failed)


def completed_error(action: Action, error: ToolError | ValidationFailed) -> ToolError:
    """`error` (its code kept: clients match on it) said of a write that ran: what it does was done, only its
    answer cannot be shown, and calling again would do it twice (`details.completed`: true, for clients and the
    audit). One said so already (an `EgressLimit`'s) is kept as it is."""
    if isinstance(error, ToolError) and error.details.get("completed") is True:
        return error
    return ToolError(
        error.code,
        f"{error.message} The action itself was done (its effect happened): only its answer cannot be shown.",
        recovery="Do not call it again: that would do it a second time. Tell the user it was done; to see the "
                 "result, read it with another action.",
        severity=error.severity,
        details={**error.details, "completed": True},
    )


def _stray(request: Request) -> bool:
    """Whether a `CancelledError` is not the cancellation of this call: the task is not being cancelled (its
    `cancelling()` is 0: no client's cancel, `Timeout`, closed connection or server shutdown cancelled it) and the
    client did not cancel it either (`Context.raise_if_cancelled` raises without cancelling the task)."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        return False
    ctx = request.scope.get(CONTEXT_SCOPE_KEY)
    return not (ctx is not None and ctx.cancelled)


def completed(response: ToolResponse) -> bool:
    """Whether `response` is the error of a write that was done all the same (`completed_error`)."""
    error = response.view.error
    return error is not None and error.details.get("completed") is True


def _failure_of(call: ActionCall, exc: Exception) -> ToolResponse:
    """The answer for what a middleware raised (or the `Timeout` it is). Once the write ran (`call.done`), the
    failure cannot undo it: answered as `AfterRun` is, never "nothing was done, retry"."""
    if _for_the_app(exc, call.request, call.transport):
        raise exc
    if call.done and not isinstance(exc, AfterRun | ProtocolSignal):
        exc = AfterRun(call.action.label, exc)
    return _failure(call.action, exc, call.raise_http, call.transport)


def _stop_held(call: ActionCall | None) -> None:
    """Stop what `call`'s middleware hold for a write's closing (`CLOSING_KEY`), now its handler returned."""
    held = call.state.get(CLOSING_KEY) if call is not None else None
    if held:
        for hold in reversed(held):
            hold.stop()


async def _resume_held(call: ActionCall) -> None:
    """Resume what `_stop_held` stopped, once the write's yield dependencies all closed (a stopped clock goes on
    with the time it had left; one never stopped is left as it is)."""
    held = call.state.get(CLOSING_KEY)
    if held:
        for hold in list(held):
            await hold.resume(True)


def _check_texts(action: Action, texts: list[str]) -> None:
    """Refuse, inside the run, a write's text that no wire can carry (a lone surrogate, from a file name or a
    broken decoder): a failure here is answered as a write done (`AfterRun`); at the transports it would say
    nothing of it. Only non-ASCII text is encoded to find out."""
    for text in texts:
        if not text.isascii():
            try:
                text.encode()
            except UnicodeEncodeError as exc:
                raise ValueError(f"{action.label}: a text block of its answer holds a lone surrogate, which JSON "
                                 "cannot carry in UTF-8 (text from a file name or a broken decoder?)") from exc


# What a cursor scope value may be made of: values that are the same bytes call after call and process after
# process (the tenant id, a principal's name, a tuple of them), never an object whose JSON is its fields
# (a `datetime.now()` among them makes every call another scope: no cursor or confirmation ever matches).
_SCOPE_TYPES = frozenset({str, int, float, bool, type(None), UUID})


_ROWS = (Iterator, AsyncIterator)


async def _read_rows(result: Any, on_loop: bool) -> Any:
    """The rows of an iterator a handler returned, read once here, as part of the handler (its `Timeout`
    running): every later step and every transport sees the list. A plain `def` handler's generator is read in
    the thread pool, as the handler ran (it may block on a database cursor)."""
    if isinstance(result, Iterator):
        return list(result) if on_loop else await run_in_threadpool(list, result)
    return [row async for row in result]  # (an async generator the handler returned)


def _checked_scope(paging: Paging, value: Any, action: Action) -> Any:
    """`value`, the app's `cursor_scope` dependency's, once it is one that binds cursors and confirmations
    (`_stable_scope`); else a clear error naming the dependency and what it must return (logged: the
    server's to fix)."""
    if _stable_scope(value, 8):
        return value
    dependency = getattr(paging.scope, "__qualname__", repr(paging.scope))
    what = f"a {type(value).__name__}" if value is not None else "None"
    logger.error("%s: the cursor_scope dependency %s returned %s: it must return a JSON value that is the same "
                 "call after call for one caller (a string such as the tenant id, a number, or a list or dict of "
                 "them), never an object", action.label, dependency, what)
    raise ToolError(
        INTERNAL_ERROR,
        f"{action.label} cannot run: the server's cursor_scope dependency {dependency} returned {what}, not a "
        "value that can bind this call (it must return JSON text or numbers that stay the same call after call, "
        "e.g. the tenant id). Nothing was done.",
        recovery="This is the server's configuration, not your call: calling again gives the same error. Tell "
                 "the user, or try another action.",
    )


def _stable_scope(value: Any, depth: int) -> bool:
    """Whether `value` is made of `_SCOPE_TYPES` only (enum members of them too), in lists, tuples, sets and
    dicts, at most `depth` levels deep."""
    cls = value.__class__
    if cls in _SCOPE_TYPES:
        return True
    if isinstance(value, Enum):
        return value.value.__class__ in _SCOPE_TYPES
    if depth <= 0:
        return False
    if cls is list or cls is tuple or cls is set or cls is frozenset:
        return all(_stable_scope(item, depth - 1) for item in value)
    if cls is dict:
        return all(k.__class__ in _SCOPE_TYPES and _stable_scope(v, depth - 1) for k, v in value.items())
    return False


def _scrub_carried(exc: Exception, scrub: Callable[[str], str]) -> None:
    """Censor, with the response's scrubber (`view.scrub`, as its attached documents are), what an error raised
    by a handler's `attach` callable tells the client (`censor.CARRIED`): the callable saw the real values,
    and an error leaves without the egress guard. In place; its code, status and severity stay."""

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            return scrub(value)
        if isinstance(value, dict):
            return {clean(k): clean(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value]
        if isinstance(value, int | float | Decimal) and not isinstance(value, bool):
            text = str(value)  # (an error is written as JSON: a removed number is censored as its text is)
            scrubbed_text = scrub(text)
            return value if scrubbed_text == text else scrubbed_text
        return value

    clean_error(exc, clean)


def _for_the_app(exc: Exception, request: Request, transport: str) -> bool:
    """Whether a REST call's exception goes to the app's own handler of its class (`@app.exception_handler`),
    as it would from the app's own routes. MCP answers it as an internal error: a JSON-RPC reply is no HTTP
    response a handler could make."""
    if transport != "rest" or isinstance(exc, ToolError | ValidationFailed | HTTPException | ProtocolSignal):
        return False
    handlers = getattr(request.app, "exception_handlers", None) or {}
    for cls in type(exc).__mro__:
        if cls is Exception:
            return False
        if cls in handlers:
            return True
    return False


def _failure(action: Action, exc: Exception, raise_http: bool, transport: str) -> ToolResponse:
    """The self-healing result for what a call raised; HTTP errors (when `raise_http`) and the MCP
    engine's own control flow (input required, protocol errors) are raised again."""
    if isinstance(exc, ToolError | ValidationFailed):
        return error_response(exc)
    if isinstance(exc, AfterRun):  # (the failure as it would be answered, HTTP errors included, then "it ran")
        answered = _failure(action, exc.cause, False, transport).view.error
        assert answered is not None  # (every failure answers a self-healing error)
        return error_response(completed_error(action, answered))
    if isinstance(exc, DependencyErrors):
        return _dependency_failure(action, exc.errors, transport)
    if isinstance(exc, RequestValidationError):  # raised by a dependency or the handler, as FastAPI's own are
        return _dependency_failure(action, _raised_errors(exc), transport, reasons=True)
    if isinstance(exc, HTTPException):
        if not is_error_status(exc.status_code) and transport != "rest":
            # 1xx-3xx, 600, 0: no error to answer a tool call with (MCP's -32010 would relay a redirect nobody
            # can follow): a server bug, on MCP and in the tester alike. (REST answers a redirect with a
            # Location, a 204 or a 304 as itself: HTTP carries them.)
            logger.error("%s: HTTPException with status %r (not an HTTP error) raised by the handler or a "
                         "dependency", action.label, exc.status_code)
            return _internal_error(action)
        if raise_http:
            raise exc
        if exc.status_code >= 500:
            logger.error("%s: HTTP %s raised by the handler or a dependency", action.label, exc.status_code)
        code, recovery = http_code(exc.status_code)  # REST's code for the same status
        retry_after = retry_after_of(exc)
        return tool_error(code, http_detail(exc), recovery=waited(recovery, retry_after) or None,
                          retry_after=retry_after)
    if isinstance(exc, CallbackError):
        logger.error("%s: %s", action.label, exc)
        return _internal_error(action)
    if isinstance(exc, PresenterError):
        logger.error("%s: %s", action.label, exc)  # field names only, never values
        return error_response(invalid_output(action.label))
    if isinstance(exc, RedactionError):
        logger.error("redaction failed closed in %s", action.label)
        return tool_error(
            INTERNAL_ERROR,
            f"{action.label} could not be answered safely.",
            recovery="This is a server problem; try another action or report it.",
        )
    if isinstance(exc, ProtocolSignal):
        raise exc  # the MCP engine's own control flow (input required, protocol errors)
    logger.error("internal error in %s", action.label, exc_info=exc)
    return _internal_error(action)


# The parts of a request FastAPI reads a dependency's parameter from (a parameter error's `loc[0]`), as the
# error names them: the agent sends none of them (its arguments are the tool call's), so none is its to fix.
# (A "body" error names one of the action's arguments: REST's body is the arguments, MCP's the tool call's.)
_REQUEST_PARTS = {"header": "the header", "cookie": "the cookie", "query": "the query parameter",
                  "path": "the path parameter"}


def _dependency_failure(action: Action, errors: Sequence[Any], transport: str, reasons: bool = False
                        ) -> ToolResponse:
    """FastAPI's parameter errors (a dependency's `Header()` missing...), and a `RequestValidationError` a
    dependency or the handler raised (`reasons`: its messages are the app's own, said with each invalid part).
    REST answers FastAPI's 422 listing them (its client sends the headers); on MCP the agent sends only the
    action's arguments: a header it cannot set is an error of the client's or the server's configuration, never
    a field to fix and call again. Only locations and messages are said, never the values sent (secrets)."""
    parts: list[tuple[bool, str]] = []  # (missing, "the header x-token")
    for error in [] if transport == "rest" else errors:
        loc = tuple(error.get("loc") or ("",))
        if loc[0] in _REQUEST_PARTS:
            part = " ".join([_REQUEST_PARTS[loc[0]], *map(str, loc[1:2])])
            missing = error.get("type") == "missing"
            parts.append((missing, f"{part} ({_reason(error)})" if reasons and not missing else part))
    if not parts:
        fields = [(field_path(_argument_loc(e.get("loc", ()), transport)), f"{_reason(e)}.") for e in errors]
        return error_response(ValidationFailed(action.label, fields))
    missing = list(dict.fromkeys(part for absent, part in parts if absent))  # (two dependencies may read one)
    invalid = list(dict.fromkeys(part for absent, part in parts if not absent))
    said = [f"lacks {', '.join(missing)}"] if missing else []
    said += [f"has an invalid value for {', '.join(invalid)}"] if invalid else []  # (never the value itself)
    return tool_error(
        http_code(400)[0],
        f"The request calling {action.label} {' and '.join(said)}.",
        recovery="No argument of yours can fix this: the MCP client (or the server's configuration) must send it "
                 "with the request. Do not call again as is; tell the user, or use another action.",
    )


_INVALID_REQUEST: dict[str, Any] = {"loc": ("(request)",), "msg": "invalid"}


def _raised_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    """The errors of a `RequestValidationError` the app's code raised, in FastAPI's shape whatever it was given
    (REST's 422 and MCP's answer read them alike): an entry that is not FastAPI's kind of error, a dict, is said
    as an invalid request, and so is a location that is not a list or tuple (None, a number, a string)."""
    errors = exc.errors()
    if not isinstance(errors, list | tuple):  # (`RequestValidationError("oops")`: one invalid request)
        return [_INVALID_REQUEST]
    return [_raised_error(e) for e in errors]


def _raised_error(error: Any) -> dict[str, Any]:
    """One entry of `_raised_errors`: a dict whose `loc` is a tuple of names and indexes."""
    if not isinstance(error, dict):
        return _INVALID_REQUEST
    loc, msg = error.get("loc"), error.get("msg")
    if not isinstance(loc, list | tuple):
        loc = _INVALID_REQUEST["loc"]
    # (a part that is neither a name nor an index, a list say, is said as text: it is looked up and joined)
    loc = tuple(part if isinstance(part, str | int) else str(part) for part in loc)
    return {**error, "loc": loc, "msg": str(msg) if msg else "invalid"}


def _reason(error: Any) -> str:
    """A parameter error's message, cut short (never its input: the value sent may be a secret)."""
    msg = error.get("msg")
    return shortened(str(msg).rstrip("."), 200) if msg else "invalid"


def _argument_loc(loc: Sequence[Any], transport: str) -> Sequence[Any]:
    """An error's location as the caller names the field: on MCP and the tester, `("body", "n")` is the
    argument `n` (the tool call has no body); REST keeps FastAPI's `body.n`."""
    if transport != "rest" and len(loc) > 1 and loc[0] == "body":
        return loc[1:]
    return loc


def _swallowed(action: Action, exc: BaseException | None) -> ToolResponse:
    """The answer of a call whose exception a yield dependency caught without raising it again (the
    "rollback in except" slip; FastAPI raises a `FastAPIError` there): an internal error, and the real
    cause in the log."""
    if exc is not None and (isinstance(exc, ProtocolSignal) or not isinstance(exc, Exception)):
        raise exc  # the MCP engine's control flow, or a cancellation: not the dependency's to swallow
    logger.error("internal error in %s, swallowed by a dependency with yield: its except block must raise the "
                 "exception again", action.label, exc_info=exc)
    return _internal_error(action)


def _internal_error(action: Action) -> ToolResponse:
    return tool_error(
        INTERNAL_ERROR,
        f"{action.label} failed with an internal error.",
        recovery="This is a server problem, not your call; retry later or try another action.",
    )


def check_content(action: Action, items: Iterable[Content], max_bytes: int) -> None:
    """Nothing leaves that is too large or not what its MIME type says (or not one the action declared)."""
    for item in items:
        try:
            item.check(max_bytes, action.content_types)
        except ContentError as exc:
            logger.warning("%s: content refused: %s", action.label, exc)
            # Only a size is the caller's to change; a type the action does not declare, or bytes that are not
            # what their MIME type says, are the server's mistake: asking for less would not help.
            recovery = "Ask for a smaller result (fewer pages or rows, a lower resolution), or report the " \
                       "problem if it persists." if isinstance(exc, ContentTooLarge) else \
                       "This is a server problem, not your call: do not retry it; try another action or report it."
            raise ToolError(CONTENT_REFUSED, f"{action.label} could not send its content. {exc}",
                            recovery=recovery) from None


def _pop_cursor(action: Action, arguments: dict[str, Any]) -> str | None:
    cursor = arguments.pop(CURSOR_PARAM, None)
    if cursor is not None and (not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_LENGTH):
        raise ValidationFailed(action.label, [(CURSOR_PARAM, "Send the next_cursor string of the previous page "
                                                             "unchanged, or no cursor for the first page. You "
                                                             f"sent: {sent_value(cursor)}.")])
    return cursor


def _pop_select(action: Action, arguments: dict[str, Any]) -> list[str] | None:
    if SELECT_PARAM not in arguments:
        return None
    if not action.tool.select:
        return None  # validation reports it as an unknown field
    raw = arguments.pop(SELECT_PARAM)
    # The tool's enum is the union of its actions' fields: this action answers only its own (a field of a
    # sibling action would select nothing, and the data would be lost to the agent).
    if raw == []:
        return []  # nothing selected: the whole data
    own = action.output_keys()
    if not own:
        raise ValidationFailed(action.label, [(SELECT_PARAM, f"{action.label} has no declared fields to select "
                                                             "from: call it without _select.")])
    if not isinstance(raw, list) or not all(isinstance(k, str) for k in raw):
        raise unselectable(action.label, raw, own)
    if action.presenter_dependency is None and not all(k in own for k in raw):
        raise unselectable(action.label, raw, own)
    # (With a `returns=` dependency the names are checked once the caller's presenter is chosen, against its
    # fields only: `check_audience`.)
    return raw


def _presenter(action: Action, dependencies: dict[str, Any]) -> Presenter | None:
    """The presenter of this call: the action's own, or the one its `returns=` dependency chose.

    A dependency that chooses nothing (None, or not a presenter) fails closed: the raw data never goes out.
    """
    if action.presenter_dependency is None:
        return action.presenter
    chosen = dependencies.pop(PRESENTER_KEY, None)
    if isinstance(chosen, Presenter):
        return chosen
    dependency = getattr(action.presenter_dependency, "__qualname__", repr(action.presenter_dependency))
    logger.error("%s: its returns= dependency %s gave %r, not a presenter; failing closed",
                 action.label, dependency, type(chosen).__name__)
    raise ToolError(
        FORBIDDEN,
        f"{action.label} has no view of its result for this caller, so nothing was sent.",
        recovery="Your role or tenant may not see this result; try another action or ask an administrator.",
    )


def _copied(response: ToolResponse) -> ToolResponse:
    """A shallow copy of a middleware's `response` that `_own_answer` may change: its own texts and view (what
    `_select`, the suggestions' filter and the output check replace), the rest shared and left as it is."""
    made = copy.copy(response)
    made.texts = list(response.texts)
    made.view = copy.copy(response.view)
    return made


def _kept_cursor(action: Action, response: ToolResponse, given: dict[str, Any]) -> None:
    """A page a middleware gave (a cache's kept one, an egress cut) keeps the next_cursor of the structuredContent
    it carried, which the output check wrote again from its rows alone."""
    structured = response.structured_content
    if NEXT_CURSOR not in given or structured is None or NEXT_CURSOR in structured:
        return
    cursor = given[NEXT_CURSOR]
    if cursor is not None and cursor.__class__ is not str:  # (the outputSchema says a string or null)
        logger.error("%s: a middleware's page carries a next_cursor that is no string", action.label)
        raise invalid_output(action.label)
    response.structured_content = {**structured, NEXT_CURSOR: cursor}


def _selected(response: ToolResponse, select: list[str]) -> None:
    """`_select` applied to a response the handler (or a middleware) built: its data reshaped, in place."""
    if not response.is_error and isinstance(response.view.data, (dict, list)):
        whole = response.view.data
        response.reshape(select_keys(whole, select))
        response.view.presented = whole


def nothing_found(action: Action) -> ToolError:
    return ToolError(
        NOT_FOUND,
        f"{action.label} found nothing to return.",
        recovery="Check the identifiers you sent; list the available items first if you are unsure.",
        available_actions=[a.qualified_name for a in action.tool.actions.values() if a.readonly and a is not action],
    )


def present(
    action: Action, result: Any, presenter: Presenter | None, ctx: CallContext, select: list[str] | None,
    given: Sequence[Any] | None = None,
) -> tuple[ToolResponse, Presenter | None]:
    """Implicit wrapping: framework responses pass (only `_select` reshapes their data); anything else is
    presented (by the action's presenter or its output model's firewall) or wrapped as `success`.

    Returns the response and the presenter that made it (None for anything else). Content (images, audio,
    documents, links) goes after the text blocks, or alone; attached documents are censored like the blocks.
    A handler's `attach(...)` content goes after its presenter's (`Presenter.attach`): both are sent; its
    callables see the data as presented before `_select` (a document may draw on a field not selected).
    `given`: every row the handler gave when `result` is a page of them (`PageCall.take`), so an attached
    document is censored of the redacted values of the rows left off the page too.
    """
    if isinstance(result, ToolResponse):
        if select:
            _selected(result, select)
        return result, None
    if isinstance(result, Attached):
        response, used = present(action, result.data, presenter, ctx, select, given)
        if not response.is_error:
            view = response.view
            scrub = view.scrub
            try:
                items = result.build(view.data if view.presented is None else view.presented)
            except CARRIED as exc:  # its callable saw the real values, and may quote one in its error
                if scrub is not None:
                    _scrub_carried(exc, scrub)
                raise
            # After the presenter's own (`Presenter.attach`), never in their place: both are sent.
            response.content = (*response.content, *(tuple(scrubbed(item, scrub) for item in items) if scrub
                                                     else items))
            if not result.data_block:
                response.texts = []
                response.view.data_left_out = True
        return response, used
    alone = content_items(result)
    if alone is not None:
        return ToolResponse([], content=alone), None
    presenter = presenter or action.output.firewall
    if presenter is not None:
        if result is None:
            raise nothing_found(action)
        return presenter.present(result, ctx, select=select, given=given), presenter
    data = to_jsonable(result)
    if not select:
        return success(data), None
    response = success(select_keys(data, select))
    response.view.presented = data
    return response, None
