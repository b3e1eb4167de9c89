"""Mends of the docs page and the contract lockfile: what `lock --check` sees of tools/list, presenter samples
of the shape an action returns, curl examples never aimed at a refused Host, like-for-like token figures,
unique anchors, search over every tool, `--file` in lock's hints, the export's base URL and CORS note, and
long names that wrap."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Presenter, Tool, suggest, tokens, ui
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import economy, lock, presenters
from mcpfusion.docs.export import export_site
from mcpfusion.docs.manifest import build_manifest
from mcpfusion.docs.page import render_page
from tests.browser.server import uvicorn_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


class Out(BaseModel):
    id: str


def things(*, title: str = "Things", toon: bool = False) -> Tool:
    tool = Tool("things", description="Things", title=title, toon_description=toon)

    @tool.action(readonly=True)
    async def get(id: str) -> Out:
        """Get a thing."""
        return Out(id=id)

    @tool.action(readonly=True)
    async def other(id: str) -> Out:
        """Another."""
        return Out(id=id)

    return tool


# -- 1. lock: what tools/list advertises ---------------------------------------------------------------

def test_lock_check_sees_the_advertised_title_description_and_output_schemas():
    pinned = lock.contract(ToolRegistry([things()]))
    assert pinned["tools"]["things"]["advertised"]["things"]["title"] == "Things"
    assert lock.diff(pinned, lock.contract(ToolRegistry([things(title="Things v2")]))) == [
        'tool things: title "Things" -> "Things v2"']
    toon = lock.diff(pinned, lock.contract(ToolRegistry([things(toon=True)])))
    assert toon == ['tool things: MCP tool "things": description line 1: "Things" -> '
                    '"Things. Select operation via the `action` parameter."']
    assert lock.diff(pinned, lock.contract(ToolRegistry([things()], output_schemas=False))) == [
        'tool things: MCP tool "things" no longer advertises its outputSchema']
    assert lock.diff(pinned, lock.contract(ToolRegistry([things()]))) == []


# -- 7. lock: nested models by field ----------------------------------------------------------------------

def shop(quantity: type) -> ToolRegistry:
    line = type("Line", (BaseModel,), {"__annotations__": {"sku": str, "quantity": quantity}})
    tool = Tool("shop")

    async def place(lines):  # type: ignore[no-untyped-def]
        """Place an order."""
        return "ok"

    place.__annotations__ = {"lines": list[line], "return": str}  # a local model (annotations are strings here)
    tool.action(readonly=True)(place)
    return ToolRegistry([tool])


def test_lock_check_names_the_field_of_a_nested_model_that_changed():
    changes = lock.diff(lock.contract(shop(int)), lock.contract(shop(str)))
    assert changes == ['shop.place object "Line": field "quantity" changed: {"type": "integer"} -> {"type": "string"}']


# -- 2. presenter samples ---------------------------------------------------------------------------------

RULE = ["Overdue invoices can be reminded."]


class Customer(BaseModel):
    name: str
    email: str


class Invoice(BaseModel):
    id: str
    status: str
    amount_cents: int = Field(description="Amount in CENTS. Divide by 100.")
    customer: Customer


def billing_registry(rule: str) -> ToolRegistry:
    """The invoice presenter of docs/presenters.md: callbacks of one invoice, on an action returning one."""
    view = (
        Presenter("invoice").schema(Invoice)
        .rules(lambda inv: [rule] if inv["status"] == "overdue" else [])
        .redact_pii(["customer.email"])
        .ui(lambda inv: ui.summary(f"{inv['id']} for {inv['customer']['name']}"))
        .suggest(lambda inv: [suggest("billing.remind", "Send a reminder") if inv["status"] == "overdue" else None])
    )
    billing = Tool("billing")

    @billing.action(readonly=True, returns=view)
    async def get_invoice(id: str) -> dict:
        """Get invoice."""
        return {}

    return ToolRegistry([billing])


def test_a_presenter_is_sampled_as_its_action_answers_and_its_rules_are_pinned():
    registry = billing_registry(RULE[0])
    described = build_manifest(registry)["tools"][0]["actions"][0]["presenters"][0]
    assert described["sample_error"] is None
    assert described["rules"] == RULE
    assert described["ui_blocks"] == [{"type": "markdown", "title": None}]
    assert described["suggestions"] == [{"action": "billing.remind", "reason": "Send a reminder"}]
    assert lock.diff(lock.contract(registry), lock.contract(billing_registry("Never remind."))) == [
        "billing.get_invoice [presenter invoice]: rule removed: 'Overdue invoices can be reminded.'",
        "billing.get_invoice [presenter invoice]: rule added: 'Never remind.'"]


def test_renders_that_worked_are_kept_when_another_fails():
    """Either shape for an action that may return both: the list render fails (the callback reads one
    invoice), the per-item renders are kept, and no error is reported as one shape rendered whole."""
    view = Presenter("p").schema(Invoice).rules(lambda inv: ["Overdue."] if inv["status"] == "overdue" else [])
    info = presenters.describe(view, None, many=None)
    assert info["rules"] == ["Overdue."] and info["sample_error"] is None
    listed = presenters.describe(view, None, many=True)  # only the list: it fails, and says so
    assert listed["rules"] == [] and listed["sample_error"].startswith("TypeError")


# -- 3. Host header ---------------------------------------------------------------------------------------

async def test_docs_refuse_a_host_mcp_refuses_and_never_aim_curl_at_it():
    app = MCPFusion("docs-host", tools=[things()]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8000") as http:
        for path in ("/tools", "/tools.json", "/tools.toon"):
            refused = await http.get(path, headers={"Host": "evil.example"})
            assert refused.status_code == 421 and "evil.example" not in refused.text, path
        served = await http.get("/tools.json")
        assert served.status_code == 200
        assert served.json()["tools"][0]["actions"][0]["examples"]["curl"].startswith(
            "curl -X POST http://127.0.0.1:8000/api/things/get")


# -- 4. token figures like for like ----------------------------------------------------------------------

@pytest.mark.skipif(not tokens.enabled(), reason="needs the tokens extra")
def test_token_figures_compare_listings_like_for_like():
    tool = things()
    advertised = [e for e in economy.listing.tool_entries(tool)]
    assert "outputSchema" in advertised[0]
    figures = economy.advertised_economy(tool, advertised)
    without = [{k: v for k, v in e.items() if k != "outputSchema"} for e in advertised]
    assert figures["grouped_toon_entry"] == tokens.count_json(economy.grouped_entry(tool, output=False))
    assert figures["advertised_no_output"] == tokens.count_json(without)
    assert figures["ratio_vs_plain"] == round(tokens.count_json(without) / figures["flat_json_entries"], 2)
    with_output = tokens.count_json(economy.flat_entries(tool, output=True))
    assert figures["ratio_vs_plain_output"] == round(figures["advertised"] / with_output, 2)


# -- 5. and 6. anchors and search -------------------------------------------------------------------------

def two_tools() -> ToolRegistry:
    ab, a = Tool("a-b", description="first"), Tool("a", description="second")

    @ab.action("c", readonly=True)
    async def first() -> str:
        """c of a-b."""
        return "1"

    @a.action("b-c", readonly=True)
    async def second() -> str:
        """b-c of a."""
        return "2"

    return ToolRegistry([ab, a])


def test_action_anchors_are_unique_and_the_sidebar_links_to_them():
    html = render_page(build_manifest(two_tools()))
    ids = re.findall(r'<article class="action" id="([^"]+)"', html)
    assert len(ids) == len(set(ids)) == 2
    assert sorted(re.findall(r'<li class="nav-action"[^>]*><a href="#([^"]+)"', html)) == sorted(ids)


def test_a_search_renders_every_tool_and_hides_what_it_does_not_match():
    html = render_page(build_manifest(two_tools()), query="b-c")
    assert re.search(r'<section class="tool" id="tool-a-b"[^>]*hidden>', html)
    assert re.search(r'<section class="tool" id="tool-a" [^>]*>', html).group(0).find("hidden") == -1
    for href in re.findall(r'<table class="economy summary">.*?</table>', html, re.S)[0:1]:
        assert all(f'id="{t}"' in html for t in re.findall(r'href="#([^"]+)"', href))


# -- 8. lock hints -----------------------------------------------------------------------------------------

SMALL_APP = '''
from mcpfusion import MCPFusion, Tool
tool = Tool("t")


@tool.action(readonly=True)
async def ping() -> str:
    """Ping."""
    return "pong"

app = MCPFusion("small", tools=[tool]).build_app()
'''


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (cwd / "small.py").write_text(SMALL_APP)
    path = os.pathsep.join([".", os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "mcpfusion.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": path})


def test_lock_hints_keep_the_file_option(tmp_path):
    (tmp_path / "ci").mkdir()
    missing = cli(tmp_path, "lock", "small:app", "--check", "--file", "ci/contract.lock")
    assert missing.returncode == 2 and "`mcpfusion lock small:app --file ci/contract.lock`" in missing.stderr
    (tmp_path / "ci" / "contract.lock").write_text("[]")
    invalid = cli(tmp_path, "lock", "small:app", "--check", "--file", "ci/contract.lock")
    assert invalid.returncode == 2 and "`mcpfusion lock small:app --file ci/contract.lock`" in invalid.stderr
    assert cli(tmp_path, "lock", "small:app", "--file", "ci/contract.lock").returncode == 0
    assert cli(tmp_path, "lock", "small:app", "--check", "--file", "ci/contract.lock").returncode == 0


# -- 9. the export's base URL ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", ["javascript:alert(1)", "http://x;script-src *", "ftp://example.com",
                                 "http://x.example/a b", "http://", "127.0.0.1:8000"])
def test_export_refuses_a_base_url_that_is_not_http(tmp_path, bad):
    with pytest.raises(ValueError, match="not an http"):
        export_site(ToolRegistry([things()]), tmp_path, base_url=bad)
    assert not (tmp_path / "index.html").exists()


def test_cli_docs_answers_a_bad_base_url_with_one_line(tmp_path):
    run = cli(tmp_path, "docs", "small:app", "--out", "site", "--base-url", "javascript:alert(1)")
    assert run.returncode == 2 and "Traceback" not in run.stderr and "not an http(s) URL" in run.stderr


# -- browser: search after ?q=, the offline try-it's explanation, long names ---------------------------------

@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: run `make test` (it runs scripts/system_deps.sh)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


def test_a_new_search_after_a_server_filtered_page_finds_every_tool(browser):
    with uvicorn_server("tests.browser.sample_app:build_app") as base:
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto(f"{base}/tools?q=analytics")
        shown = "() => [...document.querySelectorAll('section.tool')].filter(s => !s.hidden).map(s => s.id)"
        assert page.evaluate(shown) == ["tool-reports"]
        page.fill("#search", "invoices")
        page.press("#search", "Enter")
        assert page.evaluate(shown) == ["tool-billing"]
        page.fill("#search", "")
        assert {"tool-billing", "tool-reports"} <= set(page.evaluate(shown))
        links = page.evaluate("() => [...document.querySelectorAll('table.summary a')].map(a => a.hash.slice(1))")
        assert links and all(page.evaluate(f"() => !!document.getElementById({link!r})") for link in links)
        page.close()


def test_the_offline_try_it_explains_a_blocked_cross_origin_call(browser, tmp_path):
    with uvicorn_server("tests.browser.sample_app:build_app") as base:
        export_site(ToolRegistry(two_tools().tools.values()), tmp_path, base_url=base)
        page = browser.new_page()  # type: ignore[attr-defined]
        page.goto((tmp_path / "index.html").as_uri())
        assert page.locator(".cors-note").is_visible()
        form = page.locator("form.tryit").first
        form.locator("button[type=submit]").click()
        page.wait_for_function("() => document.querySelector('form.tryit .status').textContent === 'Request failed'")
        assert "CORS" in (form.locator(".response code").text_content() or "")
        page.close()


def test_long_names_wrap_instead_of_widening_the_page(browser, tmp_path):
    long_tool = Tool("t_" + "x" * 62, description="d", tags=["tag_" + "y" * 60])

    @long_tool.action("a_" + "z" * 62, readonly=True)
    async def act() -> str:
        """A long one."""
        return "1"

    export_site(ToolRegistry([long_tool]), tmp_path)
    for width in (1280, 390):
        page = browser.new_page(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
        page.goto((tmp_path / "index.html").as_uri())
        assert page.evaluate("() => document.documentElement.scrollWidth") == width
        page.close()
