"""Offline, in real headless Chromium: FastAPI's /docs (Swagger UI) renders the REST operations from assets the
app serves itself, and the documentation site (mkdocs build) renders. Every request leaving 127.0.0.1 is
blocked (no internet) and recorded: there must be none."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from .server import ROOT, free_port


class Offline:
    """A page that cannot reach anything but 127.0.0.1; what it tried to reach and logged is kept."""

    def __init__(self, browser: Browser) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.foreign: list[str] = []
        self.errors: list[str] = []
        self.context.route("**/*", self._route)
        self.page: Page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def _route(self, route: Route) -> None:
        url = route.request.url
        if urlsplit(url).scheme in ("data", "blob") or urlsplit(url).hostname == "127.0.0.1":
            route.continue_()
        else:
            self.foreign.append(url)
            route.abort("internetdisconnected")


@pytest.fixture
def offline(browser: Browser) -> Iterator[Offline]:
    page = Offline(browser)
    yield page
    page.context.close()


def test_swagger_ui_renders_the_operations_offline(offline: Offline, reference_server: str, artifacts) -> None:
    page = offline.page
    page.goto(f"{reference_server}/docs")
    operation = page.locator(".opblock", has_text="/api/billing/get_invoice")
    expect(operation.first).to_be_visible(timeout=30_000)
    assert page.locator(".opblock").count() >= 10
    operation.first.locator(".opblock-summary").click()
    expect(operation.first.locator(".opblock-body")).to_be_visible()
    page.screenshot(path=str(artifacts / "swagger-offline.png"))
    assert offline.foreign == [] and offline.errors == []


def test_swagger_try_it_of_the_pdf_asks_for_it_and_offers_a_download(offline: Offline, reference_server: str
                                                                      ) -> None:
    page = offline.page
    page.goto(f"{reference_server}/docs")
    expect(page.locator(".opblock").first).to_be_visible(timeout=30_000)
    page.click("button.authorize")
    page.fill(".modal-ux input[type=text]", "demo-admin")
    page.click(".modal-ux button.authorize")
    page.click(".modal-ux button.btn-done")
    block = page.locator("#operations-billing-billing_invoice_pdf_get")
    block.locator(".opblock-summary").click()
    block.locator("button.try-out__btn").click()
    block.locator('input[placeholder="id"]').fill("inv_0001")
    block.locator("button.execute").click()
    expect(block.locator(".live-responses-table tbody .response-col_status").first).to_contain_text("200")
    assert "accept: application/pdf" in (block.locator(".curl-command").text_content() or "")
    link = block.locator(".live-responses-table a[download]")
    expect(link).to_have_count(1)
    assert link.get_attribute("download") == "inv_0001.pdf"
    assert "Unrecognized response type" not in (block.locator(".live-responses-table").text_content() or "")
    assert offline.foreign == [] and offline.errors == []


def test_redoc_renders_offline(offline: Offline, reference_server: str) -> None:
    offline.page.goto(f"{reference_server}/redoc")
    expect(offline.page.get_by_text("/api/billing/get_invoice").first).to_be_attached(timeout=30_000)
    assert offline.foreign == []


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The documentation site built by mkdocs and served by a static file server."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                   env=env, check=True, capture_output=True, timeout=300)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_docs_site_renders_offline(offline: Offline, site: str, artifacts: Path) -> None:
    page = offline.page
    for attempt in range(100):  # the static server may still be binding its port
        try:
            page.goto(f"{site}/")
            break
        except Exception:
            if attempt == 99:
                raise
            page.wait_for_timeout(100)
    expect(page.locator("h1", has_text="mcpfusion")).to_be_visible()
    expect(page.locator("nav").get_by_text("Tools and actions").first).to_be_attached()
    assert page.locator("div.highlight").count() >= 2  # code samples rendered (highlighted)
    page.screenshot(path=str(artifacts / "docs-site-home.png"))
    page.goto(f"{site}/reference/")
    expect(page.locator("h2", has_text="MCPFusion").first).to_be_visible()
    expect(page.get_by_text("mount", exact=False).first).to_be_attached()
    page.goto(f"{site}/context/")
    expect(page.locator("h1", has_text="Context")).to_be_visible()
    assert offline.foreign == [] and offline.errors == []
