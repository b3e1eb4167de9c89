"""Bearer-token helpers for dependencies: read the token, verify it (a JWT, or an opaque token by
introspection), answer a real HTTP 401.

A dependency that raises `HTTPException(401)` makes the whole HTTP request fail with 401 on MCP and REST
alike (the framework lets it propagate to FastAPI), with `WWW-Authenticate: Bearer` as RFC 6750 asks.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from fastapi import HTTPException
from starlette._utils import get_route_path
from starlette.requests import Request
from starlette.responses import Response

from .extras import require
from .identity import AUTH_SCOPE_KEY as AUTH_SCOPE_KEY  # re-exported: where RequireBearer keeps the caller
from .problem import http_problem_response, problem, problem_response

#: The error code of a token that could not be checked now (the authorization server unreachable).
AUTH_UNAVAILABLE = "AUTH_UNAVAILABLE"

logger = logging.getLogger("mcpfusion.auth")

Audience = str | tuple[str, ...]
"""The resource URL a token must be issued for, or several: any one of them (`ProtectedResource.audience`)."""


class AuthUnavailable(HTTPException):
    """The 503 of a token that cannot be checked now (the authorization server's keys or its introspection
    endpoint unreachable): not the token's fault, so it is neither a 401 nor a 500. `RequireBearer` answers it
    as an `AUTH_UNAVAILABLE` problem with `Retry-After`."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(status_code=503, detail=message, headers={"Retry-After": str(retry_after)})
        self.retry_after = retry_after

    def response(self, instance: str) -> Response:
        body = problem(503, AUTH_UNAVAILABLE, str(self.detail), retry_after=self.retry_after, instance=instance,
                       recovery="Send the same request again after the time given in Retry-After.")
        return problem_response(body, self.headers)


