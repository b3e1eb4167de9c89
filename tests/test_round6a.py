"""Round 6a: a document attached to a presented answer never carries a redacted value in clear.

- The redacted values of rows the presenter did not send (cut by its `limit`, left out for not fitting the
  schema; embedded items too) are censored out of a document the handler built from all its rows.
- Every blob of a type accepted as text (YAML, TOML, SQL, JavaScript, GraphQL, `+yaml`...) is censored: one
  definition of "textual" serves the text check and the censor.
- `Presenter.attach(fn)` sees the data before `_select`: a field the agent did not select is still there.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool, attach, document
from mcpfusion import presenter as presenter_module
from mcpfusion.censor import Scrubber
from mcpfusion.content import _TEXT_APPLICATIONS, _text_like, _textual, scrubbed
from tests.wire_kit import every_wire as every_wire_response

SECRET = re.compile(r"person\d+@secret\.example")


class Customer(BaseModel):
    id: str
    name: str
    email: str


ROWS = [{"id": f"c{i}", "name": f"N{i}", "email": f"person{i}@secret.example"} for i in range(5)]
BAD = [{"id": "c0", "name": "N0", "email": "person0@secret.example"},
       {"id": "c1", "name": None, "email": "person1@secret.example"},  # does not fit: left out
       {"id": "c2", "name": "N2", "email": "person2@secret.example"}]


def csv(rows: list[dict[str, Any]]) -> str:
    return "id,name,email\n" + "".join(f"{r['id']},{r['name']},{r['email']}\n" for r in rows)






async def every_wire(app: Any, tool: str, action: str, arguments: dict[str, Any]) -> list[Any]:
    """REST's body (a 200), then the results of a tools/call on the 2026 and the 2025 MCP wires."""
    rest, modern, legacy = await every_wire_response(app, tool, action, arguments)
    assert rest.status_code == 200, rest.text
    return [rest.json(), modern, legacy]


# -- 1. rows the presenter did not send ----------------------------------------------------------------------


def export_app() -> Any:
    limited = Presenter("limited").schema(Customer).redact_pii(["email"]).limit(2)
    plain = Presenter("plain").schema(Customer).redact_pii(["email"])
    crm = Tool("crm")

    @crm.action(readonly=True, returns=limited, content_types=["text/csv"])
    async def export_limited() -> object:
        """Rows (2 shown) with a CSV of all of them."""
        return attach(ROWS, document(csv(ROWS), "text/csv", uri="crm://export.csv"))

    @crm.action(readonly=True, returns=plain, content_types=["text/csv"])
    async def export_degraded() -> object:
        """Rows, one of them not fitting, with a CSV of all of them."""
        return attach(BAD, document(csv(BAD), "text/csv", uri="crm://export.csv"))

    return MCPFusion("crm", tools=[crm]).build_app()


@pytest.mark.parametrize("action", ["export_limited", "export_degraded"])
async def test_rows_not_sent_are_censored_out_of_an_attached_document(action: str) -> None:
    rest, modern, legacy = await every_wire(export_app(), "crm", action, {})
    for body in (rest, modern, legacy):
        assert not SECRET.findall(json.dumps(body)), body
    document_text = modern["content"][-1]["resource"]["text"]
    assert document_text.count("[REDACTED]") == len(ROWS if action == "export_limited" else BAD)
    assert "c1,N1," in document_text or "c1,None," in document_text  # (the rest of the row is kept)


class Line(BaseModel):
    sku: str
    card: str


class Order(BaseModel):
    id: str


@pytest.mark.parametrize("limit", [1, None])
def test_embedded_items_cut_or_left_out_are_censored_too(limit: int | None) -> None:
    lines = Presenter("line").schema(Line).redact_pii(["card"])
    if limit is not None:
        lines.limit(limit)
    order = Presenter("order").schema(Order).embed("lines", lines)
    raw = {"id": "o1", "lines": [{"sku": "a", "card": "4111-0000-0000-0001"},
                                 {"sku": "b", "card": "4111-0000-0000-0002"},  # beyond the child's limit (1)
                                 {"sku": None, "card": "4111-0000-0000-0003"}]}  # does not fit
    response = order.present(raw)
    assert "4111" not in response.texts[0]
    scrub = response.view.scrub
    assert scrub is not None
    doc = scrubbed(document("\n".join(line["card"] for line in raw["lines"]), "text/plain", uri="o://1"), scrub)
    assert "4111" not in (doc.text or "")  # type: ignore[attr-defined]


class Record:
    """A row read from an ORM: attributes, no mapping."""

    def __init__(self, id: str, name: str | None, email: str) -> None:  # noqa: A002
        self.id, self.name, self.email = id, name, email


def test_an_object_row_that_does_not_fit_is_read_by_the_schema_fields() -> None:
    view = Presenter("customers").schema(Customer).redact_pii(["email"])
    rows = [Record("c0", "N0", "person0@secret.example"), Record("c1", None, "person1@secret.example")]
    response = view.present(rows)
    assert len(response.view.data) == 1
    scrub = response.view.scrub
    assert scrub is not None
    assert scrub("person0@secret.example person1@secret.example, N0") == "[REDACTED] [REDACTED], N0"


