"""Images, audio, embedded documents and resource links from actions: the official SDK client receives each
content type on both wires, REST answers the same bytes, limits and MIME checks refuse what may not leave,
and the reference service's invoice PDF carries no redacted value."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from typing import Any

import httpx
import pytest
from fastapi import Depends
from mcp import Client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.types import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent
from pypdf import PdfReader

from mcpfusion import MCPFusion, Presenter, Tool, attach, audio, document, image, link
from tests.service_kit import ACME_PII, auth, build, serve

MODES = ["auto", "legacy"]


def png(width: int = 2, height: int = 2) -> bytes:
    """A real (tiny, grey) PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


PNG = png()
WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, 8000, 8000, 1, 8) + \
    b"data" + struct.pack("<I", 0)


def tenant() -> str:
    return "acme"


contact = Presenter("contact").schema({"name": str, "email": str}).redact_pii(["email"])


def media_app(max_bytes: int | None = None) -> Any:
    media = Tool("media", description="Media", exposition="flat")

    @media.action(readonly=True, content_types=["image/png"])
    async def chart(who: str = Depends(tenant)):
        """A chart as an image"""
        return image(PNG)

    @media.action(readonly=True)
    async def clip():
        """A sound"""
        return audio(WAV)

    @media.action(readonly=True)
    async def report():
        """Numbers with a CSV document"""
        return attach({"rows": 2}, document("a,b\n1,2\n", "text/csv", uri="report://1"))

    @media.action(readonly=True)
    async def pointer():
        """A link to a resource"""
        return link("report://1", "report.csv", mime_type="text/csv", description="The report")

    @media.action(readonly=True)
    async def liar():
        """An image whose bytes are not what it says"""
        return image(PNG, "image/jpeg")

    @media.action(readonly=True, content_types=["image/png"])
    async def wrong_type():
        """A document this action did not declare"""
        return document(b"%PDF-1.4 tiny", "application/pdf", uri="x://1")

    @media.action(readonly=True, returns=contact)
    async def card():
        """A contact card built from the presented data"""
        person = {"name": "Ada", "email": "ada@example.com"}
        return attach(person, lambda shown: document(f"{shown['name']} <{shown['email']}>", "text/plain",
                                                    uri="card://ada"))

    fusion = MCPFusion("media", tools=[media])
    if max_bytes is not None:
        fusion.registry.max_content_bytes = max_bytes
    return fusion.build_app()


@pytest.fixture(scope="module")
def media_url():
    with serve(media_app()) as base:
        yield base


@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_receives_every_content_type(media_url, mode):
    async with Client(media_url + "/mcp", mode=mode) as client:
        chart = await client.call_tool("media_chart", {})
        assert not chart.is_error and len(chart.content) == 1
        assert isinstance(chart.content[0], ImageContent) and chart.content[0].mime_type == "image/png"
        assert base64.b64decode(chart.content[0].data) == PNG

        clip = await client.call_tool("media_clip", {})
        assert isinstance(clip.content[0], AudioContent) and base64.b64decode(clip.content[0].data) == WAV

        report = await client.call_tool("media_report", {})
        text, embedded = report.content
        assert isinstance(text, TextContent) and text.text == '{"rows":2}'
        assert isinstance(embedded, EmbeddedResource) and embedded.resource.text == "a,b\n1,2\n"
        assert str(embedded.resource.uri) == "report://1" and embedded.resource.mime_type == "text/csv"

        pointer = await client.call_tool("media_pointer", {})
        assert isinstance(pointer.content[0], ResourceLink) and str(pointer.content[0].uri) == "report://1"

        card = await client.call_tool("media_card", {})
        document_text = card.content[-1].resource.text
        assert document_text == "Ada <[REDACTED]>" and "ada@example.com" not in str(card.model_dump())


@pytest.mark.parametrize("mode", MODES)
async def test_content_that_may_not_leave_is_a_self_healing_error(media_url, mode):
    async with Client(media_url + "/mcp", mode=mode) as client:
        liar = await client.call_tool("media_liar", {})
        assert liar.is_error and 'code="CONTENT_REFUSED"' in liar.content[0].text
        assert "its bytes are 'image/png'" in liar.content[0].text
        wrong = await client.call_tool("media_wrong_type", {})
        assert wrong.is_error and "sends only image/png" in wrong.content[0].text
        assert all(isinstance(block, TextContent) for block in liar.content + wrong.content)


