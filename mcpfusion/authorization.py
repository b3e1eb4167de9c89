"""OAuth authorization of an MCP server, as the MCP authorization specification asks of a resource server.

- `ProtectedResource` publishes the protected resource metadata (RFC 9728) at
  `/.well-known/oauth-protected-resource` and at its path-suffixed form (`.../oauth-protected-resource/mcp`),
  and the REST routes' own (`.../oauth-protected-resource/api`, whose `resource` is `.../api`), so a client
  that got a 401 finds the authorization server; every 401 of `RequireBearer` carries
  `WWW-Authenticate: Bearer resource_metadata="..."` (on `/api`, the REST routes' metadata), and a token
  without the resource's `required_scopes` gets a 403 `insufficient_scope` before any JSON-RPC is read.
- Scopes per action (`@tool.action(scopes=[...])`, `Tool(..., scopes=[...])`) are enforced in the core call
  path (`mcpfusion.dispatch`): on MCP and stdio an action the caller lacks scopes for is not listed and is
  answered like an unknown one; on REST it is a 403 `insufficient_scope` naming the scope needed.

The caller's granted scopes come from what the authentication kept in `scope["mcpfusion.auth"]`
(`scopes_of`): an object with a `scopes` attribute, or a claims mapping with `scope` (separated by spaces,
RFC 6749 section 3.3) or `scp` (a list). A request nothing authenticated has no granted scopes at all: nothing
is enforced, so a server without authentication works as before. Under a `ProtectedResource` whose
`authenticate` lets a caller in anonymously (returns None), that caller is `ANONYMOUS`: granted no scope,
and challenged with a 401 for an action that needs one.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

from fastapi import FastAPI, HTTPException
from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import JSONResponse

from .auth import RequireBearer, bearer_authenticator, quoted
from .health import HeadServedToo
from .identity import ANONYMOUS, AUTH_SCOPE_KEY, is_claims
from .memo import by_identity

WELL_KNOWN = "/.well-known/oauth-protected-resource"
#: The OpenAPI security scheme name of the OAuth2 flows (`ProtectedResource.document_openapi`).
OAUTH2_SCHEME = "oauth2"

ScopesOf = Callable[[Any], Iterable[str] | None]


class Registry(Protocol):
    """What the metadata and OpenAPI need of the tools (`mcpfusion.dispatch.ToolRegistry`)."""

    authorization: Any
    scopes_of: ScopesOf

    def actions(self) -> Iterable[Any]: ...


# RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ), tokens separated by %x20 alone.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")


def _scope_names(value: Iterable[Any]) -> frozenset[str]:
    """The valid scope tokens of `value` (anything else grants nothing: "a\u00a0b" is neither "a" nor "b")."""
    return frozenset(s for s in value if isinstance(s, str) and _SCOPE_TOKEN.fullmatch(s))


# A principal's scopes are mostly one frozenset per role, the same object call after call: checked once.
_frozen_scope_names = by_identity(_scope_names)


def _as_scopes(value: Any) -> frozenset[str]:
    """A `scope` string (separated by U+0020 only) or a list of scopes, as a set; anything else grants nothing."""
    if isinstance(value, str):
        return _scope_names(value.split(" "))
    if value.__class__ is frozenset:  # (immutable: what was checked of it holds)
        return _frozen_scope_names(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        return _scope_names(value)
    return frozenset()


def scopes_of(auth: Any) -> frozenset[str] | None:
    """The scopes granted to an authenticated caller: `auth.scopes`, or the claims' `scope` / `scp`.

    None when nothing authenticated the request (`auth` is None): no scope is enforced then. An
    authenticated caller whose result says nothing about scopes is granted none (fail closed)."""
    if auth is None:
        return None
    if is_claims(auth):
        return _as_scopes(auth.get("scope", auth.get("scp")))
    return _as_scopes(getattr(auth, "scopes", None))


class _ClosedToAnonymous:
    """An app's own `scopes_of`, granting `ANONYMOUS` no scope without asking it (it may not know that caller,
    and None from it would mean "nothing to enforce")."""

    __slots__ = ("scopes_of",)

    def __init__(self, scopes_of: ScopesOf) -> None:
        self.scopes_of = scopes_of

    def __call__(self, auth: Any) -> Iterable[str] | None:
        return frozenset() if auth is ANONYMOUS else self.scopes_of(auth)


def _closed_to_anonymous(found: ScopesOf) -> ScopesOf:
    if found is scopes_of or isinstance(found, _ClosedToAnonymous):  # (the default grants it nothing already)
        return found
    return _ClosedToAnonymous(found)


def _anonymous_when_none(authenticate: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Any]]:
    """`authenticate`, answering `ANONYMOUS` where it answers None: a caller it let in without credentials
    is granted no scope (fail closed), not every one."""

    async def caller(request: Request) -> Any:
        found = await authenticate(request)
        return ANONYMOUS if found is None else found

    return caller


def scope_string(scopes: Iterable[str]) -> str:
    """Scopes as one space-separated string, in a stable order (RFC 6749 section 3.3)."""
    return " ".join(sorted(scopes))


def challenge(*params: tuple[str, str | None]) -> str:
    """A `Bearer` challenge with its auth-params quoted (RFC 6750 section 3); None values are left out."""
    text = ", ".join(f"{name}={quoted(value)}" for name, value in params if value is not None)
    return f"Bearer {text}" if text else "Bearer"


def insufficient_scope(needed: Iterable[str], request: Request | None = None,
                       resource: ProtectedResource | None = None, *, what: str = "This request") -> HTTPException:
    """The 403 for a token lacking `needed` scopes: `error="insufficient_scope"`, the `scope` to ask the
    authorization server for, and the resource metadata URL when a `ProtectedResource` is configured."""
    scope = scope_string(needed)
    description = f"{what} needs the scope(s): {scope}."
    if resource is not None and request is not None and request.scope.get(AUTH_SCOPE_KEY) is ANONYMOUS:
        return resource.anonymous_challenge(request, needed, description)
    metadata = resource.metadata_url(request) if resource is not None and request is not None else None
    header = challenge(("error", "insufficient_scope"), ("scope", scope), ("resource_metadata", metadata),
                       ("error_description", description))
    return HTTPException(status_code=403, detail=description, headers={"WWW-Authenticate": header})


class ProtectedResource:
    """An MCP server as an OAuth protected resource (RFC 9728): what a client needs to get a token for it.

        resource = ProtectedResource(
            resource="https://billing.example.com/mcp",          # the audience tokens must name (RFC 8707)
            authorization_servers=["https://auth.example.com"],
            verifier=JWTVerifier(jwks_url=..., issuer=..., audience="https://billing.example.com/mcp"),
        )
        fusion = MCPFusion("billing", tools=[...], authorization=resource)

    `verifier` (a `JWTVerifier` or an `IntrospectionVerifier` of `mcpfusion.auth`) checks the bearer token
    and keeps its claims as the caller; without an audience of its own, a token's `aud` must name `resource`
    (a token naming no audience is a 401 too). `authenticate` (async, request -> the caller, or an HTTP
    401) does it any other way, the audience check included. Either one makes every request to the MCP
    endpoint and under `/api` need a valid token, wherever the app is served (behind a proxy's path prefix,
    `--root-path`, or mounted in another app). An `authenticate` that returns None lets the request in
    anonymously: as `ANONYMOUS`, granted no scope, so an action declaring scopes is hidden from it on MCP and
    a 401 challenge on REST.
    `resource` may be left out: it is then derived from each request (its origin + the MCP path), which is
    only as stable as the Host header (a token naming another audience is refused, one naming none is let
    in): set it in production, and bind the token verifier's audience to it.
    `scopes_supported` (a list, or a mapping scope -> description for OpenAPI) defaults to the
    `required_scopes` and every scope the tools declare. `required_scopes` are needed for any request to
    `/mcp` and `/api` (403 `insufficient_scope` otherwise) and are advertised in the 401 challenge. `token_url` and
    `authorization_url` (the authorization server's endpoints) give OpenAPI its OAuth2 flows.
    """

    def __init__(
        self,
        *,
        authorization_servers: Sequence[str] = (),
        resource: str | None = None,
        authenticate: Callable[[Request], Any] | None = None,
        verifier: Any = None,
        scopes_supported: Sequence[str] | Mapping[str, str] | None = None,
        required_scopes: Iterable[str] = (),
        bearer_methods: Sequence[str] = ("header",),
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        token_url: str | None = None,
        authorization_url: str | None = None,
        scopes_of: ScopesOf = scopes_of,
    ) -> None:
        if resource is not None and (urlsplit(resource).scheme not in ("http", "https") or urlsplit(resource).fragment):
            raise ValueError(f"ProtectedResource: resource {resource!r} must be an http(s) URL without a fragment")
        self.resource = resource.rstrip("/") if resource else None
        self.authorization_servers = list(authorization_servers)
        if authenticate is not None and verifier is not None:
            raise ValueError("ProtectedResource takes authenticate= or verifier=, not both")
        # A configured resource is the audience tokens must name (none naming no audience either); one derived
        # from the Host header only refuses tokens issued for another service.
        configured = self.resource is not None
        self.authenticate = bearer_authenticator(verifier, self.audience, audience_required=configured) \
            if verifier is not None else None if authenticate is None else _anonymous_when_none(authenticate)
        self.scope_descriptions = dict(scopes_supported) if isinstance(scopes_supported, Mapping) else {}
        self.declared_scopes = list(scopes_supported) if scopes_supported is not None else None
        self.required_scopes = frozenset(required_scopes)
        # More declared scopes to advertise besides the actions' (the server's resources and prompts).
        self.scope_sources: list[Callable[[], Iterable[str]]] = []
        self.bearer_methods = list(bearer_methods)
        self.resource_name = resource_name
        self.resource_documentation = resource_documentation
        self.token_url = token_url
        self.authorization_url = authorization_url
        self.scopes_of = _closed_to_anonymous(scopes_of)
        self.mcp_path = "/mcp"
        # The REST routes' prefix: a resource of its own (RFC 9728 section 3.3: a client that requested
        # `/api/...` uses metadata only whose `resource` is that URL, never the MCP endpoint's).
        self.rest_path = "/api"
        self.registry: Registry | None = None

    # -- the metadata document ------------------------------------------------------------------------

    def resource_url(self, request: Request | None = None) -> str:
        """The resource identifier: the configured one, else the URL the request reached the MCP endpoint by
        (its origin, the app's path prefix, the MCP path)."""
        if self.resource is not None:
            return self.resource
        if request is None:
            raise ValueError("ProtectedResource: no resource= configured, so it needs a request to derive it")
        return _served_base(request) + self.mcp_path

    def rest_resource_url(self, request: Request | None = None) -> str:
        """The resource identifier of the REST routes: the MCP resource's with its MCP path replaced by the REST
        prefix (`https://h/mcp` -> `https://h/api`), or, derived from the request, the URL the app serves them by."""
        if self.resource is None:
            if request is None:
                raise ValueError("ProtectedResource: no resource= configured, so it needs a request to derive it")
            return _served_base(request) + self.rest_path
        parts = urlsplit(self.resource)
        mcp = self.mcp_path.rstrip("/")
        base = parts.path[:-len(mcp)] if mcp and parts.path.endswith(mcp) else ""
        return f"{parts.scheme}://{parts.netloc}{base}{self.rest_path}"

    def is_rest(self, request: Request | None) -> bool:
        """Whether `request` is for the REST routes (under `rest_path`), whose resource is `rest_resource_url`."""
        if request is None:
            return False
        path = get_route_path(request.scope)
        return path == self.rest_path or path.startswith(self.rest_path.rstrip("/") + "/")

    def audience(self, request: Request) -> str | tuple[str, ...]:
        """What a token's `aud` may name on `request`: the resource URL, and on REST its own too (a client that
        followed the REST metadata asked its authorization server for a token for `rest_resource_url`)."""
        if self.is_rest(request):
            return self.rest_resource_url(request), self.resource_url(request)
        return self.resource_url(request)

    def metadata_url(self, request: Request | None = None) -> str:
        """Where the metadata is: the REST routes' for a request under `rest_path`, else the MCP endpoint's. For
        a configured resource, the well-known path inserted between its host and its path (RFC 9728 section
        3.1), e.g. `https://h/.well-known/oauth-protected-resource/mcp`; for one derived from the request, where
        this app serves it, under the app's path prefix (a proxy's `--root-path`, a parent app's mount), which
        the RFC's form would leave out of the app's reach."""
        rest = self.is_rest(request)
        if self.resource is None and request is not None:
            path = self.rest_path if rest else self.mcp_path
            return f"{_served_base(request)}{WELL_KNOWN}{path.rstrip('/')}"
        parts = urlsplit(self.rest_resource_url(request) if rest else self.resource_url(request))
        return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"

    def scopes_supported(self) -> list[str]:
        """The advertised scopes: as configured, else the required ones and every scope a tool declares."""
        if self.declared_scopes is not None:
            return self.declared_scopes
        found = set(self.required_scopes)
        if self.registry is not None:
            for action in self.registry.actions():
                found |= action.scopes
        for source in self.scope_sources:
            found.update(source())
        return sorted(found)

    def metadata(self, request: Request | None = None, *, rest: bool = False) -> dict[str, Any]:
        """The RFC 9728 document (of the REST routes' resource with `rest`)."""
        document: dict[str, Any] = {"resource": self.rest_resource_url(request) if rest else self.resource_url(request)}
        if self.authorization_servers:
            document["authorization_servers"] = self.authorization_servers
        document["scopes_supported"] = self.scopes_supported()
        document["bearer_methods_supported"] = self.bearer_methods
        if self.resource_name:
            document["resource_name"] = self.resource_name
        if self.resource_documentation:
            document["resource_documentation"] = self.resource_documentation
        return document

    # -- challenges -------------------------------------------------------------------------------------

    def unauthorized_challenge(self, request: Request, challenge_header: str | None) -> str:
        """A 401's `WWW-Authenticate` with `resource_metadata` (and the required `scope`) added to the
        authentication's own challenge (which may carry `error` and `error_description`)."""
        header = (challenge_header or "Bearer").strip()
        scheme, _, params = header.partition(" ")
        if scheme.lower() != "bearer":
            return header
        added = [] if "resource_metadata=" in params else [f"resource_metadata={quoted(self.metadata_url(request))}"]
        if self.required_scopes and "scope=" not in params:
            added.append(f"scope={quoted(scope_string(self.required_scopes))}")
        return "Bearer " + ", ".join(p for p in (params.strip(), *added) if p)

    def anonymous_challenge(self, request: Request, needed: Iterable[str], description: str) -> HTTPException:
        """The 401 for an anonymous caller (`ANONYMOUS`) asking for what needs `needed` scopes: a token is what
        it lacks, so it is challenged (without an error code, RFC 6750 section 3.1) for the scopes to ask for."""
        scope = scope_string({*needed, *self.required_scopes})
        header = self.unauthorized_challenge(request, challenge(("scope", scope)))
        return HTTPException(status_code=401, detail=f"{description} Send a bearer token granting them.",
                             headers={"WWW-Authenticate": header})

    def refusal(self, request: Request, auth: Any) -> HTTPException | None:
        """The 403 `insufficient_scope` for a caller not granted every required scope, else None."""
        if not self.required_scopes or self.required_scopes <= frozenset(self.scopes_of(auth) or ()):
            return None
        return insufficient_scope(self.required_scopes, request, self, what="This resource")

    # -- installation -----------------------------------------------------------------------------------

    def install(self, app: FastAPI, registry: Registry | None = None, *, mcp_path: str = "/mcp",
                prefixes: Sequence[str] | None = None) -> None:
        """Serve the metadata (both well-known forms), document OAuth2 in OpenAPI, and, when `authenticate`
        is set, require a valid bearer token under `prefixes` (default: `mcp_path` and the REST routes'
        `/api/`; `RequireBearer` with this resource's challenges)."""
        self.mcp_path = mcp_path
        self.registry = registry
        paths = {WELL_KNOWN, WELL_KNOWN + mcp_path.rstrip("/")}
        rest_paths = {WELL_KNOWN + self.rest_path.rstrip("/")}
        if self.resource is not None:
            paths.add(WELL_KNOWN + urlsplit(self.resource).path.rstrip("/"))
            rest_paths.add(WELL_KNOWN + urlsplit(self.rest_resource_url()).path.rstrip("/"))
        served = [(path, self._endpoint) for path in sorted(paths)]
        served += [(path, self._rest_endpoint) for path in sorted(rest_paths - paths)]
        for path, endpoint in served:
            app.router.add_api_route(path, endpoint, methods=["GET"], tags=["authorization"],
                                     summary="OAuth protected resource metadata (RFC 9728)",
                                     include_in_schema=path == WELL_KNOWN, route_class_override=HeadServedToo)
            app.add_api_route(path, endpoint, methods=["HEAD"], include_in_schema=False)  # (RFC 9110)
        if self.authenticate is not None:
            protected = (mcp_path, "/api/") if prefixes is None else prefixes
            app.add_middleware(RequireBearer, authenticate=self.authenticate, prefixes=protected, resource=self)
        if registry is not None:
            registry.authorization = self
            # MCPFusion(scopes_of=...) wins; whichever reads the scopes grants ANONYMOUS none.
            registry.scopes_of = _closed_to_anonymous(self.scopes_of if registry.scopes_of is scopes_of
                                                      else registry.scopes_of)
            self.document_openapi(app, registry)

    async def _endpoint(self, request: Request) -> JSONResponse:
        # A public document: browser-based clients (the MCP Inspector) read it from another origin.
        return JSONResponse(self.metadata(request), headers=_PUBLIC)

    async def _rest_endpoint(self, request: Request) -> JSONResponse:
        return JSONResponse(self.metadata(request, rest=True), headers=_PUBLIC)

    # -- OpenAPI ----------------------------------------------------------------------------------------

    def openapi_scheme(self) -> dict[str, Any] | None:
        """The OpenAPI OAuth2 security scheme: client credentials (with `token_url`) and authorization code
        (with `authorization_url` too), listing the scopes; None when the endpoints are unknown."""
        if self.token_url is None:
            return None
        scopes = {s: self.scope_descriptions.get(s, "") for s in self.scopes_supported()}
        flows: dict[str, Any] = {"clientCredentials": {"tokenUrl": self.token_url, "scopes": scopes}}
        if self.authorization_url is not None:
            flows["authorizationCode"] = {"authorizationUrl": self.authorization_url, "tokenUrl": self.token_url,
                                          "scopes": scopes}
        issuers = ", ".join(self.authorization_servers)
        return {"type": "oauth2", "description": "OAuth 2 access tokens" + (f" of {issuers}" if issuers else ""),
                "flows": flows}

    def document_openapi(self, app: FastAPI, registry: Registry, prefix: str = "/api") -> None:
        """Declare the OAuth2 scheme and, on each REST operation, the scopes its action needs."""
        generate = app.openapi

        def openapi() -> dict[str, Any]:
            if app.openapi_schema is None:
                schema = generate()
                scheme = self.openapi_scheme()
                if scheme is not None:
                    schema.setdefault("components", {}).setdefault("securitySchemes", {})[OAUTH2_SCHEME] = scheme
                    paths = schema.get("paths", {})
                    for action in registry.actions():
                        for operation in paths.get(f"{prefix}/{action.tool.name}/{action.name}", {}).values():
                            needed = sorted(action.scopes | self.required_scopes)
                            operation["security"] = [{OAUTH2_SCHEME: needed}, *operation.get("security", [])]
                            operation.setdefault("responses", {}).setdefault("403", {
                                "description": "The token lacks a scope this action needs (insufficient_scope)"})
                app.openapi_schema = schema
            return app.openapi_schema

        app.openapi = openapi  # type: ignore[method-assign]


_PUBLIC = {"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=300"}


def _served_base(request: Request) -> str:
    """The origin and the path prefix the request reached this app by: `root_path` (a proxy's prefix given
    to the server, a parent app's mount: Starlette's `base_url` leaves a mount's out)."""
    url = request.url
    return f"{url.scheme}://{url.netloc}{request.scope.get('root_path', '').rstrip('/')}"


__all__ = ["ANONYMOUS", "OAUTH2_SCHEME", "WELL_KNOWN", "ProtectedResource", "challenge", "insufficient_scope",
           "scope_string", "scopes_of"]
