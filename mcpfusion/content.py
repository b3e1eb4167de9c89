"""Content an action answers beside (or instead of) its text blocks: images, audio, embedded resources (a
text or binary document with its MIME type) and links to resources of the server.

    @billing.action(readonly=True, content_types=["application/pdf"])
    async def invoice_pdf(id: str) -> EmbeddedResource:
        return document(render_pdf(id), "application/pdf", uri=f"invoice://{id}")

    return attach(invoice, image(chart_png))          # presented data, then the image

On MCP these are content blocks after the text blocks (base64 for binary data). On REST one binary item is
answered with its own media type; anything mixed is a JSON envelope `{"data": ..., "content": [...]}` whose
items have the MCP shapes. Before anything leaves, `check()` enforces the size limit, that the MIME type is a
media type (RFC 9110: printable ASCII, no control characters), and that the bytes are what it says, by the
signature of their first bytes: a PNG declared as JPEG, an executable or an HTML page declared as an image, a
PDF or audio is refused. Images are PNG, JPEG, GIF, WebP, BMP, TIFF, ICO,
AVIF or HEIC (or SVG, which is text); audio MP3, AAC, WAV, Ogg, FLAC, WebM or MP4/M4A (other audio types pass
unless their bytes are something else); ZIP-based types (Office, OpenDocument, EPUB, `+zip`) are ZIP
archives; `application/octet-stream` is any bytes; a type not known here is refused only when its bytes are
another known file (an executable, a PDF, an image). A text document is text/*, JSON, XML, YAML, CSV, TOML,
SQL, JavaScript or GraphQL (not an SVG image: it can carry script); a blob of any of these types, or of an SVG
image, is textual too: censored like a text, and its bytes must be text in the declared charset (`text/csv;
charset=iso-8859-1`; UTF-8 when none is declared), which the MIME type keeps: censoring redacted values out
of them reads and writes that charset, and REST answers it. They are read as a client reads them (WHATWG):
iso-8859-1 as windows-1252, and bytes starting with a byte order mark of another charset than the declared
one, or whose text holds NUL characters (UTF-16 declared as UTF-8), are refused.
"""

from __future__ import annotations

import base64
import codecs
import mimetypes
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from .redaction import DEFAULT_CENSOR
from .slots import FACTORY, Frozen

DEFAULT_MAX_BYTES = 5 * 1024 * 1024
"""Largest image, audio clip or document an action may send (`MCPFusion(max_content_bytes=...)`)."""

# Magic numbers of the formats whose bytes are told apart: a few `startswith` on the first bytes. A signature
# that text could start with ("MZ", "BM", "ID3") also needs a byte no text has (NUL) or a version byte.
_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"%PDF-", "application/pdf"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"\x1a\x45\xdf\xa3", "video/webm"),  # EBML: WebM and Matroska, audio or video
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),  # (an empty archive)
    (b"\x1f\x8b", "application/gzip"),
    (b"\x7fELF", "application/x-executable"),
)
# ISO base media files (`....ftyp` + brands): which of them an image or an audio-only file announces.
_AVIF_BRANDS = frozenset({b"avif", b"avis"})
_HEIF_BRANDS = frozenset({b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1",
                          b"msf1"})
