"""FastAPI's `/docs` (Swagger UI) and `/redoc` pages served offline.

FastAPI's own pages load their scripts and styles from a CDN, so they are blank without internet. The same
pages (FastAPI's `get_swagger_ui_html` / `get_redoc_html`) are served here with the assets that the maintained
`fastapi-offline` package ships, mounted under `ASSETS_PATH`, the app's title escaped, and a
Content-Security-Policy that runs the page's own scripts only: a description of the OpenAPI document (which
ReDoc renders as markdown) holding a `javascript:` link runs nothing on this origin, where the try-it forms
hold the caller's bearer token.
"""

from __future__ import annotations

import base64
import hashlib
import html
import importlib.util
import re
from functools import lru_cache
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

ASSETS_PATH = "/static-offline-docs"
# Found, not imported: the package's own code (a FastAPI factory) is not used, only the assets it ships.
_SPEC = importlib.util.find_spec("fastapi_offline")
if _SPEC is None or _SPEC.origin is None:
    raise ImportError("mcpfusion needs fastapi-offline: it serves the /docs and /redoc assets that package ships")
ASSETS_DIR = Path(_SPEC.origin).parent / "static"


def serve_offline(app: FastAPI) -> None:
    """Replace the CDN-backed `/docs` and `/redoc` routes of `app` (whichever it has) by offline ones, and
    FastAPI's Swagger UI OAuth2 redirect page by the same page under a Content-Security-Policy."""
    pages = {app.docs_url, app.redoc_url} - {None}
    if not pages or app.openapi_url is None:
        return
    # (FastAPI serves the redirect page only beside Swagger UI)
    redirect = app.swagger_ui_oauth2_redirect_url if app.docs_url is not None else None
    if redirect:
        pages.add(redirect)
    app.router.routes[:] = [r for r in app.router.routes if not (isinstance(r, Route) and r.path in pages)]
    # ReDoc's bundle draws its footer logo from its CDN: serve the bundle with that image inlined instead.
    app.add_route(f"{ASSETS_PATH}/redoc.standalone.js", _redoc_bundle, include_in_schema=False)
    app.mount(ASSETS_PATH, StaticFiles(directory=ASSETS_DIR), name="offline-docs-assets")
    openapi_url = app.openapi_url

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_PATH}/{name}"

    if app.docs_url is not None:
        async def swagger_ui(request: Request) -> HTMLResponse:
            root = request.scope.get("root_path", "")
            return _guarded(get_swagger_ui_html(
                openapi_url=f"{root}{openapi_url}", title=f"{html.escape(app.title)} - Swagger UI",
                oauth2_redirect_url=app.swagger_ui_oauth2_redirect_url,
                swagger_js_url=asset(request, "swagger-ui-bundle.js"),
                swagger_css_url=asset(request, "swagger-ui.css"),
                swagger_favicon_url=asset(request, "favicon.png"),
                init_oauth=app.swagger_ui_init_oauth, swagger_ui_parameters=app.swagger_ui_parameters,
            ))

        app.add_route(app.docs_url, swagger_ui, include_in_schema=False)
    if redirect:
        async def swagger_ui_redirect(request: Request) -> HTMLResponse:
            return _guarded(get_swagger_ui_oauth2_redirect_html(), _REDIRECT_POLICY)

        app.add_route(redirect, swagger_ui_redirect, include_in_schema=False)
    if app.redoc_url is not None:
        async def redoc(request: Request) -> HTMLResponse:
            root = request.scope.get("root_path", "")
            return _guarded(get_redoc_html(
                openapi_url=f"{root}{openapi_url}", title=f"{html.escape(app.title)} - ReDoc",
                redoc_js_url=asset(request, "redoc.standalone.js"),
                redoc_favicon_url=asset(request, "favicon.png"), with_google_fonts=False,
            ))

        app.add_route(app.redoc_url, redoc, include_in_schema=False)


_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)

# Scripts from this origin and the page's own inline ones (`{hashes}`) only, so neither a `javascript:` link nor
# a script a description smuggled in runs; ReDoc's search worker (a blob) and both UIs' injected styles allowed.
_DOCS_POLICY = ("default-src 'self'; script-src 'self'{hashes}; style-src 'self' 'unsafe-inline'; "
                "img-src 'self' data:; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; "
                "frame-ancestors 'self'")
# The OAuth2 redirect page (Swagger UI's popup, sent back here by the authorization server with the code or
# token in its URL) runs its one inline script, which hands them to the page that opened it: nothing to load,
# no form, never framed.
_REDIRECT_POLICY = "default-src 'none'; script-src{hashes}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def _guarded(page: HTMLResponse, policy: str = _DOCS_POLICY) -> HTMLResponse:
    """`page` with the Content-Security-Policy `policy`, allowing the page's own inline scripts by their hashes."""
    hashes = "".join(f" 'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
                     for script in _INLINE_SCRIPT.findall(bytes(page.body).decode()))
    page.headers["Content-Security-Policy"] = policy.format(hashes=hashes)
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page


_REDOC_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
_INLINE_LOGO = ("data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='12' height='12'%3E"
                "%3Ccircle cx='6' cy='6' r='5' fill='%23888'/%3E%3C/svg%3E")


@lru_cache(maxsize=1)
def _redoc_js() -> bytes:
    return (ASSETS_DIR / "redoc.standalone.js").read_text(encoding="utf-8").replace(_REDOC_LOGO, _INLINE_LOGO).encode()


async def _redoc_bundle(request: Request) -> Response:
    return Response(_redoc_js(), media_type="application/javascript",
                    headers={"Cache-Control": "public, max-age=86400"})
