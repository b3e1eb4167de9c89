"""The reference service as an OAuth protected resource: roles map to scopes, a JWT's own scope claim wins,
support sees and calls no write, the metadata, challenges, OpenAPI and docs page name the scopes."""

from __future__ import annotations

import time

import jwt
import pytest

from app.auth import ROLE_SCOPES, verifier_for
from app.settings import Settings
from mcpfusion.auth import IntrospectionVerifier
from tests.service_kit import McpSession, asgi_client, build, call, rest, sse_messages

ISSUER = "https://auth.example.test"
RESOURCE = "http://127.0.0.1/mcp"
SECRET = "a-shared-secret-long-enough-for-hs256"
READS = {"list_invoices", "get_invoice", "revenue_summary", "export_invoices", "invoice_pdf"}


def oauth_app(tmp_path, **overrides):
    return build(tmp_path, jwt_key=SECRET, jwt_issuer=ISSUER, resource_url=RESOURCE, authorization_servers=[ISSUER],
                 oauth_token_url=ISSUER + "/token", **overrides)


def token(**claims):
    now = int(time.time())
    values = {"sub": "client-1", "tenant": "acme", "role": "admin", "iss": ISSUER, "aud": RESOURCE, "iat": now,
              "exp": now + 600, **claims}
    return jwt.encode({k: v for k, v in values.items() if v is not None}, SECRET, algorithm="HS256")


async def listing(client, bearer):
    session = McpSession(client, bearer)
    assert (await session.start()).status_code == 200
    r = await session.rpc("tools/list")
    reply = sse_messages(r.text)[-1] if "event-stream" in r.headers["content-type"] else r.json()
    return {t["name"]: t for t in reply["result"]["tools"]}


def actions_of(listed):
    return {a for name, t in listed.items() if name.startswith("billing")
            for a in (t["inputSchema"]["properties"]["action"]["enum"] if "action" in t["inputSchema"]["properties"]
                      else [name.removeprefix("billing_")])}


async def test_support_sees_no_write_and_admin_sees_every_action(tmp_path):
    app = oauth_app(tmp_path)
    async with asgi_client(app) as client:
        support = await listing(client, "demo-support")
        admin = await listing(client, "demo-admin")
    assert set(support) == {"billing_read", "customers"} and actions_of(support) == READS
    assert set(admin) == {"billing_read", "billing_write", "billing_void_invoice", "customers"}
    assert actions_of(admin) == READS | {"create_invoice", "update_invoice_status", "remind", "record_payment",
                                         "void_invoice"}
    assert "void_invoice" not in str(support) and "record_payment" not in str(support)


async def test_a_tokens_scope_claim_wins_over_its_role(tmp_path):
    app = oauth_app(tmp_path)
    read_only_admin = token(scope="billing:read customers:read")
    payer = token(role="support", scope="billing:read payments:write")
    async with asgi_client(app) as client:
        assert set(await listing(client, read_only_admin)) == {"billing_read", "customers"}
        payer_view = await listing(client, payer)
        assert set(payer_view) == {"billing_read", "billing_write"}  # no customers:read: no customers tool
        assert payer_view["billing_write"]["inputSchema"]["properties"]["action"]["enum"] == ["record_payment"]
        refused = await rest(client, "billing", "create_invoice", {}, read_only_admin)
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"].startswith(
            'Bearer error="insufficient_scope", scope="billing:read billing:write", '
            'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/api"')
        no_claim = await listing(client, token(role="support"))  # no scope claim: the role's scopes
        assert set(no_claim) == {"billing_read", "customers"}
    assert (await call("rest", app, "customers", "list", {}, payer)).error_code == "FORBIDDEN"
    assert ROLE_SCOPES["support"] == {"billing:read", "customers:read"}


async def test_metadata_and_401_of_the_service(tmp_path):
    app = oauth_app(tmp_path)
    async with asgi_client(app) as client:
        document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
        refused = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        rest_refused = await rest(client, "billing", "list_invoices", {}, None)
    assert document == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["billing:read", "billing:write", "payments:write", "customers:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpfusion billing reference service",
    }
    metadata = 'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"'
    assert refused.status_code == rest_refused.status_code == 401
    assert refused.headers["www-authenticate"] == f"Bearer {metadata}"
    # REST's own metadata: its resource is the URL a REST client requested (RFC 9728 section 3.3)
    assert rest_refused.headers["www-authenticate"] == f"Bearer {metadata.replace('/mcp', '/api')}"


