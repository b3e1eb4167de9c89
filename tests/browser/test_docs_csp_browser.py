"""In real headless Chromium: no text of the app (a description's markdown `javascript:` link, which ReDoc
renders as a link, or a title closing <title>) runs script in /docs or /redoc: both pages carry a
Content-Security-Policy allowing the page's own scripts only, the title is escaped, and both still render."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
from playwright.sync_api import Browser

from .hostile_docs_app import TITLE
from .server import uvicorn_server


def test_the_pages_name_their_own_scripts_and_escape_the_title() -> None:
    with uvicorn_server("tests.browser.hostile_docs_app:build_app") as base:
        for path in ("/docs", "/redoc"):
            r = httpx.get(f"{base}{path}")
            policy = r.headers["content-security-policy"]
            assert "script-src 'self'" in policy and "unsafe-inline" not in policy.split("style-src")[0]
            for script in re.findall(r"<script>(.*?)</script>", r.text, re.S):  # (Swagger UI's start-up)
                digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
                assert f"'sha256-{digest}'" in policy
            assert TITLE not in r.text and "Notes&lt;/title&gt;&lt;script&gt;" in r.text


def test_no_description_runs_script_and_both_pages_render(browser: Browser) -> None:
    with uvicorn_server("tests.browser.hostile_docs_app:build_app") as base:
        dialogs: list[str] = []
        page = browser.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(f"{base}/docs")
        page.locator(".opblock").first.wait_for(timeout=30_000)
        assert page.title() == f"{TITLE} - Swagger UI"  # shown as text
        page.goto(f"{base}/redoc")
        links = page.locator("a[href^='javascript:']")
        links.first.wait_for(timeout=30_000)  # ReDoc draws the markdown links...
        for i in range(links.count()):
            links.nth(i).click()  # ...which the policy keeps from running
        page.wait_for_timeout(500)
        assert page.locator("h1").first.is_visible()
        page.close()
        assert dialogs == []


def test_the_oauth2_redirect_page_still_hands_the_code_to_swagger_ui(browser: Browser) -> None:
    """Its policy lets its one inline script run: opened as Swagger UI opens it (a popup, back from the
    authorization server), it gives the opener the code and closes, with no policy violation."""
    with uvicorn_server("tests.browser.hostile_docs_app:build_app") as base:
        page = browser.new_page()
        page.goto(f"{base}/docs")
        page.locator(".opblock").first.wait_for(timeout=30_000)
        # What Swagger UI's authorization dialog leaves on its window before opening the popup.
        page.evaluate("""() => {
            window.handedOver = null;
            window.swaggerUIRedirectOauth2 = {
                state: "s1", redirectUrl: location.origin + "/docs/oauth2-redirect",
                auth: {name: "oauth", schema: {get: () => "authorizationCode"}, code: null},
                errCb: (error) => { window.handedOver = {error: error.message}; },
                callback: (found) => { window.handedOver = {code: found.auth.code}; },
            };
        }""")
        violations: list[str] = []  # (heard on the context: the popup's first messages come before it is ours)
        page.context.on("console", lambda message: violations.append(message.text)
                        if "Content Security Policy" in message.text else None)
        with page.expect_popup() as opened:
            page.evaluate("() => { window.open('/docs/oauth2-redirect?code=abc&state=s1'); }")
        opened.value.wait_for_event("close", timeout=10_000)
        assert page.evaluate("() => window.handedOver") == {"code": "abc"}
        assert violations == []
        page.close()
