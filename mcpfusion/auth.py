"""Bearer-token helpers for dependencies: read the token, verify a JWT, answer a real HTTP 401.

A dependency that raises `HTTPException(401)` makes the whole HTTP request fail with 401 on MCP and REST
alike (the framework lets it propagate to FastAPI), with `WWW-Authenticate: Bearer` as RFC 6750 asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from .extras import require
from .identity import AUTH_SCOPE_KEY
from .problem import http_problem_response


class ResourceChallenges(Protocol):
    """What `RequireBearer` asks of a protected resource (`mcpfusion.authorization.ProtectedResource`)."""

    def unauthorized_challenge(self, request: Request, challenge: str | None) -> str:
        """The `WWW-Authenticate` of a 401, from the authentication's own challenge."""
        ...

    def refusal(self, request: Request, auth: Any) -> HTTPException | None:
        """The 403 for an authenticated caller lacking the resource's required scopes, else None."""
        ...


def quoted(value: str) -> str:
    """`value` as an RFC 7230/7235 quoted-string: backslash and double quote escaped, control characters
    and non-ASCII characters (which a header cannot carry) replaced by spaces."""
    text = "".join(c if 32 <= ord(c) < 127 else " " for c in value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unauthorized(description: str = "A valid bearer token is required.", *, error: str | None = "invalid_token"
                 ) -> HTTPException:
    """The 401 to raise from an authentication dependency."""
    challenge = "Bearer" if error is None else f"Bearer error={quoted(error)}, error_description={quoted(description)}"
    return HTTPException(status_code=401, detail=description, headers={"WWW-Authenticate": challenge})


def single_authorization(request: Request) -> str | None:
    """The one Authorization header of `request` (None when absent); 400 when it is sent more than once, since
    two components could otherwise read different credentials."""
    values = [v for k, v in request.scope["headers"] if k == b"authorization"]
    if len(values) > 1:
        raise HTTPException(status_code=400, detail="Send exactly one Authorization header.")
    return values[0].decode("latin-1") if values else None


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`, or a 401 (a 400 for repeated Authorization headers)."""
    header = single_authorization(request) or ""
    scheme, _, token = header.partition(" ")
    if not header:
        raise unauthorized("Send the header 'Authorization: Bearer TOKEN'.", error=None)
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("The Authorization header must be 'Bearer TOKEN'.", error="invalid_request")
    return token.strip()


HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = frozenset({"ES256", "ES256K", "ES384", "ES512"})
OKP_ALGORITHMS = frozenset({"EdDSA", "Ed25519", "Ed448"})


def _family_of(key: Any) -> frozenset[str]:
    """The JWS algorithms a verification key can be used with."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return EC_ALGORITHMS
    if isinstance(key, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        return OKP_ALGORITHMS
    return HMAC_ALGORITHMS if isinstance(key, str | bytes) else frozenset()


def _load_key(key: str) -> tuple[Any, frozenset[str]]:
    """A PEM public key (or certificate) loaded once, else the HMAC secret; with its algorithm family."""
    text = key.strip()
    if not text.startswith("-----BEGIN"):
        return key, HMAC_ALGORITHMS
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = text.encode()
    try:
        public: Any = x509.load_pem_x509_certificate(data).public_key() if b"CERTIFICATE" in data[:40] \
            else load_pem_public_key(data)
    except ValueError as exc:
        raise ValueError(f"JWTVerifier: the PEM key cannot be loaded ({exc})") from None
    return public, _family_of(public)


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
        self.key: Any = key
        self.jwks = jwt.PyJWKClient(jwks_url, cache_keys=True) if jwks_url else None
        self.issuer = issuer
        self.audience = audience
        self.algorithms = list(algorithms)
        if key is not None:
            # Pinned to the key's type: a token naming another family (RS256 against an HMAC secret, HS256
            # against an RSA public key) is refused before PyJWT tries to use the key with it.
            self.key, family = _load_key(key)
            self.algorithms = [a for a in self.algorithms if a in family]
            if not self.algorithms:
                raise ValueError(f"JWTVerifier: none of the algorithms {list(algorithms)} fits the key "
                                 f"(it takes {sorted(family)})")
        self.leeway = leeway
        self.required = [*required_claims, *(["iss"] if issuer else []), *(["aud"] if audience else [])]

    def verify(self, token: str) -> dict[str, Any]:
        """The token's claims, or a 401 saying why (never the token itself)."""
        jwt = self._jwt
        try:
            key: Any = self.key
            algorithms = self.algorithms
            if self.jwks is not None:
                signing = self.jwks.get_signing_key_from_jwt(token)
                key = signing.key
                family = _family_of(key)
                algorithms = [a for a in algorithms if a in family]
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=algorithms,
                issuer=self.issuer,
                audience=self.audience,
                leeway=self.leeway,
                options={"require": self.required},
            )
        except jwt.ExpiredSignatureError:
            raise unauthorized("The token has expired.") from None
        except jwt.PyJWKClientError:
            raise unauthorized("The token's signing key is unknown.") from None
        except (jwt.InvalidTokenError, jwt.InvalidKeyError) as exc:
            raise unauthorized(f"The token is invalid ({type(exc).__name__}).") from None
        except jwt.PyJWTError as exc:  # any other refusal of PyJWT's is the token's fault, never a 500
            raise unauthorized(f"The token is invalid ({type(exc).__name__}).") from None
        return claims

    async def averify(self, token: str) -> dict[str, Any]:
        """`verify` off the event loop (fetching a JWKS is blocking I/O)."""
        if self.jwks is None:
            return self.verify(token)
        return await run_in_threadpool(self.verify, token)


class RequireBearer:
    """ASGI middleware: requests under `prefixes` must pass `authenticate` or get a real HTTP 401.

    MCP's authorization model is HTTP-level: every request to the MCP endpoint carries the token, and a
    missing or bad one is a 401 with `WWW-Authenticate` before any JSON-RPC is read (so a client can start
    its auth flow). `authenticate(request)` raises `HTTPException` to refuse; what it returns is kept in
    `scope["mcpfusion.auth"]` for dependencies to reuse (no second verification).

    With `resource` (a `mcpfusion.authorization.ProtectedResource`), every 401 names the resource metadata
    (`resource_metadata="..."`) and a token without the resource's required scopes gets a 403
    `insufficient_scope`.
    """

    def __init__(
        self,
        app: Any,
        *,
        authenticate: Any,
        prefixes: Sequence[str] = ("/mcp", "/api/"),
        resource: ResourceChallenges | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.prefixes = tuple(prefixes)
        self.resource = resource

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or not scope["path"].startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        try:
            request = Request(scope)
            auth = scope[AUTH_SCOPE_KEY] = await self.authenticate(request)
            refusal = self.resource.refusal(request, auth) if self.resource is not None else None
            if refusal is not None:
                raise refusal
        except HTTPException as exc:
            if exc.status_code == 401 and self.resource is not None:
                header = self.resource.unauthorized_challenge(request, (exc.headers or {}).get("WWW-Authenticate"))
                exc = HTTPException(401, exc.detail, headers={**(exc.headers or {}), "WWW-Authenticate": header})
            await http_problem_response(exc, scope["path"])(scope, receive, send)
            return
        await self.app(scope, receive, send)
