"""Confirmation of destructive actions: `@tool.action(confirm=True)` runs only once the user agreed to
these exact arguments.

- An MCP client that declared the `elicitation` capability is asked: on the 2025-11-25 wire with an
  `elicitation/create` request on the call's stream, on 2026-07-28 with an input-required result that its
  retry answers. The question's key is bound to the arguments and the caller (and keyed by the server's
  secret): a retry with other arguments, or another caller's answer, asks again.
- Any other caller (REST, stdio or MCP clients without elicitation, the tester) gets a self-healing
  `CONFIRMATION_REQUIRED` error carrying a token bound to the action, the exact arguments and the caller,
  valid ten minutes; the call runs when it is sent again with `"_confirm": "<token>"` added.
- When the app sets `MCPFusion(cursor_scope=dependency)` (the tenant, say, a header chooses), the token and the
  question's key are bound to that dependency's value too (resolved before the question, as for a page):
  a confirmation given in one tenant runs nothing in another. Without it, the caller is what binds them.

On 2026-07-28 the question's nonce, and the confirmation a run spent, travel in the signed requestState as the
framework's own round data, next to the handler's state (`ctx.state` is exactly what the handler passed): a
handler that asks the user itself reruns on the next round still confirmed, and the user is asked once.

The action never runs without one or the other, and one confirmation runs it once. Each is bound to the epoch
of the store of spent confirmations it was issued in (`mcpfusion.spent`; in its token, or the signed round data):
one issued before that store forgot what was spent (a restart, a flushed Redis) is refused and asked again,
never run a second time. A run that fails saying nothing was done and to make the same call again (BUSY,
RATE_LIMITED, a `retry_after`: see `retryable`) gives the confirmation back, so that retry runs with the same
token or answer. A declined question answers `NOT_CONFIRMED`. A template (`confirm="Void {id}?"`) is filled
with the validated arguments (None reads "none"; text the agent wrote quoted: `Void "inv_1"?`); `mcpfusion.tool`
checks its fields, conversions and format specs at declaration.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import enum
import hashlib
import hmac
import json
import secrets
import string
import time
import typing
import unicodedata
import uuid
from typing import Any

from starlette.exceptions import HTTPException

from .context import NoBackChannel, request_round
from .errors import BUSY, CONFIRMATION_REQUIRED, NOT_CONFIRMED, RATE_LIMITED, ToolError, ValidationFailed, sent_value
from .listing import how_to_call
from .mcp.jsonrpc import ClientAnswerError
from .middleware import ActionCall
from .pagination import CURSOR_PARAM
from .pauses import waiting_for_the_user
from .select import SELECT_PARAM
from .spent import SpentUnavailable
from .tool import Action, input_name

CONFIRM_PARAM = "_confirm"
TOKEN_TTL = 600.0
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Confirm",
                               "description": "Run it, with exactly these arguments."}},
    "required": ["confirm"],
}


#: What a template shows of an argument whose validated value is None (an optional one not sent).
NONE_SHOWN = "none"


# Values whose text the server writes (a number, a date, a member of a declared enum): shown as they are. Any
# other's text is the agent's (an id, a reason, a list of them): shown quoted (see `_Question`).
_SERVER_WORDED = (bool, int, float, decimal.Decimal, dt.date, dt.time, dt.timedelta, uuid.UUID, enum.Enum)


class _Delimited(str):
    """A field's text already delimited as `repr` writes it (`{reason!r}`): not quoted again."""


_SHOWN_AS_IS = (_Delimited, *_SERVER_WORDED)


