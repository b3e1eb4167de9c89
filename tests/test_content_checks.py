"""Content checks: an egress cut keeps the attached images and documents; the bytes-versus-MIME-type check
accepts real files (Office/EPUB ZIPs, JSON text, BMP, octet-stream) and refuses mislabelled ones (an HTML page
as a PDF or audio); a text blob's charset is kept, censored in that charset and answered on REST."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import struct
import zipfile
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from mcpfusion import EgressLimit, MCPFusion, Presenter, Tool, attach, audio, document, image
from mcpfusion.content import DEFAULT_MAX_BYTES, ContentError, sniff
from mcpfusion.testing import ToolTester

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
HTML = b"<html><body>502 Bad Gateway</body></html>"
CSV = "id;name;city\n1;Ren\u00e9e M\u00fcller;K\u00f6ln\n".encode("latin-1")


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def zipped(name: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("mimetype", "application/epub+zip")
        archive.writestr(name, "<x/>")
    return buf.getvalue()


def bmp() -> bytes:
    pixel = b"\x00\x00\xff\x00"
    dib = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, len(pixel), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + len(pixel), 0, 0, 54) + dib + pixel


def ftyp(major: bytes, *compatible: bytes) -> bytes:
    body = major + b"\x00\x00\x00\x00" + b"".join(compatible)
    return struct.pack(">I", 8 + len(body)) + b"ftyp" + body + b"\x00" * 16


EXE = b"MZ\x90\x00" + b"\x00" * 60
WAV = b"RIFF" + struct.pack("<I", 36) + b"WAVEfmt " + b"\x00" * 24


# -- 1. an egress cut keeps the attached content ----------------------------------------------------------


def sales_app() -> Any:
    reports = Tool("reports")

    @reports.action(readonly=True, middleware=[EgressLimit(bytes=300)])
    async def sales(n: int = 3):
        """Sales rows with a chart and the full CSV."""
        rows = [{"id": i, "region": f"region-{i}", "total": i * 100} for i in range(n)]
        csv = "id,total\n" + "\n".join(f"{r['id']},{r['total']}" for r in rows)
        return attach(rows, image(PNG), document(csv, "text/csv", uri="report://sales.csv"))

    return MCPFusion("r", tools=[reports]).build_app()


async def test_an_egress_cut_keeps_the_attached_image_and_document_on_mcp() -> None:
    result = await ToolTester(sales_app()).call("reports", "sales", {"n": 30})
    blocks = result.raw.to_mcp()["content"]
    assert [b["type"] for b in blocks] == ["text", "text", "image", "resource"]
    assert "egress limit" in blocks[1]["text"]
    assert base64.b64decode(blocks[2]["data"]) == PNG
    assert blocks[3]["resource"]["text"].count("\n") == 30  # the whole CSV, as attached
    assert result.raw.view.truncated is not None and result.raw.view.truncated[0] < 30


async def test_an_egress_cut_keeps_the_attached_content_on_rest() -> None:
    async with client(sales_app()) as c:
        response = await c.get("/api/reports/sales", params={"n": 30})
    assert response.status_code == 200
    body = response.json()
    assert [item["type"] for item in body["content"]] == ["image", "resource"]
    shown = len(body["data"])
    assert 0 < shown < 30
    assert response.headers["truncated"] == f"shown={shown}, total=30, unit=rows"


# -- 2. bytes against their declared type -----------------------------------------------------------------

OOXML = "application/vnd.openxmlformats-officedocument."
ACCEPTED = [
    lambda: document(zipped("word/document.xml"), OOXML + "wordprocessingml.document", uri="r://1.docx"),
    lambda: document(zipped("xl/workbook.xml"), OOXML + "spreadsheetml.sheet", uri="r://1.xlsx"),
    lambda: document(zipped("ppt/presentation.xml"), OOXML + "presentationml.presentation", uri="r://1.pptx"),
    lambda: document(zipped("content.xml"), "application/vnd.oasis.opendocument.text", uri="r://1.odt"),
    lambda: document(zipped("content.opf"), "application/epub+zip", uri="r://1.epub"),
    lambda: document(zipped("a.class"), "application/java-archive", uri="r://1.jar"),  # a type not known here
    lambda: document(json.dumps({"total": 3}), "application/json", uri="r://1.json"),
    lambda: document("<total>3</total>", "application/xml", uri="r://1.xml"),
    lambda: document("total: 3\n", "application/yaml", uri="r://1.yaml"),
    lambda: document('{"data": []}', "application/vnd.api+json", uri="r://1.json"),
    lambda: document("<feed/>", "application/atom+xml", uri="r://1.atom"),
    lambda: document(b'{"total": 3}', "application/json", uri="r://2.json"),
    lambda: document(EXE, "application/octet-stream", uri="file://setup.exe"),
    lambda: document(PNG, "application/octet-stream", uri="file://x.bin"),
    lambda: document(EXE, "application/x-msdownload", uri="file://setup.exe"),
    lambda: document(b"%PDF-1.7\n", "application/pdf", uri="r://1.pdf"),
    lambda: document(b"\xff\xfeh\x00i\x00", "text/plain; charset=utf-16", uri="r://1.txt"),  # (a BOM, not MP3)
    lambda: image(bmp(), "image/bmp"),
    lambda: image(bmp()),
    lambda: image(b"II*\x00" + b"\x00" * 8, "image/tiff"),
    lambda: image(b"\x00\x00\x01\x00\x01\x00" + b"\x00" * 16, "image/vnd.microsoft.icon"),
    lambda: image(ftyp(b"avif", b"mif1")),
    lambda: image(ftyp(b"mif1", b"avif"), "image/avif"),
    lambda: image(ftyp(b"heic", b"mif1"), "image/heic"),
    lambda: image(PNG, "image/png; foo=bar"),
    lambda: image(b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/svg+xml"),
    lambda: audio(b"ID3\x04\x00" + b"\x00" * 16, "audio/mpeg"),
    lambda: audio(b"\xff\xfb\x90\x00" + b"\x00" * 16, "audio/mp3"),
    lambda: audio(b"\xff\xf1\x50\x80" + b"\x00" * 16, "audio/aac"),
    lambda: audio(WAV, "audio/x-wav"),
    lambda: audio(b"OggS\x00" + b"\x00" * 16, "audio/ogg"),
    lambda: audio(b"fLaC" + b"\x00" * 16, "audio/flac"),
    lambda: audio(ftyp(b"M4A ", b"isom"), "audio/x-m4a"),
    lambda: audio(ftyp(b"isom", b"mp42"), "audio/mp4"),
    lambda: audio(b"\x00\x01\x02 some codec", "audio/x-unknown-codec"),  # (a type not known here)
]


@pytest.mark.parametrize("make", ACCEPTED)
def test_real_files_pass_the_check(make: Callable[[], Any]) -> None:
    make().check(DEFAULT_MAX_BYTES)


REFUSED = [
    (lambda: document(HTML, "application/pdf", uri="r://1.pdf"), "its bytes are 'text/html'"),
    (lambda: audio(HTML, "audio/mpeg"), "its bytes are 'text/html'"),
    (lambda: audio(HTML, "audio/x-unknown-codec"), "its bytes are 'text/html'"),
    (lambda: audio(PNG, "audio/mpeg"), "its bytes are 'image/png'"),
    (lambda: audio(b"just bytes", "audio/wav"), "its bytes are not of that type"),
    (lambda: document(PNG, OOXML + "wordprocessingml.document", uri="r://1.docx"), "its bytes are 'image/png'"),
    (lambda: document(HTML, OOXML + "spreadsheetml.sheet", uri="r://1.xlsx"), "its bytes are 'text/html'"),
    (lambda: document(EXE, "application/vnd.acme.report", uri="r://1"), "bytes are 'application/x-msdownload'"),
    (lambda: document(b"%PDF-1.7", "application/vnd.acme.report", uri="r://1"), "its bytes are 'application/pdf'"),
    (lambda: document(PNG, "text/csv", uri="r://1.csv"), "its bytes are 'image/png'"),
    (lambda: image(HTML, "image/bmp"), "its bytes are 'text/html'"),
    (lambda: image(b"just bytes", "image/bmp"), "not a PNG, JPEG, GIF or WebP"),
    (lambda: image(PNG, "image/bmp"), "its bytes are 'image/png'"),
    (lambda: image(PNG, "image/x-portable-pixmap"), "its bytes are 'image/png'"),
    (lambda: image(b"P6 1 1 255 abc", "image/x-portable-pixmap"), "not a PNG, JPEG, GIF or WebP"),
    (lambda: document("<svg/>", "image/svg+xml", uri="r://1.svg"), "not a text type"),  # an SVG is an image only
]


@pytest.mark.parametrize(("make", "message"), REFUSED)
def test_mislabelled_bytes_are_refused(make: Callable[[], Any], message: str) -> None:
    with pytest.raises(ContentError) as refused:
        make().check(DEFAULT_MAX_BYTES)
    assert message in str(refused.value)


def test_text_that_starts_like_a_signature_is_still_text() -> None:
    assert sniff(b"MZ;BMW;ID3 rows\n") is None  # a CSV of country and model codes
    assert sniff(b"BMW,320d\n" * 4) is None
    assert sniff(b"ID3 tags\n") is None
    document("MZ;BMW\n", "text/csv", uri="r://1.csv").check(DEFAULT_MAX_BYTES)


async def test_an_html_page_declared_as_a_pdf_is_refused_end_to_end() -> None:
    reports = Tool("reports")

    @reports.action(readonly=True)
    async def pdf() -> object:
        """An upstream's error page passed on as a PDF."""
        return document(HTML, "application/pdf", uri="report://1.pdf")

    @reports.action(readonly=True)
    async def docx() -> object:
        """A Word report."""
        return document(zipped("word/document.xml"), OOXML + "wordprocessingml.document", uri="report://1.docx")

    tester = ToolTester([reports])
    refused = await tester.call("reports", "pdf")
    assert refused.error_code == "CONTENT_REFUSED" and "'text/html'" in refused.text
    sent = await tester.call("reports", "docx")
    assert not sent.is_error