_M4A_BRANDS = frozenset({b"M4A ", b"M4B ", b"M4P "})
# Signatures short enough that other bytes may start so (a frame sync is two bytes), or text (an HTML page):
# not taken for proof that bytes of a type not known here are another file.
_WEAK = frozenset({"text/html", "audio/mpeg", "audio/aac", "image/x-icon"})
# Formats that hold other files (an Office document, an e-book, a .jar, an .svgz): a declared type this module
# does not know may be one of them.
_CONTAINERS = frozenset({"application/zip", "application/gzip"})
# What the bytes of each declared type must be (what `sniff` says of them); other types are not checked
# against a signature. `application/octet-stream` means any bytes.
_EXPECTED: dict[str, frozenset[str]] = {
    **{mime: frozenset({mime}) for mime in (
        "image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp", "image/tiff", "image/x-icon",
        "image/avif", "application/pdf", "audio/mpeg", "audio/wav", "audio/ogg", "audio/flac", "audio/aac",
        "application/zip", "application/gzip", "application/x-msdownload", "application/x-executable")},
    "image/apng": frozenset({"image/png"}),
    "image/heic": frozenset({"image/heic"}),
    "image/heif": frozenset({"image/heic", "image/avif"}),
    "audio/opus": frozenset({"audio/ogg"}),
    "audio/webm": frozenset({"video/webm"}),
    "audio/mp4": frozenset({"audio/mp4", "video/mp4"}),
    "video/mp4": frozenset({"audio/mp4", "video/mp4"}),
    "video/webm": frozenset({"video/webm"}),
    "video/ogg": frozenset({"audio/ogg"}),
}
_ZIP = frozenset({"application/zip"})
_ZIP_BASED = ("application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.")
_IMAGES = "PNG, JPEG, GIF or WebP (or BMP, TIFF, ICO, AVIF, HEIC)"
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-bmp": "image/bmp",
            "image/x-ms-bmp": "image/bmp", "image/vnd.microsoft.icon": "image/x-icon", "image/ico": "image/x-icon",
            "audio/mp3": "audio/mpeg", "audio/mpeg3": "audio/mpeg", "audio/x-mpeg-3": "audio/mpeg",
            "audio/x-wav": "audio/wav", "audio/wave": "audio/wav", "audio/vnd.wave": "audio/wav",
            "audio/x-flac": "audio/flac", "audio/x-m4a": "audio/mp4", "audio/m4a": "audio/mp4",
            "audio/x-aac": "audio/aac", "application/x-zip-compressed": "application/zip",
            "application/x-gzip": "application/gzip", "application/vnd.microsoft.portable-executable":
            "application/x-msdownload", "application/x-dosexec": "application/x-msdownload",
            "application/x-msdos-program": "application/x-msdownload", "application/x-elf": "application/x-executable",
            "application/x-sharedlib": "application/x-executable"}
# Text whose declared type is not text/*: JSON, XML, YAML, CSV (and their `+json`, `+xml`, `+yaml` kin).
_TEXT_APPLICATIONS = frozenset({"json", "xml", "yaml", "x-yaml", "csv", "ndjson", "x-ndjson", "toml", "javascript",
                                "sql", "graphql", "xml-dtd", "xml-external-parsed-entity"})


def sniff(data: bytes) -> str | None:
    """The MIME type the bytes themselves announce, when they start with a known signature."""
    head = data[:4]
    if head == b"RIFF":
        return {b"WEBP": "image/webp", b"WAVE": "audio/wav"}.get(data[8:12])
    if data[4:8] == b"ftyp":
        return _iso_media(data)
    if head[:2] == b"MZ" and b"\x00" in data[2:64]:
        return "application/x-msdownload"
    if head[:2] == b"BM" and len(data) >= 26 and data[6:10] == b"\x00\x00\x00\x00":
        return "image/bmp"
    if head in (b"\x00\x00\x01\x00", b"\x00\x00\x02\x00") and data[4:6] not in (b"", b"\x00\x00"):
        return "image/x-icon"  # (an icon, or a cursor: at least one image)
    if head[:3] == b"ID3" and data[3:4] in (b"\x02", b"\x03", b"\x04"):
        return "audio/mpeg"
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # an MPEG audio frame sync
        if head[1] & 0xF6 == 0xF0:
            return "audio/aac"  # (ADTS: layer bits 00)
        if head[1] & 0x18 != 0x08 and head[1] & 0x06 in (0x02, 0x04):
            return "audio/mpeg"  # (layer III or II; version bits 01 are reserved; FF FE is UTF-16's BOM)
    for signature, mime in _SIGNATURES:
        if data.startswith(signature):
            return mime
    return None