def test_a_presenters_attach_callable_cannot_leak_rows_beyond_its_limit() -> None:
    view = (Presenter("customers").schema(Customer).redact_pii(["email"]).limit(2)
            .attach(lambda shown: document(csv(ROWS), "text/csv", uri="crm://all.csv")))
    response = view.present(ROWS)
    text = response.content[0].text  # type: ignore[attr-defined]
    assert not SECRET.findall(text), text
    assert text.count("[REDACTED]") == len(ROWS)


def test_rows_a_caller_cut_before_presenting_are_censored_when_given() -> None:
    view = Presenter("customers").schema(Customer).redact_pii(["email"])
    response = view.present(ROWS[:2], given=ROWS)  # a page of two rows, of the five the handler gave
    assert [row["id"] for row in response.view.data] == ["c0", "c1"]
    scrub = response.view.scrub
    assert scrub is not None
    assert not SECRET.findall(scrub(csv(ROWS)))


def test_nothing_is_worked_out_again_unless_a_document_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = presenter_module._given
    monkeypatch.setattr(presenter_module, "_given", lambda *a: calls.append(a) or real(*a))
    limited = Presenter("limited").schema(Customer).redact_pii(["email"]).limit(2)
    response = limited.present(ROWS)
    assert calls == []  # no document: the rows left out are never looked at
    assert response.view.scrub is not None
    assert response.view.scrub("person4@secret.example") == "[REDACTED]"
    assert len(calls) == 1
    response.view.scrub("person3@secret.example")
    assert len(calls) == 1  # worked out once per response
    # A list sent whole: the plain scrubber of the values removed, as before.
    whole = Presenter("plain").schema(Customer).redact_pii(["email"]).present(ROWS)
    assert isinstance(whole.view.scrub, Scrubber)


# -- 2. textual blobs ------------------------------------------------------------------------------------------

TEXT_BLOBS = ["text/plain", "application/yaml", "application/x-yaml", "application/toml", "application/sql",
              "application/javascript", "application/graphql", "application/vnd.foo+yaml", "application/x-ndjson",
              "application/xml-dtd", "application/ld+json", "image/svg+xml", "text/csv; charset=iso-8859-1"]


def test_every_type_accepted_as_text_is_textual() -> None:
    for sub in _TEXT_APPLICATIONS:
        assert _text_like(f"application/{sub}") and _textual(f"application/{sub}"), sub
    for essence in ("application/vnd.a+json", "application/vnd.a+xml", "application/vnd.a+yaml", "text/x-foo"):
        assert _text_like(essence) and _textual(essence), essence
    assert _textual("image/svg+xml") and not _text_like("image/svg+xml")  # text, but no text document


def blob_app() -> Any:
    view = Presenter("contact").schema({"id": str, "email": str}).redact_pii(["email"])
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view)
    async def doc(kind: str) -> object:
        """A contact with a document about it as a blob."""
        row = {"id": "c1", "email": "person1@secret.example"}
        return attach(row, document(f"id: c1\nemail: {row['email']}\n".encode(), kind, uri="crm://c1"))

    return MCPFusion("crm", tools=[crm]).build_app()


@pytest.mark.parametrize("kind", TEXT_BLOBS)
async def test_a_blob_of_any_textual_type_is_censored(kind: str) -> None:
    rest, modern, legacy = await every_wire(blob_app(), "crm", "doc", {"kind": kind})
    for blocks in (rest["content"], modern["content"], legacy["content"]):
        blob = base64.b64decode(blocks[-1]["resource"]["blob"]).decode()
        assert blob.splitlines()[1] == "email: [REDACTED]", (kind, blob)


# -- 3. Presenter.attach and _select ---------------------------------------------------------------------------


def select_app() -> Any:
    card = (Presenter("cust").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])
            .attach(lambda c: document(f"card of {c['name']} <{c['email']}> (person1@secret.example)",
                                       "text/plain", uri=f"crm://cards/{c['id']}")))
    crm = Tool("crm", select=True)

    @crm.action(readonly=True, returns=card, content_types=["text/plain"])
    async def get(id: str) -> dict[str, str]:  # noqa: A002
        """One customer."""
        return {"id": id, "name": "Ada", "email": "person1@secret.example"}

    return MCPFusion("crm", tools=[crm]).build_app()


async def test_an_attach_callable_sees_the_fields_the_agent_did_not_select() -> None:
    rest, modern, legacy = await every_wire(select_app(), "crm", "get", {"id": "c1", "_select": ["email"]})
    assert rest["data"] == {"email": "[REDACTED]"}
    expected = "card of Ada <[REDACTED]> ([REDACTED])"
    assert rest["content"][0]["resource"]["text"] == expected
    for result in (modern, legacy):
        assert not result["isError"], result
        assert result["structuredContent"] == {"email": "[REDACTED]"}
        assert result["content"][-1]["resource"] == {"uri": "crm://cards/c1", "mimeType": "text/plain",
                                                     "text": expected}
