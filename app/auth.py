"""Who is calling: a bearer token resolved to a principal (subject, tenant, role, granted OAuth scopes).

Demo mode accepts three documented tokens; otherwise the token must be a JWT verified with the settings'
key or JWKS, carrying the tenant and role claims. No token or a bad one is an HTTP 401 on MCP and REST.

A verified token must name this service as its audience (`aud`): the configured one (`jwt_audience`, else
`resource_url`), which a token naming no audience does not pass either; with neither configured, the
resource URL derived from the request, which only refuses a token issued for another service. The demo
tokens are no JWTs and name no audience: they are this service's own fixed credentials, not issued by an
authorization server for some resource, so there is no audience to check; demo mode (never in production)
accepts them whatever the audience settings.

Scopes decide which actions a caller sees and may call (`scopes=` on the tools in `routers/`):

    billing:read     read invoices (list, get, PDF, export, revenue summary)
    billing:write    create invoices, move their status, send reminders, void them
    payments:write   record a payment (reaches the payment processor)
    customers:read   read customers

A JWT's `scope` (or `scp`) claim says what it was granted; a token without one gets its role's scopes
(`ROLE_SCOPES`), as do the demo tokens: admin all four, support `billing:read customers:read`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fastapi import HTTPException
from starlette.requests import Request

from mcpfusion.auth import AUTH_SCOPE_KEY, IntrospectionVerifier, JWTVerifier, bearer_token, unauthorized
from mcpfusion.authorization import scopes_of

from .settings import Settings

Role = Literal["admin", "support"]
ROLES: tuple[str, ...] = ("admin", "support")
#: What each role may do when its token names no scopes (the demo tokens, JWTs without `scope`).
ROLE_SCOPES: dict[str, frozenset[str]] = {
    "admin": frozenset({"billing:read", "billing:write", "payments:write", "customers:read"}),
    "support": frozenset({"billing:read", "customers:read"}),
}
SCOPE_DESCRIPTIONS = {
    "billing:read": "Read invoices (list, get, PDF, export, revenue summary)",
    "billing:write": "Create invoices, move their status, send reminders, void them",
    "payments:write": "Record payments (reaches the payment processor)",
    "customers:read": "Read customers",
}


@dataclass(frozen=True, slots=True)
class Principal:
    subject: str
    tenant: str
    role: Role
    issuer: str = ""  # with subject and tenant, the identity MCP sessions are bound to
    granted: frozenset[str] | None = None  # the token's scopes (None: the role's)

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    @property
    def scopes(self) -> frozenset[str]:
        """The OAuth scopes this caller was granted (what `mcpfusion.authorization.scopes_of` reads)."""
        return ROLE_SCOPES[self.role] if self.granted is None else self.granted


DEMO_TOKENS: dict[str, Principal] = {
    "demo-admin": Principal("demo-admin", "acme", "admin"),
    "demo-support": Principal("demo-support", "acme", "support"),
    "demo-globex-admin": Principal("demo-globex-admin", "globex", "admin"),
}


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings  # set by create_app
    return settings


def verifier_for(settings: Settings) -> JWTVerifier | IntrospectionVerifier | None:
    """The token verifier the settings describe: introspection (opaque tokens) when its URL is set, else JWTs
    (None when no key or JWKS is configured). Tokens must name this service as their audience: `jwt_audience`,
    else the resource URL (RFC 8707)."""
    audience = settings.jwt_audience or settings.resource_url
    if settings.introspection_url:
        if not settings.introspection_client_id or not settings.introspection_client_secret:
            raise ValueError("MCPFUSION_INTROSPECTION_URL needs MCPFUSION_INTROSPECTION_CLIENT_ID and "
                             "MCPFUSION_INTROSPECTION_CLIENT_SECRET (the service's own client credentials)")
        return IntrospectionVerifier(settings.introspection_url, client_id=settings.introspection_client_id,
                                     client_secret=settings.introspection_client_secret, audience=audience,
                                     issuer=settings.jwt_issuer)
    if not settings.jwt_key and not settings.jwt_jwks_url:
        return None
    return JWTVerifier(
        key=settings.jwt_key,
        jwks_url=None if settings.jwt_key else settings.jwt_jwks_url,
        issuer=settings.jwt_issuer,
        audience=audience,
        algorithms=settings.jwt_algorithms,
        jwks_refetch_floor=settings.jwks_refetch_floor,
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
    verifier: JWTVerifier | IntrospectionVerifier | None = getattr(request.app.state, "jwt_verifier", None)
    if verifier is None:
        raise unauthorized("Unknown token." + (" Demo tokens: demo-admin, demo-support, demo-globex-admin."
                                               if settings.demo_mode else ""))
    fusion = getattr(request.app.state, "mcpfusion", None)
    resource = getattr(fusion, "authorization", None)
    # Tokens name this service as their audience: the configured one, else the resource URL the metadata
    # advertises (derived from the request), so a client that follows the metadata is let in. A configured
    # resource URL must be named (`verifier_for` makes it the verifier's own audience already).
    claims = await verifier.averify(token, audience=resource.resource_url(request) if resource is not None else None,
                                    audience_required=getattr(resource, "resource", None) is not None)
    tenant = claims.get(settings.tenant_claim)
    role = claims.get(settings.role_claim)
    if not isinstance(tenant, str) or not tenant:
        raise unauthorized(f'The token has no "{settings.tenant_claim}" claim.')
    if role not in ROLES:
        raise HTTPException(status_code=403, detail=f"Role {role!r} may not use this service.")
    named = "scope" in claims or "scp" in claims
    return Principal(str(claims.get("sub", "")), tenant, role, str(claims.get("iss") or ""),
                     scopes_of(claims) if named else None)
