"""/tools of the running reference service in real headless Chromium."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from .server import mcp_tools_list


@dataclass
class Watched:
    """A page plus everything it logged and requested."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        return [u for u in self.requests if urlsplit(u).scheme not in ("data", "blob")
                and urlsplit(u).hostname != "127.0.0.1"]


def open_page(browser: Browser, url: str, **context_options) -> Iterator[Watched]:
    context = browser.new_context(**context_options)
    page = context.new_page()
    watched = Watched(page)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            watched.console_errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: watched.console_errors.append(f"pageerror: {exc}"))
    context.on("request", lambda request: watched.requests.append(request.url))
    page.goto(url)
    try:
        yield watched
    finally:
        context.close()


@pytest.fixture
def docs(browser: Browser, reference_server: str) -> Iterator[Watched]:
    yield from open_page(browser, f"{reference_server}/tools", viewport={"width": 1280, "height": 900})


def test_every_tool_and_action_of_tools_list_is_on_the_page(docs: Watched, reference_server: str) -> None:
    advertised = mcp_tools_list(reference_server, token="demo-admin")
    assert advertised, "the reference service advertises no tools"
    page = docs.page
    for entry in advertised:
        articles = page.locator(f'article.action[data-mcp-name="{entry["name"]}"]')
        action_enum = entry["inputSchema"]["properties"].get("action", {}).get("enum")
        if action_enum:  # grouped (or a group of a profiles tool): one article per action of the enum
            assert articles.count() == len(action_enum)
            for action in action_enum:
                article = page.locator(f'article.action[data-mcp-name="{entry["name"]}"][data-action="{action}"]')
                expect(article).to_be_visible()
                expect(page.locator(f'#sidebar a[href="#{article.get_attribute("id")}"]')).to_be_visible()
        else:  # flat: one article for this MCP tool
            assert articles.count() == 1
            expect(articles.first).to_be_visible()
        # The TOON description of a grouped tool is on the page verbatim; a group's rows are in its tool's table.
        if action_enum and "[" in entry["description"]:
            section = page.locator("section.tool", has=articles.first)
            if section.get_attribute("id") == f"tool-{entry['name']}":
                expect(section.locator("pre.toon")).to_have_text(entry["description"])
            else:
                toon = section.locator("pre.toon").text_content() or ""
                assert all(row in toon for row in entry["description"].split("\n\n", 1)[1].splitlines()[1:])
    # Token figures are computed numbers, not placeholders.
    for cell in page.locator("table.economy.summary tbody td:nth-child(3)").all_text_contents():
        assert int(cell) > 0
    assert docs.console_errors == []
    assert docs.foreign_requests() == []


def test_search_filters_by_name_and_tag(docs: Watched) -> None:
    page = docs.page
    box = page.locator("#search")
    box.fill("void_invoice")
    expect(page.locator("#action-billing-void_invoice")).to_be_visible()
    expect(page.locator("#action-billing-list_invoices")).to_be_hidden()
    expect(page.locator("#tool-customers")).to_be_hidden()
    expect(page.locator('#sidebar a[href="#action-billing-void_invoice"]')).to_be_visible()
    expect(page.locator('#sidebar a[href="#action-billing-get_invoice"]')).to_be_hidden()

    tag = page.locator("#tool-customers .tags .tag").first.text_content()
    box.fill(tag)
    expect(page.locator("#tool-customers")).to_be_visible()

    box.fill("no-such-thing-anywhere")
    expect(page.locator("section.tool:visible")).to_have_count(0)
    expect(page.locator("#sidebar .no-results")).to_be_visible()

    box.fill("")
    expect(page.locator("article.action[hidden]")).to_have_count(0)
    assert docs.console_errors == []


def _try(page: Page, action_id: str, token: str | None) -> tuple[str, str]:
    form = page.locator(f"#{action_id} form.tryit")
    form.locator("input[name=token]").fill(token or "")
    form.locator("button[type=submit]").click()
    status = form.locator(".response .status")
    expect(status).to_contain_text("HTTP ")
    return status.text_content() or "", form.locator(".response code").text_content() or ""


