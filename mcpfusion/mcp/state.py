"""HMAC-signed `requestState` of 2026-07-28 input-required results.

The client echoes the state back verbatim, so it is attacker-controlled: it is signed (HMAC-SHA256),
bound to the method and target it was minted for, and expires. It carries the answers the client gave in
earlier rounds, so a handler that asks twice sees both answers on the last round; the handler's own `state`
(`ctx.state`), exactly as it passed it; and, in a field of its own next to it, the framework's round data (a
`Round`: the last progress sent, a confirmation's nonce and spent run). Replicas verify each other's states
when they share `signing_key`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from typing import Any

from . import jsonrpc
from .jsonrpc import McpError


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    """The bytes `_b64` encoded as `text`; ValueError for any other spelling (a lenient decode drops junk
    characters and takes padding or `+/`: an altered token must not pass for the one issued)."""
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if _b64(data) != text:
        raise ValueError("not the canonical encoding")
    return data


class Round:
    """The framework's own data of one round of a 2026-07-28 request, signed into requestState next to the
    handler's state, never in it: what the previous round left (`carried`) and what this one leaves for the
    next (`leaving`, keyed by who wrote it: "progress", "confirm")."""

    __slots__ = ("carried", "leaving")

    def __init__(self, carried: dict[str, Any]) -> None:
        self.carried = carried
        self.leaving: dict[str, Any] = {}


#: The attribute of a 2026-07-28 channel holding its `Round` (set by the engine, read by the context and
#: confirmations): the channel is the one object all three share for a request.
_ROUND = "mcpfusion_round"


def attach_round(channel: object, carried: dict[str, Any]) -> Round:
    """A new `Round` of `channel`'s request, starting from what the previous round `carried`."""
    found = Round(carried)
    setattr(channel, _ROUND, found)
    return found


def round_of(channel: object) -> Round | None:
    """The `Round` of `channel`'s request (None off the 2026-07-28 wire: no rounds there). A request that
    carried nothing from a previous round gets its empty one here, when something first asks for it."""
    found = getattr(channel, _ROUND, None)
    if found is None and getattr(channel, "kind", None) == "modern":
        return attach_round(channel, {})
    return found if isinstance(found, Round) else None


class RequestStateSigner:
    def __init__(self, key: bytes | str | None, ttl: float = 600.0) -> None:
        if key is None:
            key = os.urandom(32)
        self.key = key.encode() if isinstance(key, str) else bytes(key)
        self.ttl = ttl

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self.key, payload, hashlib.sha256).digest()

    def sign(self, method: str, target: str, responses: dict[str, Any], state: Any = None, caller: str = "",
             framework: dict[str, Any] | None = None) -> str:
        """A requestState for the next round: the `responses` so far, the handler's `state` and the framework's
        own round data (`framework`, a `Round.leaving`) in a field of its own."""
        body = {"m": method, "t": target, "c": caller, "r": responses, "s": state, "f": framework or {},
                "e": int(time.time() + self.ttl)}
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: Any, method: str, target: str, caller: str = "") -> tuple[dict[str, Any], Any]:
        """The answers and handler state carried by `token` (`({}, None)` without one); -32602 when it
        is forged, stale, or minted for another request or another caller (the answers it carries are the
        user's, for the caller that asked)."""
        responses, state, _ = self.verify_round(token, method, target, caller)
        return responses, state

    def verify_round(self, token: Any, method: str, target: str, caller: str = ""
                     ) -> tuple[dict[str, Any], Any, dict[str, Any]]:
        """`verify`, plus the framework's round data `token` carries (`{}` without any)."""
        if token is None:
            return {}, None, {}
        invalid = McpError(jsonrpc.INVALID_PARAMS, "Invalid requestState: it was not issued by this server for this "
                           "request or it has expired; retry the request without requestState")
        if not isinstance(token, str) or token.count(".") != 1:
            raise invalid
        payload_b64, mac_b64 = token.split(".")
        try:
            payload, mac = _unb64(payload_b64), _unb64(mac_b64)
        except (ValueError, TypeError):
            raise invalid from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise invalid
        try:
            body = json.loads(payload)
        except ValueError:
            raise invalid from None
        if (body.get("m") != method or body.get("t") != target or body.get("c", "") != caller
                or body.get("e", 0) < time.time()):
            raise invalid
        responses, framework = body.get("r"), body.get("f")
        return (responses if isinstance(responses, dict) else {}), body.get("s"), \
            (framework if isinstance(framework, dict) else {})
