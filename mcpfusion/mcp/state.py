"""HMAC-signed `requestState` of 2026-07-28 input-required results.

The client echoes the state back verbatim, so it is attacker-controlled: it is signed (HMAC-SHA256),
bound to the method and target it was minted for, and expires. It carries the answers the client gave in
earlier rounds, so a handler that asks twice sees both answers on the last round. Replicas verify each
other's states when they share `signing_key`.
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


class RequestStateSigner:
    def __init__(self, key: bytes | str | None, ttl: float = 600.0) -> None:
        if key is None:
            key = os.urandom(32)
        self.key = key.encode() if isinstance(key, str) else bytes(key)
        self.ttl = ttl

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self.key, payload, hashlib.sha256).digest()

    def sign(self, method: str, target: str, responses: dict[str, Any], state: Any = None, caller: str = "") -> str:
        body = {"m": method, "t": target, "c": caller, "r": responses, "s": state, "e": int(time.time() + self.ttl)}
        payload = json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(self, token: Any, method: str, target: str, caller: str = "") -> tuple[dict[str, Any], Any]:
        """The answers and handler state carried by `token` (`({}, None)` without one); -32602 when it
        is forged, stale, or minted for another request or another caller (the answers it carries are the
        user's, for the caller that asked)."""
        if token is None:
            return {}, None
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
        responses = body.get("r")
        return (responses if isinstance(responses, dict) else {}), body.get("s")