def _iso_media(data: bytes) -> str:
    """The type of an ISO base media file (MP4, M4A, AVIF, HEIC) by the brands of its `ftyp` box."""
    size = int.from_bytes(data[:4], "big")
    brands = {data[8:12], *(data[at:at + 4] for at in range(16, min(size, 64), 4))}
    if brands & _AVIF_BRANDS:
        return "image/avif"
    if brands & _HEIF_BRANDS:
        return "image/heic"
    return "audio/mp4" if data[8:12] in _M4A_BRANDS else "video/mp4"


def _looks_html(data: bytes) -> bool:
    """An HTML page (an upstream's error page passed on as a file)."""
    start = data[:64].lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


# A media type as RFC 9110 writes it: `type/subtype *(OWS ";" OWS [name=value])`, each value a token or a
# quoted-string. Printable ASCII (and spaces, tabs) only: a control character (CR, LF, NUL) or non-ASCII text
# is no media type, nor a value an HTTP header may carry (REST answers the type as Content-Type).
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
_ESSENCE = re.compile(rf"({_TOKEN})/({_TOKEN})")
# One parameter at a time, anchored where the last one ended (each run of spaces has one place to go: no
# backtracking through the ways of splitting it). A `;` inside a quoted value is part of the value.
_PARAMETER = re.compile(rf"[ \t]*;[ \t]*(?:({_TOKEN})=({_TOKEN}|{_QUOTED}))?")
_ESCAPE = re.compile(r"\\(.)")
_IS_TOKEN = re.compile(_TOKEN)

# A media type read: its type/subtype lower-case, and its parameters as (name lower-case, value unquoted, value
# as written).
_Parsed = tuple[str, tuple[tuple[str, str, str], ...]]


def _parse(mime: str) -> _Parsed | None:
    """The media type read as RFC 9110 does (a quoted value unquoted, its backslash escapes undone); None for
    a string that is no media type. The one reading of a type: its check, its charset and the type sent."""
    essence = _ESSENCE.match(mime)
    if essence is None:
        return None
    params: list[tuple[str, str, str]] = []
    at = essence.end()
    while at < len(mime):
        param = _PARAMETER.match(mime, at)
        if param is None:
            return None
        name, raw = param.group(1, 2)
        if name is not None:
            value = _ESCAPE.sub(r"\1", raw[1:-1]) if raw.startswith('"') else raw
            params.append((name.lower(), value, raw))
        at = param.end()
    return essence.group(0).lower(), tuple(params)


def _check_media_type(what: str, mime: str) -> None:
    """Refuse a MIME type that is not a media type (checked before anything reads its parameters)."""
    if _parse(mime) is None:
        raise ContentError(f"The {what}'s MIME type {mime!r:.80} is not a valid media type: write it as "
                           "type/subtype with name=value parameters in printable ASCII (a value with spaces or "
                           "other separators in double quotes; no control characters, no non-ASCII text), as in "
                           "'text/csv; charset=utf-8'.")


def declared_types(types: Any, where: str) -> frozenset[str]:
    """An action's `content_types=`, checked: a list of media types (type/subtype, parameters dropped), each
    as `check` compares it (lower-case, `image/jpg` read as `image/jpeg`). A string alone is refused: read as
    a list it would be its characters, and every content refused."""
    if isinstance(types, (str, bytes)):
        raise TypeError(f"{where}: content_types= takes a list of MIME types, e.g. content_types=[{types!r}], "
                        "not a string")
    found: set[str] = set()
    for entry in types:
        if not isinstance(entry, str) or _parse(entry) is None:
            raise ValueError(f"{where}: content_types= entry {entry!r} is not a MIME type: write it as "
                             "type/subtype, e.g. 'image/png'")
        normal = _normal(entry)
        if "*" in normal:
            raise ValueError(f"{where}: content_types= entry {entry!r} is a wildcard: list each MIME type the "
                             "action sends, e.g. 'image/png'")
        found.add(normal)
    return frozenset(found)


def _normal(mime: str) -> str:
    """The type and subtype alone, lower-case (`text/csv` of `Text/CSV; charset=utf-8`). (The first `;` ends
    them in any media type: a token has none; a string that is no media type is refused by `check`.)"""
    mime = mime.split(";", 1)[0].strip().lower()
    return _ALIASES.get(mime, mime)


