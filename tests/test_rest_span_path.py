"""The REST server span's `url.path` is chosen by any client (no token needed, a route matched or not): it keeps
printable characters only and at most 256 of them, as every client-chosen attribute value (a line break or a
terminal escape in it would break a console exporter's or a log shipper's lines)."""

from __future__ import annotations

import pytest

from mcpfusion.telemetry import MAX_ATTRIBUTE_LENGTH
from tests.test_round7_telemetry import cards_app, client

PATHS = [
    ("/api/UNAUTH%0Ainjected%1b%5b31mRED", "/api/UNAUTHinjected[31mRED"),  # unmatched: a 404
    ("/api/cards/find%0D%0Ax", "/api/cards/findx"),
    ("/api/cards/%E2%80%AEfind", "/api/cards/find"),  # a bidi override
    ("/api/cards/find", "/api/cards/find"),  # a plain path as it is
]


@pytest.mark.parametrize(("path", "expected"), PATHS)
async def test_the_span_path_keeps_printable_characters_only(path, expected):
    app, spans = cards_app()
    async with client(app) as http:
        await http.get(path)
    (server,) = [s for s in spans.get_finished_spans() if "url.path" in (s.attributes or {})]
    assert server.attributes["url.path"] == expected


async def test_a_long_path_is_cut():
    app, spans = cards_app()
    async with client(app) as http:
        await http.get("/api/" + "a" * 5000)
    (server,) = [s for s in spans.get_finished_spans() if "url.path" in (s.attributes or {})]
    assert server.attributes["url.path"] == ("/api/" + "a" * 5000)[:MAX_ATTRIBUTE_LENGTH]
