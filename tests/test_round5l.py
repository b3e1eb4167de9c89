"""Round 5l: a media type is read once, as RFC 9110 reads it. A `;charset=...` inside a quoted parameter value
declares no charset: the redaction guard reads such a text blob as a client does (UTF-8) and censors it on
REST and both MCP wires; the type is sent with its quoted value byte for byte; REST labels the UTF-8 it
answers. A real charset may be quoted, is named case-insensitively, and is refused when declared twice."""

from __future__ import annotations

import base64
import json
from email.message import Message
from typing import Any

import httpx
import pytest

from mcpfusion import MCPFusion, Presenter, Tool, attach, document
from mcpfusion.content import DEFAULT_MAX_BYTES, ContentError, _charset
from tests.wire_kit import ACCEPT, session

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
EMAIL = "ops@acme.io"

# Valid media types whose quoted values hold `;charset=`: none of them declares a charset. (As declared, as sent:
# the spaces around `;` normalized, each quoted value byte for byte.)
SMUGGLED = [('text/plain; title="x;charset=utf-7"', 'text/plain; title="x;charset=utf-7"'),
            ('text/plain; title="x\\";charset=utf-7"', 'text/plain; title="x\\";charset=utf-7"'),
            ('text/plain;title="a;b" ; x="c; charset=utf-7"', 'text/plain; title="a;b"; x="c; charset=utf-7"'),
            ('TEXT/plain; title="x;charset=utf-7;"', 'text/plain; title="x;charset=utf-7;"')]


def client_charset(mime: str) -> str | None:
    """The charset an RFC-reading client (the standard library's MIME parser) takes from a type."""
    message = Message()
    message["content-type"] = mime
    return message.get_content_charset()


def card_app() -> Any:
    view = Presenter("contact").schema({"id": str, "email": str}).redact_pii(["email"])
    cards = Tool("cards")

    @cards.action(readonly=True, returns=view)
    async def card(mime: str, charset: str = "utf-8") -> object:
        """A contact with a note about it attached as a text blob."""
        row = {"id": "c1", "email": EMAIL}
        return attach(row, document(f"Ren\u00e9e: +{EMAIL}\n".encode(charset), mime, uri="file:///card.txt"))

    @cards.action(readonly=True)
    async def note(mime: str) -> object:
        """A note as a text document."""
        return document("hello w\u00f6rld", mime, uri="file:///note.txt")

    return MCPFusion("cards", tools=[cards]).build_app()


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC result of a JSON or event-stream answer."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])["result"]
    return response.json()["result"]


async def every_wire(arguments: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The content blocks a card call answers on REST (the envelope) and both MCP wires."""
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=card_app()), base_url="http://127.0.0.1") \
            as http:
        rest = await http.post("/api/cards/card", json=arguments)
        assert rest.status_code == 200, rest.text
        call = {"name": "cards", "arguments": {"action": "card", **arguments}}
        modern = await http.post("/mcp", headers={**ACCEPT, "mcp-protocol-version": "2026-07-28",
                                                  "mcp-method": "tools/call", "mcp-name": "cards"},
                                 json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                       "params": {**call, "_meta": META_2026}})
        legacy = await http.post("/mcp", headers=await session(http),
                                 json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        return [rest.json()["content"], rpc_result(modern)["content"], rpc_result(legacy)["content"]]


def resource(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = next(block for block in blocks if block["type"] == "resource")["resource"]
    return found


@pytest.mark.parametrize(("mime", "normal"), SMUGGLED)
async def test_a_charset_in_a_quoted_value_is_no_charset_and_the_blob_is_censored_on_every_wire(mime, normal):
    assert client_charset(mime) is None
    for blocks in await every_wire({"mime": mime}):
        sent = resource(blocks)
        assert sent["mimeType"] == normal
        raw = base64.b64decode(sent["blob"])
        assert EMAIL.encode() not in raw and raw == "Ren\u00e9e: +[REDACTED]\n".encode()
        assert EMAIL not in json.dumps(blocks)


@pytest.mark.parametrize("mime", ['text/plain; charset="iso-8859-1"', 'text/plain; CharSet="ISO-8859-1"',
                                  'text/plain; title="a;charset=utf-7"; charset=iso-8859-1'])
async def test_a_real_charset_quoted_or_beside_a_quoted_value_is_read(mime):
    assert client_charset(mime) == "iso-8859-1"
    for blocks in await every_wire({"mime": mime, "charset": "latin-1"}):  # (no UTF-8 text: read as latin-1)
        raw = base64.b64decode(resource(blocks)["blob"])
        assert raw == "Ren\u00e9e: +[REDACTED]\n".encode("latin-1")


async def test_a_charset_declared_twice_is_refused_on_every_wire():
    mime = 'text/plain; charset=utf-8; CHARSET="utf-7"'
    with pytest.raises(ContentError, match="declares its charset 2 times"):
        document(b"x", mime, uri="file:///x").check(DEFAULT_MAX_BYTES)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=card_app()), base_url="http://127.0.0.1") \
            as http:
        rest = await http.post("/api/cards/card", json={"mime": mime})
        assert rest.status_code == 422 and "declares its charset 2 times" in rest.json()["detail"]
        assert EMAIL not in rest.text


async def test_rest_answers_a_text_with_a_quoted_charset_lookalike_in_utf8_labelled_utf8():
    mime = 'text/plain; title="a;charset=utf-16"'
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=card_app()), base_url="http://127.0.0.1") \
            as http:
        answer = await http.post("/api/cards/note", json={"mime": mime})
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == f"{mime}; charset=utf-8"
    assert client_charset(answer.headers["content-type"]) == "utf-8"
    assert answer.content == "hello w\u00f6rld".encode()


def test_the_type_is_read_once_as_rfc_9110_reads_it():
    kept = 'text/plain; title="a\\"b;c=d"; charset="utf-16-le"'
    item = document(b"h\x00i\x00", " Text/Plain ;Title=\"a\\\"b;c=d\"; CHARSET=\"utf-16-le\" ", uri="file:///x")
    assert item.mime_type == kept and _charset(item.mime_type) == "utf-16-le"
    item.check(DEFAULT_MAX_BYTES)
    assert _charset('text/plain; title="charset=utf-16"') == "utf-8"
    for bad in ('text/plain; title="a;charset=utf-7', 'text/plain; charset=" utf-8"', 'text/plain; charset=""'):
        with pytest.raises(ContentError):
            document(b"hi", bad, uri="file:///x").check(DEFAULT_MAX_BYTES)


@pytest.mark.parametrize("charset", ["utf-7", "UTF7", "hz-gb-2312"])
def test_a_charset_that_shifts_in_and_out_of_ascii_is_refused(charset: str) -> None:
    from mcpfusion.content import ContentError, _charset

    with pytest.raises(ContentError, match="not a known text encoding"):
        _charset(f"text/plain; charset={charset}")
