"""Static export: the same site as files (`index.html`, `tools.json`, `tools.toon`, `static/`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..dispatch import ToolRegistry
from ..tool import Tool
from . import assets
from .manifest import DEFAULT_BASE_URL, build_manifest, manifest_toon, raw_descriptors
from .page import render_page


def as_registry(source: Any) -> ToolRegistry:
    """A ToolRegistry from an MCPFusion (its `.registry`), a FastAPI app it mounted, a registry, or tools."""
    if isinstance(source, ToolRegistry):
        return source
    registry = getattr(source, "registry", None)
    if isinstance(registry, ToolRegistry):
        return registry
    fusion = getattr(getattr(source, "state", None), "mcpfusion", None)  # a FastAPI app MCPFusion.mount set up
    if fusion is not None:
        return as_registry(fusion)
    if isinstance(source, Iterable):
        tools = list(source)
        if all(isinstance(t, Tool) for t in tools):
            return ToolRegistry(tools)
    raise TypeError(f"cannot document {type(source).__name__}: pass an MCPFusion, its app, a ToolRegistry or tools")


def serves_rest(source: Any) -> bool:
    """Whether the app serves the tools' REST routes: False for an MCPFusion (or its app) mounted with
    `rest=False`; True for anything else (an MCPFusion not mounted yet, a registry, tools: REST by default)."""
    fusion = getattr(getattr(source, "state", None), "mcpfusion", None) or source
    return getattr(fusion, "rest_routes", True) is not False


# host[:port] of an http(s) URL: a name, an IPv4 or a bracketed IPv6 address (it goes into the page's CSP).
_NETLOC = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                     r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
_PATH = re.compile(r"[A-Za-z0-9._~/%-]*")


def check_base_url(base_url: str) -> str:
    """`base_url` without its trailing slash, or ValueError unless it is an http(s) URL of a host (and path):
    it is written into the page's Content-Security-Policy and into the try-it forms' target."""
    parts = urlsplit(base_url.strip())
    if (parts.scheme not in ("http", "https") or not _NETLOC.fullmatch(parts.netloc)
            or not _PATH.fullmatch(parts.path) or parts.query or parts.fragment):
        raise ValueError(f"--base-url {base_url!r} is not an http(s) URL of the server, "
                         "e.g. https://api.example.com or http://127.0.0.1:8000")
    return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")


def export_site(source: Any, out_dir: str | Path, *, base_url: str = DEFAULT_BASE_URL,
                title: str | None = None) -> list[Path]:
    """Write the docs site to `out_dir`; the try-it forms and curl examples target `base_url`.

    Note: a page opened from disk (or another origin) calling `base_url` needs CORS allowed by that server;
    the page says so. ValueError for a `base_url` that is not an http(s) URL.
    """
    base_url = check_base_url(base_url)
    registry = as_registry(source)
    name = title or getattr(source, "title", None) or getattr(source, "name", None) or "Tools"
    manifest = build_manifest(registry, title=name, curl_base=base_url, raw_tools=raw_descriptors(source),
                              rest=serves_rest(source))
    out = Path(out_dir)
    (out / "static").mkdir(parents=True, exist_ok=True)
    files = {
        out / "index.html": render_page(manifest, asset_prefix="static/", manifest_href="tools", api_base=base_url),
        out / "tools.json": json.dumps(manifest, ensure_ascii=False, indent=2, default=str),
        out / "tools.toon": manifest_toon(manifest),
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    for asset in assets.MEDIA_TYPES:
        (out / "static" / asset).write_bytes(assets.read(asset))
    return [*files, *(out / "static" / a for a in assets.MEDIA_TYPES)]
