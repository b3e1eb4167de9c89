"""Round 7 (censor): a document written by a serializer that escapes carries no redacted value past the
document censor (`censor.Scrubber`).

A handler builds an attached document from its own rows with a standard serializer: YAML (`yaml.safe_dump`,
non-ASCII as `\\xE9`), XML/HTML (`xml.sax.saxutils`, `html.escape`, markupsafe, ElementTree with
encoding="us-ascii": `&#233;`), CSV (`"` doubled), JSON (`ensure_ascii`, indented) or URL-encoded in a link.
Each removed value is censored in the form the serializer wrote: the document, decoded again, holds none.
"""

from __future__ import annotations

import ast
import base64
import csv
import html
import io
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus, urlencode, urlsplit
from xml.sax.saxutils import escape, quoteattr, unescape

import markupsafe
import pytest
import yaml

from mcpfusion import MCPFusion, Presenter, Tool, attach, document
from mcpfusion.censor import _document_forms, scrubber
from tests.wire_kit import every_wire

CENSOR = "[REDACTED]"
ROWS = [
    {"id": "c1", "name": "José Núñez", "email": "jose.nunez+crm@secret.example", "phone": "+1 (555) 010-9999"},
    {"id": "c2", "name": 'Ada "Lady" O\'Hara & Sons <Ltd>', "email": "ada&o'hara@secret.example",
     "phone": "0044 20 7946 0958"},
    {"id": "c3", "name": "Zoë 😀 Smith", "email": "zoe@secret.example", "phone": "555-0100"},
]
SECRETS = [row[field] for row in ROWS for field in ("name", "email", "phone")]


# -- what the handlers write, and how a reader decodes it again ---------------------------------------------


def as_yaml(rows: list[dict[str, str]]) -> str:
    return yaml.safe_dump(rows)  # allow_unicode=False: "Jos\xE9 N\xFA\xF1ez"


def as_wide_flow_yaml(rows: list[dict[str, str]]) -> str:
    return yaml.safe_dump(rows, default_flow_style=True, width=float("inf"))  # (the docs' advice: no folding)


def as_sax_xml(rows: list[dict[str, str]]) -> str:
    return "<rows>" + "".join(f"<row id={quoteattr(r['id'])} name={quoteattr(r['name'])}>{escape(r['email'])} "
                              f"{escape(r['phone'])}</row>" for r in rows) + "</rows>"


def as_html(rows: list[dict[str, str]]) -> str:
    return "<ul>" + "".join(f'<li id="{r["id"]}" title="{html.escape(r["name"])}">{html.escape(r["email"])} '
                            f"<b>{markupsafe.escape(r['phone'] + ' ' + r['name'])}</b></li>" for r in rows) + "</ul>"


def as_ascii_xml(rows: list[dict[str, str]]) -> str:
    root = ET.Element("rows")
    for r in rows:
        ET.SubElement(root, "row", id=r["id"], name=r["name"], email=r["email"]).text = r["name"] + " " + r["phone"]
    return ET.tostring(root, encoding="us-ascii").decode()


def as_csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def as_json(rows: list[dict[str, str]]) -> str:
    return json.dumps(rows)  # ensure_ascii=True: "Jos\u00e9", "\ud83d\ude00"


def as_indented_json(rows: list[dict[str, str]]) -> str:
    return json.dumps(rows, indent=2)


def as_markdown_links(rows: list[dict[str, str]]) -> str:
    return "\n".join(f"- [{r['id']}](https://crm.example/people/{quote(r['name'])}?{urlencode(r)}"
                     f"&e={quote(r['email'], safe='')}&p={quote_plus(r['phone'])})" for r in rows)


def as_html_links(rows: list[dict[str, str]]) -> str:
    return "<p>" + "".join(f'<a href="https://crm.example/c?{html.escape(urlencode(r))}">{r["id"]}</a>'
                           for r in rows) + "</p>"


def from_data(text: str, load: Callable[[str], Any]) -> list[str]:
    return [str(v) for row in load(text) for v in row.values()]


def from_xml(text: str) -> list[str]:
    found: list[str] = []
    for element in ET.fromstring(text).iter():
        found += [element.text or "", *element.attrib.values()]
    return found


