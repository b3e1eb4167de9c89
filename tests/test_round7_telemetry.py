"""Round 7 telemetry mends: a query part without a plain name is `REDACTED` whole in the REST span's `url.query`
and in `mcp.resource.uri` (as the access log writes it), and a resource URI's credentials are redacted behind
leading spaces and invisible characters too."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpfusion import MCPFusion, Tool
from mcpfusion.server import redacted_query
from mcpfusion.telemetry import Telemetry, clean_uri, redact_query

SECRETS = ("4111111111111111", "pw_SECRET", "tok_SECRET", "ppppppppppppppppppppppppppppppp")
META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
             "io.modelcontextprotocol/clientCapabilities": {},
             "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


def cards_app() -> tuple[Any, InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    cards = Tool("cards")

    @cards.action(readonly=True)
    async def find(number: str = "") -> dict[str, bool]:
        """Find a card."""
        return {"found": False}

    fusion = MCPFusion("cards", tools=[cards], telemetry=Telemetry(tracer_provider=provider, metrics=False))

    @fusion.resource_template("cards://{id}")
    def card(id: str) -> str:
        """A card."""
        return "x"

    return fusion.build_app(), spans


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def read_2025(http: httpx.AsyncClient, uri: str) -> None:
    headers = {"accept": "application/json, text/event-stream"}
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    started = await http.post("/mcp", json=hello, headers=headers)
    headers |= {"mcp-session-id": started.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    await http.post("/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri}})


async def read_2026(http: httpx.AsyncClient, uri: str) -> None:
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
               "mcp-method": "resources/read", "mcp-name": uri}
    await http.post("/mcp", headers=headers, json={
        "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": META_2026}})


def resource_uris(spans: InMemorySpanExporter) -> list[str]:
    return [s.attributes["mcp.resource.uri"] for s in spans.get_finished_spans()
            if s.attributes.get("mcp.method.name") == "resources/read"]


def assert_no_secret(spans: InMemorySpanExporter) -> None:
    text = str([dict(s.attributes or {}) for s in spans.get_finished_spans()])
    assert not [s for s in SECRETS if s in text], text


# (raw query, what the REST span's url.query and the access log write for it)
QUERIES = [
    ("number=4111111111111111", "number=REDACTED"),
    ("4111111111111111", "REDACTED"),
    ("number%3D4111111111111111", "REDACTED"),
    ("tok_SECRET&number=1", "REDACTED&number=REDACTED"),
    ("number%3D4111111111111111=1", "REDACTED"),  # an escaped name=value sent as a name
    ("4111111111111111=1&x.y-z_2=3", "REDACTED&x.y-z_2=REDACTED"),  # not a plain name
    ("num%62er=4111111111111111", "number=REDACTED"),  # an escaped plain name, as FastAPI decodes it
    ("number=1&&tok_SECRET=", "number=REDACTED&REDACTED"),  # FastAPI writes `tok_SECRET` as `tok_SECRET=`
]


async def test_rest_span_query_redacts_a_part_without_a_plain_name_whole():
    app, spans = cards_app()
    async with client(app) as http:
        for query, expected in QUERIES:
            spans.clear()
            await http.get(f"/api/cards/find?{query}")
            (server,) = [s for s in spans.get_finished_spans() if s.attributes.get("url.path")]
            assert server.attributes["url.query"] == expected == redact_query(query), query
            assert_no_secret(spans)
    for query, expected in QUERIES[:4]:  # the probe's queries: as the access log writes them
        assert redacted_query(f"/api/cards/find?{query}") == f"/api/cards/find?{expected}"


async def test_resource_uri_credentials_behind_leading_spaces_or_invisible_characters_are_redacted():
    uris = [" https://user:pw_SECRET@host/x", "\u200bhttps://user:pw_SECRET@host/x",
            "\x00https://user:pw_SECRET@host/x", "\ufeff\u3000https://user:pw_SECRET@host/x"]
    app, spans = cards_app()
    async with client(app) as http:
        for uri in uris:
            await read_2025(http, uri)
    assert resource_uris(spans) == ["https://REDACTED:REDACTED@host/x"] * len(uris)
    assert_no_secret(spans)


async def test_resource_uri_query_part_without_a_name_is_redacted_on_both_wires():
    app, spans = cards_app()
    async with client(app) as http:
        for uri in ("cards://1?4111111111111111", "cards://1?n%3D4111111111111111", "cards://1?tok_SECRET&n=1"):
            await read_2025(http, uri)
            await read_2026(http, uri)
    assert resource_uris(spans) == ["cards://1?REDACTED"] * 4 + ["cards://1?REDACTED&n=REDACTED"] * 2
    assert_no_secret(spans)


def test_clean_uri_redacts_a_userinfo_wherever_a_parser_reads_an_authority():
    assert clean_uri("https:user:pw_SECRET@host/x") == "https:REDACTED:REDACTED@host/x"  # WHATWG: https://user...
    assert clean_uri("HTTPS:\\\\user:pw_SECRET@host/x") == "HTTPS:\\\\REDACTED:REDACTED@host/x"
    assert clean_uri("ht\ntps://user:pw_SECRET@host/x") == "https://REDACTED:REDACTED@host/x"  # a parser drops \n
    assert clean_uri("fetch://x/https://user:pw_SECRET@host/y") == "fetch://x/https://REDACTED:REDACTED@host/y"
    assert clean_uri('"https://user:pw_SECRET@host/x"') == '"https://REDACTED:REDACTED@host/x"'
    # Its "@" past what is read: the whole authority.
    assert clean_uri("https://user:" + "p" * 5000 + "@host/x") == "https://REDACTED"
    assert clean_uri("mailto:ana@example.com") == "mailto:ana@example.com"  # no authority: no userinfo
    assert clean_uri("file:///a@b.txt") == "file:///a@b.txt"
    assert clean_uri("https://host/" + "B" * 5000).startswith("https://host/BBB")


@pytest.mark.parametrize("uri", ["postgres://admin:Zm9v/YmFy@db.internal/app", "postgres://admin:pa?ss@db.internal/app",
                                 "postgres://admin:pa#ss@db.internal/app", "x://u:p/q@h@i/j"])
def test_a_password_holding_a_slash_question_mark_or_hash_is_redacted_whole(uri: str) -> None:
    cleaned = clean_uri(uri)
    assert "REDACTED:REDACTED@" in cleaned
    assert not any(part in cleaned for part in ("admin", "Zm9v", "YmFy", "pa", "ss@", "u:p", "q@h"))
