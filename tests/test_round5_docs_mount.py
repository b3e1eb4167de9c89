"""The generated tool docs of an app mounted under a prefix of another app aim at the prefixed REST routes."""

from __future__ import annotations

import html
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.docs import export_site


def _mounted() -> TestClient:
    shop = Tool("shop")

    @shop.action(readonly=True)
    async def price(product: str) -> str:
        """The price of a product."""
        return f"{product}: 12.00"

    inner = FastAPI()
    MCPFusion("shop", tools=[shop]).mount(inner)
    outer = FastAPI()
    outer.mount("/v1", inner)
    return TestClient(outer)


def test_curl_examples_of_a_mounted_app_carry_the_mount_prefix() -> None:
    client = _mounted()
    page = html.unescape(client.get("/v1/tools").text)
    manifest = client.get("/v1/tools.json").text
    for text in (page, manifest):
        url = re.search(r"curl -X POST (\S+)", text).group(1)  # type: ignore[union-attr]
        assert url == "http://testserver/v1/api/shop/price"
        assert client.post(url.removeprefix("http://testserver"), json={"product": "lamp"}).status_code == 200
    assert "REST <code>POST /v1/api/shop/price</code>" in page
    assert re.search(r'data-api-base="/v1"', page)


def test_route_line_of_an_exported_site_names_the_base_urls_path(tmp_path: Path) -> None:
    shop = Tool("shop")

    @shop.action(readonly=True)
    async def price(product: str) -> str:
        """The price of a product."""
        return f"{product}: 12.00"

    fusion = MCPFusion("shop", tools=[shop])
    for base, shown in (("https://api.example.com", "/api/shop/price"),
                        ("https://api.example.com/prefix/", "/prefix/api/shop/price")):
        out = tmp_path / str(len(shown))
        export_site(fusion, out, base_url=base)
        page = html.unescape((out / "index.html").read_text())
        assert f"REST <code>POST {shown}</code>" in page
        assert f"curl -X POST https://api.example.com{shown}" in page
