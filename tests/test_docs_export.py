"""Static export: the same site as files, with try-it forms and curl examples aimed at a configurable URL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import toon_format

from app.main import create_fusion
from app.settings import Settings
from mcpfusion import ToolRegistry
from mcpfusion.docs import assets, build_manifest, export_site, render_page
from tests.browser.sample_app import TOOLS, build_app, build_fusion


def test_export_writes_the_site(tmp_path):
    fusion = build_fusion()
    written = export_site(fusion, tmp_path / "site", base_url="https://api.example.com/")
    names = sorted(p.relative_to(tmp_path / "site").as_posix() for p in written)
    assert names == ["index.html", "static/docs.css", "static/docs.js", "tools.json", "tools.toon"]
    html = (tmp_path / "site" / "index.html").read_text()
    assert 'data-api-base="https://api.example.com"' in html
    assert "connect-src &#x27;self&#x27; https://api.example.com;" in html
    assert 'href="static/docs.css"' in html and 'href="tools.json"' in html
    manifest = json.loads((tmp_path / "site" / "tools.json").read_text())
    assert manifest["title"] == "Docs test service"
    assert toon_format.decode((tmp_path / "site" / "tools.toon").read_text()) == manifest
    assert all("https://api.example.com/api/" in a["examples"]["curl"] for t in manifest["tools"] for a in t["actions"])
    assert (tmp_path / "site" / "static" / "docs.js").read_bytes() == assets.read("docs.js")


def test_export_is_the_served_page_with_another_api_base(tmp_path):
    base = "http://127.0.0.1:8000"
    export_site(build_fusion(), tmp_path, base_url=base)
    manifest = build_manifest(build_fusion().registry, title="Docs test service", curl_base=base)
    expected = render_page(manifest, asset_prefix="static/", manifest_href="tools", api_base=base)
    assert (tmp_path / "index.html").read_text() == expected
    assert json.loads((tmp_path / "tools.json").read_text()) == json.loads(json.dumps(manifest))


def test_export_accepts_an_app_a_registry_or_tools_and_rejects_anything_else(tmp_path):
    export_site(ToolRegistry(TOOLS), tmp_path / "a")
    export_site(TOOLS, tmp_path / "b", title="Mine")
    assert "<title>Mine · tool documentation</title>" in (tmp_path / "b" / "index.html").read_text()
    export_site(build_app(), tmp_path / "d")  # a FastAPI app that MCPFusion.mount set up
    assert "<title>Docs test service · tool documentation</title>" in (tmp_path / "d" / "index.html").read_text()
    with pytest.raises(TypeError, match="MCPFusion, its app, a ToolRegistry or tools"):
        export_site(42, tmp_path / "c")


def test_cli_docs_exports_the_reference_service(tmp_path):
    """`mcpfusion docs app.main:app --out DIR` writes every action of the reference service."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "MCPFUSION_DB_PATH": str(tmp_path / "db.sqlite3")}
    out = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "docs", "app.main:app", "--out", str(out),
                           "--base-url", "http://127.0.0.1:8765"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "tools.json").read_text())
    html = (out / "index.html").read_text()
    registry = create_fusion(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.sqlite3'}")).registry
    assert [t["name"] for t in manifest["tools"]] == list(registry.tools)
    for action in registry.actions():
        assert f'id="action-{action.tool.name}-{action.name}"' in html
    assert 'data-api-base="http://127.0.0.1:8765"' in html


def test_export_replaces_its_own_site_and_keeps_a_folders_other_files(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "notes.txt").write_text("mine")
    export_site(build_fusion(), site)
    first = (site / "index.html").read_text()
    (site / "tools.json").write_text("{}")  # a file of the site's, changed: still the export's site
    written = export_site(build_fusion(), site, base_url="https://api.example.com")
    assert len(written) == 5 and (site / "index.html").read_text() != first
    assert json.loads((site / "tools.json").read_text())["title"] == "Docs test service"
    assert (site / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("own", ["index.html", "tools.json", "static/docs.css"])
def test_export_never_writes_over_files_it_did_not_write(tmp_path, own):
    site = tmp_path / "site"
    (site / "static").mkdir(parents=True)
    (site / own).write_text("<h1>my own page</h1>")
    with pytest.raises(FileExistsError, match=own.replace(".", r"\.")):
        export_site(build_fusion(), site)
    assert (site / own).read_text() == "<h1>my own page</h1>"
    assert sorted(p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()) == [own]
    export_site(build_fusion(), site, overwrite=True)  # asked for: written over
    assert "Generated by mcpfusion" in (site / "index.html").read_text()
    assert (site / own).read_text() != "<h1>my own page</h1>"
