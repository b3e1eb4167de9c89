"""`/tools`, `/tools.json`, `/tools.toon` and the page's own assets, served by the app itself."""

from __future__ import annotations

import re
from html import unescape

import httpx
import pytest
import toon_format

from mcpfusion.docs import assets
from tests.browser.sample_app import build_app


@pytest.fixture
async def http():
    transport = httpx.ASGITransport(app=build_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as client:
        yield client


async def test_page_lists_every_action_and_references_only_local_assets(http):
    page = await http.get("/tools")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    for name in ("list_invoices", "get_invoice", "remind", "void_invoice"):
        assert f'id="action-billing-{name}"' in html
    assert 'id="action-reports-totals"' in html and 'data-mcp-name="reports_totals"' in html
    # Every src/href is relative or a fragment: nothing is fetched from another host.
    for url in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert not re.match(r"^(https?:)?//", url), url
    csp = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1))
    assert "default-src 'none'" in csp and "connect-src 'self';" in csp
    assert 'href="tools/static/docs.css"' in html and 'src="tools/static/docs.js"' in html
    assert "password_hash" not in html and "never shown" not in html


async def test_assets_are_served_with_their_media_types(http):
    css = await http.get("/tools/static/docs.css")
    js = await http.get("/tools/static/docs.js")
    assert css.status_code == js.status_code == 200
    assert css.headers["content-type"].startswith("text/css") and "prefers-color-scheme: dark" in css.text
    assert js.headers["content-type"].startswith("text/javascript") and css.content == assets.read("docs.css")
    missing = await http.get("/tools/static/..%2Fpage.py")
    assert missing.status_code == 404


async def test_manifests_json_and_toon_agree(http):
    as_json = (await http.get("/tools.json")).json()
    as_toon = (await http.get("/tools.toon"))
    assert as_toon.headers["content-type"].startswith("text/plain")
    assert toon_format.decode(as_toon.text) == as_json
    assert as_json["title"] == "Docs test service"
    # curl examples target the server the page was fetched from.
    curl = as_json["tools"][0]["actions"][0]["examples"]["curl"]
    assert curl.startswith("curl -X POST http://127.0.0.1:8123/api/billing/list_invoices")


async def test_search_works_server_side_without_javascript(http):
    html = (await http.get("/tools", params={"q": "analytics"})).text
    # Every tool is on the page (a new search may find any), what the query does not match rendered hidden.
    assert re.search(r'id="tool-reports"[^>]*>', html).group(0).find(" hidden") == -1
    assert re.search(r'id="tool-billing"[^>]*>', html).group(0).endswith(" hidden>")
    html = (await http.get("/tools", params={"q": "void"})).text
    assert re.search(r'id="action-billing-void_invoice"[^>]*>', html).group(0).find(" hidden") == -1
    assert re.search(r'id="action-billing-remind"[^>]*>', html).group(0).endswith(" hidden>")
    html = (await http.get("/tools", params={"q": "<script>nothing"})).text
    assert "No tool or action matches this search." in html and "<script>nothing" not in html


async def test_docs_routes_stay_out_of_openapi(http):
    paths = (await http.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/tools")]


async def test_page_sends_its_policy_as_a_header_and_is_never_framed(http):
    """Browsers ignore frame-ancestors in a <meta> policy: the header keeps other sites from framing the page
    whose try-it forms take a bearer token (clickjacking); X-Frame-Options for browsers without it."""
    for path in ("/tools", "/tools?q=invoice"):
        page = await http.get(path)
        assert page.status_code == 200
        header = page.headers["content-security-policy"]
        meta = unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page.text).group(1))
        assert header == f"{meta}; frame-ancestors 'none'"
        assert "default-src 'none'" in header and "script-src 'self';" in header
        assert page.headers["x-frame-options"] == "DENY"
    head = await http.head("/tools")
    assert head.headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in head.headers[
        "content-security-policy"]


async def test_every_docs_response_says_its_type_is_not_to_be_sniffed(http):
    """A browser sniffing a manifest or an asset as HTML would run what a description put there."""
    static = re.search(r'src="(tools/static/[^"]+)"', (await http.get("/tools")).text).group(1)
    for path in ("/tools", "/tools.json", "/tools.toon", "/" + static, "/docs"):
        answer = await http.get(path)
        assert answer.status_code == 200, path
        assert answer.headers["x-content-type-options"] == "nosniff", path


async def test_page_under_a_root_path_keeps_its_header_policy():
    transport = httpx.ASGITransport(app=build_app(), root_path="/svc")
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8123") as client:
        page = await client.get("/svc/tools")
    assert page.status_code == 200, page.text[:200]
    assert page.headers["content-security-policy"].endswith("; frame-ancestors 'none'")
    assert page.headers["x-frame-options"] == "DENY"