class _Question(string.Formatter):
    """`str.format` of a confirmation template over the validated arguments: None reads `NONE_SHOWN`, a value
    its field's format spec cannot take (a middleware changed it) is written plain, never an error, and the
    characters of a value that could change what the user reads (line breaks, controls, bidi overrides) are
    written escaped. Text the agent wrote (a `str`, a list or an object holding some) is shown in double quotes,
    the quotes and backslashes inside escaped as JSON writes them (`"duplicate\\")..."`): a crafted reason
    cannot close the sentence and go on as the server's own words."""

    def get_value(self, key: int | str, args: typing.Sequence[Any], kwargs: typing.Mapping[str, Any]) -> Any:
        return kwargs.get(key) if isinstance(key, str) else None

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if value is None:
            return value
        converted = super().convert_field(value, conversion)
        return _Delimited(converted) if conversion in ("r", "a") else converted

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            return NONE_SHOWN
        try:
            shown = format(value, format_spec)  # (what `Formatter.format_field` does)
        except (ValueError, TypeError):
            shown = str(value)
        if isinstance(value, _SHOWN_AS_IS):  # (`str` is none of them; a `StrEnum` member is an Enum)
            return shown if shown.isprintable() else _escaped(shown)
        if isinstance(value, list | tuple | dict) and not format_spec:
            with contextlib.suppress(TypeError, ValueError):  # (JSON of plain data: its strings quoted)
                return _escaped(json.dumps(value, ensure_ascii=False))
        return _escaped(json.dumps(shown, ensure_ascii=False))


def _escaped(text: str) -> str:
    """`text` with what is not printable written as `repr` writes it (`\\n`, `\\x1b`, `\\u202e`): the caller's
    value cannot start a new paragraph or reorder the question around it. Spaces (no-break ones) stay."""
    return "".join(c if c.isprintable() or unicodedata.category(c) == "Zs" else repr(c)[1:-1] for c in text)


_QUESTION = _Question()


def question(call: ActionCall) -> str:
    """What the user is asked: the action's own template (`confirm="Void {id}?"`) filled with the validated
    arguments (what runs: numeric text sent for a number is that number), or a plain sentence."""
    template = call.action.confirm
    if isinstance(template, str):
        try:
            return _QUESTION.vformat(template, (), _values(call))
        except (AttributeError, LookupError, TypeError, ValueError):
            pass  # `{items[0]}` of an empty list, `{id.x}` of a value without it: the plain sentence says it all
    shown = ", ".join(f"{k}={v!r}" for k, v in _own(call).items()) or "no arguments"
    what = call.action.summary.rstrip(".") or call.action.qualified_name
    return f"Confirm {call.action.qualified_name} ({what}) with {shown}?"


def _values(call: ActionCall) -> dict[str, Any]:
    """The validated arguments under the names a template uses: its input schema's properties (aliases, and
    the fields of a flattened model); an optional argument not sent holds its default."""
    action = call.action
    if action.json_schema is not None:  # a hand-written schema converts nothing: what was sent is what runs
        return {**_own(call), **call.arguments}
    found = dict(call.arguments)
    for param, (_, fields) in action.flattened.items():
        model = found.get(param)
        found.update({name: getattr(model, name, None) for name in fields})
    return {input_name(name, field): found.get(name) for name, field in action.args_model.model_fields.items()}


def _framework(action: Action) -> tuple[str, ...]:
    """The framework's own arguments in a call of `action`: the confirmation itself, and what the call shows
    (`_select` when its tool has `select=True`, `cursor` when it is paginated). As `audit.declared_names`:
    under any other of these names the handler gets an argument of its own (a `cursor` of an action that is
    not paginated), which the confirmation covers."""
    return (CONFIRM_PARAM, *(name for name, on in ((SELECT_PARAM, action.tool.select),
                                                   (CURSOR_PARAM, action.paginate)) if on))


def _own(call: ActionCall) -> dict[str, Any]:
    """The arguments sent, without the framework's own for this action (`raw_arguments` has them all)."""
    sent = call.raw_arguments
    framework = _framework(call.action)
    return {k: v for k, v in sent.items() if k not in framework} if any(k in sent for k in framework) else sent


def digest_of(call: ActionCall, scope: str = "") -> str:
    """What a confirmation is of: a keyed digest of the action, its own arguments as sent and the app's cursor
    scope value (`scope`, its fingerprint; "" when the app sets none), equal for the call asked and the call
    confirmed."""
    canonical = json.dumps([call.action.qualified_name, _own(call), scope], sort_keys=True, separators=(",", ":"),
                           ensure_ascii=False, default=str)
    return hmac.new(call.guards.signing_key, b"call|" + canonical.encode(), hashlib.sha256).hexdigest()


