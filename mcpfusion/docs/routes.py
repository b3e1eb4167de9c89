"""`/tools` (HTML), `/tools.json`, `/tools.toon` and `/tools/static/*` on a FastAPI app.

The manifest and the page (samples, token counts, HTML) are imported by the first request for them: adding
the routes is part of every `build_app()`, reading the docs is not."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from ..dispatch import ToolRegistry
from . import assets

HostCheck = Callable[[str | None, str | None], tuple[int, str] | None]  # as mcpfusion.rest.HostCheck
RawTools = Callable[[], Iterable[dict[str, Any]]]  # the raw tools' tools/list entries, read on each request


class _ManifestCache:
    """The manifest is built once per set of tools (building it counts tokens); each request only re-aims
    the curl examples at the URL it came in on, so a stream of odd Host headers costs nothing."""

    def __init__(self, registry: ToolRegistry, title: str, raw_tools: RawTools | None = None,
                 rest: bool = True) -> None:
        self.registry = registry
        self.title = title
        self.raw_tools = raw_tools or (lambda: [])
        self.rest = rest
        self._lock = threading.Lock()
        self._built: tuple[Any, dict[str, Any]] | None = None

    def _state(self, raw: list[dict[str, Any]]) -> Any:
        # The raw tools' entries themselves (compared by identity first: cheap while nothing changed).
        return tuple((t.name, tuple(t.actions)) for t in self.registry.tools.values()), tuple(raw)

    def get(self, curl_base: str) -> dict[str, Any]:
        from .manifest import DEFAULT_BASE_URL, build_manifest, rebase

        raw = list(self.raw_tools())
        state = self._state(raw)
        with self._lock:
            if self._built is None or self._built[0] != state:
                self._built = (state, build_manifest(self.registry, title=self.title, curl_base=DEFAULT_BASE_URL,
                                                     raw_tools=raw, rest=self.rest))
            manifest = self._built[1]
        return rebase(manifest, curl_base)




def _server_url(request: Request) -> str:
    """Where this app answers: scheme, host and the root path it is mounted under (a Starlette `Mount`'s
    prefix included, which `request.base_url` leaves out), so a curl example reaches the REST route."""
    url = request.url
    root: str = request.scope.get("root_path", "")
    return f"{url.scheme}://{url.netloc}{root.rstrip('/')}"


# Every response of the docs pages is read as the type it says (a browser sniffing a manifest or an asset as HTML
# would run what a description put there).
NOSNIFF = {"X-Content-Type-Options": "nosniff"}


def openapi_link(app: FastAPI, root: str) -> dict[str, str]:
    """The page's link to the app's OpenAPI UI (Swagger, else ReDoc): none when the app serves neither, or no
    OpenAPI schema for them to show (`openapi_url=None`: both pages are then 404s)."""
    ui = app.docs_url or app.redoc_url
    return {"OpenAPI": root + ui} if ui and app.openapi_url else {}


def add_docs_routes(app: FastAPI, registry: ToolRegistry, *, path: str = "/tools", title: str | None = None,
                    host_check: HostCheck | None = None, raw_tools: RawTools | None = None,
                    rest: bool = True) -> None:
    """Serve the generated tool docs at `path` (HTML), `path.json`, `path.toon` and `path/static/…`.

    `raw_tools` gives the tools/list entries of the server's raw tools (read on each request: they may be
    added later), documented beside the tools. Without `rest` (the app serves no REST routes) the page offers
    no curl example and no try-it form.

    The page links its assets and manifests relatively, so it also works under a mount prefix. The curl
    examples are aimed at the URL the request came in on, so with `host_check` (the MCP endpoint's
    DNS-rebinding guard) a Host `/mcp` refuses is refused here too (421): no example that carries a bearer
    token is ever aimed at a host the server does not answer as.
    """
    path = "/" + path.strip("/")
    leaf = path.rsplit("/", 1)[-1]
    cache = _ManifestCache(registry, title or app.title, raw_tools, rest)

    def manifest_for(request: Request) -> dict[str, Any]:
        """The manifest aimed at the request's URL, or `HTTPException` 421 for a Host the server refuses."""
        refusal = host_check(request.headers.get("host"), None) if host_check is not None else None
        if refusal is not None:  # Origin is not checked: the page and manifests are read-only and not CORS-shared
            raise HTTPException(*refusal)
        return cache.get(_server_url(request))

    # sync endpoints: FastAPI runs them in its thread pool, so a first (token-counting) build never blocks the loop.
    # They read `q` and `name` from the request rather than as typed parameters: a parameter makes FastAPI import
    # `pydantic.v1` when the route is added (~35 ms of a server's start-up), for two plain strings.
    def page(request: Request) -> HTMLResponse:
        from .page import _csp, render_page

        q = request.query_params.get("q", "")
        root = request.scope.get("root_path", "").rstrip("/")
        links = openapi_link(app, root)
        html = render_page(manifest_for(request), asset_prefix=f"{leaf}/static/", manifest_href=leaf,
                           api_base=root, query=q, links=links)
        # The page's policy (its <meta> too, for a saved copy) as a header, where browsers obey frame-ancestors:
        # no site frames the page whose try-it forms take a bearer token (clickjacking); X-Frame-Options for
        # browsers without CSP frame-ancestors.
        return HTMLResponse(html, headers={"Content-Security-Policy": f"{_csp(root)}; frame-ancestors 'none'",
                                           "X-Frame-Options": "DENY", **NOSNIFF})

    def manifest_json(request: Request) -> Response:
        body = json.dumps(manifest_for(request), ensure_ascii=False, indent=2, default=str)
        return Response(body, media_type="application/json", headers=NOSNIFF)

    def manifest_in_toon(request: Request) -> Response:
        from .manifest import manifest_toon

        return Response(manifest_toon(manifest_for(request)), media_type="text/plain; charset=utf-8", headers=NOSNIFF)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            content = assets.read(name)
        except KeyError:
            raise HTTPException(404, f"No docs asset {name!r}.") from None
        return Response(content, media_type=assets.MEDIA_TYPES[name],
                        headers={"Cache-Control": "public, max-age=300", **NOSNIFF})

    app.add_api_route(path, page, methods=["GET", "HEAD"], include_in_schema=False, response_class=HTMLResponse)
    app.add_api_route(f"{path}.json", manifest_json, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_api_route(f"{path}.toon", manifest_in_toon, methods=["GET", "HEAD"], include_in_schema=False)
    app.add_api_route(f"{path}/static/{{name}}", static, methods=["GET", "HEAD"], include_in_schema=False)
