"""Content an action answers beside (or instead of) its text blocks: images, audio, embedded resources (a
text or binary document with its MIME type) and links to resources of the server.

    @billing.action(readonly=True, content_types=["application/pdf"])
    async def invoice_pdf(id: str) -> EmbeddedResource:
        return document(render_pdf(id), "application/pdf", uri=f"invoice://{id}")

    return attach(invoice, image(chart_png))          # presented data, then the image

On MCP these are content blocks after the text blocks (base64 for binary data). On REST one binary item is
answered with its own media type; anything mixed is a JSON envelope `{"data": ..., "content": [...]}` whose
items have the MCP shapes. Before anything leaves, `check()` enforces the size limit and that the bytes are
what their MIME type says (a PNG declared as JPEG, or an executable declared as an image, is refused).
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .slots import FACTORY, Frozen

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
"""Largest image, audio clip or document an action may send (`MCPFusion(max_content_bytes=...)`)."""

# Magic numbers of the formats whose declared type is checked against their bytes.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
    (b"\xff\xfb", "audio/mpeg"),
    (b"\xff\xf3", "audio/mpeg"),
    (b"PK\x03\x04", "application/zip"),
    (b"MZ", "application/x-msdownload"),
    (b"\x7fELF", "application/x-executable"),
)
_TEXT_IMAGES = frozenset({"image/svg+xml"})
_ALIASES = {"image/jpg": "image/jpeg", "audio/mp3": "audio/mpeg", "audio/x-wav": "audio/wav",
            "audio/wave": "audio/wav"}


def sniff(data: bytes) -> str | None:
    """The MIME type the bytes themselves announce, when they start with a known signature."""
    if data[:4] == b"RIFF" and data[8:12] in (b"WEBP", b"WAVE"):
        return "image/webp" if data[8:12] == b"WEBP" else "audio/wav"
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    return None


def _normal(mime: str) -> str:
    mime = mime.split(";", 1)[0].strip().lower()
    return _ALIASES.get(mime, mime)


def _set(obj: Frozen, **fields: Any) -> None:
    """Fill a frozen instance's fields (its own `__setattr__` refuses)."""
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


class ContentError(ValueError):
    """Content that may not leave: too large, or not what its MIME type says. The message is self-healing."""


class Content:
    """Base of the content helpers; `kind` is the MCP content type. The helpers are plain classes that behave
    as frozen slotted dataclasses (`slots.Frozen`): the decorator would compile their methods at import."""

    __slots__ = ()
    kind = "content"

    def to_mcp(self) -> dict[str, Any]:
        raise NotImplementedError

    def payload(self) -> bytes:
        """The bytes REST answers for this item alone."""
        raise NotImplementedError

    @property
    def media_type(self) -> str:
        raise NotImplementedError

    def check(self, max_bytes: int, allowed: frozenset[str] | None = None) -> None:
        """Refuse content that is larger than `max_bytes`, or not of its declared (or an allowed) type."""


class _Binary(Content, Frozen):
    __slots__ = ("data", "mime_type", "annotations")
    __match_args__ = _fields = ("data", "mime_type", "annotations")
    data: bytes
    mime_type: str
    annotations: dict[str, Any] | None

    def __init__(self, data: bytes, mime_type: str, annotations: dict[str, Any] | None = None) -> None:
        _set(self, data=data, mime_type=mime_type, annotations=annotations)

    def to_mcp(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": self.kind, "data": base64.b64encode(self.data).decode("ascii"),
                                 "mimeType": self.mime_type}
        if self.annotations:
            block["annotations"] = self.annotations
        return block

    def payload(self) -> bytes:
        return self.data

    @property
    def media_type(self) -> str:
        return self.mime_type

    def check(self, max_bytes: int, allowed: frozenset[str] | None = None) -> None:
        _check_bytes(self.kind, self.data, self.mime_type, max_bytes, allowed, family=self.kind)


class Image(_Binary):
    """An image (`image/png`, `image/jpeg`, ...), sent base64-encoded."""

    __slots__ = ()
    kind = "image"


class Audio(_Binary):
    """An audio clip (`audio/wav`, `audio/mpeg`, ...), sent base64-encoded."""

    __slots__ = ()
    kind = "audio"


