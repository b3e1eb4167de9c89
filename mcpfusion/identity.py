"""Who an authenticated request comes from, as the transports need it (no JWT machinery imported here).

An authentication middleware (`mcpfusion.auth.RequireBearer`) keeps what it verified in
`scope["mcpfusion.auth"]`; MCP sessions are bound to its identity, not to the bytes of a header.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

AUTH_SCOPE_KEY = "mcpfusion.auth"
#: The claims (or attributes) naming the caller's tenant, in the order they are read (`tenant_of`).
TENANT_NAMES = ("tenant", "tenant_id")
# Compact JSON, ASCII only, for names orjson refuses: a lone surrogate a claim may hold still encodes (to UTF-8,
# a Redis key, an HMAC), and a tuple comes out as an array.
_KEY_JSON = json.JSONEncoder(separators=(",", ":"))


class _Anonymous(Mapping[str, Any]):
    """An empty, immutable claims mapping: no subject, no tenant, no scopes."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "ANONYMOUS"


#: What a `ProtectedResource` keeps in `scope["mcpfusion.auth"]` when its `authenticate` lets a request in
#: without naming a caller (returns None): a caller granted no scope at all, rather than nothing to enforce.
#: Falsy and empty, so `scope.get(AUTH_SCOPE_KEY) or {}` still reads no claims.
ANONYMOUS: Mapping[str, Any] = _Anonymous()

# Whether instances of a class are mappings, per class: `isinstance(x, Mapping)` goes through the ABC's
# Python-level check (~2k instructions), and every call reads its caller a few times. (Its own dict, not
# `memo.by_identity`: this module is a foundation leaf and imports nothing of the package.)
_CLAIMS_CLASSES: dict[type, bool] = {dict: True}
_CLAIMS_CLASSES_SIZE = 256


def is_claims(auth: Any) -> bool:
    """Whether what authenticated a request is a mapping of claims (a verified token's), rather than an object
    whose attributes name the caller."""
    cls = auth.__class__
    known = _CLAIMS_CLASSES.get(cls)
    if known is None:
        if len(_CLAIMS_CLASSES) >= _CLAIMS_CLASSES_SIZE:
            _CLAIMS_CLASSES.clear()
            _CLAIMS_CLASSES[dict] = True
        known = _CLAIMS_CLASSES[cls] = isinstance(auth, Mapping)
    return known


def tenant_of(auth: Any) -> str | None:
    """The tenant of what authenticated a request: its `tenant`, else `tenant_id` (claim or attribute), as a
    string; None when it names none. The one reading of it: sessions, `ActionCall.tenant`, the audit and rate
    limits all agree on who shares a tenant."""
    if auth is None or isinstance(auth, str):
        return None
    claims = is_claims(auth)
    for name in TENANT_NAMES:
        value = auth.get(name) if claims else getattr(auth, name, None)
        if value is not None and value != "":
            return str(value)
    return None


def identity_of(auth: Any) -> tuple[str, str | None] | None:
    """(digest of issuer + subject + tenant, tenant) of what `RequireBearer` authenticated: an object with
    `subject` (or `sub`) and optional `issuer` / `tenant` attributes, or a claims mapping (`iss`, `sub`,
    `tenant` or `tenant_id`: `tenant_of`). MCP sessions are bound to it, so a refreshed token of the same
    caller keeps its session. None when `auth` names no subject."""
    if auth is None:
        return None
    if is_claims(auth):
        issuer, subject = auth.get("iss"), auth.get("sub")
    else:
        issuer = getattr(auth, "issuer", None)
        subject = getattr(auth, "subject", getattr(auth, "sub", None))
    if subject is None or subject == "":
        return None
    tenant = tenant_of(auth)
    who = json.dumps([str(issuer or ""), str(subject), tenant or ""], separators=(",", ":"))
    return hashlib.sha256(who.encode()).hexdigest()[:32], tenant


def caller_key_of(*parts: str | None) -> str:
    """One key for the caller named by `parts` (issuer, tenant, principal: what per-caller state is keyed by),
    as a JSON array: distinct parts never share a key, whatever characters the names hold (a `/` in a tenant
    or a subject, a quote), and None (no tenant) is not "" nor "null"."""
    try:
        return orjson.dumps(parts).decode()  # (the hot path: a key per rate-limited call)
    except orjson.JSONEncodeError:  # a lone surrogate: escaped. JSON reads one way, so no two inputs share a key
        return _KEY_JSON.encode(parts)


def credential_digest(authorization: str, key: bytes | None = None) -> str:
    """A digest of the credentials an Authorization header carries, whatever the spelling of its scheme
    (case-insensitive, RFC 9110 section 11.1) and the whitespace around them: `Bearer x`, `bearer  x` and
    `BEARER x` are one caller. What per-caller state is keyed by when the caller names no subject.

    With `key` (the server's signing key) it is an HMAC: what is logged (the audit's principal) or stored
    under it cannot be brute-forced back to a weak password or API key without the key, and replicas sharing
    `MCPFUSION_SIGNING_KEY` agree on it."""
    scheme, _, credentials = authorization.strip().replace("\t", " ").partition(" ")
    canonical = f"{scheme.lower()} {credentials.strip()}".encode()
    if key is None:
        return hashlib.sha256(canonical).hexdigest()[:32]
    return hmac.new(key, b"credential|" + canonical, hashlib.sha256).hexdigest()[:32]


__all__ = ["ANONYMOUS", "AUTH_SCOPE_KEY", "TENANT_NAMES", "caller_key_of", "credential_digest", "identity_of",
           "is_claims", "tenant_of"]