def token(call: ActionCall, digest: str, epoch: str, expires: int | None = None, nonce: str | None = None) -> str:
    """`<expiry>.<nonce>.<epoch>.<mac>`: bound to the call's digest (action + arguments), its caller (tenant and
    principal) and the epoch of the spent confirmations' store; the nonce makes each one issued its own (a
    token is used once: see `GuardState.spend`)."""
    expires = expires if expires is not None else int(time.time() + TOKEN_TTL)
    nonce = nonce if nonce is not None else secrets.token_hex(4)
    signed = f"confirm|{expires}|{nonce}|{epoch}|{call.caller_key}|{digest}"
    mac = hmac.new(call.guards.signing_key, signed.encode(), hashlib.sha256).hexdigest()[:32]
    return f"{expires}.{nonce}.{epoch}.{mac}"


def question_key(call: ActionCall, digest: str, nonce: str) -> str:
    """The input-request key of one confirmation question: bound to the arguments, the caller and the
    question's nonce (carried by the signed requestState on 2026-07-28), keyed by the server's secret. An
    answer sent without that state (answers may be sent ahead) names no question that was asked."""
    mac = hmac.new(call.guards.signing_key, f"question|{call.caller_key}|{digest}|{nonce}".encode(), hashlib.sha256)
    return f"confirm-{mac.hexdigest()[:16]}"


def pop_token(action: Action, arguments: dict[str, Any]) -> str | None:
    """The `_confirm` token taken out of the arguments (None when not sent); one that is not a string is
    refused as invalid arguments, nothing run: a number or an object is no token that was issued."""
    sent = arguments.pop(CONFIRM_PARAM, None)
    if sent is not None and not isinstance(sent, str):
        raise ValidationFailed(action.label, [(CONFIRM_PARAM, "Send the confirm_token string of the "
                                                              "CONFIRMATION_REQUIRED answer unchanged, or no "
                                                              f"{CONFIRM_PARAM} to be asked. You sent: "
                                                              f"{sent_value(sent)}.")])
    return sent


def _valid(call: ActionCall, digest: str, sent: Any) -> str | None:
    """The epoch `sent` was issued in when it is an unexpired token of this call; None otherwise."""
    if not isinstance(sent, str) or sent.count(".") != 3:
        return None
    expiry, nonce, epoch, _ = sent.split(".")
    # ASCII digits of a plausible length only: `isdigit` also takes "²", and int() refuses 4,300 digits.
    if not (expiry.isascii() and expiry.isdigit() and len(expiry) <= 12) or int(expiry) < time.time():
        return None
    if not all(part.isascii() and part.isalnum() and len(part) <= limit for part, limit in ((nonce, 16), (epoch, 32))):
        return None
    # (bytes: `compare_digest` raises on a str holding a non-ASCII character, which only the MAC part may hold)
    return epoch if hmac.compare_digest(sent.encode("utf-8", "surrogatepass"),
                                        token(call, digest, epoch, int(expiry), nonce).encode()) else None


class Confirmed:
    """The confirmation a call spent: `give_back` returns it when the run it confirmed did nothing."""

    __slots__ = ("key", "expires")

    def __init__(self, key: str, expires: float) -> None:
        self.key = key
        self.expires = expires