def _declared(mime: str) -> str:
    """The MIME type as sent: its type and subtype normalized, its parameters (a text's charset) kept, each
    value as written (a quoted one byte for byte). A string that is no media type is kept as it is (its ends
    trimmed), for `check` to refuse."""
    mime = mime.strip()
    parsed = _parse(mime)
    if parsed is None:
        return mime
    essence, params = parsed
    return "; ".join([_ALIASES.get(essence, essence), *(f"{name}={raw}" for name, _, raw in params)])


def _charsets(mime: str) -> list[str]:
    """The values of the `charset` parameters of a media type (unquoted); a string that is no media type is
    refused: no charset is read out of it."""
    parsed = _parse(mime)
    if parsed is None:
        raise ContentError(f"The MIME type {mime!r:.80} is not a valid media type: write it as type/subtype with "
                           "name=value parameters, as in 'text/csv; charset=utf-8'.")
    return [value for name, value, _ in parsed[1] if name == "charset"]


# Encodings that shift in and out of ASCII bytes ("+ops-" is UTF-7 for other text): a client that reads them as
# ASCII (browsers dropped UTF-7, WHATWG maps HZ to nothing) sees text the censor read another way.
_SHIFTED = frozenset({"utf-7", "hz"})


def _charset(mime: str) -> str:
    """The charset a textual type's bytes are written in: declared (a real `charset` parameter, read as a
    client reads it), else UTF-8. Raises ContentError for a charset Python cannot decode, and for one declared
    twice (readers differ on which one counts: the censor could read the text one way and the client
    another); checked at return, before anything leaves."""
    declared = _charsets(mime)
    if len(declared) > 1:
        raise ContentError(f"The type {_declared(mime)!r} declares its charset {len(declared)} times: declare it "
                           "once, as in 'text/csv; charset=utf-8'.")
    if not declared:
        return "utf-8"
    charset = declared[0]
    try:
        if not _IS_TOKEN.fullmatch(charset):  # (RFC 9110: a charset is a token; readers trim others their way)
            raise LookupError(charset)
        b"".decode(charset)  # (LookupError for an unknown name, and for a codec such as base64 or rot13)
        "".encode(charset)
        if codecs.lookup(charset).name in _SHIFTED:
            raise LookupError(charset)
    except LookupError:
        raise ContentError(f"The charset {charset!r} of {_normal(mime)!r} is not a known text encoding: "
                           "declare one such as utf-8, iso-8859-1 or windows-1252.") from None
    return charset


# The byte order marks of the charsets whose byte order the bytes themselves say.
_BOMS = {"utf-16": (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE), "utf-32": (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)}


# A byte order mark a client honours over the declared charset (WHATWG: the BOM decides), what it reads the
# bytes as then, and the charsets (codec names) that agree with it.
_BOM_READS = (
    (codecs.BOM_UTF8, "utf-8", frozenset({"utf-8", "utf-8-sig"})),
    (codecs.BOM_UTF16_LE, "utf-16le", frozenset({"utf-16", "utf-16-le", "utf-32", "utf-32-le"})),
    (codecs.BOM_UTF16_BE, "utf-16be", frozenset({"utf-16", "utf-16-be"})),
)
# WHATWG reads iso-8859-1 (latin1, ...) as windows-1252: bytes 0x80-0x9F are letters and signs (0x8A is Š),
# not the C1 controls Python's latin-1 makes of them. The censor reads them so too (and writes them back).
_WINDOWS_1252 = {byte: bytes([byte]).decode("cp1252") for byte in range(0x80, 0xA0)
                 if byte not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}  # (those five stay controls there too)
_AS_1252 = str.maketrans({chr(byte): char for byte, char in _WINDOWS_1252.items()})
_FROM_1252 = str.maketrans({char: chr(byte) for byte, char in _WINDOWS_1252.items()})


