"""Who is calling: a bearer token resolved to a principal (subject, tenant, role).

Demo mode accepts three documented tokens; otherwise the token must be a JWT verified with the settings'
key or JWKS, carrying the tenant and role claims. No token or a bad one is an HTTP 401 on MCP and REST.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException
from starlette.requests import Request

from mcpfusion.auth import AUTH_SCOPE_KEY, JWTVerifier, bearer_token, unauthorized

from .settings import Settings

Role = Literal["admin", "support"]
ROLES: tuple[str, ...] = ("admin", "support")


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    tenant: str
    role: Role
    issuer: str = ""  # with subject and tenant, the identity MCP sessions are bound to

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


DEMO_TOKENS: dict[str, Principal] = {
    "demo-admin": Principal("demo-admin", "acme", "admin"),
    "demo-support": Principal("demo-support", "acme", "support"),
    "demo-globex-admin": Principal("demo-globex-admin", "globex", "admin"),
}


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


def verifier_for(settings: Settings) -> JWTVerifier | None:
    """The JWT verifier the settings describe (None when no key or JWKS is configured)."""
    if not settings.jwt_key and not settings.jwt_jwks_url:
        return None
    return JWTVerifier(
        key=settings.jwt_key,
        jwks_url=None if settings.jwt_key else settings.jwt_jwks_url,
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        algorithms=settings.jwt_algorithms,
    )


async def current_principal(request: Request) -> Principal:
    """The caller, from `Authorization: Bearer ...` (a 401 otherwise)."""
    known = request.scope.get(AUTH_SCOPE_KEY)
    if isinstance(known, Principal):  # already authenticated by the HTTP middleware
        return known
    return await authenticate(request, get_settings(request))


async def authenticate(request: Request, settings: Settings | None = None) -> Principal:
    """Resolve the bearer token of `request` (used by the dependency and the HTTP middleware)."""
    settings = settings or get_settings(request)
    token = bearer_token(request)
    if settings.demo_mode and token in DEMO_TOKENS:
        return DEMO_TOKENS[token]
    verifier: JWTVerifier | None = getattr(request.app.state, "jwt_verifier", None)
    if verifier is None:
        raise unauthorized("Unknown token." + (" Demo tokens: demo-admin, demo-support, demo-globex-admin."
                                               if settings.demo_mode else ""))
    claims = await verifier.averify(token)
    tenant = claims.get(settings.tenant_claim)
    role = claims.get(settings.role_claim)
    if not isinstance(tenant, str) or not tenant:
        raise unauthorized(f'The token has no "{settings.tenant_claim}" claim.')
    if role not in ROLES:
        raise HTTPException(status_code=403, detail=f"Role {role!r} may not use this service.")
    return Principal(str(claims.get("sub", "")), tenant, role, str(claims.get("iss") or ""))
