"""Generated tool docs (/tools, /tools.json, /tools.toon): a failing presenter callback's text stays in the
server log; raw tools are documented; `mount(rest=False)` offers no REST example; no "None encoding" without
the tokens extra; a pattern + length parameter gets an example; no OpenAPI link to a 404."""

from __future__ import annotations

import json
import logging
import re
from typing import Annotated

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import Field

from mcpfusion import MCPFusion, Presenter, Tool, tokens
from mcpfusion.docs import build_manifest, economy, render_page
from mcpfusion.docs.manifest import raw_descriptors
from mcpfusion.docs.samples import arguments, pattern_example

SECRET = "postgresql://u:pw@db/x"


def notes_tool() -> Tool:
    notes = Tool("notes", description="Notes")

    @notes.action(readonly=True)
    async def search(text: str) -> list[str]:
        """Search notes."""
        return [text]

    return notes


# -- 1. a failing callback's text never reaches the docs ----------------------------------------------------

def failing_app() -> FastAPI:
    def boom(item: dict[str, str]) -> None:
        raise RuntimeError(f"needs the database: {SECRET}")

    view = Presenter("row").schema({"id": str, "a": str, "b": str, "c": str}).ui(boom).limit(3)
    t = Tool("t", select=True)

    @t.action(readonly=True, returns=view)
    async def rows() -> list[dict[str, str]]:
        """Rows."""
        return []

    return MCPFusion("x", tools=[t]).build_app()


def test_callback_error_text_is_logged_not_published(caplog: pytest.LogCaptureFixture) -> None:
    client = TestClient(failing_app())
    with caplog.at_level(logging.WARNING, logger="mcpfusion.docs"):
        page = client.get("/tools").text
    published = [page, client.get("/tools.json").text, client.get("/tools.toon").text]
    assert all("pw@db" not in text and "needs the database" not in text for text in published)
    presenter = client.get("/tools.json").json()["tools"][0]["actions"][0]["presenters"][0]
    assert presenter["sample_error"].startswith("RuntimeError")
    assert "could not be sampled: RuntimeError" in page
    assert any(SECRET in (r.exc_text or "") for r in caplog.records)  # the operator still sees why


def test_token_sample_error_is_the_class_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError(f"needs the database: {SECRET}")

    action = next(iter(notes_tool().actions.values()))
    action.presenter = Presenter("p").schema({"id": str})
    monkeypatch.setattr(economy, "sample_item", boom)
    assert economy.action_economy(action) == {"select": None, "limit": None,
                                              "error": "RuntimeError (details in the server log)"}


# -- 2. raw tools are on the docs -------------------------------------------------------------------------

def raw_fusion() -> MCPFusion:
    fusion = MCPFusion("svc", tools=[notes_tool()])

    @fusion.raw_tool("thumbnail", description="A thumbnail of an image", annotations={"readOnlyHint": True},
                     input_schema={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]})
    async def thumbnail(id: str) -> str:
        return f"thumbnail of {id}"

    return fusion


def test_raw_tools_are_documented() -> None:
    fusion = raw_fusion()
    client = TestClient(fusion.build_app())
    manifest = client.get("/tools.json").json()
    (raw,) = manifest["raw_tools"]
    assert raw["name"] == "thumbnail" and raw["description"] == "A thumbnail of an image"
    assert raw["annotations"] == {"readOnlyHint": True}
    assert raw["input_schema"]["required"] == ["id"] and raw["example_arguments"] == {"id": "id_1"}
    assert raw["examples"]["mcp"]["params"] == {"name": "thumbnail", "arguments": {"id": "id_1"}}
    page = client.get("/tools").text
    assert 'id="raw-thumbnail"' in page and 'href="#raw-thumbnail"' in page and "A thumbnail of an image" in page
    assert "thumbnail" in client.get("/tools.toon").text and manifest["rest"] is True


def test_raw_tool_added_after_the_first_read_is_documented() -> None:
    fusion = raw_fusion()
    client = TestClient(fusion.build_app())
    assert [r["name"] for r in client.get("/tools.json").json()["raw_tools"]] == ["thumbnail"]

    @fusion.raw_tool("later")
    async def later(n: int) -> str:
        """Added later."""
        return str(n)

    assert [r["name"] for r in client.get("/tools.json").json()["raw_tools"]] == ["thumbnail", "later"]
    fusion.remove_raw_tool("thumbnail")
    assert [r["name"] for r in client.get("/tools.json").json()["raw_tools"]] == ["later"]


def test_raw_tools_search_and_export_helper() -> None:
    fusion = raw_fusion()
    client = TestClient(fusion.build_app())
    found = client.get("/tools?q=thumb").text
    assert re.search(r'<article class="action raw" id="raw-thumbnail"[^>]*data-keys="thumbnail">', found)
    assert re.search(r'<section class="tool" id="tool-notes"[^>]* hidden>', found)
    assert re.search(r'<article class="action raw" id="raw-thumbnail"[^>]* hidden>', client.get("/tools?q=note").text)
    # The static export's manifest takes them from the fusion or its app.
    assert [d["name"] for d in raw_descriptors(fusion)] == [d["name"] for d in raw_descriptors(fusion.app)]
    manifest = build_manifest(fusion.registry, raw_tools=raw_descriptors(fusion))
    assert "raw-thumbnail" in render_page(manifest)