def test_try_it_returns_data_with_demo_admin_and_401_without_token(docs: Watched, artifacts) -> None:
    page = docs.page
    status, body = _try(page, "action-billing-list_invoices", "demo-admin")
    assert status.startswith("HTTP 200"), (status, body)
    assert '"id"' in body and "inv_" in body
    page.evaluate("document.querySelector('.topbar').style.position = 'static'")  # keep it off the element shot
    page.locator("#action-billing-list_invoices").screenshot(path=str(artifacts / "docs-try-it.png"))
    assert docs.console_errors == []

    status, body = _try(page, "action-billing-list_invoices", None)
    assert status.startswith("HTTP 401"), (status, body)
    # The only console line allowed is Chromium's report of that expected 401.
    assert all("status of 401" in e for e in docs.console_errors), docs.console_errors
    assert docs.foreign_requests() == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots_light_and_dark(browser: Browser, reference_server: str, artifacts, scheme: str) -> None:
    for watched in open_page(browser, f"{reference_server}/tools", color_scheme=scheme,
                             viewport={"width": 1280, "height": 900}):
        page = watched.page
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (background == "rgb(255, 255, 255)") == (scheme == "light"), background
        page.screenshot(path=str(artifacts / f"docs-{scheme}.png"))
        # The toggle overrides the OS preference.
        page.locator(".theme-toggle").click()
        assert page.evaluate("document.documentElement.dataset.theme") == "light"
        page.locator(".theme-toggle").click()
        assert page.evaluate("document.documentElement.dataset.theme") == "dark"
        assert watched.console_errors == []


def test_narrow_screen_has_no_horizontal_page_scroll(browser: Browser, reference_server: str, artifacts) -> None:
    for watched in open_page(browser, f"{reference_server}/tools", viewport={"width": 390, "height": 844},
                             is_mobile=True):
        page = watched.page
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0
        expect(page.locator("#sidebar")).to_be_visible()
        page.screenshot(path=str(artifacts / "docs-narrow.png"))
        assert watched.console_errors == []


def test_core_content_readable_with_javascript_off(browser: Browser, reference_server: str) -> None:
    advertised = mcp_tools_list(reference_server, token="demo-admin")
    for watched in open_page(browser, f"{reference_server}/tools", java_script_enabled=False):
        page = watched.page
        for entry in advertised:
            expect(page.locator(f'article.action[data-mcp-name="{entry["name"]}"]').first).to_be_visible()
        expect(page.locator("table.params").first).to_be_visible()
        expect(page.locator("pre.toon").first).to_be_visible()
        # Search still works: the form submits ?q= and the server filters.
        page.locator("#search").fill("void_invoice")
        page.locator("#search").press("Enter")
        page.wait_for_url("**/tools?q=void_invoice")
        expect(page.locator("article.action:not([hidden])")).to_have_count(1)  # the others: hidden
        expect(page.locator("#action-billing-void_invoice")).to_be_visible()


def test_search_by_an_mcp_tool_name_shows_only_the_actions_it_serves(docs: Watched) -> None:
    page = docs.page
    page.locator("#search").fill("billing_write")
    shown = page.locator("#tool-billing article.action:visible")
    expect(shown).to_have_count(4)
    names = sorted(shown.evaluate_all("els => els.map(e => e.getAttribute('data-action'))"))
    assert names == ["create_invoice", "record_payment", "remind", "update_invoice_status"]
    expect(page.locator("#action-billing-get_invoice")).to_be_hidden()
    assert docs.console_errors == []


def test_try_it_of_a_pdf_offers_a_download(docs: Watched) -> None:
    page = docs.page
    curl = page.locator("#action-billing-invoice_pdf pre").filter(has_text="curl -X POST").text_content() or ""
    assert "-o invoice.pdf" in curl and "Accept: application/pdf" in curl
    form = page.locator("#action-billing-invoice_pdf form.tryit")
    form.locator("input[name=token]").fill("demo-admin")
    form.locator("button[type=submit]").click()
    expect(form.locator(".response .status")).to_contain_text("HTTP 200")
    body = form.locator(".response code").text_content() or ""
    assert body.startswith("binary application/pdf, ") and body.endswith(" bytes") and "%PDF" not in body
    link = form.locator(".response a.download")
    expect(link).to_be_visible()
    assert (link.get_attribute("download") or "").endswith(".pdf")
    with page.expect_download() as got:
        link.click()
    path = got.value.path()
    with open(path, "rb") as f:
        assert f.read(5) == b"%PDF-"
    assert docs.console_errors == []