class IntrospectionVerifier:
    """Verifies opaque access tokens with the authorization server's introspection endpoint (RFC 7662).

        verifier = IntrospectionVerifier("https://auth.example.com/token/introspection",
                                         client_id="billing-api", client_secret="...",
                                         audience="https://billing.example.com/mcp")
        claims = await verifier.averify(token)      # or ProtectedResource(verifier=verifier)

    The resource server authenticates itself with HTTP Basic (`client_secret_basic`). An inactive token,
    one issued for another audience or by another issuer is a 401; an unreachable or failing endpoint is a
    503 (the token may be fine). Answers are cached for `cache_ttl` seconds, never past the token's `exp`,
    keyed by the token's SHA-256 (the token itself is never kept).
    """

    def __init__(
        self,
        url: str,
        *,
        client_id: str,
        client_secret: str,
        audience: str | None = None,
        issuer: str | None = None,
        cache_ttl: float = 60,
        cache_size: int = 10_000,
        timeout: float = 10,
        http: Any = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._httpx = require("httpx", extra="auth", feature="IntrospectionVerifier")
        self.url = url
        self.auth = (client_id, client_secret)
        self.audience = audience
        self.issuer = issuer
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.timeout = timeout
        self.http = http  # an httpx.AsyncClient to share (tests, connection pooling); one per call otherwise
        self.clock = clock
        self.requests = 0
        self._cache: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    async def averify(self, token: str, *, audience: Audience | None = None, audience_required: bool = False
                      ) -> dict[str, Any]:
        """The token's introspection claims (`scope`, `sub`, `aud`, `exp`...), or an HTTP 401 / 503.
        `audience`: what its `aud` must name when this verifier has no audience of its own (a token without
        `aud` is refused too with `audience_required`: see `check_audience`)."""
        claims = await self._claims(token)
        if self.audience is None:
            check_audience(claims, audience, required=audience_required)
        return claims

    async def _claims(self, token: str) -> dict[str, Any]:
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._cache.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        self._cache.pop(digest, None)
        claims = self._check(await self._introspect(token), now)
        expires = now + self.cache_ttl
        if "exp" in claims:  # (a number: `_check` saw to it)
            expires = min(expires, claims["exp"])
        if expires > now:
            self._cache[digest] = (expires, claims)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return claims

    async def _introspect(self, token: str) -> Any:
        httpx = self._httpx
        self.requests += 1
        form = {"token": token, "token_type_hint": "access_token"}
        try:
            if self.http is not None:
                response = await self.http.post(self.url, data=form, auth=self.auth, timeout=self.timeout)
            else:
                async with httpx.AsyncClient(timeout=self.timeout) as client:
                    response = await client.post(self.url, data=form, auth=self.auth)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            logger.warning("token introspection at %s failed: %s", self.url, type(exc).__name__)
            raise AuthUnavailable("The authorization server could not check the token; retry later.", 5) from None

    def _check(self, claims: Any, now: float) -> dict[str, Any]:
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise unauthorized("The token is not active.")
        _check_numeric_dates(claims)
        exp = claims.get("exp")
        if exp is not None and exp <= now:
            raise unauthorized("The token has expired.")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise unauthorized("The token was issued by another authorization server.")
        if self.audience is not None:
            check_audience(claims, self.audience, required=True)
        return claims


def bearer_authenticator(verifier: Any, resource_url: Callable[[Request], Audience] | None = None, *,
                         audience_required: bool = False) -> Callable[[Request], Any]:
    """`authenticate(request)` for `RequireBearer`: the bearer token's claims, as `verifier.averify` gives them.
    With `resource_url` (the protected resource's URL for a request), a verifier of this module that has no
    audience of its own refuses a token issued for another audience than that URL; with `audience_required`
    (that URL is configured, not derived from the request) it refuses a token naming no audience too."""
    fallback = resource_url if isinstance(verifier, JWTVerifier | IntrospectionVerifier) else None

    async def authenticate(request: Request) -> Any:
        if fallback is None:
            return await verifier.averify(bearer_token(request))
        return await verifier.averify(bearer_token(request), audience=fallback(request),
                                      audience_required=audience_required)

    return authenticate


def audience_forms(audience: Audience) -> list[str]:
    """The spellings of a resource URL a token's `aud` may use: with and without its trailing slash (the
    metadata advertises it without; a configured audience may carry one); of each, for several resources."""
    if not isinstance(audience, str):
        return [form for one in audience for form in audience_forms(one)]
    bare = audience.rstrip("/")
    return [bare, bare + "/"]


def names_audience(claims: Mapping[str, Any], audience: Audience) -> bool:
    """Whether the `aud` claim (a string or a list) names `audience` in one of its `audience_forms` (what
    `JWTVerifier` accepts too)."""
    found = claims.get("aud")
    audiences = [found] if isinstance(found, str) else found if isinstance(found, list) else []
    forms = audience_forms(audience)
    return any(isinstance(a, str) and a in forms for a in audiences)


def check_audience(claims: Mapping[str, Any], audience: Audience | None, *, required: bool = False) -> None:
    """The 401 for a token whose `aud` claim does not name `audience`. A token without `aud` is refused when
    `required` (a configured audience: RFC 8707, the MCP authorization spec's "issued for this server"), and
    passes otherwise (the resource URL a server derived from the request, when none was configured: only a
    token issued for another service is refused then)."""
    if audience is None:
        return
    if "aud" not in claims:
        if required:
            raise unauthorized("The token names no audience; it must be issued for this resource.")
        return
    if not names_audience(claims, audience):
        raise unauthorized("The token was not issued for this resource.")


class ResourceChallenges(Protocol):
    """What `RequireBearer` asks of a protected resource (`mcpfusion.authorization.ProtectedResource`)."""

    def unauthorized_challenge(self, request: Request, challenge: str | None) -> str:
        """The `WWW-Authenticate` of a 401, from the authentication's own challenge."""
        ...

    def refusal(self, request: Request, auth: Any) -> HTTPException | None:
        """The 403 for an authenticated caller lacking the resource's required scopes, else None."""
        ...


# The RFC 6750 error of a refusal that carries no challenge of its own (a 401's is the authentication's).
_REFUSAL_ERRORS = {400: "invalid_request", 403: "insufficient_scope"}


def quoted(value: str) -> str:
    """`value` as an RFC 7230/7235 quoted-string: backslash and double quote escaped, control characters
    and non-ASCII characters (which a header cannot carry) replaced by spaces."""
    text = "".join(c if 32 <= ord(c) < 127 else " " for c in value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unauthorized(description: str = "A valid bearer token is required.", *, error: str | None = "invalid_token"
                 ) -> HTTPException:
    """The 401 to raise from an authentication dependency."""
    challenge = "Bearer" if error is None else bearer_challenge(error, description)
    return HTTPException(status_code=401, detail=description, headers={"WWW-Authenticate": challenge})


def bearer_challenge(error: str, description: str) -> str:
    """`Bearer error="...", error_description="..."` (RFC 6750 section 3; no description when empty)."""
    return f"Bearer error={quoted(error)}" + (f", error_description={quoted(description)}" if description else "")


def single_authorization(request: Request) -> str | None:
    """The one Authorization header of `request` (None when absent); 400 when it is sent more than once, since
    two components could otherwise read different credentials."""
    found = None
    for name, value in request.scope["headers"]:  # (a loop, not a comprehension: one frame less per request)
        if name == b"authorization":
            if found is not None:
                raise HTTPException(status_code=400, detail="Send exactly one Authorization header.")
            found = value
    return None if found is None else found.decode("latin-1")


def bearer_token(request: Request) -> str:
    """The token of `Authorization: Bearer <token>`, or a 401 (a 400 for repeated Authorization headers).
    A request carrying no bearer token (no header, another scheme, `Bearer` alone) is challenged without an
    error code: RFC 6750 section 3.1 keeps `invalid_request` for a 400."""
    header = single_authorization(request) or ""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("The Authorization header must be 'Bearer TOKEN'." if header
                           else "Send the header 'Authorization: Bearer TOKEN'.", error=None)
    return token.strip()


HMAC_ALGORITHMS = frozenset({"HS256", "HS384", "HS512"})
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = frozenset({"ES256", "ES256K", "ES384", "ES512", "ES521"})
OKP_ALGORITHMS = frozenset({"EdDSA", "Ed25519", "Ed448"})
# Each ECDSA algorithm signs with one curve (PyJWT refuses a key of another: InvalidKeyError).
_CURVE_ALGORITHMS = {"secp256r1": frozenset({"ES256"}), "secp256k1": frozenset({"ES256K"}),
                     "secp384r1": frozenset({"ES384"}), "secp521r1": frozenset({"ES512", "ES521"})}


def _family_of(key: Any) -> frozenset[str]:
    """The JWS algorithms a verification key can be used with (an EC key: those of its curve)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPublicKey | rsa.RSAPrivateKey):
        return RSA_ALGORITHMS
    if isinstance(key, ec.EllipticCurvePublicKey | ec.EllipticCurvePrivateKey):
        return _CURVE_ALGORITHMS.get(key.curve.name, frozenset())
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


class _Fetch:
    """One JWKS fetch in flight: the lookups that need its outcome wait for it, none starts another. A thread
    waits on `done`; a coroutine on its event loop (`until_done`), holding no thread meanwhile."""

    __slots__ = ("_lock", "_waiters", "deadline", "done", "refetch")

    def __init__(self, timeout: float, refetch: bool) -> None:
        self.done = threading.Event()
        # The fetch's own timeout decides first; a server that trickles its answer cannot hold waiters longer.
        self.deadline = time.monotonic() + timeout + 1
        self.refetch = refetch  # for a key id the set lacked (rate-limited by the floor)
        self._waiters: list[asyncio.Future[None]] = []
        self._lock = threading.Lock()  # (the fetch ends on its own thread)

    def wait(self) -> bool:
        """Whether the fetch ended before its deadline."""
        return self.done.wait(max(0.0, self.deadline - time.monotonic()))

    async def until_done(self) -> bool:
        """`wait` for a coroutine."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        with self._lock:
            if self.done.is_set():
                return True
            self._waiters.append(future)
        try:
            await asyncio.wait_for(future, max(0.0, self.deadline - time.monotonic()))
        except TimeoutError:
            return False
        return True

    def finish(self) -> None:
        """Mark the fetch ended and wake its waiters, threads and coroutines."""
        with self._lock:
            self.done.set()
            waiters, self._waiters = self._waiters, []
        for future in waiters:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits any more
                future.get_loop().call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # (a waiter that timed out cancelled its future)
        future.set_result(None)


class JWKSKeys:
    """The signing keys a JWKS URL publishes, as `JWTVerifier` needs them through key rotations.

    Fetched on first use and again after `lifespan` seconds, then in the background: a lookup of a key
    already known never waits for a fetch. A token naming a key id the set does not have (the authorization
    server rotated its key) waits for a refetch of the set; such refetches happen at most every
    `refetch_floor` seconds, counted from the end of the last one, and one at a time (lookups arriving
    meanwhile share it), so a flood of tokens with made-up key ids cannot hammer the authorization server. A
    key removed from the set stops being accepted at the next fetch. A failed fetch (unreachable, not a JSON
    key set, no signing key in it) keeps the keys already known and is retried `refetch_floor` seconds after
    it ended; until then a key id not known is `PyJWKClientConnectionError` (the token may be fine), with
    `retry_after` seconds.

    Keys without a `kid` are all kept (an authorization server mid-rotation that names no key ids): a token
    without a kid is tried against each of them, at most `MAX_KIDLESS` (a set of one key serves it too). With
    `algorithms` (a verifier's), only kid-less keys usable with one of them are kept and counted."""

    #: How many kid-less keys a token without a kid is tried against (each try is one signature check).
    MAX_KIDLESS = 4

    def __init__(self, url: str, *, lifespan: float = 300, refetch_floor: float = 10, timeout: float = 10,
                 clock: Callable[[], float] = time.monotonic, algorithms: Sequence[str] | None = None) -> None:
        jwt = require("jwt", extra="auth", feature="JWTVerifier")
        self._jwt = jwt
        # PyJWT fetches and parses the set; the caching and its refetch policy are ours.
        self.client = jwt.PyJWKClient(url, cache_keys=False, cache_jwk_set=False, timeout=timeout)
        self.url = url
        self.lifespan = lifespan
        self.refetch_floor = refetch_floor
        self.timeout = timeout
        self.clock = clock
        self.algorithms = None if algorithms is None else frozenset(algorithms)
        self.fetches = 0
        self._keys: dict[str | None, tuple[Any, ...]] = {}  # the keys of each kid (None: the kid-less ones)
        self._fetched_at: float | None = None  # when the keys known were fetched
        self._ended_at: float | None = None  # when the last fetch ended, whatever its outcome
        self._failed = False  # whether that fetch failed
        self._refetched_at: float | None = None  # when the last refetch for an unknown key id ended
        self._fetch: _Fetch | None = None  # the fetch in flight
        self._lock = threading.Lock()  # guards the fields above; never held during a fetch

    def key(self, kid: str | None) -> Any:
        """The `PyJWK` of `kid` (the first of `keys(kid)`)."""
        return self.keys(kid)[0]

    def keys(self, kid: str | None) -> tuple[Any, ...]:
        """The `PyJWK`s a token naming `kid` may be signed with: the key of that kid; for no kid, the set's
        kid-less keys, or its only key. `PyJWKClientError` when there is none (`PyJWKClientConnectionError`
        while the set cannot be fetched)."""
        found, fetch = self._lookup(kid)
        if found:
            return found
        return self._after_fetch(kid, fetch.wait() if fetch is not None else True)

    async def akeys(self, kid: str | None) -> tuple[Any, ...]:
        """`keys` for a coroutine: known keys at once, and a fetch waited for on the event loop, so lookups
        of unknown key ids during an outage hold no thread (the threadpool stays free for everything else)."""
        found, fetch = self._lookup(kid)
        if found:
            return found
        return self._after_fetch(kid, await fetch.until_done() if fetch is not None else True)

    async def akey(self, kid: str | None) -> Any:
        """`key` for a coroutine."""
        return (await self.akeys(kid))[0]

    def _lookup(self, kid: str | None) -> tuple[tuple[Any, ...], _Fetch | None]:
        """(the key of `kid`, None) when it is known (an expired set starts its refresh meanwhile), else
        (None, the fetch to wait for: the one in flight, or one started now when it may be)."""
        with self._lock:
            now = self.clock()
            found = self._find(kid)
            if found:
                if self._may_fetch(now) and (self._fetched_at is None or now - self._fetched_at >= self.lifespan):
                    self._start(refetch=False)  # the known key serves meanwhile
                return found, None
            fetch = self._fetch
            if fetch is None and self._may_fetch(now, refetch=self._fetched_at is not None):
                fetch = self._start(refetch=self._fetched_at is not None)
            return (), fetch

    def _after_fetch(self, kid: str | None, ended: bool) -> tuple[Any, ...]:
        """The keys of `kid` once the fetch waited for is over (`ended`: before its deadline), or why not."""
        with self._lock:
            found = self._find(kid)
            if found:
                return found
            if ended and not self._failed and self._fetched_at is not None:
                raise self._jwt.PyJWKClientError(f"no signing key {kid!r} in the JWKS")
            unavailable = self._jwt.PyJWKClientConnectionError(f"the JWKS at {self.url} cannot be fetched")
            unavailable.retry_after = self._retry_after(self.clock())
            raise unavailable

    def _find(self, kid: str | None) -> tuple[Any, ...]:
        if kid is None and None not in self._keys and len(self._keys) == 1:
            (only,) = self._keys.values()
            return only[:1]
        return self._keys.get(kid, ())

    def _may_fetch(self, now: float, *, refetch: bool = False) -> bool:
        """Whether a fetch may start now: none in flight, none failed within the floor, and for an unknown key
        id none refetched within it."""
        if self._fetch is not None:
            return False
        if self._failed and self._ended_at is not None and now - self._ended_at < self.refetch_floor:
            return False
        return not (refetch and self._refetched_at is not None and now - self._refetched_at < self.refetch_floor)

    def _retry_after(self, now: float) -> int:
        """Whole seconds until the set may be fetched again (at least 1)."""
        if self._fetch is not None:
            wait = self._fetch.deadline - time.monotonic()
        else:
            wait = self.refetch_floor - (now - (self._ended_at if self._ended_at is not None else now))
        return max(1, math.ceil(wait))

    def _start(self, *, refetch: bool) -> _Fetch:
        fetch = self._fetch = _Fetch(self.timeout, refetch)
        self.fetches += 1
        threading.Thread(target=self._run, args=(fetch,), name="mcpfusion-jwks", daemon=True).start()
        return fetch

    def _run(self, fetch: _Fetch) -> None:
        keys: dict[str | None, tuple[Any, ...]] | None = None
        try:
            keys = self._download()
        except Exception as exc:  # whatever the cause, it is the authorization server's, never a token's
            logger.warning("JWKS %s could not be used (%s); the keys fetched before are kept",
                           self.url, type(exc).__name__)
        finally:
            with self._lock:
                now = self.clock()
                self._ended_at, self._failed, self._fetch = now, keys is None, None
                if keys is not None:
                    self._keys, self._fetched_at = keys, now
                if fetch.refetch:
                    self._refetched_at = now
            fetch.finish()

    def _download(self) -> dict[str | None, tuple[Any, ...]]:
        """The signing keys of the set the URL serves now, by kid (all the kid-less ones, up to `MAX_KIDLESS`);
        an error for an unusable answer (not JSON, a JSON without keys: an HTML page of a proxy, an empty set)."""
        jwk_set = self.client.get_jwk_set(refresh=True)
        keys: dict[str | None, tuple[Any, ...]] = {}
        for k in jwk_set.keys:
            if k.public_key_use not in ("sig", None):
                continue
            if k.key_id is None:
                # (a key no algorithm here can use would only take the place of one that can)
                if self.algorithms is None or self.algorithms & _family_of(k.key):
                    keys[None] = (*keys.get(None, ()), k)[:self.MAX_KIDLESS]
            else:
                keys[k.key_id] = (k,)
        if not keys:
            raise self._jwt.PyJWKSetError("the JWKS holds no signing key")
        return keys


class JWTVerifier:
    """Verifies JWTs with PyJWT: signature (shared key, PEM public key, or JWKS), expiry, issuer, audience.

    With `jwks_url`, the keys follow the authorization server's rotations (see `JWKSKeys`: refetched for an
    unknown key id, at most every `jwks_refetch_floor` seconds)."""

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
        jwks_lifespan: float = 300,
        jwks_refetch_floor: float = 10,
    ) -> None:
        if (key is None) == (jwks_url is None):
            raise ValueError("JWTVerifier needs exactly one of key= or jwks_url=")
        self._jwt = require("jwt", extra="auth", feature="JWTVerifier")
        self.key: Any = key
        self.jwks = JWKSKeys(jwks_url, lifespan=jwks_lifespan, refetch_floor=jwks_refetch_floor,
                             algorithms=algorithms) if jwks_url else None
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

    def verify(self, token: str, *, audience: Audience | None = None, audience_required: bool = False
               ) -> dict[str, Any]:
        """The token's claims, or a 401 saying why (never the token itself). `audience`: what its `aud` must
        name when this verifier has no audience of its own (a token without `aud` is refused too with
        `audience_required`: see `check_audience`)."""
        with _refusals(self._jwt):
            return self._checked(token, self.jwks.keys(self._kid(token)) if self.jwks is not None else None,
                                 audience, audience_required)

    async def averify(self, token: str, *, audience: Audience | None = None, audience_required: bool = False
                      ) -> dict[str, Any]:
        """`verify` for a coroutine, on the event loop and holding no thread: a known key verifies at once;
        a key id the set lacks waits for the set's refetch on the event loop."""
        if self.jwks is None:
            return self.verify(token, audience=audience, audience_required=audience_required)
        with _refusals(self._jwt):
            return self._checked(token, await self.jwks.akeys(self._kid(token)), audience, audience_required)

    def _kid(self, token: str) -> str | None:
        kid = self._jwt.get_unverified_header(token).get("kid")
        return kid if isinstance(kid, str) else None

    def _checked(self, token: str, jwks: Sequence[Any] | None, audience: Audience | None, audience_required: bool
                 ) -> dict[str, Any]:
        """The claims of `token` signed with one of `jwks` (JWKS keys, tried in turn; None: this verifier's
        own key)."""
        if jwks is None:
            return self._decoded(token, self.key, self.algorithms, audience, audience_required)
        # Pinned: a key is only tried with the algorithms it serves (its family; an EC key, its curve's).
        tries = [(jwk.key, fits) for jwk in jwks
                 if (fits := [a for a in self.algorithms if a in _family_of(jwk.key)])]
        if not tries:
            raise unauthorized("The token's signing algorithm is not accepted here.")
        # (several: kid-less keys; a wrong signature, or a key not for the token's algorithm, tries the next)
        for key, algorithms in tries[:-1]:
            with contextlib.suppress(self._jwt.InvalidSignatureError, self._jwt.InvalidAlgorithmError,
                                     self._jwt.InvalidKeyError):
                return self._decoded(token, key, algorithms, audience, audience_required)
        key, algorithms = tries[-1]
        return self._decoded(token, key, algorithms, audience, audience_required)

    def _decoded(self, token: str, key: Any, algorithms: list[str], audience: Audience | None,
                 audience_required: bool) -> dict[str, Any]:
        """The claims of `token` signed with `key`, checked."""
        claims: dict[str, Any] = self._jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=self.issuer,
            # Either spelling of the resource URL (trailing slash or not): the metadata advertises it without.
            audience=None if self.audience is None else audience_forms(self.audience),
            leeway=self.leeway,
            # Without an audience of its own, `aud` is `check_audience`'s (PyJWT refuses any then).
            options={"require": self.required, "verify_aud": self.audience is not None},
        )
        _check_numeric_dates(claims)
        if self.audience is None:
            check_audience(claims, audience, required=audience_required)
        return claims


