"""REST and OpenAPI of an action answering its content alone (`attach(..., data_block=False)`): the 200 documents
the media types sent (as binary strings, no JSON), the document goes out inline with a safe file name, and an
Accept allowing nothing the action sends is a 406 problem (checked before the call)."""
from __future__ import annotations

import httpx
import pytest

from mcpfusion import MCPFusion, Tool, attach, document, image
from mcpfusion.rest import content_only

PDF = b"%PDF-1.3\n%\xe2\xe3\xcf\xd3\n1 0 obj << >> endobj\n%%EOF\n"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16

files = Tool("files", description="Files")
calls: list[str] = []


@files.action(readonly=True, content_types=["application/pdf"], content_only=True)
async def pdf(id: str) -> object:
    """One document as a PDF"""
    calls.append(id)
    return attach({"id": id}, document(PDF, "application/pdf", uri=f"doc://{id}"), data_block=False)


@files.action(readonly=True, content_types=["application/pdf"], content_only=True)
async def odd_name(id: str) -> object:
    """A document whose URI holds characters no file name should"""
    return attach({"id": id}, document(PDF, "application/pdf", uri='doc://x/..%2f"evil\r\n name'),
                  data_block=False)


@files.action(readonly=True, content_types=["image/png"], content_only=True)
async def picture(id: str) -> object:
    """An image without a name"""
    return attach({"id": id}, image(PNG), data_block=False)


@files.action(readonly=True, content_types=["application/pdf"])
async def both(id: str, raw: bool = False) -> object:
    """Data, or the PDF: JSON stays documented"""
    if raw:
        return attach({"id": id}, document(PDF, "application/pdf", uri=f"doc://{id}"), data_block=False)
    return {"id": id}


@files.action(readonly=True)
async def data(id: str) -> dict:
    """Plain data"""
    return {"id": id}


@pytest.fixture
async def http():
    app = MCPFusion(name="files", tools=[files]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        yield client


def test_content_only_is_declared_with_its_content_types():
    assert content_only(files.actions["pdf"]) and content_only(files.actions["picture"])
    assert not content_only(files.actions["both"]) and not content_only(files.actions["data"])
    with pytest.raises(ValueError, match="content_only=True answers content alone, so it declares content_types"):
        @files.action(readonly=True, content_only=True)
        async def bare(id: str) -> object:
            """No content types"""
            return attach({"id": id}, image(PNG), data_block=False)


async def test_a_content_only_action_answering_its_data_is_refused_not_sent_as_json():
    odd = Tool("odd", description="Odd")

    @odd.action(readonly=True, content_types=["application/pdf"], content_only=True)
    async def leaky(id: str) -> object:
        """Says content only, answers data"""
        return {"id": id, "secret_note": "x"}

    app = MCPFusion(name="odd", tools=[odd]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        answer = await client.post("/api/odd/leaky", json={"id": "1"})
    assert answer.status_code == 500 and answer.json()["code"] == "INVALID_OUTPUT" and "secret_note" not in answer.text


async def test_openapi_documents_what_is_sent(http):
    spec = (await http.get("/openapi.json")).json()
    for method in ("get", "post"):
        ok = spec["paths"]["/api/files/pdf"][method]["responses"]["200"]
        assert ok["content"] == {"application/pdf": {"schema": {"type": "string", "format": "binary"}}}
        assert "Content-Disposition" in ok["headers"]
        assert "406" in spec["paths"]["/api/files/pdf"][method]["responses"]
    mixed = spec["paths"]["/api/files/both"]["get"]["responses"]["200"]["content"]
    assert list(mixed) == ["application/json", "application/pdf"]
    plain = spec["paths"]["/api/files/data"]["get"]["responses"]["200"]
    assert list(plain["content"]) == ["application/json"] and "headers" not in plain


async def test_the_document_goes_out_inline_with_its_name(http):
    for accept in (None, "application/pdf", "*/*", "application/*", "application/json, */*;q=0.1",
                   "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"):
        r = await http.get("/api/files/pdf?id=inv_1", headers={"accept": accept} if accept else {})
        assert r.status_code == 200, accept
        assert r.headers["content-type"] == "application/pdf" and r.content == PDF
        assert r.headers["content-disposition"] == 'inline; filename="inv_1.pdf"'
        assert r.headers["content-description"] == "File Transfer"  # (Swagger UI's try-it: a download link)
    posted = await http.post("/api/files/pdf", json={"id": "inv_2"}, headers={"accept": "application/pdf"})
    assert posted.headers["content-disposition"] == 'inline; filename="inv_2.pdf"'
    odd = await http.get("/api/files/odd_name?id=1")
    assert odd.headers["content-disposition"] == 'inline; filename="evil_name.pdf"'
    unnamed = await http.get("/api/files/picture?id=1")
    assert unnamed.headers["content-type"] == "image/png" and unnamed.headers["content-disposition"] == "inline"
    assert "content-description" not in unnamed.headers  # (shown as an image)


async def test_an_accept_excluding_what_is_sent_is_a_406_before_the_call(http):
    calls.clear()
    for accept in ("application/json", "application/pdf;q=0, */*", "text/html"):
        r = await http.get("/api/files/pdf?id=1", headers={"accept": accept})
        assert r.status_code == 406, accept
        assert r.headers["content-type"] == "application/problem+json"
        body = r.json()
        assert body["status"] == 406 and "application/pdf" in body["detail"]
    assert calls == []  # the handler never ran
    assert (await http.post("/api/files/pdf", json={"id": "1"}, headers={"accept": "application/json"})
            ).status_code == 406
    assert (await http.get("/api/files/data?id=1", headers={"accept": "application/xml"})).status_code == 406
    assert (await http.get("/api/files/data?id=1", headers={"accept": "application/json"})).json() == {"id": "1"}
    assert (await http.get("/api/files/both?id=1", headers={"accept": "application/pdf"})).status_code == 200


async def test_an_accept_it_cannot_read_is_disregarded_and_several_are_one_list(http):
    # Java's HttpURLConnection default (`*; q=.2` is no media range, `.2` no qvalue), a bare `*` or `json`: the
    # header is disregarded (RFC 9110 12.5.1 allows it) rather than every answer refused; several Accept fields
    # are one list, whatever their order.
    for accept in ("text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2", "*", "json", "application/json;q=x"):
        r = await http.get("/api/files/data?id=1", headers={"accept": accept})
        assert r.status_code == 200 and r.json() == {"id": "1"}, accept
    for fields in ([("accept", "text/html"), ("accept", "*/*")], [("accept", "*/*"), ("accept", "text/html")]):
        r = await http.get("/api/files/data?id=1", headers=httpx.Headers(fields))
        assert r.status_code == 200, fields
    r = await http.get("/api/files/data?id=1", headers=httpx.Headers([("accept", "text/html"), ("accept", "image/png")]))
    assert r.status_code == 406
