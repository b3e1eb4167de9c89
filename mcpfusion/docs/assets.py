"""The page's own static files (CSS and JS), shipped inside the package: nothing comes from a CDN."""

from __future__ import annotations

from importlib import resources

MEDIA_TYPES = {"docs.css": "text/css; charset=utf-8", "docs.js": "text/javascript; charset=utf-8"}


def read(name: str) -> bytes:
    """One asset by file name; KeyError for anything that is not one of ours (no path traversal)."""
    if name not in MEDIA_TYPES:
        raise KeyError(name)
    return resources.files(__package__).joinpath("static", name).read_bytes()