async def test_openapi_and_docs_page_name_each_actions_scopes(tmp_path):
    app = oauth_app(tmp_path)
    async with asgi_client(app) as client:
        schema = (await client.get("/openapi.json")).json()
        page = (await client.get("/tools")).text
    scheme = schema["components"]["securitySchemes"]
    assert scheme["oauth2"]["flows"]["clientCredentials"]["tokenUrl"] == ISSUER + "/token"
    assert scheme["oauth2"]["flows"]["clientCredentials"]["scopes"]["payments:write"].startswith("Record payments")
    assert scheme["bearer"]["scheme"] == "bearer"  # the demo tokens still have their Authorize button
    assert schema["paths"]["/api/billing/record_payment"]["post"]["security"] == [
        {"oauth2": ["billing:read", "payments:write"]}, {"bearer": ["billing:read", "payments:write"]}]
    assert schema["paths"]["/api/customers/get"]["get"]["security"][0] == {"oauth2": ["customers:read"]}
    assert "OAuth scopes: <code>billing:read</code> <code>billing:write</code>" in page


async def test_demo_openapi_names_each_operations_scopes_without_an_oauth_token_url(tmp_path):
    """Demo mode knows no token endpoint, so no OAuth2 scheme: the bearer entry still lists the scopes."""
    async with asgi_client(build(tmp_path)) as client:
        schema = (await client.get("/openapi.json")).json()
    assert "oauth2" not in schema["components"]["securitySchemes"]
    paths = schema["paths"]
    assert paths["/api/billing/void_invoice"]["post"]["security"] == [{"bearer": ["billing:read", "billing:write"]}]
    assert paths["/api/billing/get_invoice"]["get"]["security"] == [{"bearer": ["billing:read"]}]
    api = [op for path, ops in paths.items() if path.startswith("/api/") for op in ops.values()]
    assert api and all(op["security"][-1]["bearer"] for op in api)  # every action needs some scope


def test_settings_read_the_oauth_environment():
    settings = Settings.from_env({
        "MCPFUSION_RESOURCE_URL": "https://billing.example.test/mcp",
        "MCPFUSION_AUTHORIZATION_SERVERS": "https://a.example.test, https://b.example.test",
        "MCPFUSION_OAUTH_TOKEN_URL": "https://a.example.test/token",
        "MCPFUSION_OAUTH_AUTHORIZATION_URL": "https://a.example.test/auth",
        "MCPFUSION_JWT_JWKS_URL": "https://a.example.test/jwks",
        "MCPFUSION_JWKS_REFETCH_FLOOR": "2.5",
    })
    assert settings.resource_url == "https://billing.example.test/mcp"
    assert settings.authorization_servers == ["https://a.example.test", "https://b.example.test"]
    assert settings.oauth_token_url == "https://a.example.test/token"
    assert settings.oauth_authorization_url == "https://a.example.test/auth"
    verifier = verifier_for(settings)
    assert verifier.audience == "https://billing.example.test/mcp"  # bound to the resource (RFC 8707)
    assert verifier.jwks.refetch_floor == 2.5
    opaque = Settings.from_env({"MCPFUSION_INTROSPECTION_URL": "https://a.example.test/introspect",
                                "MCPFUSION_INTROSPECTION_CLIENT_ID": "billing",
                                "MCPFUSION_INTROSPECTION_CLIENT_SECRET": "s",
                                "MCPFUSION_RESOURCE_URL": "https://billing.example.test/mcp"})
    introspection = verifier_for(opaque)
    assert isinstance(introspection, IntrospectionVerifier)
    assert introspection.audience == "https://billing.example.test/mcp" and introspection.auth == ("billing", "s")
    with pytest.raises(ValueError, match="CLIENT_ID"):
        verifier_for(Settings.from_env({"MCPFUSION_INTROSPECTION_URL": "https://a.example.test/introspect"}))
