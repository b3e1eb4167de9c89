"""Authentication (demo tokens, JWT with shared key or JWKS), real HTTP 401s on MCP and REST, and the
credential dependency answering MISSING_CREDENTIAL."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from app.settings import Settings
from tests.service_kit import McpSession, asgi_client, build, call, mcp, rest, serve

ISSUER = "https://issuer.example"
AUDIENCE = "mcpfusion-billing"
SECRET = "a-shared-secret-long-enough-for-hs256"


def claims(**overrides):
    now = int(time.time())
    values = {"sub": "user-1", "tenant": "globex", "role": "support", "iss": ISSUER, "aud": AUDIENCE,
              "iat": now, "exp": now + 3600}  # built at collection: valid for a slow whole-suite run
    values.update(overrides)
    return {k: v for k, v in values.items() if v is not None}


def jwt_app(tmp_path, **overrides):
    return build(tmp_path, demo_mode=False, jwt_key=SECRET, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, **overrides)


BAD_HEADERS = [
    pytest.param({}, id="no-token"),
    pytest.param({"authorization": "Basic dXNlcjpwYXNz"}, id="wrong-scheme"),
    pytest.param({"authorization": "Bearer "}, id="empty-token"),
    pytest.param({"authorization": "Bearer not-a-token"}, id="unknown-token"),
]


@pytest.mark.parametrize("headers", BAD_HEADERS)
async def test_bad_or_missing_token_is_a_real_401_on_mcp_and_rest(tmp_path, headers):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        responses = [
            await client.post("/api/billing/list_invoices", json={}, headers=headers),
            await client.post("/api/customers/get", json={"id": "cus_0001"}, headers=headers),
        ]
        session = McpSession(client, None)
        session.headers.update(headers)
        responses.append(await session.start())  # 2025-11-25: initialize itself needs the token
        modern = await mcp(client, "billing", "get_invoice", {"id": "inv_0001"})
        responses.append(await client.post("/mcp", content=modern.request.content,
                                           headers={**dict(modern.request.headers), **headers}))
        for r in responses:
            assert r.status_code == 401, (r.request.url, r.text)
            assert r.headers["www-authenticate"].startswith("Bearer")
            assert "Traceback" not in r.text
        assert (await client.get("/healthz")).status_code == 200


async def test_401_on_a_real_server_and_mcp_works_with_a_token(tmp_path):
    app = build(tmp_path)
    with serve(app) as base:
        async with httpx.AsyncClient(base_url=base, timeout=30) as client:
            assert (await rest(client, "billing", "list_invoices")).status_code == 401
            denied = McpSession(client, "wrong")
            assert (await denied.start()).status_code == 401
            session = McpSession(client, "demo-admin")
            assert (await session.start()).status_code == 200
            reply = await session.call("billing", "get_invoice", {"id": "inv_0001"})
            assert reply["result"]["isError"] is False


async def test_in_process_calls_without_token_answer_unauthorized(tmp_path):
    app = build(tmp_path)
    outcome = await call("inproc", app, "billing", "list_invoices", {}, None)
    assert outcome.error_code == "UNAUTHORIZED"


async def test_jwt_with_shared_key(tmp_path):
    app = jwt_app(tmp_path)
    good = jwt.encode(claims(), SECRET, algorithm="HS256")
    outcome = await call("rest", app, "customers", "list", {}, good)
    assert {c["id"] for c in outcome.data} == {"cus_0101", "cus_0102", "cus_0103"}
    assert {c["email"] for c in outcome.data} == {"[REDACTED]"}  # role support from the token
    admin = jwt.encode(claims(role="admin", tenant="acme"), SECRET, algorithm="HS256")
    outcome = await call("mcp", app, "customers", "get", {"id": "cus_0001"}, admin)
    assert outcome.data["email"] == "ana.lima@northwind.example"


@pytest.mark.parametrize(
    ("token_claims", "key", "status", "reason"),
    [
        (lambda: claims(exp=int(time.time()) - 3600), SECRET, 401, "expired"),
        (lambda: claims(aud="someone-else"), SECRET, 401, "InvalidAudienceError"),
        (lambda: claims(iss="https://evil.example"), SECRET, 401, "InvalidIssuerError"),
        (lambda: claims(exp=None), SECRET, 401, "MissingRequiredClaimError"),
        (lambda: claims(), "another-secret-that-is-long-enough", 401, "InvalidSignatureError"),
        (lambda: claims(tenant=None), SECRET, 401, "tenant"),
        (lambda: claims(role="owner"), SECRET, 403, "owner"),
    ],
    # Minted when the test runs (not at collection), so a slow suite never sees them expire early.
    ids=["expired", "audience", "issuer", "no-exp", "signature", "no-tenant", "bad-role"],
)
async def test_jwt_rejections(tmp_path, token_claims, key, status, reason):
    app = jwt_app(tmp_path)
    token = jwt.encode(token_claims(), key, algorithm="HS256")
    async with asgi_client(app) as client:
        for r in (await rest(client, "billing", "list_invoices", {}, token),
                  await mcp(client, "billing", "list_invoices", {}, token)):
            assert r.status_code == status, r.text
            assert reason in r.text
            if status == 401:
                assert r.headers["www-authenticate"].startswith("Bearer")


async def test_demo_tokens_only_work_in_demo_mode(tmp_path):
    app = jwt_app(tmp_path)
    async with asgi_client(app) as client:
        assert (await rest(client, "billing", "list_invoices", {}, "demo-admin")).status_code == 401
    demo = build(tmp_path / "demo")
    async with asgi_client(demo) as client:
        assert (await rest(client, "billing", "list_invoices", {}, "demo-admin")).status_code == 200


@pytest.fixture
def jwks_server():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "key-1", "use": "sig", "alg": "RS256"})
    body = json.dumps({"keys": [jwk]}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield key, f"http://127.0.0.1:{server.server_port}/.well-known/jwks.json"
    server.shutdown()
    server.server_close()


async def test_jwt_with_jwks(tmp_path, jwks_server):
    key, url = jwks_server
    app = build(tmp_path, demo_mode=False, jwt_jwks_url=url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE,
                jwt_algorithms=["RS256"])
    token = jwt.encode(claims(role="admin", tenant="acme"), key, algorithm="RS256", headers={"kid": "key-1"})
    outcome = await call("rest", app, "billing", "get_invoice", {"id": "inv_0001"}, token)
    assert outcome.error_code is None and outcome.data["customer"]["email"] == "billing@contoso-bakery.example"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = jwt.encode(claims(role="admin", tenant="acme"), other, algorithm="RS256", headers={"kid": "key-1"})
    async with asgi_client(app) as client:
        assert (await rest(client, "billing", "get_invoice", {"id": "inv_0001"}, forged)).status_code == 401


# -- credentials ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", ["inproc", "rest", "mcp"])
async def test_missing_credential(tmp_path, monkeypatch, transport):
    monkeypatch.delenv("PAYMENT_API_KEY", raising=False)
    app = build(tmp_path, credentials={})
    outcome = await call(transport, app, "billing", "record_payment", {"id": "inv_0001", "amount_cents": 100},
                         "demo-admin")
    assert outcome.error_code == "MISSING_CREDENTIAL"
    assert "PAYMENT_API_KEY" in outcome.raw
    # nothing was recorded
    invoice = (await call(transport, app, "billing", "get_invoice", {"id": "inv_0001"}, "demo-admin")).data
    assert invoice["paid_cents"] == 0 and invoice["payments"] == []


async def test_missing_credential_status_on_rest(tmp_path, monkeypatch):
    monkeypatch.delenv("PAYMENT_API_KEY", raising=False)
    app = build(tmp_path, credentials={})
    async with asgi_client(app) as client:
        r = await rest(client, "billing", "record_payment", {"id": "inv_0001", "amount_cents": 100}, "demo-admin")
    assert r.status_code == 503
    assert r.json()["code"] == "MISSING_CREDENTIAL"


async def test_credential_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("PAYMENT_API_KEY", "from-the-environment")
    app = build(tmp_path, credentials={})
    outcome = await call("inproc", app, "billing", "record_payment", {"id": "inv_0001", "amount_cents": 100},
                         "demo-admin")
    assert outcome.error_code is None and outcome.data["paid_cents"] == 100
    assert "from-the-environment" not in outcome.raw


def test_settings_from_environment():
    demo = Settings.from_env({})
    assert demo.demo_mode and demo.credentials["PAYMENT_API_KEY"]
    assert demo.database_url.startswith("sqlite+aiosqlite:///")
    prod = Settings.from_env({"MCPFUSION_DEMO": "0", "DATABASE_URL": "postgres://u:p@db:5432/billing",
                              "MCPFUSION_JWT_KEY": "k", "MCPFUSION_JWT_ALGORITHMS": "HS256,HS512"})
    assert not prod.demo_mode and prod.credentials == {}
    assert prod.database_url == "postgresql+asyncpg://u:p@db:5432/billing"
    assert prod.jwt_algorithms == ["HS256", "HS512"]
    assert Settings.from_env({"MCPFUSION_DB_PATH": "/tmp/x.db"}).database_url == "sqlite+aiosqlite:////tmp/x.db"


async def test_without_a_configured_audience_tokens_name_the_advertised_resource(tmp_path):
    """No jwt_audience and no resource URL: the resource URL the metadata advertises (derived from the
    request) is the audience. A token for it is let in (a client following the metadata), one issued for
    another service is a 401, and one without `aud` passes (set the resource URL in production)."""
    app = build(tmp_path, demo_mode=False, jwt_key=SECRET, jwt_issuer=ISSUER)
    async with asgi_client(app) as client:
        advertised = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()["resource"]
        for audience, status in ((advertised, 200), ([advertised, "other"], 200), (None, 200),
                                 ("https://other.example/mcp", 401), (["other"], 401)):
            token = jwt.encode(claims(aud=audience), SECRET, algorithm="HS256")
            for r in (await rest(client, "billing", "list_invoices", {}, token),
                      await mcp(client, "billing", "list_invoices", {}, token)):
                assert r.status_code == status, (audience, r.text)
                if status == 401:
                    assert "not issued for this resource" in r.text


async def test_protected_resource_verifier_checks_the_resource_as_audience():
    """A library verifier without an audience of its own, behind ProtectedResource(resource=...): a token
    for another resource, or naming none, is refused; one for this resource is accepted."""
    from fastapi import HTTPException
    from starlette.requests import Request

    from mcpfusion.auth import JWTVerifier
    from mcpfusion.authorization import ProtectedResource

    resource = ProtectedResource(resource="https://billing.example.com/mcp",
                                 verifier=JWTVerifier(key=SECRET, algorithms=["HS256"]))

    def request(token):
        return Request({"type": "http", "method": "POST", "path": "/mcp", "headers": [
            (b"authorization", f"Bearer {token}".encode()), (b"host", b"billing.example.com")]})

    token = jwt.encode(claims(aud="https://billing.example.com/mcp"), SECRET, algorithm="HS256")
    assert (await resource.authenticate(request(token)))["sub"] == "user-1"
    for audience in ("https://other.example/mcp", None):  # another resource's token, or one naming none
        with pytest.raises(HTTPException) as refused:
            await resource.authenticate(request(jwt.encode(claims(aud=audience), SECRET, algorithm="HS256")))
        assert refused.value.status_code == 401


async def test_an_admin_token_without_customers_read_gets_no_customer_contact_through_invoices(tmp_path):
    # customers:read gates the customers tool: a token narrowed to billing:read must not read the same email and
    # phone through an invoice, its list, its PDF or its resource (it sees invoices as support does).
    narrowed = jwt.encode(claims(role="admin", tenant="acme", scope="billing:read"), SECRET, algorithm="HS256")
    whole = jwt.encode(claims(role="admin", tenant="acme"), SECRET, algorithm="HS256")
    app = jwt_app(tmp_path)
    async with asgi_client(app) as client:
        headers = {"authorization": f"Bearer {narrowed}"}
        assert (await client.post("/api/customers/get", json={"id": "cus_0001"}, headers=headers)).status_code == 403
        one = (await client.post("/api/billing/get_invoice", json={"id": "inv_0001"}, headers=headers)).json()
        rows = (await client.post("/api/billing/list_invoices", json={}, headers=headers)).json()
        assert one["customer"]["email"] == "[REDACTED]" and one["customer"]["phone"] in ("[REDACTED]", None)
        assert rows and {row["customer"]["email"] for row in rows} == {"[REDACTED]"}
        on_mcp = (await mcp(client, "billing", "get_invoice", {"id": "inv_0001"}, narrowed)).text
        assert "@" not in on_mcp and "[REDACTED]" in on_mcp
        admin = (await client.post("/api/billing/get_invoice", json={"id": "inv_0001"},
                                   headers={"authorization": f"Bearer {whole}"})).json()
        assert "@" in admin["customer"]["email"] and "internal_note" in admin
