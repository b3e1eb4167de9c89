"""Round 6l: over stdio a request the client cancelled is never answered on the session wire either (not at a
stop, not when a new initialize replaces the session), and a `_meta` naming a session protocol version stays on
the session wire; JWKS kid-less keys are tried only with the algorithms they serve, and only usable ones count
towards the bound; introspected date claims must be usable numbers; a resource template's variables reach its
dependencies as path parameters (and a dependency parameter nothing could set is refused at declaration). Each
test fails without its fix."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import Depends, HTTPException
from starlette.requests import Request

from mcpfusion import MCPFusion, Tool, ToolError
from mcpfusion.auth import IntrospectionVerifier, JWKSKeys, JWTVerifier
from mcpfusion.mcp.stdio import StdioBridge
from tests.jwks_kit import JWKSEndpoint
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
VERSION = "io.modelcontextprotocol/protocolVersion"
AUDIENCE = "https://api.example.test/mcp"


# -- 1: a cancelled session-wire request is forgotten by the bridge ----------------------------------------------


def stubborn_app(started: asyncio.Event, release: asyncio.Event) -> Any:
    t = Tool("t", description="test tool")

    @t.action(readonly=True)
    async def stubborn() -> str:
        """Swallows every cancellation until released (a slow clean-up)."""
        started.set()
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        return "done"

    return MCPFusion("stubborn", tools=[t]).build_app()


def call(msg_id: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                       "params": {"name": "t", "arguments": {"action": "stubborn"}}})


def cancel(msg_id: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": msg_id}})


@pytest.mark.parametrize("ending", ["close", "initialize"])
async def test_a_cancelled_session_request_is_never_answered_when_the_server_stops(ending):
    started, release = asyncio.Event(), asyncio.Event()
    lines = Lines()
    bridge = StdioBridge(stubborn_app(started, release), lines.write, headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    running = []
    for msg_id in (7, 8):
        started.clear()
        bridge.submit(call(msg_id))
        running.extend(bridge.tasks - set(running))
        await asyncio.wait_for(started.wait(), WAIT)
    await bridge.handle_line(cancel(7))  # the client gives up on 7 only
    try:
        if ending == "initialize":  # a client restarting its session: the old one's calls end
            await bridge.handle_line(json.dumps({**INIT, "id": 100}))
            assert (await lines.wait_for(lambda m: m.get("id") == 100))["result"]
        else:
            await bridge.close("the server was stopped (SIGTERM)")
    finally:
        release.set()
        await asyncio.wait_for(asyncio.gather(*running, return_exceptions=True), WAIT)
    if ending == "initialize":
        await bridge.close()
    assert lines.with_id(7) == []  # cancelled by the client: no answer, ever
    (answer,) = lines.with_id(8)  # not cancelled: answered exactly once
    assert answer["error"]["message"].startswith("Request cancelled: ")


# -- 2: a session protocol version in _meta keeps a request on the session wire ----------------------------------


async def test_a_session_version_in_meta_is_a_session_request():
    lines = Lines()
    bridge = StdioBridge(stubborn_app(asyncio.Event(), asyncio.Event()), lines.write, headers={})
    await bridge.startup()
    listed = {"jsonrpc": "2.0", "method": "tools/list", "params": {"_meta": {VERSION: "2025-11-25"}}}
    await bridge.handle_line(json.dumps({**listed, "id": 1}))
    (before,) = lines.with_id(1)
    assert before["error"]["code"] == -32600 and "send initialize first" in before["error"]["message"]
    assert "Mcp-Session-Id" not in before["error"]["message"]
    # A version the server does not speak, with no session: the 2026-07-28 wire says so, as over HTTP.
    await bridge.handle_line(json.dumps({**listed, "id": 2, "params": {"_meta": {VERSION: "2099-01-01"}}}))
    (unknown,) = lines.with_id(2)
    assert "unsupported protocol version 2099-01-01" in unknown["error"]["message"]
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    await bridge.handle_line(json.dumps({**listed, "id": 3}))
    (after,) = lines.with_id(3)
    assert after["result"]["tools"][0]["name"] == "t"
    await bridge.close()


# -- 3, 4: JWKS kid-less keys ---------------------------------------------------------------------------------


def ec_jwk(curve: ec.EllipticCurve, alg: str) -> tuple[Any, dict[str, Any]]:
    key = ec.generate_private_key(curve)
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    jwk.update({"use": "sig", "alg": alg})
    return key, jwk


def token(key: Any, algorithm: str, **claims: Any) -> str:
    values = {"sub": "client-1", "aud": AUDIENCE, "exp": int(time.time()) + 600, **claims}
    return jwt.encode(values, key, algorithm=algorithm)  # (no kid in its header)


def test_kidless_keys_of_other_curves_do_not_stop_the_search():
    p384, p384_jwk = ec_jwk(ec.SECP384R1(), "ES384")
    p256, p256_jwk = ec_jwk(ec.SECP256R1(), "ES256")
    for order in ((p384_jwk, p256_jwk), (p256_jwk, p384_jwk)):
        with JWKSEndpoint(b"") as endpoint:
            endpoint.serve(*order)
            verifier = JWTVerifier(jwks_url=endpoint.url, audience=AUDIENCE, algorithms=["ES256", "ES384"])
            assert verifier.verify(token(p256, "ES256"))["sub"] == "client-1"
            assert verifier.verify(token(p384, "ES384"))["sub"] == "client-1"


def test_a_kidless_key_that_cannot_be_used_lets_the_next_one_be_tried():
    # An HMAC secret that looks like a PEM key: PyJWT refuses to use it (InvalidKeyError), a key fault.
    pem_like = jwt.utils.base64url_encode(b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----").decode()
    secret = "round-6l-secret-0123456789abcdef0123456789"
    good = jwt.utils.base64url_encode(secret.encode()).decode()
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve({"kty": "oct", "k": pem_like, "use": "sig"}, {"kty": "oct", "k": good, "use": "sig"})
        verifier = JWTVerifier(jwks_url=endpoint.url, audience=AUDIENCE, algorithms=["HS256"])
        assert verifier.verify(token(secret, "HS256"))["sub"] == "client-1"


def test_only_usable_kidless_keys_count_towards_the_bound():
    others = [ec_jwk(ec.SECP256R1(), "ES256")[1] for _ in range(JWKSKeys.MAX_KIDLESS)]
    signer = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    signer_jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signer.public_key()))
    signer_jwk.update({"use": "sig", "alg": "RS256"})
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(*others, signer_jwk)
        verifier = JWTVerifier(jwks_url=endpoint.url, audience=AUDIENCE, algorithms=["RS256"])
        assert verifier.verify(token(signer, "RS256"))["sub"] == "client-1"
        # A set read for no algorithms in particular keeps the first ones, bounded as before.
        assert len(JWKSKeys(endpoint.url, timeout=5).keys(None)) == JWKSKeys.MAX_KIDLESS


# -- 5: introspected date claims ------------------------------------------------------------------------------


@pytest.mark.parametrize("claim, raw", [("exp", "1" + "0" * 400), ("exp", '"1000"'), ("nbf", '"soon"'),
                                        ("iat", "true")])
async def test_an_introspected_date_claim_that_is_no_usable_number_is_a_401(claim, raw):
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b'{"active": true, "sub": "c", "aud": "https://x/mcp", "%s": %s}'
                              % (claim.encode(), raw.encode()))

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        verifier = IntrospectionVerifier("http://as.test/introspect", client_id="a", client_secret="b",
                                         audience="https://x/mcp", http=http)
        with pytest.raises(HTTPException) as refused:
            await verifier.averify("tok")
    assert refused.value.status_code == 401 and f"its {claim} claim" in refused.value.detail


async def test_an_introspected_numeric_exp_still_bounds_the_cache():
    now = int(time.time())

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"active": True, "sub": "c", "exp": now + 600.5})

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        verifier = IntrospectionVerifier("http://as.test/introspect", client_id="a", client_secret="b", http=http)
        assert (await verifier.averify("tok"))["sub"] == "c"
        assert (await verifier.averify("tok"))["sub"] == "c"
    assert verifier.requests == 1


# -- 6: a template's variables reach its dependencies ------------------------------------------------------------


def library() -> MCPFusion:
    fusion = MCPFusion("library")
    books = {1: {"title": "Dune"}}

    def load(id: int, request: Request) -> dict:
        if id not in books:
            raise ToolError("NOT_FOUND", f"Book {id} was not found.")
        return {**books[id], "seen": request.path_params}

    @fusion.resource_template("lib://books/{id}", mime_type="application/json")
    async def book(book: dict = Depends(load)) -> dict:
        """One book, loaded by its dependency."""
        return book

    return fusion


async def read(app: Any, uri: str) -> dict[str, Any]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        headers = {"accept": "application/json", "content-type": "application/json"}
        started = await client.post("/mcp", headers=headers, json=INIT)
        headers = {**headers, "mcp-session-id": started.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-11-25"}
        await client.post("/mcp", headers=headers, json=INITED)
        answer = await client.post("/mcp", headers=headers, json={
            "jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": uri}})
        return answer.json()


async def test_a_template_variable_reaches_a_dependency_as_a_path_parameter():
    fusion = library()
    app = fusion.build_app()
    found = await read(app, "lib://books/1")
    assert json.loads(found["result"]["contents"][0]["text"]) == {"title": "Dune", "seen": {"id": "1"}}
    missing = await read(app, "lib://books/2")
    assert missing["error"]["code"] == -32002 and missing["error"]["data"]["code"] == "NOT_FOUND"
    wrong = await read(app, "lib://books/abc")  # converted to the dependency's type, as FastAPI's path would be
    assert wrong["error"]["code"] == -32602 and "path.id" in wrong["error"]["message"]
    direct = await fusion.resources.read("lib://books/1")  # outside a transport (a unit test) too
    assert json.loads(direct["contents"][0]["text"])["title"] == "Dune"


def test_a_dependency_parameter_nothing_could_set_is_refused_at_declaration():
    fusion = MCPFusion("library")

    def load(book_id: str) -> dict:
        return {}

    with pytest.raises(TypeError, match="the dependency .*load takes 'book_id'"):
        @fusion.resource_template("lib://books/{id}")
        async def book(id: str, found: dict = Depends(load)) -> dict:
            return found

    with pytest.raises(TypeError, match="resource 'lib://readme'.*takes 'book_id'"):
        @fusion.resource("lib://readme")
        def readme(found: dict = Depends(load)) -> str:
            return ""

    def paged(limit: int = 10) -> int:  # a default: nothing needs to set it
        return limit

    @fusion.resource("lib://count")
    def count(limit: int = Depends(paged)) -> str:
        return str(limit)
