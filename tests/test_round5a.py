"""Round 5a: an advertised output schema's discriminator maps to no `$defs` entry that inlining removed (MCP
tools/list, flat and grouped, and REST OpenAPI); a content item whose MIME type is no media type (a control
character, non-ASCII text) is refused with CONTENT_REFUSED on REST and both MCP wires, and REST never fails
on a header value."""

from __future__ import annotations

import base64
import json
import re
from typing import Annotated, Any, Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Presenter, Tool, ToolRegistry, document, image, link
from mcpfusion.content import DEFAULT_MAX_BYTES, ContentError, EmbeddedResource, Image
from mcpfusion.response import ToolResponse
from mcpfusion.rest import _content_body
from mcpfusion.schema import inline_refs
from tests.wire_kit import ACCEPT, session

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


# -- 1. discriminator mappings of inlined schemas -----------------------------------------------------------


class Card(BaseModel):
    kind: Literal["card"]
    number: str


class Bank(BaseModel):
    kind: Literal["bank"]
    iban: str


class Pay(BaseModel):
    id: str
    method: Annotated[Card | Bank, Field(discriminator="kind")]


def pay_tool(exposition: str) -> Tool:
    pay = Tool("pay", exposition=exposition)

    @pay.action(readonly=True, returns=Presenter("payment").schema(Pay).redact_pii(["method.iban"]))
    async def get() -> dict:
        """A payment, presented."""
        return {"id": "p1", "method": {"kind": "bank", "iban": "DE00"}}

    @pay.action(readonly=True)
    async def typed() -> Pay:
        """A payment, typed."""
        return Pay(id="p1", method=Card(kind="card", number="4111"))

    return pay


def pay_in_tool(exposition: str) -> Tool:
    pay_in = Tool("pay_in", exposition=exposition)

    @pay_in.action()
    async def make(p: Pay) -> str:
        """Make a payment."""
        return "ok"

    return pay_in


def dangling(schema: Any, defs: dict[str, Any]) -> list[str]:
    """The `#/$defs/...` references of `schema` (in `$ref` or a discriminator's mapping) `defs` does not define."""
    return sorted(name for name in set(re.findall(r'"#/\$defs/([^"]+)"', json.dumps(schema))) if name not in defs)


@pytest.mark.parametrize("exposition", ["flat", "grouped"])
def test_advertised_schemas_have_no_discriminator_mapping_to_a_removed_definition(exposition):
    entries = ToolRegistry([pay_tool(exposition), pay_in_tool(exposition)]).mcp_tools()
    outputs = [e["outputSchema"] for e in entries if "outputSchema" in e]
    assert outputs
    for entry in entries:
        for key in ("inputSchema", "outputSchema"):
            if key in entry:
                assert dangling(entry[key], entry[key].get("$defs", {})) == [], (entry["name"], key)
    # The discriminator still names the property telling the branches apart.
    assert '"propertyName": "kind"' in json.dumps(outputs)