def _check_numeric_dates(claims: Mapping[str, Any]) -> None:
    """The 401 for an `exp`, `nbf` or `iat` that is not a JSON number (RFC 7519 NumericDate; PyJWT reads a
    numeric string such as "1999999999" with int()) or is one no clock can compare with (10**400, NaN)."""
    for name in ("exp", "nbf", "iat"):
        if name not in claims:
            continue
        value = claims[name]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise unauthorized(f"The token is invalid (its {name} claim is not a number).")
        if not _finite_date(value):
            raise unauthorized(f"The token is invalid (its {name} claim is not a usable date).")


def _finite_date(value: int | float) -> bool:
    """Whether `value` is a finite number a float can hold (the clock's type)."""
    try:
        return math.isfinite(value)  # (OverflowError for an int past float's range)
    except OverflowError:
        return False


@contextlib.contextmanager
def _refusals(jwt: Any) -> Iterator[None]:
    """PyJWT's refusals as HTTP answers: a 401 saying why for the token's faults (never the token itself), a
    503 `AuthUnavailable` when the key set cannot be fetched (the token may be fine), never a 500."""
    try:
        yield
    except jwt.ExpiredSignatureError:
        raise unauthorized("The token has expired.") from None
    except jwt.PyJWKClientConnectionError as exc:
        raise AuthUnavailable("The authorization server's keys could not be fetched; retry later.",
                              getattr(exc, "retry_after", 5)) from None
    except jwt.PyJWKClientError:
        raise unauthorized("The token's signing key is unknown.") from None
    except (jwt.InvalidTokenError, jwt.InvalidKeyError) as exc:
        raise unauthorized(f"The token is invalid ({type(exc).__name__}).") from None
    except jwt.PyJWTError as exc:  # any other refusal of PyJWT's is the token's fault
        raise unauthorized(f"The token is invalid ({type(exc).__name__}).") from None