def _blob_charset(data: bytes, mime: str) -> str:
    """`_charset` of bytes given as they are (a blob). utf-16 or utf-32 without a byte order mark is refused:
    RFC 2781 reads it big-endian, Python (the censor) in the machine's order; one of them would read the
    text the censor did not. So is a byte order mark of another charset than the one declared: a client reads
    the bytes as the mark says, the censor as the type says."""
    charset = _charset(mime)
    name = codecs.lookup(charset).name
    if name in _BOMS and not data.startswith(_BOMS[name]) and data:
        raise ContentError(f"The bytes declared {charset} (in {_declared(mime)!r}) start with no byte order mark: "
                           f"declare the order they are written in, as in '{_normal(mime)}; charset={name}-le' "
                           f"(or {name}-be).")
    for bom, read, agree in _BOM_READS:
        if data.startswith(bom):
            if name not in agree:
                raise ContentError(f"The bytes declared {charset} (in {_declared(mime)!r}) start with the byte "
                                   f"order mark of {read}, which a client reads them as: declare "
                                   f"'{_normal(mime)}; charset={read}' (or write them in {charset}).")
            break
    return charset


def _blob_text(data: bytes, mime: str) -> tuple[str, str]:
    """The text of textual bytes as a client reads them (iso-8859-1 as windows-1252), and their charset.
    ContentError (`_blob_charset`, or text holding NUL characters: bytes of another charset, such as UTF-16
    declared as nothing or UTF-8, which a reader may take apart otherwise), UnicodeDecodeError."""
    charset = _blob_charset(data, mime)
    text = data.decode(charset)
    if codecs.lookup(charset).name == "iso8859-1":
        text = text.translate(_AS_1252)
    if "\x00" in text:
        raise ContentError(f"The text declared {_declared(mime)!r} holds NUL characters: it is not text in that "
                           "charset (UTF-16 declared as UTF-8?). Declare the charset it is written in, as in "
                           f"'{_normal(mime)}; charset=utf-16le', or send it as application/octet-stream.")
    return text, charset


def _text_like(essence: str) -> bool:
    """A type a text document may have: text/*, or JSON, XML, YAML and CSV as application/* (not an SVG image:
    a text document of it is refused, as it can carry script)."""
    top, _, sub = essence.partition("/")
    return top == "text" or (top == "application" and (sub in _TEXT_APPLICATIONS or sub.endswith(
        ("+json", "+xml", "+yaml"))))


def _expected(essence: str) -> frozenset[str] | None:
    """What the bytes of a declared type must be (per `sniff`); None: a type without a signature known here."""
    expected = _EXPECTED.get(essence)
    if expected is None and (essence.endswith("+zip") or essence.startswith(_ZIP_BASED)
                             or essence.endswith(".macroenabled.12")):
        return _ZIP  # Office (OOXML, ODF), EPUB and other ZIP-based formats
    return expected


def _set(obj: Frozen, **fields: Any) -> None:
    """Fill a frozen instance's fields (its own `__setattr__` refuses)."""
    for name, value in fields.items():
        object.__setattr__(obj, name, value)


class ContentError(ValueError):
    """Content that may not leave: too large, or not what its MIME type says. The message is self-healing."""


