"""Round 6c: a refused cursor is REST's 400 (not a 404 that says the list route is gone), and an embedded
child's `limit` cut is said on REST too (`Truncated-Embedded`)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion import pagination as pagination_module
from mcpfusion.response import ResponseView, ToolResponse
from mcpfusion.rest import EMBEDDED_CUTS, rest_body
from tests.service_kit import asgi_client, build, rest

# -- 1. INVALID_CURSOR and CURSOR_EXPIRED answer 400 ---------------------------------------------------------


def _notes_app() -> Any:
    notes = Tool("notes")

    @notes.action(readonly=True, paginate=2)
    async def list_all() -> list[dict]:
        """All."""
        return [{"id": i} for i in range(5)]

    return MCPFusion("notes", tools=[notes]).build_app()


def test_an_invalid_cursor_is_a_400_on_post_and_get():
    client = TestClient(_notes_app())
    for sent in (client.post("/api/notes/list_all", json={"cursor": "abc"}),
                 client.get("/api/notes/list_all", params={"cursor": "abc"})):
        assert sent.status_code == 400, sent.text
        body = sent.json()
        assert body["code"] == "INVALID_CURSOR" and body["type"] == "urn:mcpfusion:error:INVALID_CURSOR"
        assert body["status"] == 400 and body["title"] == "Bad Request"
        assert "no cursor" in body["recovery"]


def test_an_expired_cursor_is_a_400(monkeypatch):
    client = TestClient(_notes_app())
    cursor = client.post("/api/notes/list_all", json={}).headers["next-cursor"]
    later = pagination_module.time.time() + 3601  # the default lifetime is an hour
    monkeypatch.setattr(pagination_module.time, "time", lambda: later)
    for sent in (client.post("/api/notes/list_all", json={"cursor": cursor}),
                 client.get("/api/notes/list_all", params={"cursor": cursor})):
        assert sent.status_code == 400, sent.text
        assert sent.json()["code"] == "CURSOR_EXPIRED" and sent.json()["status"] == 400


def test_the_openapi_document_says_a_cursor_is_a_400_not_a_404():
    responses = TestClient(_notes_app()).get("/openapi.json").json()["paths"]["/api/notes/list_all"]["post"][
        "responses"]
    assert "INVALID_CURSOR" in responses["400"]["description"] and "CURSOR_EXPIRED" in responses["400"]["description"]
    assert "cursor" not in responses["404"]["description"]


async def test_the_reference_service_answers_a_bad_cursor_with_400(tmp_path):
    app = build(tmp_path)
    async with app.router.lifespan_context(app), asgi_client(app) as client:
        sent = await rest(client, "billing", "list_invoices", {"cursor": "abc"}, "demo-admin")
    assert sent.status_code == 400 and sent.json()["code"] == "INVALID_CURSOR", sent.text


# -- 2. an embedded child's limit cut is a Truncated-Embedded header -------------------------------------------


class _View(ResponseView):
    """A response view that carries the embedded cuts as the presenter is to expose them."""


def _cut_response(cuts: dict[str, tuple[int, int, int]] | None) -> ToolResponse:
    view = _View(data={"id": "o1", "lines": [{"sku": "A"}]})
    setattr(view, EMBEDDED_CUTS, cuts)
    return ToolResponse(['{"id":"o1","lines":[{"sku":"A"}]}'], view=view)


def test_an_embedded_cut_is_said_in_a_truncated_embedded_header():
    sent = rest_body(_cut_response({"lines": (1, 3, 7), "lines.notes": (2, 1, 1)}))
    assert sent.status_code == 200
    assert sent.headers["truncated-embedded"] == \
        '"lines"; limit=1; items=3; hidden=7, "lines.notes"; limit=2; items=1; hidden=1'
    assert "truncated" not in sent.headers  # the object itself was not cut


def test_an_embedded_key_any_header_can_carry():
    sent = rest_body(_cut_response({'a "b" \\ c': (1, 1, 1), "líneas\n": (1, 1, 2)}))
    assert sent.headers["truncated-embedded"] == \
        '"a \\"b\\" \\\\ c"; limit=1; items=1; hidden=1, %"l%c3%adneas%0a"; limit=1; items=1; hidden=2'


def test_no_embedded_cut_no_header():
    assert "truncated-embedded" not in rest_body(_cut_response(None)).headers
    assert "truncated-embedded" not in rest_body(_cut_response({})).headers


def _shop_app() -> Any:
    line = Presenter("line").schema({"sku": str}).limit(1)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    shop = Tool("shop")

    @shop.action(readonly=True, returns=order)
    async def get_order(id: str) -> dict:
        """One order."""
        return {"id": id, "lines": [{"sku": "A"}, {"sku": "B"}, {"sku": "C"}]}

    @shop.action(readonly=True, returns=line)
    async def list_lines() -> list[dict]:
        """Lines."""
        return [{"sku": "A"}, {"sku": "B"}, {"sku": "C"}]

    @shop.action(readonly=True, returns=Presenter("plain").schema({"id": str}))
    async def plain() -> dict:
        """Plain."""
        return {"id": "p"}

    return MCPFusion("shop", tools=[shop]).build_app()


def test_the_openapi_document_lists_the_cut_headers_an_action_may_send():
    paths = TestClient(_shop_app()).get("/openapi.json").json()["paths"]
    ok = {name: paths[f"/api/shop/{name}"]["post"]["responses"]["200"] for name in ("get_order", "list_lines", "plain")}
    assert set(ok["get_order"]["headers"]) == {"Truncated-Embedded"}
    assert set(ok["list_lines"]["headers"]) == {"Truncated"}
    assert "headers" not in ok["plain"]


def test_a_top_level_limit_cut_keeps_its_truncated_header():
    sent = TestClient(_shop_app()).post("/api/shop/list_lines", json={})
    assert sent.headers["truncated"] == "shown=1, total=3, unit=rows"
    assert "truncated-embedded" not in sent.headers
