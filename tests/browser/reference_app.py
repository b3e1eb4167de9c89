"""The reference service as the browser tests serve it: `app.main.create_app()` with its settings from the
environment, plus the docs routes if `MCPFusion.mount` does not add them yet."""

from __future__ import annotations

from fastapi import FastAPI

from app.main import create_app
from mcpfusion.docs import add_docs_routes


def ensure_docs(app: FastAPI) -> FastAPI:
    paths = {getattr(route, "path", None) for route in app.routes}
    if "/tools" not in paths:
        add_docs_routes(app, app.state.mcpfusion.registry)
    return app


def build_app() -> FastAPI:
    return ensure_docs(create_app())
