"""Authentication hardening: a slow or broken JWKS endpoint (cached keys never wait, one fetch at a time, a
503 not a 401 or a 500), per-caller state keyed on the credential and its issuer, RFC 6750 challenges."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import HTTPException
from starlette.requests import Request

from mcpfusion import MCPFusion, ProtectedResource, RateLimit, Tool
from mcpfusion.auth import JWKSKeys, JWTVerifier, bearer_token, unauthorized
from mcpfusion.confirm import CONFIRM_PARAM
from mcpfusion.identity import AUTH_SCOPE_KEY
from mcpfusion.middleware import ActionCall, GuardState
from tests.jwks_kit import JWKSEndpoint
from tests.service_kit import McpSession, confirm_token

ISSUER = "https://as.example.test"
RESOURCE = "http://127.0.0.1/mcp"
METADATA = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"'
# REST's own (RFC 9728 section 3.3: the metadata's resource is what the client requested, `/api`)
API_METADATA = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/api"'


def rsa_key(kid: str) -> tuple[rsa.RSAPrivateKey, dict]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return key, jwk


def signed(key, kid: str, **claims) -> str:
    now = int(time.time())
    values = {"iss": ISSUER, "aud": RESOURCE, "sub": "client-1", "iat": now, "exp": now + 600, **claims}
    return jwt.encode({k: v for k, v in values.items() if v is not None}, key, algorithm="RS256",
                      headers={"kid": kid})


def outcome(fn, *args):
    """What `fn(*args)` returned, or the exception it raised."""
    try:
        return fn(*args)
    except Exception as exc:
        return exc


def while_held(endpoint: JWKSEndpoint, fn, *args):
    """`fn(*args)` run while the endpoint holds a fetch: it must answer before the fetch is released (the
    hold lasts until `release`, so a lookup that waited behind it would still be waiting; 20 s bounds a hang)."""
    assert endpoint.in_flight == 1 and not endpoint.release.is_set()
    with ThreadPoolExecutor(1) as pool:
        found = pool.submit(outcome, fn, *args).result(timeout=20)
    assert endpoint.in_flight == 1 and not endpoint.release.is_set()  # answered while the fetch was held
    return found


def until(condition, seconds: float = 5) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


# -- a slow JWKS endpoint ---------------------------------------------------------------------------------


def test_cached_keys_never_wait_behind_a_slow_fetch_and_concurrent_lookups_share_one():
    _, jwk = rsa_key("k1")
    _, rotated = rsa_key("k2")
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(jwk)
        keys = JWKSKeys(endpoint.url, refetch_floor=0, timeout=5)
        assert keys.key("k1").key_id == "k1" and endpoint.requests == 1
        endpoint.serve(jwk, rotated)
        endpoint.delay = 30  # the authorization server is slow now (until released)
        with ThreadPoolExecutor(5) as pool:
            unknown = [pool.submit(outcome, keys.key, kid) for kid in ("k2", "made-up", "k2", "other", "k2")]
            until(lambda: endpoint.in_flight == 1)
            time.sleep(0.3)  # every lookup of an unknown key id is waiting now
            for _ in range(3):
                assert while_held(endpoint, keys.key, "k1").key_id == "k1"  # the known key: no wait at all
            assert not any(f.done() for f in unknown)  # the unknown ones wait for the fetch
            endpoint.release.set()
            results = [f.result(timeout=20) for f in unknown]
        assert endpoint.requests == 2 and endpoint.most_in_flight == 1  # one refetch, shared by all five
        assert [r.key_id for r in results if not isinstance(r, Exception)] == ["k2", "k2", "k2"]
        assert all(isinstance(r, jwt.PyJWKClientError) for r in results if isinstance(r, Exception))


def test_an_expired_set_is_refreshed_in_the_background_while_its_keys_serve():
    _, jwk = rsa_key("k1")
    _, rotated = rsa_key("k2")
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(jwk)
        now = [1000.0]
        keys = JWKSKeys(endpoint.url, lifespan=300, refetch_floor=10, timeout=5, clock=lambda: now[0])
        assert keys.key("k1").key_id == "k1"
        now[0] += 301  # past the lifespan, and the authorization server is slow now
        endpoint.serve(rotated)
        endpoint.delay = 30
        assert keys.key("k1").key_id == "k1"  # the expired set still serves, and starts its refresh
        until(lambda: endpoint.in_flight == 1)
        for _ in range(3):
            assert while_held(endpoint, keys.key, "k1").key_id == "k1"  # never waits behind the refresh
        endpoint.release.set()
        until(lambda: keys.key("k2") is not None and endpoint.in_flight == 0)
        assert endpoint.requests == 2  # one refresh, however many lookups saw the set expired
        with pytest.raises(jwt.PyJWKClientError):
            keys.key("k1")  # retired at that fetch


def test_an_outage_is_one_fetch_per_floor_counted_from_its_end_and_a_503_meanwhile():
    key, jwk = rsa_key("k1")
    rotated, rotated_jwk = rsa_key("k2")
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(jwk)
        verifier = JWTVerifier(jwks_url=endpoint.url, issuer=ISSUER, audience=RESOURCE, jwks_refetch_floor=1)
        assert verifier.verify(signed(key, "k1"))["sub"] == "client-1"
        verifier.jwks.timeout = 0.5  # (PyJWT's own timeout is its client's)
        verifier.jwks.client.timeout = 0.5
        endpoint.delay = 30  # down: every fetch times out, taking as long as... the floor
        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(lambda _: outcome(verifier.verify, signed(rotated, "k2")), range(4)))
        for refused in outcomes:
            assert isinstance(refused, HTTPException) and refused.status_code == 503, refused
        assert endpoint.requests == 2 and endpoint.most_in_flight == 1  # one fetch for the four, not one each
        refused = outcome(verifier.verify, signed(rotated, "k2"))  # within the floor after the failure
        assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
        assert endpoint.requests == 2  # answered without a fetch
        assert verifier.verify(signed(key, "k1"))["sub"] == "client-1"  # the known key still serves

        endpoint.delay = 0
        endpoint.serve(jwk, rotated_jwk)  # back up, rotated
        time.sleep(1.1)
        assert verifier.verify(signed(rotated, "k2"))["sub"] == "client-1"
        assert endpoint.requests == 3


def test_a_fresh_verifier_facing_a_hanging_jwks_answers_every_waiting_request_after_one_timeout():
    key, jwk = rsa_key("k1")
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(jwk)
        endpoint.delay = 30
        verifier = JWTVerifier(jwks_url=endpoint.url, jwks_refetch_floor=10)
        verifier.jwks.timeout = verifier.jwks.client.timeout = 0.5
        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(lambda _: outcome(verifier.verify, signed(key, "k1")), range(4)))
        assert [getattr(r, "status_code", r) for r in outcomes] == [503] * 4
        assert endpoint.requests == 1 and endpoint.most_in_flight == 1  # one timed-out fetch answered all four


# -- a JWKS that is not a usable key set ------------------------------------------------------------------


@pytest.mark.parametrize("body", [b"<html>proxy error</html>", b'{"keys": []}', b'{"foo": 1}', b'{"keys": "abc"}',
                                  b"[1, 2]", b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "use": "enc"}]}', b'{"keys": [1]}'],
                         ids=["html", "empty", "no-keys", "keys-string", "array", "no-signing-key", "not-jwk"])
def test_an_unusable_key_set_is_the_authorization_servers_fault_a_503(body):
    key, jwk = rsa_key("k1")
    with JWKSEndpoint(body) as endpoint:
        verifier = JWTVerifier(jwks_url=endpoint.url)
        with pytest.raises(HTTPException) as refused:
            verifier.verify(signed(key, "k1"))
        assert refused.value.status_code == 503 and refused.value.headers["Retry-After"]


async def test_an_html_jwks_is_a_503_problem_on_rest_and_mcp():
    key, _ = rsa_key("k1")
    with JWKSEndpoint(b"<html>proxy error</html>") as endpoint:
        verifier = JWTVerifier(jwks_url=endpoint.url, audience=RESOURCE)
        app = billing(ProtectedResource(resource=RESOURCE, authorization_servers=[ISSUER], verifier=verifier))
        headers = {"authorization": f"Bearer {signed(key, 'k1')}", "accept": "application/json, text/event-stream"}
        async with client_of(app) as client:
            for r in (await client.post("/api/billing/get", json={"id": "1"}, headers=headers),
                      await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers)):
                assert r.status_code == 503 and r.headers["retry-after"], r.text
                assert r.headers["content-type"] == "application/problem+json" and "Traceback" not in r.text


# -- per-caller state: the credential, and its issuer ------------------------------------------------------

SECRET = "a-test-secret-of-at-least-32-bytes!!"


def billing(resource: ProtectedResource, *middleware) -> object:
    tool = Tool("billing", exposition="flat")

    @tool.action(readonly=True)
    async def get(id: str) -> dict:
        """Get one invoice"""
        return {"id": id}

    @tool.action(destructive=True, confirm="Void invoice {id}?")
    async def void(id: str) -> dict:
        """Void an invoice"""
        return {"id": id, "status": "void"}

    return MCPFusion("billing", tools=[tool], authorization=resource, middleware=list(middleware),
                     max_sessions_per_principal=1, json_response=True).build_app()


def client_of(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=30)


def test_the_credential_digest_ignores_the_spelling_of_the_scheme_not_the_token():
    from mcpfusion.identity import credential_digest

    same = {credential_digest(h) for h in ("Bearer x.y", "bearer x.y", "BEARER  x.y", " BeArEr\tx.y ")}
    assert len(same) == 1
    assert credential_digest("Bearer X.y") not in same and credential_digest("Basic x.y") not in same


def without_sub() -> tuple[JWTVerifier, str]:
    verifier = JWTVerifier(key=SECRET, algorithms=["HS256"], audience=RESOURCE)
    return verifier, jwt.encode({"aud": RESOURCE, "exp": int(time.time()) + 600}, SECRET, algorithm="HS256")


async def test_a_jwt_without_sub_is_one_rate_limited_caller_however_the_scheme_is_spelled():
    verifier, token = without_sub()
    app = billing(ProtectedResource(resource=RESOURCE, verifier=verifier), RateLimit(3, per=60))
    async with client_of(app) as client:
        statuses = [(await client.post("/api/billing/get", json={"id": "1"}, headers={"authorization": h})).status_code
                    for h in (f"Bearer {token}", f"bearer {token}", f"BEARER  {token}", f"bEARER {token}")]
        assert statuses == [200, 200, 200, 429]


async def test_a_jwt_without_sub_is_one_session_principal_however_the_scheme_is_spelled():
    verifier, token = without_sub()
    app = billing(ProtectedResource(resource=RESOURCE, verifier=verifier))  # one session per principal
    async with client_of(app) as client:
        assert (await McpSession(client, token).start()).status_code == 200
        other = McpSession(client, None)
        other.headers["authorization"] = f"bearer   {token}"
        assert (await other.start()).status_code == 429


class Principal:
    """What a custom authentication returns: subject, tenant and (maybe) the issuer."""

    def __init__(self, subject: str, tenant: str, issuer: str | None = None) -> None:
        self.subject, self.tenant, self.scopes = subject, tenant, frozenset()
        if issuer is not None:
            self.issuer = issuer


PRINCIPALS = {"local": Principal("alice", "acme"),  # no issuer: a demo token
              "federated": Principal("alice", "acme", "https://other-issuer.example"),
              "claims": {"iss": "https://third.example", "sub": "alice", "tenant": "acme"}}


async def authenticate(request):
    found = PRINCIPALS.get(bearer_token(request))
    if found is None:
        raise unauthorized("Unknown token.")
    return found


async def call_as(client: httpx.AsyncClient, token: str, action: str, args: dict) -> httpx.Response:
    return await client.post(f"/api/billing/{action}", json=args, headers={"authorization": f"Bearer {token}"})


async def test_a_confirmation_belongs_to_the_issuer_of_the_caller_it_was_given_to():
    app = billing(ProtectedResource(resource=RESOURCE, authenticate=authenticate))
    async with client_of(app) as client:
        asked = await call_as(client, "local", "void", {"id": "inv_1"})
        assert asked.status_code == 428
        confirmation = confirm_token(asked.text)
        for other in ("federated", "claims"):  # the same subject and tenant, another issuer
            stolen = await call_as(client, other, "void", {"id": "inv_1", CONFIRM_PARAM: confirmation})
            assert stolen.status_code == 428, stolen.text  # asked again: not its confirmation
        done = await call_as(client, "local", "void", {"id": "inv_1", CONFIRM_PARAM: confirmation})
        assert done.status_code == 200 and done.json()["status"] == "void"


async def test_a_rate_limit_bucket_belongs_to_one_issuer():
    app = billing(ProtectedResource(resource=RESOURCE, authenticate=authenticate), RateLimit(1, per=60))
    async with client_of(app) as client:
        for token in ("local", "federated", "claims"):  # the same subject and tenant, three issuers
            assert (await call_as(client, token, "get", {"id": "1"})).status_code == 200, token
        for token in ("local", "federated", "claims"):
            assert (await call_as(client, token, "get", {"id": "1"})).status_code == 429, token


def test_the_caller_key_binds_the_issuer_and_is_stable():
    def key(principal) -> str:
        request = Request({"type": "http", "headers": [], AUTH_SCOPE_KEY: principal})
        return ActionCall(None, {}, {}, request, "rest", GuardState(), lambda _: nullcontext()).caller_key

    assert key(PRINCIPALS["local"]) == key(Principal("alice", "acme"))  # the same caller, the same key
    assert key({"sub": "alice"}) != key(PRINCIPALS["local"])  # no tenant is not tenant acme
    keys = {key(PRINCIPALS["local"]), key(PRINCIPALS["federated"]), key(PRINCIPALS["claims"]),
            key({"iss": "https://other-issuer.example", "sub": "alice"}), key({"iss": "https://x", "sub": "alice"})}
    assert len(keys) == 5


# -- RFC 6750 challenges -----------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [None, "Basic ZGVtbzp4", "Bearer", "Bearer ", "Bearer\tlocal", "Token local"])
async def test_a_request_without_a_bearer_token_is_challenged_without_an_error_code(header):
    app = billing(ProtectedResource(resource=RESOURCE, authenticate=authenticate))
    headers = {"authorization": header} if header is not None else {}
    async with client_of(app) as client:
        for path, metadata in (("/api/billing/get", API_METADATA), ("/mcp", METADATA)):
            r = await client.post(path, json={"id": "1"}, headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == metadata, r.headers


async def test_a_bad_token_still_names_invalid_token():
    app = billing(ProtectedResource(resource=RESOURCE, authenticate=authenticate))
    async with client_of(app) as client:
        r = await client.post("/api/billing/get", json={"id": "1"}, headers={"authorization": "Bearer nobody"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"].startswith('Bearer error="invalid_token", error_description="Unknown token."')
    assert 'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/api"' in r.headers["www-authenticate"]