async def require_confirmation(call: ActionCall, scope: str = "") -> Confirmed:
    """Return (the confirmation spent) once the user confirmed this exact call (in the cursor `scope`: see
    `digest_of`); raise a self-healing `ToolError` otherwise."""
    digest = digest_of(call, scope)
    name = call.action.qualified_name
    if call.confirmation is not None:
        epoch = _valid(call, digest, call.confirmation)
        if epoch is None:
            raise await _needs_token(call, digest, f"The {CONFIRM_PARAM} token does not match this call of {name} "
                                                   "(other arguments, another caller, or expired); nothing was done.")
        spent = await _spend(call, f"token|{call.confirmation}", epoch)
        if spent is not None:
            return spent
        current = await _epoch(call)
        if current != epoch:
            raise await _needs_token(call, digest, f"The {CONFIRM_PARAM} token {_FORGOT}; nothing was done.", current)
        raise await _needs_token(call, digest, f"The {CONFIRM_PARAM} token was already used: one confirmation "
                                               f"runs {name} once; nothing was done.", current)
    ctx = call.context
    asking = None if ctx.is_detached else ctx.elicitation(question(call), SCHEMA)
    if asking is not None and ctx.can_ask(asking):  # (a form: a client of URL elicitation only gets a token)
        # One question per request: its nonce comes back in the round data of the 2026 wire's retries.
        carried = _carried(call)
        nonce, epoch = carried.get("nonce"), carried.get("epoch")
        if not (isinstance(nonce, str) and isinstance(epoch, str)):
            nonce, epoch = f"confirm:{secrets.token_hex(8)}", await _epoch(call)  # (before the user is asked)
        key = question_key(call, digest, nonce)
        _leave(call, nonce=nonce, epoch=epoch)  # (this round ends with the question when it is not answered yet)
        try:
            async with waiting_for_the_user(call):  # the user's reading time is not the action's run
                answer = (await ctx.ask({key: asking}))[key]
                # `ask` let through only a valid ElicitResult whose accepted content matches SCHEMA (else
                # -32602). A "no" ends the call here, before the guards take their slots back.
                if answer is not None and not (answer.get("action") == "accept"
                                               and (answer.get("content") or {}).get("confirm") is True):
                    raise ToolError(NOT_CONFIRMED, f"The user did not confirm {name}; nothing was done.",
                                    recovery="Do not call it again unless the user asks for it.")
        except NoBackChannel:
            answer = None
        except ClientAnswerError as exc:  # its client failed to ask (not the server): the user agrees elsewhere
            raise await _needs_token(call, digest, f"{name} needs the user's confirmation, and this client could "
                                                   f"not ask the user ({exc.message}); nothing was done.") from None
        if answer is not None:
            spent = await _spend(call, f"question|{key}", epoch, nonce)
            if spent is not None:
                return spent
            why = "was already used" if await _epoch(call) == epoch else _FORGOT
            raise ToolError(NOT_CONFIRMED, f"That confirmation of {name} {why}; nothing was done.",
                            recovery=f"Call {called_as(call)} again to ask the user once more.")
    raise await _needs_token(call, digest, f"{name} needs the user's confirmation, and this client cannot ask "
                                           "the user; nothing was done.")


#: Why a confirmation of another epoch than the store's is refused (see `mcpfusion.spent`).
_FORGOT = ("cannot be known to be unused: this server's record of used confirmations was reset since it was "
           "issued (a restart), or another of its processes issued it")


#: `mcp.state.Round` key of a confirmation's round data: {"nonce": its question's, "epoch": the spent store's
#: when it was asked, "spent": the confirmation a run spent, "run": what the next round spends of it}.
_ROUND_KEY = "confirm"


def _carried(call: ActionCall) -> dict[str, Any]:
    """What the previous round of this 2026-07-28 request left of its confirmation ({}: nothing, or no rounds)."""
    this_round = request_round(call.context)
    found = this_round.carried.get(_ROUND_KEY) if this_round is not None else None
    return found if isinstance(found, dict) else {}


def _leave(call: ActionCall, **data: str | None) -> None:
    """Leave `data` of the confirmation to the next round of this 2026-07-28 request (nothing elsewhere)."""
    this_round = request_round(call.context)
    if this_round is not None:
        this_round.leaving[_ROUND_KEY] = {k: v for k, v in data.items() if v is not None}


async def _epoch(call: ActionCall) -> str:
    """The epoch a confirmation issued now is bound to; a BUSY error when the store cannot be reached (no
    confirmation is asked for that could not be used)."""
    try:
        return await call.guards.epoch()
    except SpentUnavailable:
        raise ToolError(BUSY, f"The confirmation of {call.action.qualified_name} cannot be asked for right now; "
                              "nothing was done.",
                        recovery="Retry the same call in a few seconds.", retry_after=2.0) from None