async def test_openapi_schemas_have_no_discriminator_mapping_to_a_removed_definition():
    app = MCPFusion("pay", tools=[pay_tool("flat"), pay_in_tool("flat")]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        document_ = (await http.get("/openapi.json")).json()
    paths = {path: ops for path, ops in document_["paths"].items() if path.startswith("/api/pay")}
    assert len(paths) == 3, sorted(paths)
    assert dangling(paths, {}) == []  # (a document's own references are to its components)
    assert '"propertyName": "kind"' in json.dumps(paths)


def test_inline_refs_keeps_other_mappings_and_names_that_look_like_keywords():
    schema = {"oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
              "discriminator": {"propertyName": "t", "mapping": {"a": "#/$defs/A", "b": "other.json#/B"}},
              "properties": {"discriminator": {"type": "string"}, "$defs": {"type": "integer"}},
              "$defs": {"A": {"const": 1}, "B": {"const": 2}}}
    out = inline_refs(schema)
    assert out["oneOf"] == [{"const": 1}, {"const": 2}]
    assert out["discriminator"] == {"propertyName": "t", "mapping": {"b": "other.json#/B"}}
    assert out["properties"] == {"discriminator": {"type": "string"}, "$defs": {"type": "integer"}}


# -- 2. a MIME type that is no media type -------------------------------------------------------------------

BAD_TYPES = ["text/plain; a=b\r\nSet-Cookie: evil=1", "text/plain; name=\u6587\u4ef6.txt",
             "text/plain; name=caf\u00e9.txt", "text/plain; a=b\nc", "text/plain; a=\x00", "text/plain; a=\x7f",
             "text/plain\t", " text/plain"]


@pytest.mark.parametrize("mime", BAD_TYPES)
def test_a_mime_type_that_is_no_media_type_is_refused(mime):
    png_type = mime.replace("text/plain", "image/png")
    items = [EmbeddedResource("file://x", mime, text="hi"), EmbeddedResource("file://x", mime, blob=b"hi"),
             Image(PNG, png_type), link("file://x", "x", mime_type=mime)]
    if mime.strip() == mime:  # (the helpers strip the ends of a type and of its parameters)
        items += [document("hi", mime, uri="file://x"), document(b"hi", mime, uri="file://x"), image(PNG, png_type)]
    for item in items:
        with pytest.raises(ContentError, match="not a valid media type"):
            item.check(DEFAULT_MAX_BYTES)


@pytest.mark.parametrize("mime", ["text/plain", "text/csv; charset=utf-8", "Text/CSV ;charset=UTF-8",
                                  'text/plain; name="caf e.txt"; x=y', "text/plain;"])
def test_media_types_pass(mime):
    document("hi", mime, uri="file://x").check(DEFAULT_MAX_BYTES)
    link("file://x", "x", mime_type=mime).check(DEFAULT_MAX_BYTES)


def files_app() -> Any:
    files = Tool("files", description="Files.")

    @files.action(readonly=True, content_types=["text/plain"])
    async def stored(mime: str, text: str = "hi"):
        """A stored text file with its stored MIME type."""
        return document(text, mime, uri="file://x")

    @files.action(readonly=True, content_types=["image/png"])
    async def png(mime: str):
        """A stored PNG with its stored MIME type."""
        return image(PNG, mime)

    return MCPFusion("files", tools=[files]).build_app()


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a JSON or event-stream answer."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]
    return response.json()["result"]


WIRE_CASES = [("stored", m) for m in BAD_TYPES[:5]] + [("png", "image/png; a=b\r\nSet-Cookie: evil=1"),
                                                        ("png", "image/png; title=\u6587")]


@pytest.mark.parametrize(("action", "mime"), WIRE_CASES)
async def test_every_wire_refuses_the_content_with_content_refused(action, mime):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=files_app()), base_url="http://127.0.0.1") \
            as http:
        rest = await http.post(f"/api/files/{action}", json={"mime": mime})
        assert rest.status_code == 422 and "CONTENT_REFUSED" in rest.json()["type"]
        assert "not a valid media type" in rest.json()["detail"]
        assert "set-cookie" not in rest.headers
        arguments = {"action": action, "mime": mime}
        modern = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": "tools/call", "mcp-name": "files"},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                                     "name": "files", "arguments": arguments, "_meta": META_2026}})
        legacy = await http.post("/mcp", headers=await session(http), json={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "files", "arguments": arguments}})
        for result in (rpc_result(modern), rpc_result(legacy)):
            assert result["isError"] is True
            assert 'code="CONTENT_REFUSED"' in result["content"][0]["text"]
            assert all(block["type"] == "text" for block in result["content"])  # the item never left


def test_rest_answers_a_media_type_no_header_can_carry_in_the_envelope():
    """Defence in depth: an item that reached REST unchecked is answered in the JSON envelope."""
    for mime in ("image/png; a=b\r\nSet-Cookie: evil=1", "image/png; title=\u6587", "image/png ", "image/png\x00"):
        answer = _content_body(ToolResponse([], content=(Image(PNG, mime),)))
        assert answer.headers["content-type"] == "application/json"
        assert json.loads(answer.body)["content"][0]["mimeType"] == mime
    answer = _content_body(ToolResponse([], content=(Image(PNG, "image/png; a=\"b\tc\""),)))
    assert answer.body == PNG and answer.headers["content-type"] == "image/png; a=\"b\tc\""
