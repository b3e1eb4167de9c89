"""/tools of the reference service: a PDF action's curl writes a file and its try-it asks for the PDF; a search
by an MCP tool's name (exposition="profiles") keeps only the actions that MCP tool serves."""

from __future__ import annotations

import re

import httpx
import pytest

from app.main import create_app
from mcpfusion.docs import examples, search

WRITES = ["create_invoice", "record_payment", "remind", "update_invoice_status"]


@pytest.fixture
async def http(tmp_path, monkeypatch):
    monkeypatch.setenv("MCPFUSION_DB_PATH", str(tmp_path / "billing.sqlite3"))
    app = create_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        yield client


async def test_search_by_an_mcp_tool_name_keeps_only_its_actions(http):
    manifest = (await http.get("/tools.json", headers={"authorization": "Bearer demo-admin"})).json()
    billing = next(t for t in manifest["tools"] if t["name"] == "billing")
    kept = search.filter_manifest(manifest, "billing_write")
    assert sorted(a["name"] for t in kept["tools"] for a in t["actions"]) == WRITES
    assert "billing_write" not in search.tool_keys(billing)
    every = search.filter_manifest(manifest, "billing")  # the tool's own name still finds all of it
    assert len(next(t for t in every["tools"] if t["name"] == "billing")["actions"]) == len(billing["actions"])
    page = (await http.get("/tools", params={"q": "billing_write"})).text
    articles = re.findall(r'<article class="action" id="action-billing-(\w+)"([^>]*)>', page)
    assert sorted(name for name, attrs in articles if " hidden" not in attrs) == WRITES


async def test_a_pdf_action_curl_writes_a_file_and_try_it_asks_for_the_pdf(http):
    manifest = (await http.get("/tools.json")).json()
    actions = {a["name"]: a for t in manifest["tools"] for a in t["actions"] if t["name"] == "billing"}
    pdf = actions["invoice_pdf"]
    assert pdf["rest_media_types"] == ["application/pdf"]
    assert "-o invoice.pdf" in pdf["examples"]["curl"] and "Accept: application/pdf" in pdf["examples"]["curl"]
    assert actions["get_invoice"]["rest_media_types"] == ["application/json"]
    assert " -o " not in actions["get_invoice"]["examples"]["curl"]
    assert "Accept" not in actions["get_invoice"]["examples"]["curl"]
    page = (await http.get("/tools")).text
    assert 'data-path="/api/billing/invoice_pdf" data-accept="application/pdf, application/problem+json"' in page
    assert 'data-path="/api/billing/get_invoice" data-accept="application/json, application/problem+json"' in page


def test_download_names():
    assert examples.download_name("/api/billing/invoice_pdf", "application/pdf") == "invoice.pdf"
    assert examples.download_name("/api/crm/avatar", "image/png") == "avatar.png"
    assert examples.download_name("/api/x/pdf", "application/pdf") == "pdf.pdf"
    curl = examples.curl("/api/x/scan", {"id": 1}, "http://h", (), ["image/png", "application/pdf"])
    assert "-H 'Accept: image/png, application/pdf'" in curl and curl.endswith("-o scan.png")
    mixed = examples.curl("/api/x/both", {"id": 1}, "http://h", (), ["application/json", "application/pdf"])
    assert " -o " not in mixed