class ContentTooLarge(ContentError):
    """Content over the size limit: the one refusal a caller can help (asking for less)."""


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
        _check_media_type(self.kind, self.mime_type)
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
        if self.blob is not None:
            return self.blob
        # (REST sends the declared charset: the text is written in it; `check` refused one it cannot take.)
        return (self.text or "").encode(_charset(self.mime_type) if ";" in self.mime_type else "utf-8")

    @property
    def media_type(self) -> str:
        """The type REST answers: a text/* type declaring no charset says the UTF-8 its bytes are in (Starlette
        adds it only to a type with no `charset=` anywhere, not to one whose quoted value holds it)."""
        if _normal(self.mime_type).startswith("text/") and _parse(self.mime_type) is not None \
                and not _charsets(self.mime_type):
            return f"{self.mime_type}; charset=utf-8"
        return self.mime_type

    def check(self, max_bytes: int, allowed: frozenset[str] | None = None) -> None:
        _check_media_type("document", self.mime_type)
        try:
            data = self.payload()
        except UnicodeEncodeError as exc:
            raise ContentError(f"The document's text cannot be written in {exc.encoding} (declared "
                               f"{self.mime_type!r}): declare charset=utf-8.") from None
        _check_bytes("document", data, self.mime_type, max_bytes, allowed,
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

    def check(self, max_bytes: int, allowed: frozenset[str] | None = None) -> None:
        if self.mime_type is not None:  # (a link has no bytes: only the type it announces is checked)
            _check_media_type("link", self.mime_type)

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

    A content item may be a function of the presented data (after the schema firewall and redaction, before
    `_select`: a document may draw on a field the agent did not select): a document drawn from it can never
    carry a value the agent may not see. With `data_block=False` only the content is sent (the data is still
    presented, to build it); structuredContent is still sent when the action's MCP tool advertises an
    outputSchema, as the spec then requires. A paginated action may return `attach(rows, ...)`: the rows are
    paged as a plain list, the content is kept."""
    for item in content:
        if not isinstance(item, Content) and not callable(item):
            raise TypeError(f"attach() takes content helpers (image, audio, document, link), not {type(item)!r}")
    return Attached(data, content, data_block)


_Item = TypeVar("_Item", bound=Frozen)


def _textual(mime_type: str) -> bool:
    """Whether bytes of this type are text a redacted value could be written in: every type a text document
    may have (`_text_like`: one definition, so a blob of a type accepted as text is censored and checked as
    text too), and an SVG image, any other `+json`/`+xml`/`+yaml` type and anything JSON."""
    essence = _normal(mime_type)
    return _text_like(essence) or essence.endswith(("+json", "+xml", "+yaml")) or "json" in essence


def _censor_error(exc: UnicodeError) -> tuple[str, int]:
    """A censored value the charset cannot write: the default censor text (ASCII) in its place."""
    assert isinstance(exc, UnicodeEncodeError)
    return DEFAULT_CENSOR, exc.end


codecs.register_error("mcpfusion.censor", _censor_error)


def _scrub_bytes(data: bytes, mime_type: str, scrub: Callable[[str], str]) -> bytes:
    """Textual bytes with redacted values censored, read and written in their charset. Bytes that are not
    text in it are left as they are: `check` refuses them before anything leaves (never corrupted)."""
    try:
        text, charset = _blob_text(data, mime_type)
    except (ContentError, UnicodeDecodeError):
        return data
    censored = scrub(text)
    if censored == text:
        return data
    if codecs.lookup(charset).name == "iso8859-1":  # (read as windows-1252: written back so)
        censored = censored.translate(_FROM_1252)
    return censored.encode(charset, "mcpfusion.censor")


def scrubbed(item: Content, scrub: Callable[[str], str]) -> Content:
    """The item with redacted values censored out of its text and its URI (an attached document or link
    may not carry them)."""
    if isinstance(item, EmbeddedResource):
        if item.text is not None:
            return _replaced(item, uri=scrub(item.uri), text=scrub(item.text))
        if item.blob is not None and _textual(item.mime_type):
            return _replaced(item, uri=scrub(item.uri), blob=_scrub_bytes(item.blob, item.mime_type, scrub))
        return _replaced(item, uri=scrub(item.uri))
    if isinstance(item, ResourceLink):
        return _replaced(item, uri=scrub(item.uri), name=scrub(item.name), title=item.title and scrub(item.title),
                         description=item.description and scrub(item.description))
    if isinstance(item, _Binary) and _textual(item.mime_type):  # an SVG image is text
        return _replaced(item, data=_scrub_bytes(item.data, item.mime_type, scrub))
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
    return raw, _declared(mime)


def image(data: bytes | None = None, mime_type: str | None = None, *, path: str | Path | None = None) -> Image:
    """An image from bytes or a file; the MIME type defaults to what the bytes (or the file name) say."""
    return Image(*_typed_bytes(data, path, mime_type,
                               "image's type is unknown: pass mime_type='image/png' (or jpeg, gif, webp)."))


def audio(data: bytes | None = None, mime_type: str | None = None, *, path: str | Path | None = None) -> Audio:
    """An audio clip from bytes or a file; the MIME type defaults to what the bytes (or the file name) say."""
    return Audio(*_typed_bytes(data, path, mime_type,
                               "audio clip's type is unknown: pass mime_type='audio/wav' (or mpeg, ogg)."))


def document(content: bytes | str, mime_type: str, *, uri: str) -> EmbeddedResource:
    """An embedded resource: `str` content as text, `bytes` as a base64 blob. The MIME type keeps its
    parameters: a blob of text is written in its `charset` (`text/csv; charset=iso-8859-1`), else UTF-8."""
    if isinstance(content, str):
        return EmbeddedResource(uri=uri, mime_type=_declared(mime_type), text=content)
    return EmbeddedResource(uri=uri, mime_type=_declared(mime_type), blob=bytes(content))


def link(uri: str, name: str, *, mime_type: str | None = None, title: str | None = None,
         description: str | None = None, size: int | None = None) -> ResourceLink:
    """A link to a resource of this server (`invoice://inv_0001`), read by the client with resources/read."""
    return ResourceLink(uri=uri, name=name, mime_type=mime_type, title=title, description=description, size=size)


def _check_bytes(what: str, data: bytes, mime: str, max_bytes: int, allowed: frozenset[str] | None,
                 *, family: str | None) -> None:
    declared = _normal(mime)
    if len(data) > max_bytes:
        raise ContentTooLarge(
            f"The {what} is {len(data):,} bytes; the limit is {max_bytes:,} bytes. "
            "Ask for a smaller one (fewer pages, a lower resolution or a shorter clip).")
    if family == "text" and not _text_like(declared):
        raise ContentError(f"The {what} is declared as {declared!r}, which is not a text type (text/*, JSON, XML, "
                           "YAML or CSV): send its bytes as a blob.")
    if family is not None and family != "text" and not declared.startswith(family + "/"):
        raise ContentError(f"The {what} is declared as {declared!r}, which is not a {family}/* type.")
    if allowed is not None and declared not in allowed:
        raise ContentError(f"The {what} is {declared!r}; this action sends only {', '.join(sorted(allowed))}.")
    if declared == "application/octet-stream":
        return  # any bytes
    actual = sniff(data) or ("text/html" if _looks_html(data) else None)
    if family == "text" or _textual(declared):
        if actual is not None and actual not in _WEAK:
            raise ContentError(f"The {what} is declared as {declared!r} but its bytes are {actual!r}.")
        if family != "text":  # (a text document's bytes were written in its charset by `payload`)
            _check_text(what, data, mime)
        return
    expected = _expected(declared)
    if expected is not None and actual in expected:
        return
    if actual is None and declared.startswith("image/"):
        raise ContentError(f"The {what}'s bytes are not a {_IMAGES} image (declared {declared!r}).")
    if expected is not None or (actual is not None and not _may_be(declared, actual)):
        raise ContentError(f"The {what} is declared as {declared!r} but its bytes are "
                           f"{repr(actual) if actual else 'not of that type'}.")


def _may_be(declared: str, actual: str) -> bool:
    """Whether bytes of a known type may be those of a declared type not known here: audio or video in
    another container; anything else an archive (its own format may be one), not another file (an
    executable, a PDF, an image)."""
    if declared.startswith("image/"):
        return False  # (an image of a format not known here is refused)
    if declared.startswith(("audio/", "video/")):
        return actual.startswith(("audio/", "video/"))
    return actual in _CONTAINERS or actual in _WEAK


def _check_text(what: str, data: bytes, mime: str) -> None:
    """Bytes of a textual type are text in its charset (else they could not be censored, nor read)."""
    try:
        _blob_text(data, mime)
    except UnicodeDecodeError:
        raise ContentError(f"The {what}'s bytes are not {_charset(mime)} text (declared {_declared(mime)!r}): declare "
                           f"the charset they are written in, as in '{_normal(mime)}; charset=iso-8859-1'.") from None


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
