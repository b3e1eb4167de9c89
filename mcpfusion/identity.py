"""Who an authenticated request comes from, as the transports need it (no JWT machinery imported here).

An authentication middleware (`mcpfusion.auth.RequireBearer`) keeps what it verified in
`scope["mcpfusion.auth"]`; MCP sessions are bound to its identity, not to the bytes of a header.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

AUTH_SCOPE_KEY = "mcpfusion.auth"


def identity_of(auth: Any) -> tuple[str, str | None] | None:
    """(digest of issuer + subject + tenant, tenant) of what `RequireBearer` authenticated: an object with
    `subject` (or `sub`) and optional `issuer` / `tenant` attributes, or a claims mapping (`iss`, `sub`,
    `tenant`). MCP sessions are bound to it, so a refreshed token of the same caller keeps its session.
    None when `auth` names no subject."""
    if auth is None:
        return None
    if isinstance(auth, Mapping):
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


__all__ = ["AUTH_SCOPE_KEY", "identity_of"]
