"""Hostile input found by the attack run (issue 11): each case answers a clear 4xx / JSON-RPC error,
never a 500, a traceback or a silently changed value."""

from __future__ import annotations

import json
import re

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcpfusion.auth import JWTVerifier, quoted, unauthorized
from tests.service_kit import META, McpSession, asgi_client, build, call, mcp, sse_messages
from tests.test_service_auth import AUDIENCE, ISSUER, SECRET
from tests.test_service_auth import claims as base_claims

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
RSA_PUBLIC_PEM = RSA_KEY.public_key().public_bytes(
    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def claims(**overrides):
    return base_claims(**{"tenant": "acme", "role": "admin", **overrides})


def hs256_token_signed_with(key: bytes) -> str:
    """An HS256 token MACed with `key` (built by hand: PyJWT itself refuses PEM text as an HMAC secret)."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(json.dumps(claims()).encode())
    mac = hmac.new(key, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64(mac)


async def refused_everywhere(app, token: str) -> list[httpx.Response]:
    headers = {"authorization": f"Bearer {token}"}
    async with asgi_client(app) as client:
        responses = [await client.post("/api/billing/list_invoices", json={}, headers=headers)]
        session = McpSession(client, token)
        responses.append(await session.start())
        modern = await mcp(client, "billing", "get_invoice", {"id": "inv_0001"}, token)
        responses.append(modern)
    return responses


CONFUSED = [
    pytest.param("hs", lambda: jwt.encode(claims(), RSA_KEY, algorithm="RS256"), id="RS256-vs-HMAC-secret"),
    pytest.param("hs", lambda: jwt.encode(claims(), EC_KEY, algorithm="ES256"), id="ES256-vs-HMAC-secret"),
    pytest.param("rsa", lambda: hs256_token_signed_with(RSA_PUBLIC_PEM.encode()), id="HS256-vs-RSA-public-key"),
    pytest.param("rsa", lambda: jwt.encode(claims(), EC_KEY, algorithm="ES256"), id="ES256-vs-RSA-public-key"),
]


@pytest.mark.parametrize(("key", "make_token"), CONFUSED)
async def test_jwt_algorithm_confusion_is_a_401(tmp_path, key, make_token):
    app = build(tmp_path, demo_mode=False, jwt_key=SECRET if key == "hs" else RSA_PUBLIC_PEM,
                jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    for r in await refused_everywhere(app, make_token()):
        assert r.status_code == 401, (r.request.url, r.status_code, r.text)
        assert r.headers["www-authenticate"].startswith("Bearer error=\"invalid_token\"")
        assert "Traceback" not in r.text


async def test_jwt_with_the_right_key_type_still_works(tmp_path):
    app = build(tmp_path, demo_mode=False, jwt_key=RSA_PUBLIC_PEM, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    outcome = await call("rest", app, "billing", "get_invoice", {"id": "inv_0001"},
                         jwt.encode(claims(), RSA_KEY, algorithm="RS256"))
    assert outcome.error_code is None and outcome.data["id"] == "inv_0001"


def test_verifier_pins_algorithms_to_the_key_type():
    assert JWTVerifier(key=SECRET, algorithms=["HS256", "RS256", "ES256"]).algorithms == ["HS256"]
    assert JWTVerifier(key=RSA_PUBLIC_PEM, algorithms=["HS256", "RS256", "ES256"]).algorithms == ["RS256"]
    with pytest.raises(ValueError, match="fits the key"):
        JWTVerifier(key=RSA_PUBLIC_PEM, algorithms=["HS256"])


# RFC 7235 auth-param: token "=" ( token / quoted-string ), quoted-string per RFC 7230 section 3.2.6.
QUOTED = r'"(?:[^"\\\x00-\x1f\x7f]|\\[\x09\x20-\x7e])*"'
CHALLENGE = re.compile(rf'^Bearer (?:[A-Za-z_]+=(?:[A-Za-z0-9_.-]+|{QUOTED})(?:, |$))+$')


def unquote(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value[1:-1])


async def test_challenge_with_quotes_in_its_description_is_well_formed(tmp_path):
    app = build(tmp_path, demo_mode=False, jwt_key=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE)
    token = jwt.encode(claims(tenant=None), SECRET, algorithm="HS256")
    for r in await refused_everywhere(app, token):
        assert r.status_code == 401
        challenge = r.headers["www-authenticate"]
        assert CHALLENGE.match(challenge), challenge
        description = re.search(rf"error_description=({QUOTED})", challenge).group(1)
        assert unquote(description) == 'The token has no "tenant" claim.'
    odd = unauthorized('say "hi" \\ bye\r\nX-Injected: 1 é')
    assert CHALLENGE.match(odd.headers["WWW-Authenticate"])
    assert quoted('a"b\\c') == r'"a\"b\\c"'


async def test_more_than_one_authorization_header_is_a_400(tmp_path):
    app = build(tmp_path)
    headers = [("authorization", "Bearer demo-admin"), ("authorization", "Bearer demo-globex-admin"),
               ("content-type", "application/json"), ("accept", "application/json, text/event-stream")]
    async with asgi_client(app) as client:
        rest = await client.post("/api/billing/list_invoices", content=b"{}", headers=headers)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        mcp_reply = await client.post("/mcp", content=json.dumps(init).encode(), headers=headers)
    for r in (rest, mcp_reply):
        assert r.status_code == 400, r.text
        assert "Authorization" in r.text


# -- REST bodies ---------------------------------------------------------------------------------------

async def asgi_post(app, path: str, chunks: list[bytes], headers: dict[str, str]) -> tuple[int, bytes, int]:
    """POST `chunks` through the ASGI interface; (status, body, chunks the app pulled)."""
    pulled = 0
    sent: list[dict] = []

    async def receive():
        nonlocal pulled
        if pulled < len(chunks):
            pulled += 1
            return {"type": "http.request", "body": chunks[pulled - 1], "more_body": pulled < len(chunks)}
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {}}
    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body, pulled


@pytest.mark.parametrize("path", ["/api/billing/create_invoice", "/mcp"])
async def test_oversized_bodies_are_413_before_being_read(tmp_path, path):
    app = build(tmp_path)
    limit = app.state.mcpfusion.settings.max_body_bytes
    chunk = b" " * (1024 * 1024)
    chunks = [chunk] * (limit // len(chunk) + 8)  # 12 MB announced by nobody (chunked)
    headers = {"authorization": "Bearer demo-admin", "content-type": "application/json", "host": "127.0.0.1"}
    status, body, pulled = await asgi_post(app, path, chunks, headers)
    assert status == 413, body
    # Stopped reading by twice the limit (what is past the limit is dropped, not kept, so that the connection could
    # serve the next request had the body ended there; it did not: left unread, the answer closes the connection).
    assert pulled <= 2 * limit // len(chunk) + 1 < len(chunks)
    declared = {**headers, "content-length": str(len(chunks) * len(chunk))}
    status, _, pulled = await asgi_post(app, path, chunks, declared)
    assert status == 413 and pulled == 0  # a declared oversize is refused without reading anything


async def test_rest_body_limit_follows_the_setting_and_small_bodies_pass():
    from tests.mcp_app import build_fusion

    app = build_fusion(max_body_bytes=2048).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        big = await client.post("/api/billing/get_invoice", json={"id": "inv_1", "pad": "x" * 4096})
        assert big.status_code == 413
        ok = await client.post("/api/billing/get_invoice", json={"id": "inv_1"})
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("depth", [150, 1000, 100_000])
async def test_deeply_nested_rest_body_is_a_4xx(tmp_path, depth):
    app = build(tmp_path)
    nested = '{"id": "inv_0001", "x": ' + "[" * depth + "]" * depth + "}"
    async with asgi_client(app) as client:
        r = await client.post("/api/billing/get_invoice", content=nested.encode(),
                              headers={"authorization": "Bearer demo-admin", "content-type": "application/json"})
        assert 400 <= r.status_code < 500, r.text
        assert "Traceback" not in r.text
        assert (await client.get("/healthz")).status_code == 200


# -- /mcp content type ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("content_type", "status"), [
    ("text/json", 415), ("application/jsonx", 415), ("application/json-patch+json", 415), ("text/plain", 415),
    (None, 415), ("application/json", 200), ("Application/JSON; charset=utf-8", 200),
])
async def test_mcp_requires_application_json(tmp_path, content_type, status):
    app = build(tmp_path)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    headers = {"authorization": "Bearer demo-admin", "accept": "application/json",
               "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"}
    if content_type is not None:
        headers["content-type"] = content_type
    async with asgi_client(app) as client:
        r = await client.post("/mcp", content=json.dumps(body).encode(), headers=headers)
    assert r.status_code == status, r.text


# -- JSON-RPC params -----------------------------------------------------------------------------------

BAD_PARAMS = [
    ("logging/setLevel", {"level": {"x": 1}}),
    ("logging/setLevel", {"level": 5}),
    ("logging/setLevel", {}),
    ("tools/call", {"name": 7}),
    ("tools/call", {"name": "billing", "arguments": [1, 2]}),
    ("tools/list", {"cursor": {"a": 1}}),
    ("resources/read", {"uri": ["x"]}),
    ("resources/subscribe", {"uri": 5}),
    ("resources/unsubscribe", {}),
    ("prompts/get", {"name": None}),
    ("prompts/get", {"name": "p", "arguments": "text"}),
    ("completion/complete", {"ref": "x", "argument": {}}),
    ("completion/complete", {"ref": {"type": "ref/prompt", "name": 1}, "argument": {"name": "a", "value": 2}}),
    ("ping", {"_meta": "not an object"}),
]


async def test_invalid_params_are_32602_on_the_session_wire(tmp_path):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        session = McpSession(client, "demo-admin")
        assert (await session.start()).status_code == 200
        for method, params in BAD_PARAMS:
            r = await session.rpc(method, params)
            replies = sse_messages(r.text) if "event-stream" in r.headers["content-type"] else [r.json()]
            reply = next(m for m in replies if "id" in m)
            assert reply.get("error", {}).get("code") == -32602, (method, params, r.text)
            assert "Traceback" not in r.text
        bad_init = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": [], "clientInfo": {"name": 3}}},
            headers={"authorization": "Bearer demo-admin", "content-type": "application/json"})
        assert bad_init.status_code == 400 and bad_init.json()["error"]["code"] == -32602


async def test_invalid_params_are_32602_on_the_sessionless_wire(tmp_path):
    app = build(tmp_path)
    # (a non-string name cannot match an Mcp-Name header: that is -32020 on this wire, checked first)
    modern = [(m, p) for m, p in BAD_PARAMS if m not in ("logging/setLevel", "resources/subscribe",
                                                       "resources/unsubscribe", "ping")
              and all(isinstance(p.get(k, ""), str) for k in ("name", "uri"))]
    modern.append(("subscriptions/listen", {"notifications": "all"}))
    async with asgi_client(app) as client:
        for method, params in modern:
            headers = {"authorization": "Bearer demo-admin", "content-type": "application/json",
                       "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                       "mcp-method": method}
            for key in ("name", "uri"):
                if key in params:
                    headers["mcp-name"] = params[key]
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
            r = await client.post("/mcp", json=body, headers=headers)
            assert r.status_code == 400, (method, params, r.status_code, r.text)
            assert r.json()["error"]["code"] == -32602, (method, params, r.text)


# -- integers ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["inproc", "rest", "mcp"])
@pytest.mark.parametrize("amount", [2.9, 1.5, "2.5"])
async def test_money_is_never_truncated(tmp_path, transport, amount):
    app = build(tmp_path)
    outcome = await call(transport, app, "billing", "record_payment", {"id": "inv_0001", "amount_cents": amount},
                         "demo-admin")
    assert outcome.error_code is not None, outcome
    assert "amount_cents" in outcome.raw and "valid integer" in outcome.raw
    invoice = (await call("inproc", app, "billing", "get_invoice", {"id": "inv_0001"}, "demo-admin")).data
    assert invoice["paid_cents"] == 0 and invoice["payments"] == []


async def test_whole_valued_numbers_are_still_integers(tmp_path):
    app = build(tmp_path)
    outcome = await call("inproc", app, "billing", "record_payment", {"id": "inv_0001", "amount_cents": 250.0},
                         "demo-admin")
    assert outcome.error_code is None and outcome.data["paid_cents"] == 250


def test_int_cast_of_a_model_refuses_fractions():
    from pydantic import BaseModel

    from mcpfusion import Model

    class Row(BaseModel):
        cents: int

    model = Model(Row, casts={"cents": "int"}, fillable={"create": ["cents"]})
    assert model.read({"cents": "12"}) == {"cents": 12}
    with pytest.raises(ValueError, match="whole number"):
        model.read({"cents": 2.5})
    with pytest.raises(ValueError):
        model.input_model("create")(cents=2.9)


@pytest.mark.parametrize("path", ["/mcp", "/api/billing/whoami"])
async def test_a_client_gone_while_sending_its_body_is_no_error(path):
    """The client hangs up mid-body: nothing to answer, nothing raised (uvicorn logged a traceback)."""
    from tests.mcp_app import build_fusion

    app = build_fusion().build_app()
    messages = iter([{"type": "http.request", "body": b'{"jsonrpc"', "more_body": True}, {"type": "http.disconnect"}])
    sent: list[dict] = []

    async def receive():
        return next(messages)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
             "http_version": "1.1", "app": app,
             "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json"), (b"content-length", b"1000"),
                         (b"accept", b"application/json, text/event-stream"), (b"mcp-protocol-version", b"2026-07-28")]}
    await app(scope, receive, send)
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [400]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
async def test_a_non_finite_number_is_a_validation_error_never_stored(value):
    """JSON has no nan or inf (1e400 parses as inf): a float argument refuses them on every transport,
    before the handler runs (it would store a number that comes back as null)."""
    import httpx

    from mcpfusion import MCPFusion, Tool
    from mcpfusion.testing import ToolTester

    stored: list[float] = []
    tool = Tool("t", description="T")

    @tool.action()
    async def save(amount: float) -> dict:
        """Save"""
        stored.append(amount)
        return {"saved": amount}

    @tool.action(readonly=True)
    async def echo(f: float = 0.0) -> dict:
        """Echo"""
        return {"f": f}

    app = MCPFusion("t", tools=[tool]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        posted = await http.post("/api/t/save", content=f'{{"amount": {value if value == "1e400" else "1e999"}}}',
                                 headers={"content-type": "application/json"})
        got = await http.get(f"/api/t/echo?f={value}")
    assert posted.status_code == got.status_code == 422, (posted.text, got.text)
    assert "finite number" in got.text
    tested = await ToolTester([tool]).call("t", "save", {"amount": float(value)})
    assert tested.is_error and "finite number" in tested.text
    assert stored == []