# -- 3. a text document's charset -------------------------------------------------------------------------


def test_the_mime_type_keeps_its_parameters_normalized() -> None:
    item = document(CSV, " Text/CSV ; Charset=ISO-8859-1 ", uri="x://1.csv")
    assert item.mime_type == "text/csv; charset=ISO-8859-1"
    assert item.to_mcp()["resource"]["mimeType"] == "text/csv; charset=ISO-8859-1"
    assert image(PNG, "image/jpg; q=1").mime_type == "image/jpeg; q=1"


def crm_tool(censor: str = "[REDACTED]") -> Tool:
    view = Presenter("customer").schema({"id": str, "name": str, "email": str}).redact_pii(["email"], censor)
    crm = Tool("crm")
    csv = "id;name;email;city\n1;Ren\u00e9e M\u00fcller;renee@example.com;K\u00f6ln\n".encode("latin-1")

    @crm.action(readonly=True, returns=view)
    async def export(id: str, charset: str = "iso-8859-1"):
        """A customer with a CSV of their record (latin-1, as Excel writes it)."""
        row = {"id": id, "name": "Ren\u00e9e", "email": "renee@example.com"}
        return attach(row, document(csv, f"text/csv; charset={charset}", uri="export://1.csv"))

    @crm.action(readonly=True)
    async def undeclared(id: str):
        """A latin-1 CSV declared without a charset."""
        return attach({"id": id}, document(csv, "text/csv", uri="export://1.csv"))

    return crm


