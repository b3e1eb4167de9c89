"""In real headless Chromium: /tools (whose try-it forms take a bearer token) cannot be framed by another site
(clickjacking): its Content-Security-Policy header says frame-ancestors 'none' (ignored in its <meta>), with
X-Frame-Options: DENY; opened on its own it still renders."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from playwright.sync_api import Browser, expect

from .server import uvicorn_server


@contextmanager
def framing_site(target: str) -> Iterator[str]:
    """Another origin (its own port) whose page frames `target`."""
    body = f'<!doctype html><iframe id="f" src="{target}" width="800" height="600"></iframe>'.encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_another_site_cannot_frame_the_tools_page(browser: Browser) -> None:
    with uvicorn_server("tests.browser.sample_app:build_app") as base, framing_site(f"{base}/tools") as evil:
        context = browser.new_context()
        page = context.new_page()
        page.goto(evil)
        page.wait_for_timeout(1500)
        framed = [frame for frame in page.frames if frame is not page.main_frame]
        assert framed, "the iframe was not created"
        for frame in framed:  # refused: none of the page's content, no token field
            assert frame.locator("[id^=action-billing-]").count() == 0, frame.url
        alone = context.new_page()
        alone.goto(f"{base}/tools")
        expect(alone.locator("#action-billing-list_invoices")).to_be_visible()
        context.close()
