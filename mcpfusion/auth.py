"""Bearer-token helpers for dependencies: read the token, verify a JWT, answer a real HTTP 401.

A dependency that raises `HTTPException(401)` makes the whole HTTP request fail with 401 on MCP and REST
alike (the framework lets it propagate to FastAPI), with `WWW-Authenticate: Bearer` as RFC 6750 asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from .extras import require
from .problem import http_problem_response


def unauthorized(description: str = "A valid bearer token is required.", *, error: str | None = "invalid_token"
                 ) -> HTTPException:
    """The 401 to raise from an authentication dependency."""
    challenge = "Bearer" if error is None else f'Bearer error="{error}", error_description="{description}"'
    return HTTPException(status_code=401, detail=description, headers={"WWW-Authenticate": challenge})


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`, or a 401."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header:
        raise unauthorized("Send the header 'Authorization: Bearer TOKEN'.", error=None)
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("The Authorization header must be 'Bearer TOKEN'.", error="invalid_request")
    return token.strip()


class JWTVerifier:
    """Verifies JWTs with PyJWT: signature (shared key, PEM public key, or JWKS), expiry, issuer, audience."""

    def __init__(
        self,
        *,
        key: str | None = None,
        jwks_url: str | None = None,
        issuer: str | None = None,
        audience: str | None = None,
        algorithms: Sequence[str] = ("RS256",),
        leeway: float = 30,
        required_claims: Sequence[str] = ("exp",),
    ) -> None:
        if (key is None) == (jwks_url is None):
            raise ValueError("JWTVerifier needs exactly one of key= or jwks_url=")
        self._jwt = jwt = require("jwt", extra="auth", feature="JWTVerifier")
        self.key = key
        self.jwks = jwt.PyJWKClient(jwks_url, cache_keys=True) if jwks_url else None
        self.issuer = issuer
        self.audience = audience
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self.required = [*required_claims, *(["iss"] if issuer else []), *(["aud"] if audience else [])]

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or a 401 saying why (never the token itself)."""
        jwt = self._jwt
        try:
            key: Any = self.jwks.get_signing_key_from_jwt(token).key if self.jwks else self.key
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway,
                options={"require": self.required},
            )
        except jwt.ExpiredSignatureError:
            raise unauthorized("The token has expired.") from None
        except jwt.PyJWKClientError:
            raise unauthorized("The token's signing key is unknown.") from None
        except jwt.InvalidTokenError as exc:
            raise unauthorized(f"The token is invalid ({type(exc).__name__}).") from None
        return claims

    async def averify(self, token: str) -> dict[str, Any]:
        """`verify` off the event loop (fetching a JWKS is blocking I/O)."""
        if self.jwks is None:
            return self.verify(token)
        return await run_in_threadpool(self.verify, token)


AUTH_SCOPE_KEY = "mcpfusion.auth"


class RequireBearer:
    """ASGI middleware: requests under `prefixes` must pass `authenticate` or get a real HTTP 401.

    MCP's authorization model is HTTP-level: every request to the MCP endpoint carries the token, and a
    missing or bad one is a 401 with `WWW-Authenticate` before any JSON-RPC is read (so a client can start
    its auth flow). `authenticate(request)` raises `HTTPException` to refuse; what it returns is kept in
    `scope["mcpfusion.auth"]` for dependencies to reuse (no second verification).
    """

    def __init__(
        self,
        app: Any,
        *,
        authenticate: Any,
        prefixes: Sequence[str] = ("/mcp", "/api/"),
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.prefixes = tuple(prefixes)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        try:
            scope[AUTH_SCOPE_KEY] = await self.authenticate(Request(scope))
        except HTTPException as exc:
            await http_problem_response(exc, scope["path"])(scope, receive, send)
            return
        await self.app(scope, receive, send)