def resource_of(result: Any) -> dict[str, Any]:
    return next(b for b in result.raw.to_mcp()["content"] if b["type"] == "resource")["resource"]


async def test_a_latin1_blob_is_censored_in_latin1_and_keeps_its_charset() -> None:
    result = await ToolTester([crm_tool()]).call("crm", "export", {"id": "1"})
    resource = resource_of(result)
    assert resource["mimeType"] == "text/csv; charset=iso-8859-1"
    sent = base64.b64decode(resource["blob"])
    assert sent == "id;name;email;city\n1;Ren\u00e9e M\u00fcller;[REDACTED];K\u00f6ln\n".encode("latin-1")


async def test_a_censor_the_charset_cannot_write_is_the_ascii_default() -> None:
    result = await ToolTester([crm_tool(censor="\u2588\u2588")]).call("crm", "export", {"id": "1"})
    sent = base64.b64decode(resource_of(result)["blob"])
    assert sent == "id;name;email;city\n1;Ren\u00e9e M\u00fcller;[REDACTED];K\u00f6ln\n".encode("latin-1")


async def test_bytes_that_are_not_text_in_their_charset_are_refused_not_corrupted() -> None:
    tester = ToolTester([crm_tool()])
    undeclared = await tester.call("crm", "undeclared", {"id": "1"})
    assert undeclared.error_code == "CONTENT_REFUSED" and "not utf-8 text" in undeclared.text
    mislabelled = await tester.call("crm", "export", {"id": "1", "charset": "utf-8"})  # (it holds the email)
    assert mislabelled.error_code == "CONTENT_REFUSED" and "renee@" not in mislabelled.text
    unknown = await tester.call("crm", "export", {"id": "1", "charset": "klingon-8"})
    assert unknown.error_code == "CONTENT_REFUSED" and "'klingon-8'" in unknown.text
    base64_codec = await tester.call("crm", "export", {"id": "1", "charset": "base64"})
    assert base64_codec.error_code == "CONTENT_REFUSED"