class RequireBearer:
    """ASGI middleware: requests under `prefixes` must pass `authenticate` or get a real HTTP 401. The
    prefixes are matched as the app's router matches its routes: against the path below the app's `root_path`
    (`/mcp` is checked at `/billing/mcp` behind `--root-path /billing` or `parent.mount("/billing", app)`).

    MCP's authorization model is HTTP-level: every request to the MCP endpoint carries the token, and a
    missing or bad one is a 401 with `WWW-Authenticate` before any JSON-RPC is read (so a client can start
    its auth flow). `authenticate(request)` raises `HTTPException` to refuse; what it returns is kept in
    `scope["mcpfusion.auth"]` for dependencies to reuse (no second verification).

    With `resource` (a `mcpfusion.authorization.ProtectedResource`), every 401 names the resource metadata
    (`resource_metadata="..."`) and a token without the resource's required scopes gets a 403
    `insufficient_scope`. A token that cannot be checked now (`AuthUnavailable`) is a 503 `AUTH_UNAVAILABLE`.
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
        # The path as the app's router matches it: relative to `root_path` (a proxy's prefix, a parent app's
        # mount), so whatever reaches the protected routes is checked, under any prefix.
        if scope["type"] != "http" or scope["method"] == "OPTIONS" or \
                not get_route_path(scope).startswith(self.prefixes):
            await self.app(scope, receive, send)
            return
        try:
            request = Request(scope)
            auth = scope[AUTH_SCOPE_KEY] = await self.authenticate(request)
            refusal = self.resource.refusal(request, auth) if self.resource is not None else None
            if refusal is not None:
                raise refusal
        except HTTPException as exc:
            status, own = exc.status_code, (exc.headers or {}).get("WWW-Authenticate")
            if self.resource is not None and (status == 401 or (own is None and status in _REFUSAL_ERRORS)):
                # RFC 6750 section 3: every refusal of the token's request says why in a Bearer challenge (a 400
                # for two Authorization headers, an authentication's own 403), naming the resource metadata.
                if own is None and status != 401:
                    own = bearer_challenge(_REFUSAL_ERRORS[status], exc.detail if isinstance(exc.detail, str) else "")
                header = self.resource.unauthorized_challenge(request, own)
                exc = HTTPException(status, exc.detail, headers={**(exc.headers or {}), "WWW-Authenticate": header})
            answer = exc.response(scope["path"]) if isinstance(exc, AuthUnavailable) else \
                http_problem_response(exc, scope["path"])
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)

