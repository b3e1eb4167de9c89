"""The statically exported site, opened from disk in headless Chromium: assets load, the script runs,
the try-it forms target the configured base URL, and nothing is requested from another host."""

from __future__ import annotations

from playwright.sync_api import Browser, expect

from mcpfusion.docs import export_site

from .sample_app import build_fusion
from .server import free_port, uvicorn_server
from .test_docs_browser import open_page


def test_exported_site_works_from_disk(browser: Browser, tmp_path, artifacts) -> None:
    export_site(build_fusion(), tmp_path, base_url="http://127.0.0.1:9")
    for watched in open_page(browser, (tmp_path / "index.html").as_uri(), viewport={"width": 1280, "height": 900}):
        page = watched.page
        # The stylesheet applied and the script ran (it enables the try-it buttons and the theme toggle).
        assert page.evaluate("getComputedStyle(document.querySelector('.sidebar')).position") == "sticky"
        expect(page.locator(".theme-toggle")).to_be_visible()
        expect(page.locator("#action-billing-list_invoices button[type=submit]")).to_be_enabled()
        assert page.evaluate("document.body.dataset.apiBase") == "http://127.0.0.1:9"
        page.locator("#search").fill("analytics")
        expect(page.locator("#tool-reports")).to_be_visible()
        expect(page.locator("#tool-billing")).to_be_hidden()
        page.screenshot(path=str(artifacts / "docs-export.png"))
        assert watched.console_errors == []
        assert [u for u in watched.requests if not u.startswith("file://")] == []


def test_exported_try_it_calls_the_configured_base_url(browser: Browser, tmp_path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    export_site(build_fusion(), tmp_path, base_url=base)
    with uvicorn_server("tests.browser.sample_app:build_app_serving_export", {"DOCS_SITE_DIR": str(tmp_path)},
                        port=port):
        for watched in open_page(browser, f"{base}/site/index.html"):
            form = watched.page.locator("#action-reports-totals form.tryit")
            form.locator("input[name=token]").fill("demo-admin")
            form.locator("button[type=submit]").click()
            expect(form.locator(".response .status")).to_have_text("HTTP 200 OK")
            assert '"total_cents"' in (form.locator(".response code").text_content() or "")
            assert f"{base}/api/reports/totals" in watched.requests
            assert watched.console_errors == []
