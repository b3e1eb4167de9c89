"""Content helpers: MCP shapes, MIME sniffing and the checks made before content leaves."""

from __future__ import annotations

import base64
import copy
import pickle
from dataclasses import FrozenInstanceError

import pytest

from mcpfusion.content import (
    Attached,
    Audio,
    ContentError,
    EmbeddedResource,
    Image,
    ResourceLink,
    attach,
    audio,
    document,
    image,
    link,
    scrubbed,
    sniff,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 32
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24
PDF = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n"


def test_sniffing_names_the_common_formats():
    assert sniff(PNG) == "image/png"
    assert sniff(JPEG) == "image/jpeg"
    assert sniff(WAV) == "audio/wav"
    assert sniff(PDF) == "application/pdf"
    assert sniff(b"plain text") is None


def test_mcp_shapes():
    assert image(PNG).to_mcp() == {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    assert audio(WAV).to_mcp()["mimeType"] == "audio/wav"
    assert document("a,b\n1,2\n", "text/csv", uri="report://1").to_mcp() == {
        "type": "resource", "resource": {"uri": "report://1", "mimeType": "text/csv", "text": "a,b\n1,2\n"}}
    blob = document(PDF, "application/pdf", uri="invoice://inv_1").to_mcp()["resource"]
    assert base64.b64decode(blob["blob"]) == PDF and "text" not in blob
    assert link("invoice://inv_1", "inv_1.pdf", mime_type="application/pdf").to_mcp() == {
        "type": "resource_link", "uri": "invoice://inv_1", "name": "inv_1.pdf", "mimeType": "application/pdf"}


def test_image_from_a_file_and_unknown_types(tmp_path):
    path = tmp_path / "chart.jpg"
    path.write_bytes(JPEG)
    assert image(path=path).mime_type == "image/jpeg"
    with pytest.raises(ContentError, match="mime_type"):
        image(b"no signature here")
    with pytest.raises(TypeError):
        image(PNG, path=path)


@pytest.mark.parametrize(("item", "message"), [
    (image(PNG, "image/jpeg"), "its bytes are 'image/png'"),
    (image(b"MZ\x90\x00 windows executable", "image/png"), "its bytes are 'application/x-msdownload'"),
    (image(b"just some bytes", "image/png"), "not a PNG, JPEG, GIF or WebP"),
    (image(PNG, "text/plain"), "not a image/\\* type"),
    (audio(PNG, "audio/wav"), "its bytes are 'image/png'"),
    (document(PNG, "application/pdf", uri="x://1"), "its bytes are 'image/png'"),
])
def test_content_that_is_not_what_it_says_is_refused(item, message):
    with pytest.raises(ContentError, match=message):
        item.check(1_000_000)


def test_size_limit_and_declared_types():
    big = image(PNG + b"\x00" * 2000)
    with pytest.raises(ContentError, match="limit is 1,000 bytes"):
        big.check(1_000)
    big.check(10_000)
    pdf = document(PDF, "application/pdf", uri="invoice://1")
    pdf.check(1_000, frozenset({"application/pdf"}))
    with pytest.raises(ContentError, match="sends only application/pdf"):
        document("x", "text/plain", uri="a://b").check(1_000, frozenset({"application/pdf"}))


def test_attach_and_embedded_resource_arguments():
    attached = attach({"id": 1}, image(PNG))
    assert attached.data == {"id": 1} and attached.content[0].mime_type == "image/png"
    with pytest.raises(TypeError):
        attach({"id": 1}, b"raw bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        EmbeddedResource(uri="a://b", mime_type="text/plain")


# The helpers are plain classes behaving as frozen slotted dataclasses (slots.Frozen): what users can rely on.
_ITEMS = [Image(b"\x89PNG\r\n\x1a\n", "image/png"), Audio(b"ID3x", "audio/mpeg", {"priority": 1}),
          EmbeddedResource(uri="a://b", mime_type="text/plain", text="hi"),
          ResourceLink("u://1", "n", title="t"), Attached({"a": 1}, (), data_block=False)]


@pytest.mark.parametrize("item", _ITEMS, ids=lambda item: type(item).__name__)
def test_content_helpers_keep_the_dataclass_behaviour(item):
    twin = type(item)(**{name: getattr(item, name) for name in item.__match_args__})
    assert twin == item and copy.copy(item) == item and pickle.loads(pickle.dumps(item)) == item
    assert item != object() and not hasattr(item, "__dict__")
    values = tuple(getattr(item, name) for name in item.__match_args__)
    if any(isinstance(value, dict) for value in values):
        with pytest.raises(TypeError):
            hash(item)
    else:
        assert hash(item) == hash(values)
    for change in (lambda: setattr(item, item.__match_args__[0], 1), lambda: setattr(item, "other", 1),
                   lambda: delattr(item, item.__match_args__[0])):
        with pytest.raises(FrozenInstanceError):
            change()
    fields = ", ".join(f"{name}={value!r}" for name, value in zip(item.__match_args__, values, strict=True))
    assert repr(item) == f"{type(item).__name__}({fields})"


def test_content_helpers_defaults_and_class_equality():
    assert Image(b"a", "image/png") != Audio(b"a", "image/png")
    assert repr(ResourceLink("u", "n")) == ("ResourceLink(uri='u', name='n', mime_type=None, title=None, "
                                            "description=None, size=None, extra={})")
    assert ResourceLink("u", "n").extra is not ResourceLink("u", "n").extra  # a fresh dict each
    extra = {"x": 1}
    assert ResourceLink("u", "n", extra=extra).extra is extra
    assert EmbeddedResource("u", "text/plain", blob=b"x").text is None
    assert Attached(1, ()).data_block is True


def test_scrubbed_content_is_a_changed_copy():
    text = EmbeddedResource("u", "text/plain", text="secret", annotations={"a": 1})
    assert scrubbed(text, str.upper) == EmbeddedResource("U", "text/plain", text="SECRET", annotations={"a": 1})
    blob = EmbeddedResource("u", "text/csv", blob=b"secret")
    assert scrubbed(blob, str.upper) == EmbeddedResource("U", "text/csv", blob=b"SECRET")
    assert scrubbed(ResourceLink("u", "n", title="t", extra={"k": 1}), str.upper) == \
        ResourceLink("U", "N", title="T", extra={"k": 1})  # the URI too: it may be written from data
    picture = Image(PNG, "image/png")
    assert scrubbed(picture, str.upper) is picture