def from_csv(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


def from_links(text: str) -> list[str]:
    found: list[str] = []
    for link in re.findall(r'\((https://[^)\s]+)\)|href="([^"]+)"', text):
        url = urlsplit(html.unescape(link[0] or link[1]))
        found += [unquote(segment) for segment in url.path.split("/")]
        found += [value for _, value in parse_qsl(url.query, keep_blank_values=True)]
    return found


KINDS: dict[str, tuple[Callable[[list[dict[str, str]]], str], Callable[[str], list[str]]]] = {
    "yaml": (as_yaml, lambda text: from_data(text, yaml.safe_load)),
    "wide_flow_yaml": (as_wide_flow_yaml, lambda text: from_data(text, yaml.safe_load)),
    "sax_xml": (as_sax_xml, from_xml),
    "html": (as_html, from_xml),
    "ascii_xml": (as_ascii_xml, from_xml),
    "csv": (as_csv, from_csv),
    "json": (as_json, lambda text: from_data(text, json.loads)),
    "indented_json": (as_indented_json, lambda text: from_data(text, json.loads)),
    "markdown_links": (as_markdown_links, from_links),
    "html_links": (as_html_links, from_links),
}


def export_app(write: Callable[[list[dict[str, str]]], str], blob: bool) -> Any:
    people = Presenter("people").schema({"id": str, "name": str, "email": str, "phone": str})
    people.redact_pii(["name", "email", "phone"])
    crm = Tool("crm")

    @crm.action(readonly=True, returns=people, content_types=["text/plain", "application/yaml"])
    async def export() -> object:
        """The people, with a document of them."""
        text = write(ROWS)
        made = document(text.encode(), "application/yaml", uri="crm://people") if blob else \
            document(text, "text/plain", uri="crm://people")
        return attach(ROWS, made)

    return MCPFusion("crm", tools=[crm]).build_app()


def attached(resource: dict[str, Any]) -> str:
    return resource["text"] if "text" in resource else base64.b64decode(resource["blob"]).decode()


def assert_censored(document_text: str, decode: Callable[[str], list[str]]) -> None:
    """The document, decoded as its reader decodes it, holds no removed value, and the rest of it."""
    values = decode(document_text)
    leaked = [secret for secret in SECRETS for value in values if secret in value]
    assert not leaked, document_text
    assert any(CENSOR in value for value in values), document_text
    assert {"c1", "c2", "c3"} <= set(values), document_text


# -- 1. over every wire ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
async def test_an_escaping_serializer_writes_no_redacted_value_into_an_attached_document(kind: str) -> None:
    write, decode = KINDS[kind]
    rest, modern, legacy = await every_wire(export_app(write, blob=False), "crm", "export", {})
    assert rest.status_code == 200, rest.text
    for body in (rest.json(), modern, legacy):
        assert_censored(attached(body["content"][-1]["resource"]), decode)
        assert CENSOR in json.dumps(body["content"][0] if "data" not in body else body["data"])


@pytest.mark.parametrize("kind", ["yaml", "ascii_xml"])
async def test_a_textual_blob_written_by_an_escaping_serializer_is_censored(kind: str) -> None:
    write, decode = KINDS[kind]
    _, modern, _ = await every_wire(export_app(write, blob=True), "crm", "export", {})
    assert_censored(attached(modern["content"][-1]["resource"]), decode)


# -- 2. each value, each serializer, as the standard library writes it --------------------------------------

VALUES = ["José Núñez", 'Ada "Lady" O\'Hara & Sons <Ltd>', "Zoë 😀 Smith", "jose.nunez+crm@secret.example",
          "+1 (555) 010-9999", "line one\tline two\r\nthree", "C:\\Users\\ada", "a/b (c)!*' d", "Ünïcödé\xa0name"]


def et_attribute(value: str) -> str:
    return ET.tostring(ET.Element("p", v=value), encoding="us-ascii").decode()


def et_text(value: str) -> str:
    element = ET.Element("p")
    element.text = value
    return ET.tostring(element, encoding="us-ascii").decode()


def csv_row(value: str) -> str:
    out = io.StringIO()
    csv.writer(out).writerow(["id", value])
    return out.getvalue()


def hex_references(value: str) -> str:
    return re.sub(r"[^\x00-\x7f]", lambda m: f"&#x{ord(m[0]):X};", html.escape(value))


def xml_value(text: str) -> str:
    element = ET.fromstring(text)
    return element.get("v") or element.text or ""


WRITERS: dict[str, tuple[Callable[[str], str], Callable[[str], str]]] = {
    "yaml": (lambda v: yaml.safe_dump({"k": v}), lambda t: yaml.safe_load(t)["k"]),
    "yaml_unicode": (lambda v: yaml.safe_dump({"k": v}, allow_unicode=True), lambda t: yaml.safe_load(t)["k"]),
    "yaml_double_quoted": (lambda v: yaml.safe_dump({"k": v}, default_style='"'), lambda t: yaml.safe_load(t)["k"]),
    "saxutils_escape": (escape, unescape),
    "quoteattr": (lambda v: f"<p v={quoteattr(v)}/>", xml_value),
    "html_escape": (html.escape, html.unescape),
    "html_escape_text": (lambda v: html.escape(v, quote=False), html.unescape),
    "markupsafe": (lambda v: str(markupsafe.escape(v)), html.unescape),
    "etree_attribute": (et_attribute, xml_value),
    "etree_text": (et_text, xml_value),
    "hex_references": (hex_references, html.unescape),
    "csv": (csv_row, lambda t: next(csv.reader(io.StringIO(t)))[1]),
    "json_ascii": (lambda v: json.dumps({"k": v}), lambda t: json.loads(t)["k"]),
    "json_indent": (lambda v: json.dumps({"k": v}, indent=2), lambda t: json.loads(t)["k"]),
    "json_in_html": (lambda v: html.escape(json.dumps({"k": v})), lambda t: json.loads(html.unescape(t))["k"]),
    "json_in_csv": (lambda v: csv_row(json.dumps(v, ensure_ascii=False)),
                    lambda t: json.loads(next(csv.reader(io.StringIO(t)))[1])),
    "python_ascii": (ascii, ast.literal_eval),
    "python_repr": (lambda v: str({"k": v}), lambda t: ast.literal_eval(t)["k"]),
    "quote": (quote, unquote),
    "quote_all": (lambda v: quote(v, safe=""), unquote),
    "quote_plus": (quote_plus, unquote_plus),
    "urlencode": (lambda v: urlencode({"k": v}), lambda t: dict(parse_qsl(t))["k"]),
    "encode_uri_component": (lambda v: quote(v, safe="!'()*"), unquote),
}


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("value", VALUES)
def test_every_form_a_standard_serializer_writes_is_censored(value: str, writer: str) -> None:
    write, read = WRITERS[writer]
    written = write(value)
    censored = scrubber([value])(written)
    assert censored != written
    assert value not in read(censored), (written, censored)


def test_a_value_that_is_no_string_is_censored_url_encoded_too() -> None:
    at = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    scrub = scrubber([at, Decimal("85000")])
    assert scrub(f"https://x/?at={quote(str(at))}&n={quote_plus(f'{85000:,}')}") == f"https://x/?at={CENSOR}&n={CENSOR}"


# -- 3. what the forms cost, and what they never touch ------------------------------------------------------


def test_forms_are_made_only_for_values_serializers_change_and_long_enough() -> None:
    assert _document_forms("ABCD-1234_x.y~z") == ()  # no serializer escapes it: nothing more to look for
    assert scrubber(["a&b"])("a&amp;b and a%26b") == "a&amp;b and a%26b"  # shorter than MIN_LENGTH
    assert _document_forms("José Núñez") is _document_forms("José Núñez")  # made once per value


def test_yaml_dumped_as_the_docs_advise_keeps_long_and_multi_line_values_whole() -> None:
    values = ["line one\nline two of a note", "word " * 30 + "José Núñez"]
    written = yaml.safe_dump([{"note": values[0], "bio": values[1]}], width=float("inf"), default_style='"')
    assert yaml.safe_load(scrubber(values)(written)) == [{"note": CENSOR, "bio": CENSOR}]
