"""Token verification against local test servers: JWKS key rotation (an unknown key id refetches the set,
at most once per floor), and RFC 7662 introspection (client authentication, active=false, the cache)."""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from urllib.parse import parse_qs

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import HTTPException

from mcpfusion import MCPFusion, ProtectedResource, Tool
from mcpfusion.auth import IntrospectionVerifier, JWTVerifier

ISSUER = "https://as.example.test"
RESOURCE = "https://api.example.test/mcp"


class LocalServer:
    """A JSON endpoint on 127.0.0.1 (a free port) whose answer the test changes; it counts requests."""

    def __init__(self, answer):
        self.answer = answer  # (method, path, headers, body) -> (status, JSON)
        self.requests: list[tuple[str, dict[str, str], str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self, method):
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode()
                server.requests.append((self.path, dict(self.headers), body))
                status, payload = server.answer(method, self.path, dict(self.headers), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's naming
                self._reply("GET")

            def do_POST(self):  # noqa: N802
                self._reply("POST")

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def rsa_key(kid):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": kid, "use": "sig", "alg": "RS256"})
    return key, jwk


def token(key, kid, **claims):
    now = int(time.time())
    values = {"iss": ISSUER, "aud": RESOURCE, "sub": "client-1", "iat": now, "exp": now + 600,
              "scope": "crm:read", **claims}
    return jwt.encode(values, key, algorithm="RS256", headers={"kid": kid})


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


async def test_jwks_key_rotation_refetches_once_per_floor():
    old, old_jwk = rsa_key("k1")
    new, new_jwk = rsa_key("k2")
    published = {"keys": [old_jwk]}
    with LocalServer(lambda *a: (200, published)) as jwks:
        verifier = JWTVerifier(jwks_url=jwks.url + "/jwks", issuer=ISSUER, audience=RESOURCE,
                               jwks_refetch_floor=30)
        clock = verifier.jwks.clock = Clock()
        assert (await verifier.averify(token(old, "k1")))["scope"] == "crm:read"
        assert (await verifier.averify(token(old, "k1", sub="again")))["sub"] == "again"
        assert len(jwks.requests) == 1  # fetched once, then kept

        published["keys"] = [new_jwk]  # the authorization server rotates its signing key
        assert (await verifier.averify(token(new, "k2")))["sub"] == "client-1"  # unknown kid: one refetch
        assert len(jwks.requests) == 2
        with pytest.raises(HTTPException) as removed:
            await verifier.averify(token(old, "k1"))  # the retired key is no longer accepted
        assert removed.value.status_code == 401

        forger = rsa_key("x")[0]
        for n in range(20):  # a flood of made-up key ids (and forged tokens) within the floor
            forged = token(forger, f"made-up-{n}")
            with pytest.raises(HTTPException) as unknown:
                await verifier.averify(forged)
            assert unknown.value.status_code == 401 and "signing key" in unknown.value.detail
        assert len(jwks.requests) == 2  # the retired-k1 and the flood refetched nothing more

        clock.now += 31  # after the floor, an unknown kid may refetch again (once)
        third, third_jwk = rsa_key("k3")
        published["keys"] = [new_jwk, third_jwk]
        assert (await verifier.averify(token(third, "k3")))["sub"] == "client-1"
        assert len(jwks.requests) == 3


async def test_jwt_verifier_pins_algorithms_and_checks_issuer_and_audience():
    key, jwk = rsa_key("k1")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    ec_jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key()))
    ec_jwk.update({"kid": "e1", "use": "sig"})
    with LocalServer(lambda *a: (200, {"keys": [jwk, ec_jwk]})) as jwks:
        verifier = JWTVerifier(jwks_url=jwks.url, issuer=ISSUER, audience=RESOURCE)  # RS256 only
        for bad, reason in (
            (token(key, "k1", aud="https://other.example.test/mcp"), "InvalidAudienceError"),
            (token(key, "k1", iss="https://evil.example.test"), "InvalidIssuerError"),
            (jwt.encode({"iss": ISSUER, "aud": RESOURCE, "exp": int(time.time()) + 60}, ec_key, algorithm="ES256",
                        headers={"kid": "e1"}), "algorithm is not accepted"),
            ("not.a.jwt", "DecodeError"),
        ):
            with pytest.raises(HTTPException) as refused:
                await verifier.averify(bad)
            assert refused.value.status_code == 401 and reason in refused.value.detail, refused.value.detail


async def test_an_unreachable_jwks_is_a_503_not_a_401():
    with LocalServer(lambda *a: (500, {})) as down:
        verifier = JWTVerifier(jwks_url=down.url)
        with pytest.raises(HTTPException) as refused:
            await verifier.averify(token(rsa_key("k")[0], "k"))
    assert refused.value.status_code == 503 and refused.value.headers["Retry-After"]