async def test_oversized_content_is_refused_on_every_path():
    app = media_app(max_bytes=len(PNG) - 1)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        rest = await http.post("/api/media/chart", json={})
        assert rest.status_code == 422 and rest.headers["content-type"] == "application/problem+json"
        assert rest.json()["code"] == "CONTENT_REFUSED" and "limit is" in rest.json()["detail"]
        assert "data" not in rest.text.lower() or PNG.hex() not in rest.text


async def test_rest_answers_the_same_bytes_or_an_envelope():
    app = media_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        chart = await http.post("/api/media/chart", json={})
        assert chart.status_code == 200 and chart.headers["content-type"] == "image/png" and chart.content == PNG
        clip = await http.post("/api/media/clip", json={})
        assert clip.headers["content-type"] == "audio/wav" and clip.content == WAV
        report = (await http.post("/api/media/report", json={})).json()
        assert report == {"data": {"rows": 2}, "content": [
            {"type": "resource", "resource": {"uri": "report://1", "mimeType": "text/csv", "text": "a,b\n1,2\n"}}]}
        pointer = (await http.post("/api/media/pointer", json={})).json()
        assert pointer["content"][0]["uri"] == "report://1"
        spec = (await http.get("/openapi.json")).json()
        media_types = spec["paths"]["/api/media/chart"]["post"]["responses"]["200"]["content"]
        assert media_types["image/png"]["schema"] == {"type": "string", "format": "binary"}


# -- input_schema= ---------------------------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 2}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
    "additionalProperties": False,
}


def forecast_app() -> Any:
    weather = Tool("weather", description="Weather", exposition="flat")

    @weather.action(readonly=True, input_schema=SCHEMA)
    async def forecast(city: str, days: int = 1, who: str = Depends(tenant)):
        """Forecast for a city"""
        return {"city": city, "days": days, "tenant": who}

    return MCPFusion("weather", tools=[weather]).build_app()


async def test_hand_written_input_schema_is_advertised_and_enforced():
    app = forecast_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        ok = await http.post("/api/weather/forecast", json={"city": "Oslo", "days": 3})
        assert ok.json() == {"city": "Oslo", "days": 3, "tenant": "acme"}
        bad = await http.post("/api/weather/forecast", json={"city": "O", "days": 0, "extra": 1})
        assert bad.status_code == 422
        detail = bad.text
        assert "city" in detail and "days" in detail and "extra" in detail
    with serve(forecast_app()) as base:
        async with Client(base + "/mcp") as client:
            tool = next(t for t in (await client.list_tools()).tools if t.name == "weather_forecast")
            assert tool.input_schema["properties"]["city"] == {"type": "string", "minLength": 2}
            assert tool.input_schema["required"] == ["city"]
            missing = await client.call_tool("weather_forecast", {"days": 2})
            assert missing.is_error and "<validation_error" in missing.content[0].text


def test_input_schema_must_name_the_parameters():
    weather = Tool("weather2", description="Weather")
    with pytest.raises(ValueError, match="not properties of input_schema"):
        @weather.action(input_schema=SCHEMA)
        async def forecast(town: str):
            """x"""


# -- the reference service ---------------------------------------------------------------------------------


def pdf_text(data: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(data)).pages)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    with serve(build(tmp_path_factory.mktemp("pdf"))) as base:
        yield base


async def sdk_pdf(base: str, token: str, mode: str) -> tuple[bytes, bytes]:
    """invoice_pdf of inv_0001 and the invoice://inv_0001 resource, through the official SDK client."""
    http = create_mcp_http_client(headers=auth(token))
    async with Client(streamable_http_client(base + "/mcp", http_client=http), mode=mode) as client:
        result = await client.call_tool("billing_read", {"action": "invoice_pdf", "id": "inv_0001"})
        assert not result.is_error, result.content
        (block,) = result.content
        assert isinstance(block, EmbeddedResource) and block.resource.mime_type == "application/pdf"
        assert str(block.resource.uri) == "invoice://inv_0001"
        read = await client.read_resource("invoice://inv_0001")
        assert read.contents[0].mime_type == "application/pdf"
        return base64.b64decode(block.resource.blob), base64.b64decode(read.contents[0].blob)