def test_a_text_document_in_a_charset_that_cannot_write_it_is_refused() -> None:
    with pytest.raises(ContentError, match="cannot be written in"):
        document("\u4e2d\u6587", "text/plain; charset=iso-8859-1", uri="x://1.txt").check(DEFAULT_MAX_BYTES)


async def test_rest_answers_the_declared_charset_and_bytes() -> None:
    reports = Tool("reports")

    @reports.action(readonly=True)
    async def blob() -> object:
        """A latin-1 CSV export."""
        return document(CSV, "text/csv; charset=iso-8859-1", uri="report://x.csv")

    @reports.action(readonly=True)
    async def text() -> object:
        """The same CSV as text, declared latin-1."""
        return document(CSV.decode("latin-1"), "text/csv; charset=iso-8859-1", uri="report://x.csv")

    @reports.action(readonly=True)
    async def plain() -> object:
        """A CSV with no charset declared: UTF-8."""
        return document("K\u00f6ln\n", "text/csv", uri="report://x.csv")

    @reports.action(readonly=True)
    async def badge(label: str) -> object:
        """An SVG badge."""
        return image(f'<svg xmlns="http://www.w3.org/2000/svg"><text>{label}</text></svg>'.encode(), "image/svg+xml")

    async with client(MCPFusion("r", tools=[reports]).build_app()) as c:
        for name in ("blob", "text"):
            response = await c.get(f"/api/reports/{name}")
            assert response.headers["content-type"] == "text/csv; charset=iso-8859-1"
            assert response.content == CSV and response.text == CSV.decode("latin-1")
        response = await c.get("/api/reports/plain")
        assert response.headers["content-type"] == "text/csv; charset=utf-8"
        assert response.content == "K\u00f6ln\n".encode()
        response = await c.get("/api/reports/badge", params={"label": "<script>alert(1)</script>"})
        assert response.headers["content-type"] == "image/svg+xml"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in response.headers["content-security-policy"]


def test_a_typed_action_answering_content_alone_is_invalid_output_not_a_result_without_its_data(caplog):
    """An action whose outputSchema promises structured data may not answer an image alone: the official SDK
    refuses such a result ("has an output schema but did not return structured content")."""
    import logging

    from mcpfusion import Tool, image
    from mcpfusion.testing import ToolTester

    tool = Tool("shots")

    @tool.action(readonly=True, returns=ShotModel, content_types=["image/png"])
    async def only_png(id: str) -> ShotModel:
        """A picture alone."""
        return image(PNG, "image/png")  # type: ignore[return-value]

    @tool.action(readonly=True, content_types=["image/png"])
    async def untyped_png(id: str):
        """A picture, no output schema."""
        return image(PNG, "image/png")

    with caplog.at_level(logging.ERROR, logger="mcpfusion"):
        typed = asyncio.run(ToolTester([tool]).call("shots", "only_png", {"id": "s1"}))
    assert typed.is_error and typed.error_code == "INVALID_OUTPUT"
    assert "attach(data" in caplog.text
    untyped = asyncio.run(ToolTester([tool]).call("shots", "untyped_png", {"id": "s1"}))
    assert not untyped.is_error and untyped.raw.to_mcp().get("structuredContent") is None


class ShotModel(BaseModel):
    id: str


def test_a_rest_get_answer_with_content_and_a_next_page_has_the_link_header() -> None:
    """As a plain JSON page does: `Next-Cursor`, and for GET the next page's URL in `Link`."""
    from starlette.requests import Request

    from mcpfusion.response import success
    from mcpfusion.rest import rest_body

    response = success([{"id": 1}])
    response.content = (image(PNG),)
    response.view.next_cursor = "c2"
    scope = {"type": "http", "method": "GET", "path": "/api/reports/sales", "query_string": b"n=30",
             "headers": [(b"host", b"testserver")], "scheme": "http", "server": ("testserver", 80), "root_path": ""}
    answer = rest_body(response, Request(scope))
    assert answer.headers["next-cursor"] == "c2"
    assert answer.headers["link"] == '</api/reports/sales?n=30&cursor=c2>; rel="next"'
