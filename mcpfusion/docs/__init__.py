"""Generated tool documentation: a manifest (JSON/TOON), an HTML page, routes and a static export.

    from mcpfusion.docs import add_docs_routes, export_site
    add_docs_routes(app, registry)                 # /tools, /tools.json, /tools.toon, /tools/static/*
    export_site(fusion, "site/", base_url="https://api.example.com")
"""

from .export import export_site
from .manifest import build_manifest, manifest_toon
from .page import render_page
from .routes import add_docs_routes

__all__ = ["add_docs_routes", "build_manifest", "export_site", "manifest_toon", "render_page"]
