"""Generated tool documentation: a manifest (JSON/TOON), an HTML page, routes and a static export.

    from mcpfusion.docs import add_docs_routes, export_site
    add_docs_routes(app, registry)                 # /tools, /tools.json, /tools.toon, /tools/static/*
    export_site(fusion, "site/", base_url="https://api.example.com")

The names are imported on first use (PEP 562): `build_app()` adds the routes, whose handlers load the
manifest and the page (samples, token counts, the export) when the docs are first asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .export import export_site
    from .manifest import build_manifest, manifest_toon
    from .page import render_page
    from .routes import add_docs_routes

__all__ = ["add_docs_routes", "build_manifest", "export_site", "manifest_toon", "render_page"]

_HOME = {"add_docs_routes": "routes", "build_manifest": "manifest", "export_site": "export",
         "manifest_toon": "manifest", "render_page": "page"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