async def _spend(call: ActionCall, confirmation: str, epoch: str, nonce: str | None = None) -> Confirmed | None:
    """The confirmation, issued in `epoch`, spent now; None when it was already, or that epoch is gone.

    A 2026-07-28 run that spent it and then asked the user itself reruns on the next round: that rerun
    spends the `run` key its signed round data carries, once. Each run leaves one requestState with a
    fresh key, and only a run that asks leaves one, so a confirmation still completes one run only."""
    carried = _carried(call)
    run = carried.get("run")
    key = f"{confirmation}|{run}" if carried.get("spent") == confirmation and isinstance(run, str) else confirmation
    expires = time.time() + TOKEN_TTL
    try:
        if not await call.guards.spend(key, expires, epoch):
            return None
    except SpentUnavailable:
        raise ToolError(BUSY, f"The confirmation of {call.action.qualified_name} could not be recorded right now; "
                              "nothing was done.",
                        recovery="Retry the same call in a few seconds (the confirmation is still valid).",
                        retry_after=2.0) from None
    _leave(call, nonce=nonce, epoch=epoch, spent=confirmation, run=secrets.token_hex(8))
    return Confirmed(key, expires)


#: Error codes that say the call did nothing and is to be made again as it is (with or without `retry_after`).
_RETRY_CODES = frozenset({BUSY, RATE_LIMITED})


def retryable(failure: BaseException | None) -> bool:
    """Whether a confirmed run's failure says nothing was done and to make the same call again: a `ToolError`
    with a `retry_after` or a BUSY / RATE_LIMITED code, an HTTP 429, or a 503 with Retry-After. A timeout or
    a cancellation is not one: the handler may have done part of its work."""
    if isinstance(failure, ToolError):
        if failure.details.get("completed") is True:  # the action was done (`dispatch.completed_error`)
            return False
        return failure.retry_after is not None or failure.code in _RETRY_CODES
    if isinstance(failure, HTTPException):
        status = failure.status_code
        return status == 429 or (status == 503 and any(k.lower() == "retry-after" for k in failure.headers or ()))
    return False


async def give_back(call: ActionCall, confirmed: Confirmed, failure: BaseException | None) -> None:
    """Un-spend `confirmed` when the run it confirmed failed with a `retryable` error: the same call, made
    again as that error says, runs with the same token or answer (still once: a success or any other
    failure keeps it spent, and a store that cannot give it back leaves it spent: the user confirms again)."""
    if not retryable(failure):
        return
    release = getattr(call.guards.spent, "release", None)  # (an app's own store may not have one)
    if release is None:
        return
    # Unreachable (the store logged it): fail closed, the retry is asked to confirm again, never run twice.
    with contextlib.suppress(SpentUnavailable):
        await release(confirmed.key, confirmed.expires)


async def _needs_token(call: ActionCall, digest: str, message: str, epoch: str | None = None) -> ToolError:
    """CONFIRMATION_REQUIRED with a fresh token, in `epoch` (the store's, when already read)."""
    issued = token(call, digest, epoch if epoch is not None else await _epoch(call))
    return ToolError(
        CONFIRMATION_REQUIRED,
        message,
        recovery=f'Ask the user: "{question(call)}" Only if they agree, call {called_as(call)} '
                 f'again with exactly the same arguments plus "{CONFIRM_PARAM}": "{issued}" '
                 f"(valid {int(TOKEN_TTL // 60)} minutes).",
        details={"confirm_token": issued},
    )


#: How each action is called on MCP ("billing with action void_invoice", "billing_void_invoice"), with the
#: tool's actions it was worked out from: `listing.how_to_call` builds the tool's listing.
_CALLED_AS: dict[Action, tuple[tuple[str, ...], str]] = {}


def called_as(call: ActionCall) -> str:
    """How the caller names `call.action` in "call ... again": over MCP (stdio, the tester) the MCP tool it
    calls, with its `action` when grouped; on REST the qualified name, which `rest._route_named` turns into
    the route called. A raw tool's name is its MCP tool's."""
    action = call.action
    if call.transport == "rest" or not isinstance(action, Action):
        return action.qualified_name
    names = tuple(action.tool.actions)  # the exposition of one action changes with its tool's other actions
    known = _CALLED_AS.get(action)
    if known is None or known[0] != names:
        if len(_CALLED_AS) >= 4096:  # actions of tools made and dropped at runtime (tests): start again
            _CALLED_AS.clear()
        known = _CALLED_AS[action] = (names, how_to_call(action))
    return known[1]