@pytest.mark.parametrize("mode", MODES)
async def test_invoice_pdf_for_admin_and_support(reference, mode):
    async with httpx.AsyncClient(base_url=reference) as http:
        invoice = (await http.post("/api/billing/get_invoice", json={"id": "inv_0001"},
                                   headers=auth("demo-admin"))).json()
        rest_pdf = await http.post("/api/billing/invoice_pdf", json={"id": "inv_0001"}, headers=auth("demo-support"))
    assert rest_pdf.headers["content-type"] == "application/pdf"
    total = f"{invoice['total_cents'] / 100:,.2f}"
    for token in ("demo-admin", "demo-support"):
        action_pdf, resource_pdf = await sdk_pdf(reference, token, mode)
        text = pdf_text(action_pdf)
        assert invoice["number"] in text and total in text
        assert pdf_text(resource_pdf) == text
        if token == "demo-support":
            assert action_pdf == rest_pdf.content or pdf_text(rest_pdf.content) == text
            assert "[REDACTED]" in text
            assert not [value for value in ACME_PII if value in text]
            assert not [value for value in ACME_PII if value.encode() in action_pdf]
        else:
            assert invoice["customer"]["email"] in text


async def test_another_tenants_invoice_pdf_is_not_found(reference):
    async with httpx.AsyncClient(base_url=reference) as http:
        r = await http.post("/api/billing/invoice_pdf", json={"id": "inv_0001"}, headers=auth("demo-globex-admin"))
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"


async def test_docs_page_shows_the_content_types(tmp_path):
    app = build(tmp_path)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        manifest = (await http.get("/tools.json")).json()
        page = (await http.get("/tools")).text
    billing = next(t for t in manifest["tools"] if t["name"] == "billing")
    pdf_action = next(a for a in billing["actions"] if a["name"] == "invoice_pdf")
    assert pdf_action["content_types"] == ["application/pdf"]
    assert 'Content: <code>application/pdf</code>' in page


async def test_another_tenants_invoice_resource_is_refused(reference):
    http = create_mcp_http_client(headers=auth("demo-globex-admin"))
    async with Client(streamable_http_client(reference + "/mcp", http_client=http)) as client:
        with pytest.raises(Exception) as refused:
            await client.read_resource("invoice://inv_0001")
    assert "inv_0001" in str(refused.value) and "%PDF" not in str(refused.value)


async def test_a_presenter_attaches_content_after_its_blocks_from_the_presented_data():
    from tests.service_kit import META

    secret = "grace@example.com"
    view = (Presenter("person").schema({"name": str, "email": str}).redact_pii(["email"])
            .rules(["Names are public."])
            .attach(lambda shown: [document(f"{shown['name']} <{shown['email']}>", "text/plain", uri="card://1"),
                                   link("card://1", f"card of {secret}"), None]))
    people = Tool("people", description="People", exposition="flat")

    @people.action(readonly=True, returns=view)
    async def card():
        """A person's card"""
        return {"name": "Grace", "email": secret}

    app = MCPFusion("people", tools=[people]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        r = await http.post("/mcp", headers={"accept": "application/json, text/event-stream",
                                             "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                                             "mcp-name": "people_card"},
                            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                  "params": {"name": "people_card", "arguments": {}, "_meta": META}})
        rest_body = (await http.post("/api/people/card", json={})).json()
    blocks = r.json()["result"]["content"]
    assert [b["type"] for b in blocks] == ["text", "text", "resource", "resource_link"]  # data, rules, then content
    assert blocks[2]["resource"]["text"] == "Grace <[REDACTED]>"
    assert secret not in r.text and secret not in str(rest_body)
    assert rest_body["data"] == {"name": "Grace", "email": "[REDACTED]"} and len(rest_body["content"]) == 2
