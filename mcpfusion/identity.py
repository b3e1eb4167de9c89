"""Who an authenticated request comes from, as the transports need it (no JWT machinery imported here).

An authentication middleware (`mcpfusion.auth.RequireBearer`) keeps what it verified in
`scope["mcpfusion.auth"]`; MCP sessions are bound to its identity, not to the bytes of a header.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

AUTH_SCOPE_KEY = "mcpfusion.auth"

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


def identity_of(auth: Any) -> tuple[str, str | None] | None:
    """(digest of issuer + subject + tenant, tenant) of what `RequireBearer` authenticated: an object with
    `subject` (or `sub`) and optional `issuer` / `tenant` attributes, or a claims mapping (`iss`, `sub`,
    `tenant`). MCP sessions are bound to it, so a refreshed token of the same caller keeps its session.
    None when `auth` names no subject."""
    if auth is None:
        return None
    if is_claims(auth):
        issuer, subject, tenant = auth.get("iss"), auth.get("sub"), auth.get("tenant")
    else:
        issuer = getattr(auth, "issuer", None)
        subject = getattr(auth, "subject", getattr(auth, "sub", None))
        tenant = getattr(auth, "tenant", None)
    if subject is None or subject == "":
        return None
    tenant = None if tenant is None else str(tenant)
    who = json.dumps([str(issuer or ""), str(subject), tenant or ""], separators=(",", ":"))
    return hashlib.sha256(who.encode()).hexdigest()[:32], tenant


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


__all__ = ["AUTH_SCOPE_KEY", "credential_digest", "identity_of", "is_claims"]
