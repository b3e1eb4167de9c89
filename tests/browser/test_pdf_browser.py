"""The reference service's invoice PDF, as the support role gets it over REST, rendered to a page image with
pdftoppm (Debian's poppler-utils) and shown in headless Chromium; both images are kept in artifacts/."""

from __future__ import annotations

import shutil
import subprocess

import httpx
from playwright.sync_api import Browser

from tests.service_kit import ACME_PII


def test_support_invoice_pdf_renders_as_a_page(browser: Browser, reference_server: str, tmp_path, artifacts) -> None:
    r = httpx.post(f"{reference_server}/api/billing/invoice_pdf", json={"id": "inv_0001"},
                   headers={"authorization": "Bearer demo-support"}, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"] == "application/pdf"
    pdf = tmp_path / "inv_0001.pdf"
    pdf.write_bytes(r.content)
    pdftoppm = shutil.which("pdftoppm")
    assert pdftoppm, "pdftoppm is missing: run `make test` (scripts/system_deps.sh installs poppler-utils)"
    subprocess.run([pdftoppm, "-png", "-r", "80", "-singlefile", str(pdf), str(artifacts / "invoice-pdf-support")],
                   check=True, timeout=60)
    page_image = artifacts / "invoice-pdf-support.png"
    assert page_image.read_bytes().startswith(b"\x89PNG")
    page = browser.new_page(viewport={"width": 800, "height": 1000})
    try:
        viewer = tmp_path / "viewer.html"  # a file:// page may show a file:// image (about:blank may not)
        viewer.write_text(f'<img id="page" src="{page_image.as_uri()}" style="border:1px solid #888">')
        page.goto(viewer.as_uri())
        page.wait_for_function("document.getElementById('page').complete")
        width, height = page.evaluate("[document.getElementById('page').naturalWidth, "
                                      "document.getElementById('page').naturalHeight]")
        assert width > 500 and height > width  # an A4 page, portrait
        page.screenshot(path=str(artifacts / "invoice-pdf-browser.png"), full_page=True)
    finally:
        page.close()
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "[REDACTED]" in text and not [value for value in ACME_PII if value in text]
