"""`/docs` and `/redoc` load every asset from the app itself (no CDN), on built and mounted apps alike."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool

tool = Tool("notes")


@tool.action(readonly=True)
async def ping() -> str:
    return "pong"


def asset_urls(html: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]+)"', html)


def test_built_app_serves_swagger_and_redoc_offline():
    client = TestClient(MCPFusion("notes", tools=[tool]).build_app())
    for page, expected in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = client.get(page).text
        urls = asset_urls(html)
        assert any(u.endswith(expected) for u in urls), urls
        assert not [u for u in urls if u.startswith(("http:", "https:", "//"))], urls
        for url in urls:
            r = client.get(url)
            assert r.status_code == 200 and len(r.content) > 1000, url
    assert "cdn" not in client.get("/docs").text.lower()
    assert client.get("/docs/oauth2-redirect").status_code == 200


def test_mount_keeps_the_apps_own_docs_urls():
    app = FastAPI(docs_url="/api-docs", redoc_url=None)
    MCPFusion("notes", tools=[tool]).mount(app)
    client = TestClient(app)
    assert "/static-offline-docs/swagger-ui-bundle.js" in client.get("/api-docs").text
    assert client.get("/redoc").status_code == 404 and client.get("/docs").status_code == 404
    assert "/api/notes/ping" in client.get("/openapi.json").json()["paths"]


def test_no_docs_pages_no_assets():
    app = MCPFusion("notes", tools=[tool]).build_app(docs_url=None, redoc_url=None)
    assert TestClient(app).get("/static-offline-docs/swagger-ui.css").status_code == 404


def test_redoc_bundle_names_no_outside_host():
    app = MCPFusion("offline-redoc", tools=[Tool("t", description="d")]).build_app()
    with TestClient(app) as client:
        page = client.get("/redoc").text
        src = re.search(r'<script src="([^"]*redoc[^"]*)"', page).group(1)
        bundle = client.get(src)
    assert bundle.status_code == 200 and bundle.headers["content-type"].startswith("application/javascript")
    assert "cdn.redoc.ly" not in bundle.text and len(bundle.content) > 100_000


def test_the_oauth2_redirect_page_runs_its_own_script_only():
    """FastAPI's Swagger UI OAuth2 redirect page (the popup the authorization server sends the code or token
    to) under a policy of its own: its one inline script by hash, nothing else, on built and mounted apps."""
    import base64
    import hashlib

    from fastapi.openapi.docs import get_swagger_ui_oauth2_redirect_html

    script = re.search(r"<script>(.*?)</script>", get_swagger_ui_oauth2_redirect_html().body.decode(), re.S)
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    policy = (f"default-src 'none'; script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'; "
              "frame-ancestors 'none'")
    mounted = FastAPI(docs_url="/api-docs", swagger_ui_oauth2_redirect_url="/api-docs/redirect")
    MCPFusion("notes", tools=[tool]).mount(mounted)
    for app, path in ((MCPFusion("notes", tools=[tool]).build_app(), "/docs/oauth2-redirect"),
                      (mounted, "/api-docs/redirect")):
        r = TestClient(app).get(path)
        assert r.status_code == 200 and r.headers["content-security-policy"] == policy, path
        assert r.text == get_swagger_ui_oauth2_redirect_html().body.decode()  # FastAPI's page, as it was
        assert [route.path for route in app.router.routes if getattr(route, "path", None) == path] == [path]
    # Without Swagger UI there is no redirect page (as FastAPI has none).
    bare = MCPFusion("notes", tools=[tool]).build_app(docs_url=None)
    assert TestClient(bare).get("/docs/oauth2-redirect").status_code == 404
