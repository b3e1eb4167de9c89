"""`Context`: what a tool handler can do with the MCP client during a call.

Declare a parameter annotated `Context` and the framework injects the per-call instance:

    async def export(ctx: Context) -> str:
        await ctx.progress(1, 3, "reading")
        await ctx.info("export started")
        answer = await ctx.elicit("Which format?", {"type": "object", "properties": {...}})

Outside MCP (REST, the CLI, tests) `Context.detached()` stands in: progress and logs are no-ops, while
elicit/sample/list_roots/ask raise `OutsideMcp`: a `NoBackChannel` a handler may catch to fall back, and a
`ToolError` (`NO_BACK_CHANNEL`) the call answers when it does not.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any, NoReturn

from .errors import NO_BACK_CHANNEL, ToolError
from .mcp import jsonrpc
from .mcp.channel import Channel, InputRequired, NoBackChannel
from .mcp.jsonrpc import McpError
from .mcp.state import Round, round_of

__all__ = ["NO_BACK_CHANNEL", "ClientUnreachable", "Context", "NoBackChannel", "OutsideMcp"]


class ClientUnreachable(NoBackChannel, ToolError):
    """The client declared what a call asks of it, but the transport has no way to send it the request now
    (the session wire in JSON mode without a GET stream). Still a `NoBackChannel` for handlers that catch one;
    uncaught, the call answers a self-healing tool error saying what the client must change."""

    def __init__(self, method: str, reason: str) -> None:
        ToolError.__init__(
            self, NO_BACK_CHANNEL, f"This call needs to send {method} to the client, and cannot: {reason}.",
            recovery="The client must keep a way open for the server's requests (streamable HTTP: accept "
                     "text/event-stream on the call's POST, or open the session's GET stream first), then call "
                     "again.",
        )


class OutsideMcp(NoBackChannel, ToolError):
    """The call was made outside MCP (REST, the CLI, a test without a client): nobody can answer what it asks.
    A `NoBackChannel` for handlers that catch one to fall back; uncaught, a self-healing `NO_BACK_CHANNEL`
    error (REST: a 400 problem), never a server error: the caller must call through an MCP client."""

    def __init__(self, methods: list[str]) -> None:
        needed = list(dict.fromkeys(_CAPABILITY_OF.get(m, m) for m in methods))
        capabilities = ", ".join(needed) + (" capability" if len(needed) == 1 else " capabilities")
        ToolError.__init__(
            self, NO_BACK_CHANNEL,
            f"This call asks the client ({', '.join(dict.fromkeys(methods))}), so it needs an MCP client that "
            f"supports {', '.join(needed)}; it was made outside MCP (REST, the CLI or a test), where no client "
            "can answer.",
            recovery=f"Call this action through MCP (tools/call) from a client that declares the {capabilities}.",
        )


class Context:
    """Per-call handle on the MCP client: progress, logging, cancellation, elicitation, sampling, roots."""

    def __init__(
        self,
        channel: Channel | None = None,
        *,
        request_id: Any = None,
        session_id: str | None = None,
        protocol_version: str | None = None,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        transport: str = "detached",
    ) -> None:
        self._channel = channel or Channel()
        self.request_id = request_id
        self.session_id = session_id
        self.protocol_version = protocol_version
        self.client_capabilities = client_capabilities or {}
        self.client_info = client_info or {}
        self.meta = meta or {}
        self.transport = transport

    @classmethod
    def detached(cls) -> Context:
        """A context for calls that do not come from an MCP client (REST, unit tests)."""
        return cls()

    @property
    def is_detached(self) -> bool:
        return self.transport == "detached"

    # -- progress and logging -------------------------------------------------------------------------

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send `notifications/progress` when the client asked for it (a `progressToken`), else nothing.

        MCP wants the progress value to increase with each notification: one not greater than the last sent
        for this request, or not a finite number (NaN, infinity), is dropped, never an error to the handler
        (progress is best effort). A total that is not finite is left out."""
        channel = self._channel
        token = channel.progress_token
        if token is None:
            return
        if not math.isfinite(progress):  # JSON has no NaN/inf: it would go out as null
            return
        last = self._last_progress()
        if last is not None and progress <= last:
            return
        channel.last_progress = progress  # set before the await: concurrent calls of a handler see it
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None and math.isfinite(total):
            params["total"] = total
        if message is not None:
            params["message"] = message
        await channel.notify("notifications/progress", params)

    report_progress = progress

    def _last_progress(self) -> float | None:
        """The last progress value sent for this call: in this run of the handler, else in an earlier round
        of the same 2026-07-28 request (carried in its signed requestState), else None."""
        last = self._channel.last_progress
        if last is not None:
            return last
        this_round = round_of(self._channel)
        carried = this_round.carried.get("progress") if this_round is not None else None
        return float(carried) if isinstance(carried, (int, float)) and not isinstance(carried, bool) else None

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` at `level` if the client's log level lets it through."""
        if not self._channel.wants_log(level):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._channel.notify("notifications/message", params)

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.log("info", data, logger)

    async def notice(self, data: Any, logger: str | None = None) -> None:
        await self.log("notice", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.log("error", data, logger)

    # -- cancellation ---------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (`notifications/cancelled` or closed stream)."""
        return self._channel.is_cancelled

    async def wait_cancelled(self) -> None:
        """Return when the request is cancelled (use in `asyncio.wait` next to long work)."""
        await self._channel.cancelled.wait()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise asyncio.CancelledError(self._channel.cancel_reason or "request cancelled by the client")

    # -- asking the client ----------------------------------------------------------------------------

    @staticmethod
    def elicitation(message: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
        """An `elicitation/create` request (form mode), for `ask`."""
        schema = schema or {"type": "object", "properties": {}}
        return {"method": "elicitation/create",
                "params": {"mode": "form", "message": message, "requestedSchema": schema}}

    @staticmethod
    def sampling(
        messages: list[dict[str, Any]] | str,
        *,
        max_tokens: int = 512,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A `sampling/createMessage` request, for `ask`. A string is one user text message."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        return {"method": "sampling/createMessage", "params": params}

    @staticmethod
    def roots() -> dict[str, Any]:
        """A `roots/list` request, for `ask`."""
        return {"method": "roots/list"}

    async def ask(self, requests: dict[str, dict[str, Any]], *, state: Any = None) -> dict[str, Any]:
        """Ask the client several things at once (`{key: ctx.elicitation(...) | ctx.sampling(...) |
        ctx.roots()}`) and get the answers by key.

        On the session wire the requests go out on the call's stream. On 2026-07-28 the first round ends
        the call with an input-required result listing them, and the client's retry re-runs the handler
        with the answers; `state` (any JSON value) comes back signed as `ctx.state` on that retry."""
        if self.is_detached:
            raise OutsideMcp([req["method"] for req in requests.values()])
        self._require_for(*requests.values())
        try:
            answers = await self._channel.ask(requests, state)
        except InputRequired:
            self._carry_progress()
            raise
        except ClientUnreachable:
            raise
        except NoBackChannel as exc:
            raise ClientUnreachable(", ".join(dict.fromkeys(r["method"] for r in requests.values())), str(exc)) \
                from None
        for key, request in requests.items():
            self._check_answer(request, answers.get(key))
        return answers

    @property
    def state(self) -> Any:
        """The `state` given to `ask` in the previous round of this request (2026-07-28), else None: exactly
        that value (the framework's own round data travels next to it, never in it)."""
        return self._channel.state

    async def elicit(self, message: str, schema: dict[str, Any] | None = None, *, key: str | None = None
                     ) -> dict[str, Any]:
        """Ask the user for input (form mode). Returns the `ElicitResult` dict:
        `{"action": "accept"|"decline"|"cancel", "content": {...}}`."""
        return await self._one(self.elicitation(message, schema), key)

    async def sample(self, messages: list[dict[str, Any]] | str, *, key: str | None = None, **kwargs: Any
                     ) -> dict[str, Any]:
        """Ask the client's LLM for a completion (`sampling/createMessage`); returns the result dict."""
        return await self._one(self.sampling(messages, **kwargs), key)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (`roots/list`)."""
        result = await self._one(self.roots(), key)
        return list(result.get("roots", []))

    def require_capability(self, name: str) -> None:
        """Fail the request with JSON-RPC -32021 when the client did not declare capability `name`."""
        if name not in self.client_capabilities and not self.is_detached:
            self._refuse({name: {}})

    def can_ask(self, request: dict[str, Any]) -> bool:
        """Whether the client declared what `request` (`ctx.elicitation(...)`, `ctx.sampling(...)`,
        `ctx.roots()`) needs: its capability, for an elicitation the mode (`{"elicitation": {}}` is form mode
        only), for sampling with tools or includeContext `sampling.tools` / `sampling.context`. False when
        detached. What `ask` and `elicit` check before sending anything."""
        return not self.is_detached and not _lacking(self.client_capabilities, request)

    def _require_for(self, *requests: dict[str, Any]) -> None:
        """Fail the request with -32021 naming everything the client lacks for `requests`, in one error: MCP
        forbids sending a request (or an elicitation mode) the client did not declare."""
        missing: dict[str, Any] = {}
        for request in requests:
            for name, modes in _lacking(self.client_capabilities, request).items():
                missing.setdefault(name, {}).update(modes)
        if missing and not self.is_detached:
            self._refuse(missing)

    def _refuse(self, missing: dict[str, Any]) -> NoReturn:
        """Raise (and record on the channel) -32021 with `requiredCapabilities` = `missing`."""
        listed = ", ".join(_capability_text(name, sub) for name, sub in missing.items())
        raise self._channel.fail(McpError(
            jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"This request needs the client capabilit{'y' if len(missing) == 1 else 'ies'} {listed}",
            {"requiredCapabilities": missing},
        ))

    def close_stream(self) -> None:
        """End the SSE response stream now (the client reconnects with `Last-Event-ID` and gets the rest)."""
        self._channel.close_stream()

    async def _one(self, request: dict[str, Any], key: str | None) -> dict[str, Any]:
        if self.is_detached:
            raise OutsideMcp([request["method"]])
        method = request["method"]
        self._require_for(request)
        try:
            if key is None:
                answer: dict[str, Any] = await self._channel.request(method, request.get("params"))
            else:
                answer = (await self._channel.ask({key: request}))[key]
        except InputRequired:
            self._carry_progress()
            raise
        except ClientUnreachable:
            raise
        except NoBackChannel as exc:
            raise ClientUnreachable(method, str(exc)) from None
        self._check_answer(request, answer)
        return answer

    def _carry_progress(self) -> None:
        """This round of a 2026-07-28 request ends with an input-required result, and the retry re-runs the
        handler from the start: leave the last progress sent in the round data signed into requestState (next
        to the handler's state), so the rerun sends only greater values (MCP: progress increases for the
        whole call)."""
        this_round = round_of(self._channel)
        if this_round is not None:
            last = self._last_progress()
            if last is not None:
                this_round.leaving["progress"] = last

    def _check_answer(self, request: dict[str, Any], answer: Any) -> None:
        """Fail the request with -32602 when the client's answer to `request` is malformed (every way of
        asking goes through here: the handler never sees an answer it did not ask for)."""
        problem = _answer_problem(request, answer)
        if problem is not None:
            raise self._channel.fail(McpError(jsonrpc.INVALID_PARAMS, f"The client's answer to {request['method']} "
                                              f"{problem}"))


def request_round(ctx: Context) -> Round | None:
    """The framework's own round data of `ctx`'s 2026-07-28 request (None elsewhere): see `mcp.state.Round`."""
    return round_of(ctx._channel)


def _capability_text(name: str, sub: dict[str, Any]) -> str:
    """A `requiredCapabilities` entry in words: 'elicitation' (form mode), 'sampling.tools', 'roots'."""
    if not sub:
        return repr(name)
    if name == "elicitation":
        return f"{name!r} ({', '.join(sub)} mode)"
    return ", ".join(repr(f"{name}.{part}") for part in sub)


_CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}


def _lacking(capabilities: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    """What of the client `capabilities` `request` needs is not declared, as `requiredCapabilities` entries
    ({} : nothing). An elicitation needs its mode too: `{}` declares form mode only, `{"url": {}}` url mode
    only (MCP: servers must not send a mode the client does not support). A sampling request with tools
    needs `sampling.tools`, one with an `includeContext` other than "none" `sampling.context`."""
    name = _CAPABILITY_OF.get(request["method"])
    if name is None:
        return {}
    declared = capabilities.get(name)
    params = request.get("params") or {}
    if name == "sampling":
        have = declared if isinstance(declared, dict) else {}
        missing: dict[str, Any] = {sub: {} for sub in _sampling_needs(params) if have.get(sub) is None}
        return {name: missing} if declared is None or missing else {}
    if declared is None:
        return {name: {}}
    if name != "elicitation":
        return {}
    mode = params.get("mode", "form")  # (no mode: form, as before modes existed)
    modes = declared if isinstance(declared, dict) else {}
    if mode in modes or (mode == "form" and not modes):
        return {}
    return {name: {str(mode): {}}}


def _sampling_needs(params: dict[str, Any]) -> list[str]:
    """The `sampling` sub-capabilities a `sampling/createMessage` request's `params` need (MCP 2025-11-25)."""
    needs = ["tools"] if _uses_tools(params) else []
    if params.get("includeContext") not in (None, "none"):
        needs.append("context")
    return needs


def _uses_tools(params: dict[str, Any]) -> bool:
    """Whether a sampling request is tool-enabled: it offers `tools` or a `toolChoice`, or its messages carry
    tool_use/tool_result blocks. It needs `sampling.tools`, and its answer may be a list of blocks, tool_use
    among them (`CreateMessageResultWithTools`)."""
    if params.get("tools") is not None or params.get("toolChoice") is not None:
        return True
    messages = params.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else [content]:
            if isinstance(block, dict) and block.get("type") in ("tool_use", "tool_result"):
                return True
    return False


_RESULT_OF = {"elicitation/create": "ElicitResult", "sampling/createMessage": "CreateMessageResult",
              "roots/list": "ListRootsResult"}


def _answer_problem(request: dict[str, Any], answer: Any) -> str | None:
    """What is wrong with a client's answer to a server request (None: nothing), on either wire: its shape,
    as MCP's result type for the method has it, and an accepted elicitation's content against the schema asked."""
    import mcp_types
    from pydantic import ValidationError

    method = request["method"]
    params = request.get("params") or {}
    result = _RESULT_OF[method]
    if method == "sampling/createMessage" and _uses_tools(params):
        result = "CreateMessageResultWithTools"  # content may be a list, with tool_use blocks
    try:
        getattr(mcp_types, result).model_validate(answer)
    except ValidationError as exc:
        where = sorted({".".join(map(str, e["loc"])) or "(root)" for e in exc.errors()})
        return f"is not a valid {result} (at {', '.join(where[:5])})"
    if method == "elicitation/create" and isinstance(answer, dict) and answer.get("action") == "accept":
        return _content_problem(params.get("requestedSchema"), answer.get("content"))
    return None


def _content_problem(schema: Any, content: Any) -> str | None:
    """What is wrong with accepted elicitation `content` against the `requestedSchema` sent (None: nothing).
    MCP's form schemas are flat objects of primitives: a property the form did not ask for is refused too
    (unless the schema itself allows more), so a handler can trust every key and type it reads."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    if not isinstance(schema, dict):
        return None
    closed = {"additionalProperties": False, **schema}
    cls = validator_for(closed)
    try:
        cls.check_schema(closed)
    except SchemaError:  # the handler's own schema is broken: nothing to check the client against
        return None
    errors = list(cls(closed).iter_errors({} if content is None else content))
    if not errors:
        return None
    said = sorted({f"{'.'.join(['content', *map(str, e.absolute_path)])}: {e.message[:120]}" for e in errors})
    return f"does not match the requestedSchema ({'; '.join(said[:5])})"
