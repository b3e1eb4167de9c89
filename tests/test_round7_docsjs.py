"""Round 7, the docs page's script: the try-it form sends the headers (`data-header`) and cookies (`data-cookie`)
an action requires, so its answer is the action's and not a 422. Cookies are set for the request's path alone
(fetch never sends a Cookie header) and only by the docs the API serves itself; a value no request can carry is
refused in the form. Real headless Chromium against real uvicorn servers, as the other docs browser tests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from fastapi import Cookie, Depends, FastAPI, Header

from mcpfusion import MCPFusion, Tool
from mcpfusion.docs.export import export_site
from tests.browser.server import uvicorn_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ACTION = "#action-orders-get_order"
PLAIN = "#action-orders-whoami"


async def tenant(x_tenant: Annotated[str, Header()]) -> str:
    return x_tenant


async def session(sid: Annotated[str, Cookie()]) -> str:
    return sid


async def maybe_session(sid: Annotated[str | None, Cookie()] = None) -> str | None:
    return sid


def orders() -> Tool:
    t = Tool("orders")

    @t.action(readonly=True)
    async def get_order(id: str, who: str = Depends(tenant), sid: str = Depends(session)) -> dict:
        """Get an order of the caller's tenant."""
        return {"id": id, "tenant": who, "sid": sid}

    @t.action(readonly=True)
    async def whoami(who: str = Depends(tenant), sid: str | None = Depends(maybe_session)) -> dict:
        """The tenant, and the optional session cookie as the server saw it."""
        return {"tenant": who, "sid": sid}

    return t


def build_app() -> Any:
    """The API serving its own docs at /tools (a uvicorn factory)."""
    return MCPFusion("orders", tools=[orders()]).build_app()


def build_mounted_app() -> Any:
    """The same API mounted under /v1: the page's API base is a path, the cookie path is under it."""
    outer = FastAPI()
    outer.add_api_route("/healthz", lambda: {"status": "ok"})
    outer.mount("/v1", build_app())
    return outer


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: run `make test` (it runs scripts/system_deps.sh)"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with uvicorn_server("tests.test_round7_docsjs:build_app") as url:
        yield url


def submit(page: Any, action: str, fields: dict[str, str] | None = None) -> tuple[str, str]:
    """Fill the form's fields (CSS selector -> value), send it, and read the answer shown."""
    form = page.locator(f"{action} form.tryit")
    for selector, value in (fields or {}).items():
        form.locator(selector).fill(value)
    form.locator("button[type=submit]").click()
    page.wait_for_function(f"() => !document.querySelector('{action} form.tryit button[type=submit]').disabled"
                           f" && !['', 'Sending…'].includes(document.querySelector('{action} .response .status')"
                           ".textContent)")
    return (form.locator(".response .status").text_content() or "",
            form.locator(".response code").text_content() or "")


def test_the_try_it_form_sends_the_required_header_and_cookie(browser, base):
    context = browser.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{base}/tools")
    # As rendered: the sample values the page fills in.
    status, body = submit(page, ACTION)
    assert status.startswith("HTTP 200"), (status, body)
    assert json.loads(body) == {"id": "id_1", "tenant": "x-tenant_1", "sid": "sid_1"}
    # What the user types is what the server sees.
    status, body = submit(page, ACTION, {'input[data-header="x-tenant"]': "acme",
                                         'input[data-cookie="sid"]': "s-42"})
    assert status.startswith("HTTP 200"), (status, body)
    assert json.loads(body) == {"id": "id_1", "tenant": "acme", "sid": "s-42"}
    # The cookie lived for that request only: the browser keeps none of it.
    assert context.cookies() == []
    assert errors == []
    context.close()


def test_without_cookie_fields_the_request_carries_no_cookie(browser, base):
    """Only a form with cookie fields sends credentials: a cookie of the page's origin stays home otherwise."""
    context = browser.new_context()
    context.add_cookies([{"name": "sid", "value": "from-the-browser", "url": base}])
    page = context.new_page()
    page.goto(f"{base}/tools")
    assert page.locator(f"{PLAIN} form.tryit input[data-cookie]").count() == 0
    status, body = submit(page, PLAIN, {'input[data-header="x-tenant"]': "acme"})
    assert status.startswith("HTTP 200"), (status, body)
    assert json.loads(body) == {"tenant": "acme", "sid": None}
    context.close()


def test_the_docs_of_a_mounted_api_set_the_cookie_on_the_mounted_path(browser):
    with uvicorn_server("tests.test_round7_docsjs:build_mounted_app") as url:
        context = browser.new_context()
        page = context.new_page()
        requests: list[Any] = []
        page.on("request", lambda request: requests.append(request))
        page.goto(f"{url}/v1/tools")
        assert page.locator("body").get_attribute("data-api-base") == "/v1"
        status, body = submit(page, ACTION, {'input[data-cookie="sid"]': "mounted"})
        assert status.startswith("HTTP 200"), (status, body)
        assert json.loads(body)["sid"] == "mounted"
        sent = [r for r in requests if r.url.endswith("/v1/api/orders/get_order")]
        assert len(sent) == 1 and sent[0].headers.get("x-tenant") == "x-tenant_1"
        assert context.cookies() == []
        context.close()


def test_a_value_no_request_can_carry_is_refused_in_the_form(browser, base):
    page = browser.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(f"{base}/tools")
    status, body = submit(page, ACTION, {'input[data-header="x-tenant"]': "snow\u2603man"})
    assert status == "Cannot send" and "x-tenant" in body, (status, body)
    status, body = submit(page, ACTION, {'input[data-header="x-tenant"]': "acme",
                                         'input[data-cookie="sid"]': "a; admin=1"})
    assert status == "Cannot send" and "Cookie sid" in body, (status, body)
    assert not [u for u in requests if "/api/" in u]  # neither was sent
    page.close()


def test_the_export_opened_from_a_file_explains_it_cannot_set_cookies(browser, base, tmp_path):
    export_site(build_app(), tmp_path, base_url=base)
    page = browser.new_page()
    page.goto((tmp_path / "index.html").as_uri())
    status, body = submit(page, ACTION)
    assert status == "Cannot send" and "own server" in body and f"{base}/tools" in body, (status, body)
    page.close()