class EmbeddedResource(Content, Frozen):
    """A document inside the result: `text` (with its MIME type) or binary `blob`, under a resource `uri`."""

    __slots__ = ("uri", "mime_type", "text", "blob", "annotations")
    __match_args__ = _fields = ("uri", "mime_type", "text", "blob", "annotations")
    uri: str
    mime_type: str
    text: str | None
    blob: bytes | None
    annotations: dict[str, Any] | None

    kind = "resource"

    def __init__(self, uri: str, mime_type: str, text: str | None = None, blob: bytes | None = None,
                 annotations: dict[str, Any] | None = None) -> None:
        _set(self, uri=uri, mime_type=mime_type, text=text, blob=blob, annotations=annotations)
        if (text is None) == (blob is None):
            raise TypeError("EmbeddedResource takes exactly one of text= or blob=")

    def to_mcp(self) -> dict[str, Any]:
        resource: dict[str, Any] = {"uri": self.uri, "mimeType": self.mime_type}
        if self.text is not None:
            resource["text"] = self.text
        else:
            resource["blob"] = base64.b64encode(self.blob or b"").decode("ascii")
        block: dict[str, Any] = {"type": "resource", "resource": resource}
        if self.annotations:
            block["annotations"] = self.annotations
        return block

    def payload(self) -> bytes:
        return self.blob if self.blob is not None else (self.text or "").encode()

    @property
    def media_type(self) -> str:
        return self.mime_type

    def check(self, max_bytes: int, allowed: frozenset[str] | None = None) -> None:
        _check_bytes("document", self.payload(), self.mime_type, max_bytes, allowed,
                     family=None if self.blob is not None else "text")


class ResourceLink(Content, Frozen):
    """A link to a resource (or an instance of a resource template) the client can read with resources/read."""

    __slots__ = ("uri", "name", "mime_type", "title", "description", "size", "extra")
    __match_args__ = _fields = ("uri", "name", "mime_type", "title", "description", "size", "extra")
    uri: str
    name: str
    mime_type: str | None
    title: str | None
    description: str | None
    size: int | None
    extra: dict[str, Any]

    def __init__(self, uri: str, name: str, mime_type: str | None = None, title: str | None = None,
                 description: str | None = None, size: int | None = None,
                 extra: dict[str, Any] = FACTORY) -> None:
        _set(self, uri=uri, name=name, mime_type=mime_type, title=title, description=description, size=size,
             extra={} if extra is FACTORY else extra)  # a new dict each, as the dataclass's default_factory

    kind = "resource_link"

    def to_mcp(self) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        for key, value in (("mimeType", self.mime_type), ("title", self.title),
                           ("description", self.description), ("size", self.size)):
            if value is not None:
                block[key] = value
        return {**block, **self.extra}

    def payload(self) -> bytes:
        raise ContentError("a resource link has no bytes of its own")

    @property
    def media_type(self) -> str:
        return "application/json"


ContentSource = Content | Callable[[Any], Content]


class Attached(Frozen):
    """Data to present plus content blocks to send after it (`attach(data, *content)`)."""

    __slots__ = ("data", "content", "data_block")
    __match_args__ = _fields = ("data", "content", "data_block")
    data: Any
    content: tuple[ContentSource, ...]
    data_block: bool

    def __init__(self, data: Any, content: tuple[ContentSource, ...], data_block: bool = True) -> None:
        _set(self, data=data, content=content, data_block=data_block)

    def build(self, presented: Any) -> tuple[Content, ...]:
        """The content blocks; a callable source is given the data *as presented* (after redaction)."""
        built = tuple(item(presented) if not isinstance(item, Content) else item for item in self.content)
        for item in built:
            if not isinstance(item, Content):
                raise TypeError(f"an attach() callable returned {type(item)!r}, not a content helper")
        return built


def attach(data: Any, *content: ContentSource, data_block: bool = True) -> Attached:
    """Return `data` as usual (presented, or wrapped) with `content` after its text blocks.

    A content item may be a function of the presented data (after the schema firewall, `_select` and
    redaction): a document drawn from it can never carry a value the agent may not see. With
    `data_block=False` only the content is sent (the data is still presented, to build it)."""
    for item in content:
        if not isinstance(item, Content) and not callable(item):
            raise TypeError(f"attach() takes content helpers (image, audio, document, link), not {type(item)!r}")
    return Attached(data, content, data_block)


_Item = TypeVar("_Item", bound=Frozen)
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/csv", "application/yaml")


def _textual(mime_type: str) -> bool:
    """Whether bytes of this type are text a redacted value could be written in (an SVG image, JSON-LD,
    NDJSON and any `+json`/`+xml` type count)."""
    return mime_type.startswith(_TEXT_TYPES) or mime_type.endswith(("+json", "+xml")) or "json" in mime_type


def scrubbed(item: Content, scrub: Callable[[str], str]) -> Content:
    """The item with redacted values censored out of its text and its URI (an attached document or link
    may not carry them)."""
    if isinstance(item, EmbeddedResource):
        if item.text is not None:
            return _replaced(item, uri=scrub(item.uri), text=scrub(item.text))
        if item.blob is not None and _textual(item.mime_type):
            return _replaced(item, uri=scrub(item.uri), blob=scrub(item.blob.decode("utf-8", "replace")).encode())
        return _replaced(item, uri=scrub(item.uri))
    if isinstance(item, ResourceLink):
        return _replaced(item, uri=scrub(item.uri), name=scrub(item.name), title=item.title and scrub(item.title),
                         description=item.description and scrub(item.description))
    if isinstance(item, _Binary) and _textual(item.mime_type):  # an SVG image is text
        return _replaced(item, data=scrub(item.data.decode("utf-8", "replace")).encode())
    return item