def test_the_exported_site_documents_raw_tools(tmp_path) -> None:
    from mcpfusion.docs.export import export_site

    for source in (raw_fusion(), raw_fusion().build_app()):  # `mcpfusion docs` takes the fusion or its app
        out = tmp_path / str(id(source))
        export_site(source, out)
        manifest = json.loads((out / "tools.json").read_text())
        assert [d["name"] for d in manifest["raw_tools"]] == ["thumbnail"]
        assert "raw-thumbnail" in (out / "index.html").read_text()


# -- 3. rest=False: no REST example, no try-it form --------------------------------------------------------

def test_rest_false_offers_no_rest_route() -> None:
    app = FastAPI()
    MCPFusion("notes", tools=[notes_tool()]).mount(app, rest=False)
    client = TestClient(app)
    page = client.get("/tools").text
    assert '<form class="tryit' not in page and "curl -X POST" not in page and "/api/notes/search" not in page
    action = client.get("/tools.json").json()["tools"][0]["actions"][0]
    assert action["rest_path"] is None and action["examples"]["curl"] is None
    assert action["examples"]["mcp"]["params"]["name"] == "notes"
    assert client.post("/api/notes/search", json={"text": "x"}).status_code == 404


def test_rest_true_keeps_the_try_it_form() -> None:
    app = FastAPI()
    MCPFusion("notes", tools=[notes_tool()]).mount(app)
    page = TestClient(app).get("/tools").text
    assert 'data-path="/api/notes/search"' in page and "curl -X POST" in page


# -- 4. without the tokens extra ---------------------------------------------------------------------------

def test_no_tokens_extra_names_no_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "enabled", lambda: False)
    client = TestClient(MCPFusion("x", tools=[notes_tool()]).build_app())
    page = client.get("/tools").text
    assert "None" not in re.sub(r"\s+", " ", page.split('<section class="overview">')[1].split("</p>")[0])
    assert "Token counts need the tokens extra" in page
    assert client.get("/tools.json").json()["token_encoding"] is None


# -- 5. pattern + lengths -----------------------------------------------------------------------------------

def test_pattern_example_grows_to_the_lengths() -> None:
    assert pattern_example(r"^[A-Z]+$", 3, 3) == "AAA"
    assert pattern_example(r"^[A-Z]{2}-[0-9]+$", 6) == "AA-000"
    assert pattern_example(r"^(ab)+$", 4, 4) == "abab"
    assert pattern_example(r"^[A-Z]", 3, 3) == "AAA"
    assert pattern_example(r"^(ab)+$", 3, 3) is None  # no string fits: none rather than a wrong one


def test_required_pattern_length_parameter_is_in_the_examples() -> None:
    geo = Tool("geo")

    @geo.action(readonly=True)
    async def currency(code: Annotated[str, Field(pattern=r"^[A-Z]+$", min_length=3, max_length=3)]) -> str:
        """Currency name."""
        return code

    client = TestClient(MCPFusion("geo", tools=[geo]).build_app())
    action = client.get("/tools.json").json()["tools"][0]["actions"][0]
    assert action["example_arguments"] == {"code": "AAA"} and action["example_missing"] == []
    assert action["examples"]["mcp"]["params"]["arguments"]["code"] == "AAA"
    assert client.post("/api/geo/currency", json=action["example_arguments"]).status_code == 200


def test_a_required_parameter_without_example_is_named() -> None:
    t = Tool("t")

    @t.action(readonly=True)
    async def odd(code: Annotated[str, Field(pattern=r"^(ab)+$", min_length=3, max_length=3)]) -> str:
        """Impossible."""
        return code

    schema = t.actions["odd"].input_schema
    assert arguments(schema) == {}
    client = TestClient(MCPFusion("t", tools=[t]).build_app())
    action = client.get("/tools.json").json()["tools"][0]["actions"][0]
    assert action["example_missing"] == ["code"]
    assert re.search(r'class="muted example-missing">[^<]*<code>code</code>', client.get("/tools").text)


# -- 6. OpenAPI link -----------------------------------------------------------------------------------------

def openapi_links(app: FastAPI) -> tuple[TestClient, list[str]]:
    MCPFusion("notes", tools=[notes_tool()]).mount(app)
    client = TestClient(app)
    return client, re.findall(r'<a href="([^"#]*)"[^>]*>\s*OpenAPI', client.get("/tools").text)


@pytest.mark.parametrize("kwargs", [{}, {"docs_url": None}, {"openapi_url": None},
                                    {"docs_url": None, "redoc_url": "/api-ref"}, {"docs_url": None, "redoc_url": None}])
def test_openapi_link_never_a_404(kwargs: dict[str, str | None]) -> None:
    client, links = openapi_links(FastAPI(**kwargs))  # type: ignore[arg-type]
    assert all(client.get(link).status_code == 200 for link in links)
    assert bool(links) == (kwargs.get("openapi_url", "/openapi.json") is not None
                           and any(kwargs.get(k, "/") is not None for k in ("docs_url", "redoc_url")))
