"""The reference service's FastAPI application, built from every tool found in `routers/`.

    uvicorn app.main:app                      # from the repository root (settings from the environment)
    create_app(Settings(database_url=...))    # tests and embedding: an app on other settings

`/mcp` (MCP), `/api/{tool}/{action}` (REST), `/docs` (OpenAPI) and `/healthz` come from `MCPFusion.mount`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from mcpfusion import Audit, RateLimit, __version__
from mcpfusion.app import MCPFusion
from mcpfusion.authorization import ProtectedResource
from mcpfusion.discovery import discover_tools

from .auth import SCOPE_DESCRIPTIONS, authenticate, verifier_for
from .db import Database
from .deps import cursor_scope
from .pdf import invoice_resource
from .settings import ROOT, Settings
from .telemetry import telemetry_for

ROUTERS = ROOT / "routers"
INSTRUCTIONS = (
    "Billing for one organisation (tenant): invoices, payments and customers. Amounts are integers in cents. "
    "Start with billing list_invoices or customers list."
)
logger = logging.getLogger("app")


def create_fusion(settings: Settings, routers: str | Path = ROUTERS) -> MCPFusion:
    """The MCP server: every discovered tool, with the transport settings of `settings`. Every call is
    rate-limited per principal, and every mutation leaves an audit event (JSON lines on `mcpfusion.audit`)."""
    transport: dict[str, Any] = {}
    if settings.allowed_hosts:
        transport["allowed_hosts"] = settings.allowed_hosts
    if settings.allowed_origins:
        transport["allowed_origins"] = settings.allowed_origins
    fusion = MCPFusion(
        name="mcpfusion-billing",
        version=__version__,
        title="mcpfusion billing reference service",
        instructions=INSTRUCTIONS,
        tools=discover_tools(routers),
        telemetry=telemetry_for(settings),
        cursor_scope=cursor_scope,
        middleware=[Audit(), RateLimit(settings.rate_limit, per=60)],
        authorization=protected_resource(settings),
        **transport,
    )
    # billing.invoice_pdf's documents, read back with resources/read (the same view of the invoice).
    # The scope of billing_read: a caller that may not read invoices neither lists nor reads this resource.
    fusion.resource_template("invoice://{id}", name="invoice_pdf", title="Invoice (PDF)", mime_type="application/pdf",
                             description="An invoice as a PDF document, as the caller may see it",
                             scopes=["billing:read"])(invoice_resource)
    return fusion


def protected_resource(settings: Settings) -> ProtectedResource:
    """The service as an OAuth protected resource: every MCP and REST request needs a valid bearer token (a
    real HTTP 401 naming the metadata before any tool runs); the metadata names the authorization servers."""
    return ProtectedResource(
        resource=settings.resource_url,
        authorization_servers=settings.authorization_servers,
        authenticate=authenticate,
        scopes_supported=SCOPE_DESCRIPTIONS,
        resource_name="mcpfusion billing reference service",
        token_url=settings.oauth_token_url,
        authorization_url=settings.oauth_authorization_url,
    )


def create_app(settings: Settings | None = None, *, routers: str | Path = ROUTERS) -> FastAPI:
    """A new application on `settings` (from the environment when omitted)."""
    settings = settings or Settings.from_env()
    db = Database(settings.database_url, seed=settings.seed_demo_data)
    fusion = create_fusion(settings, routers)
    fusion.readiness.add("database", db.ping)  # /readyz: 503 while the database is unreachable

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await db.ready()  # create and seed at start-up rather than on the first call
        yield
        await db.dispose()
        if fusion.telemetry is not None:
            fusion.telemetry.shutdown()

    app = FastAPI(
        title="mcpfusion billing reference service",
        version=__version__,
        description=INSTRUCTIONS,
        lifespan=lifespan,
        # REST server spans from FastAPI's own telemetry, on the same providers as the MCP and action spans.
        telemetry=fusion.telemetry.fastapi_config() if fusion.telemetry is not None else None,
    )
    app.state.settings = settings
    app.state.db = db
    app.state.credentials = settings.credentials
    app.state.jwt_verifier = verifier_for(settings)
    fusion.mount(app)  # /mcp, /healthz, /api/{tool}/{action}, /tools, the OAuth metadata and the bearer check
    _document_bearer(app, fusion)
    return app


def _document_bearer(app: FastAPI, fusion: MCPFusion) -> None:
    """Declare the bearer scheme in OpenAPI, so `/docs` has an Authorize button for the REST actions; each
    operation names the scopes its action needs on the bearer entry too (OpenAPI 3.1 lets a non-OAuth scheme
    list them), so they show without an OAuth token URL configured (demo mode)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            schemes = schema.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["bearer"] = {"type": "http", "scheme": "bearer",
                                 "description": "Demo tokens: demo-admin, demo-support, demo-globex-admin."}
            paths = schema.get("paths", {})
            for action in fusion.registry.actions():
                for operation in paths.get(f"/api/{action.tool.name}/{action.name}", {}).values():
                    # next to the OAuth2 scheme, when configured
                    operation["security"] = [*operation.get("security", []), {"bearer": sorted(action.scopes)}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def __getattr__(name: str) -> Any:
    """`app.main:app` is built on first access, so importing `create_app` has no side effects."""
    if name == "app":
        application = create_app()
        globals()["app"] = application
        return application
    raise AttributeError(name)