def _replaced(item: _Item, **changes: Any) -> _Item:
    """A copy of a frozen item with some fields changed (`dataclasses.replace`: it runs `__init__` again)."""
    make: Callable[..., _Item] = type(item)
    return make(**{**dict(zip(item._fields, item._values(), strict=True)), **changes})


def content_items(result: Any) -> tuple[Content, ...] | None:
    """The content of a handler result made only of content (one item, or a list of them), else None."""
    if isinstance(result, Content):
        return (result,)
    # The first item decides most lists (a page of rows) before a generator is made for the rest.
    if isinstance(result, (list, tuple)) and result and isinstance(result[0], Content) \
            and all(isinstance(item, Content) for item in result):
        return tuple(result)
    return None


def _typed_bytes(data: bytes | None, path: str | Path | None, mime_type: str | None, hint: str) -> tuple[bytes, str]:
    """The bytes (given, or read from `path`) and their MIME type: declared, else sniffed, else the file name's."""
    if (data is None) == (path is None):
        raise TypeError("give the bytes or a path=, not both")
    raw, guessed = (Path(path).read_bytes(), mimetypes.guess_type(str(path))[0]) if path is not None \
        else (bytes(data or b""), None)
    mime = mime_type or sniff(raw) or guessed
    if mime is None:
        raise ContentError(f"The {hint}")
    return raw, _normal(mime)


def image(data: bytes | None = None, mime_type: str | None = None, *, path: str | Path | None = None) -> Image:
    """An image from bytes or a file; the MIME type defaults to what the bytes (or the file name) say."""
    return Image(*_typed_bytes(data, path, mime_type,
                               "image's type is unknown: pass mime_type='image/png' (or jpeg, gif, webp)."))


def audio(data: bytes | None = None, mime_type: str | None = None, *, path: str | Path | None = None) -> Audio:
    """An audio clip from bytes or a file; the MIME type defaults to what the bytes (or the file name) say."""
    return Audio(*_typed_bytes(data, path, mime_type,
                               "audio clip's type is unknown: pass mime_type='audio/wav' (or mpeg, ogg)."))


def document(content: bytes | str, mime_type: str, *, uri: str) -> EmbeddedResource:
    """An embedded resource: `str` content as text, `bytes` as a base64 blob."""
    if isinstance(content, str):
        return EmbeddedResource(uri=uri, mime_type=_normal(mime_type), text=content)
    return EmbeddedResource(uri=uri, mime_type=_normal(mime_type), blob=bytes(content))


def link(uri: str, name: str, *, mime_type: str | None = None, title: str | None = None,
         description: str | None = None, size: int | None = None) -> ResourceLink:
    """A link to a resource of this server (`invoice://inv_0001`), read by the client with resources/read."""
    return ResourceLink(uri=uri, name=name, mime_type=mime_type, title=title, description=description, size=size)


def _check_bytes(what: str, data: bytes, mime: str, max_bytes: int, allowed: frozenset[str] | None,
                 *, family: str | None) -> None:
    declared = _normal(mime)
    if len(data) > max_bytes:
        raise ContentError(
            f"The {what} is {len(data):,} bytes; the limit is {max_bytes:,} bytes. "
            "Ask for a smaller one (fewer pages, a lower resolution or a shorter clip).")
    if family is not None and not declared.startswith(family + "/"):
        raise ContentError(f"The {what} is declared as {declared!r}, which is not a {family}/* type.")
    if allowed is not None and declared not in allowed:
        raise ContentError(f"The {what} is {declared!r}; this action sends only {', '.join(sorted(allowed))}.")
    actual = sniff(data)
    if actual is not None and actual != declared:
        raise ContentError(f"The {what} is declared as {declared!r} but its bytes are {actual!r}.")
    if actual is None and family == "image" and declared not in _TEXT_IMAGES:
        raise ContentError(f"The {what}'s bytes are not a PNG, JPEG, GIF or WebP image (declared {declared!r}).")


__all__ = [
    "DEFAULT_MAX_BYTES",
    "Attached",
    "Audio",
    "Content",
    "ContentError",
    "EmbeddedResource",
    "Image",
    "ResourceLink",
    "attach",
    "audio",
    "content_items",
    "scrubbed",
    "document",
    "image",
    "link",
    "sniff",
]