def introspection(tokens):
    """An RFC 7662 endpoint: client `rs`/`secret` (HTTP Basic), `tokens` maps a token to its answer."""

    def answer(method, path, headers, body):
        expected = "Basic " + base64.b64encode(b"rs:secret").decode()
        if method != "POST" or headers.get("Authorization") != expected:
            return 401, {"error": "invalid_client"}
        form = parse_qs(body)
        return 200, tokens.get(form["token"][0], {"active": False})

    return answer


async def test_introspection_verifies_opaque_tokens_and_caches_within_exp():
    now = int(time.time())
    tokens = {
        "opaque-1": {"active": True, "sub": "u1", "scope": "crm:read crm:write", "aud": RESOURCE, "iss": ISSUER,
                     "exp": now + 3600},
        "short": {"active": True, "sub": "u2", "scope": "crm:read", "aud": [RESOURCE], "exp": now + 5},
        "foreign": {"active": True, "sub": "u3", "aud": "https://other.example.test", "exp": now + 3600},
    }
    with LocalServer(introspection(tokens)) as server:
        verifier = IntrospectionVerifier(server.url + "/introspect", client_id="rs", client_secret="secret",
                                         audience=RESOURCE, cache_ttl=60)
        clock = verifier.clock = Clock()
        clock.now = now
        claims = await verifier.averify("opaque-1")
        assert claims["scope"] == "crm:read crm:write" and claims["sub"] == "u1"
        assert await verifier.averify("opaque-1") == claims
        assert len(server.requests) == 1  # cached
        path, headers, body = server.requests[0]
        assert parse_qs(body) == {"token": ["opaque-1"], "token_type_hint": ["access_token"]}
        assert "opaque-1" not in json.dumps(list(verifier._cache))  # keyed by its hash

        for bad, reason in (("revoked", "not active"), ("foreign", "not issued for this resource")):
            with pytest.raises(HTTPException) as refused:
                await verifier.averify(bad)
            assert refused.value.status_code == 401 and reason in refused.value.detail

        await verifier.averify("short")
        clock.now += 6  # past the short token's exp, well within the cache TTL: asked again, now expired
        tokens["short"]["exp"] = now + 5
        with pytest.raises(HTTPException) as expired:
            await verifier.averify("short")
        assert expired.value.status_code == 401
        asked = [parse_qs(b)["token"][0] for _, _, b in server.requests]
        assert asked.count("short") == 2

        clock.now += 60  # the TTL passed: introspected again (a revocation shows within cache_ttl)
        tokens["opaque-1"]["active"] = False
        with pytest.raises(HTTPException):
            await verifier.averify("opaque-1")


async def test_introspection_with_wrong_client_credentials_or_a_down_server_is_a_503():
    with LocalServer(introspection({})) as server:
        wrong = IntrospectionVerifier(server.url, client_id="rs", client_secret="nope")
        with pytest.raises(HTTPException) as refused:
            await wrong.averify("anything")
    assert refused.value.status_code == 503
    gone = IntrospectionVerifier(server.url, client_id="rs", client_secret="secret", timeout=2)
    with pytest.raises(HTTPException) as down:
        await gone.averify("anything")
    assert down.value.status_code == 503


async def test_a_protected_resource_with_an_introspection_verifier_end_to_end():
    crm = Tool("crm", scopes=["crm:read"])

    @crm.action(readonly=True)
    async def get(id: str) -> dict:
        """Get one"""
        return {"id": id}

    @crm.action(scopes=["crm:write"])
    async def rename(id: str, name: str) -> dict:
        """Rename one"""
        return {"id": id, "name": name}

    tokens = {"reader": {"active": True, "sub": "u", "scope": "crm:read", "aud": RESOURCE}}
    with LocalServer(introspection(tokens)) as server:
        verifier = IntrospectionVerifier(server.url, client_id="rs", client_secret="secret", audience=RESOURCE)
        resource = ProtectedResource(resource=RESOURCE, authorization_servers=[ISSUER], verifier=verifier)
        app = MCPFusion("crm", tools=[crm], authorization=resource).build_app()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            read = await http.post("/api/crm/get", json={"id": "1"}, headers={"authorization": "Bearer reader"})
            write = await http.post("/api/crm/rename", json={"id": "1", "name": "n"},
                                    headers={"authorization": "Bearer reader"})
            inactive = await http.post("/api/crm/get", json={"id": "1"}, headers={"authorization": "Bearer gone"})
    assert read.status_code == 200 and read.json() == {"id": "1"}
    assert write.status_code == 403 and 'scope="crm:read crm:write"' in write.headers["www-authenticate"]
    assert inactive.status_code == 401
    assert inactive.headers["www-authenticate"] == ('Bearer error="invalid_token", error_description="The token is '
                                                    'not active.", resource_metadata="https://api.example.test/'
                                                    '.well-known/oauth-protected-resource/api"')
