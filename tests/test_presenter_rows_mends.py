"""Redaction paths through custom serializers are refused; a row of a list that cannot be sent (its redaction
fails closed, or JSON cannot write it) is left out with a notice instead of failing the list."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, PlainSerializer, field_serializer, model_serializer
from pydantic.alias_generators import to_camel

from mcpfusion import Presenter, Tool, ui
from mcpfusion.presenter import PresenterError
from mcpfusion.redaction import RedactionError
from tests.firewall_kit import PATHS, app_for, every_path

# -- 1: a redaction path the redactor cannot follow through a custom serializer -----------------------------


class Renaming(BaseModel):
    name: str
    email: str

    @model_serializer
    def _write(self) -> dict[str, Any]:
        return {"name": self.name, "contact": self.email}  # `email` written as `contact`


class Deriving(BaseModel):
    name: str
    email: str

    @model_serializer(mode="wrap")
    def _write(self, handler: Any) -> dict[str, Any]:
        written = handler(self)
        written["display"] = f"{self.name} <{self.email.upper()}>"  # a copy the egress guard cannot recognize
        return written


class Order(BaseModel):
    id: str
    customer: Renaming


class Contact(BaseModel):
    email: str


class Wrapped(BaseModel):
    id: str
    contact: Contact
    card: Annotated[Contact, PlainSerializer(lambda c: {"primary": c.email})]

    @field_serializer("contact")
    def _write(self, contact: Contact) -> dict[str, str]:
        return {"primary": contact.email}


@pytest.mark.parametrize(("model", "path", "writer"), [
    (Renaming, "email", "model Renaming's custom model_serializer"),
    (Deriving, "email", "model Deriving's custom model_serializer"),
    (Order, "customer.email", "model Renaming's custom model_serializer"),
    (Order, "*.email", "model Renaming's custom model_serializer"),
    (Wrapped, "contact.email", "the serializer of Wrapped.contact"),
    (Wrapped, "card.email", "the serializer of Wrapped.card"),
])
def test_a_redaction_path_through_a_custom_serializer_is_refused_at_declaration(model, path, writer):
    for build in (lambda: Presenter("p").schema(model).redact_pii([path]),
                  lambda: Presenter("p").redact_pii([path]).schema(model)):
        with pytest.raises(ValueError, match="goes through") as refused:
            build()
        assert writer in str(refused.value) and "censor the value in that serializer" in str(refused.value)


class Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    full_name: str
    email_address: str


class Masked(BaseModel):
    name: str
    email: str

    @field_serializer("email")
    def _write(self, email: str) -> dict[str, str]:
        return {"primary": email}


def test_paths_the_redactor_follows_are_still_censored():
    """An alias generator is followed; a serializer of the redacted field itself writes what is censored whole;
    a whole field written by a serializer is censored whole."""
    camel = Presenter("camel").schema(Camel).redact_pii(["email_address"])
    assert camel.present({"full_name": "Ada", "email_address": "ada@example.com"}).view.data == {
        "fullName": "Ada", "emailAddress": "[REDACTED]"}
    masked = Presenter("masked").schema(Masked).redact_pii(["email"])
    assert masked.present({"name": "Ada", "email": "ada@example.com"}).view.data == {
        "name": "Ada", "email": "[REDACTED]"}
    whole = Presenter("whole").schema(Wrapped).redact_pii(["contact", "card"])
    out = whole.present({"id": "1", "contact": {"email": "ada@example.com"}, "card": {"email": "bob@example.com"}})
    assert out.view.data == {"id": "1", "contact": "[REDACTED]", "card": "[REDACTED]"}
    assert "example.com" not in out.text


# -- 2: one row that cannot be sent never fails a list ---------------------------------------------------------

LONE = json.loads('"Mallory \\ud800"')  # a lone surrogate, as a JSON column may hold: JSON cannot write it


def test_a_row_holding_a_lone_surrogate_is_left_out_of_a_list(caplog):
    seen: list[Any] = []

    def summary(rows: list[dict[str, Any]]) -> Any:
        seen.append([r["id"] for r in rows])
        return ui.summary(f"{len(rows)} rows")

    rows = Presenter("rows").schema({"id": str, "name": str}).collection_ui(summary)
    with caplog.at_level("WARNING", logger="mcpfusion"):
        out = rows.present([{"id": "1", "name": "Ada"}, {"id": "2", "name": LONE}, {"id": "3", "name": "Bob"}])
    assert out.view.data == [{"id": "1", "name": "Ada"}, {"id": "3", "name": "Bob"}]
    assert "1 of 3 item(s) could not be shown" in out.text and "2 rows" in out.text
    assert seen[-1] == ["1", "3"]  # callbacks of the answer sent never saw the row left out
    assert "#1 (a value cannot be written as JSON)" in caplog.text and "Mallory" not in caplog.text
    out.text.encode()  # every block is valid UTF-8
    with pytest.raises(PresenterError, match="cannot be written as JSON"):  # one object: INVALID_OUTPUT
        rows.present({"id": "2", "name": LONE})


def test_a_row_left_out_takes_its_embedded_blocks_with_it():
    child = Presenter("tag").schema({"label": str}).ui(lambda t: ui.summary(f"tag {t['label']}"))
    rows = Presenter("rows").schema({"id": str, "name": str}).embed("tag", child)
    out = rows.present([{"id": "1", "name": "Ada", "tag": {"label": "first"}},
                        {"id": "2", "name": LONE, "tag": {"label": "second"}}])
    assert out.view.data == [{"id": "1", "name": "Ada", "tag": {"label": "first"}}]
    assert "tag first" in out.text and "tag second" not in out.text


def test_a_row_whose_value_does_not_fit_a_redaction_path_is_left_out(caplog):
    seen: list[Any] = []
    rows = (Presenter("rows").schema({"id": str, "contact": dict[str, str] | str | None})
            .redact_pii(["contact.email"])
            .collection_ui(lambda items: seen.append([i["id"] for i in items])))
    data = [{"id": "c1", "contact": {"email": "ada@example.com"}}, {"id": "c2", "contact": "legacy ada@example.org"},
            {"id": "c3", "contact": None}]
    with caplog.at_level("WARNING", logger="mcpfusion"):
        out = rows.present(data)
    assert out.view.data == [{"id": "c1", "contact": {"email": "[REDACTED]"}}, {"id": "c3", "contact": None}]
    assert "1 of 3 item(s) could not be shown" in out.text and "example" not in out.text
    assert seen[-1] == ["c1", "c3"]
    assert "#1 (a redacted path does not fit it)" in caplog.text and "legacy" not in caplog.text
    with pytest.raises(RedactionError):  # one object still fails closed
        rows.present(data[1])


def test_sifting_judges_a_row_by_what_select_sends():
    """A row whose unwritable value `_select` leaves out is sent; the row that cannot be redacted is not."""
    rows = Presenter("rows").schema({"id": str, "note": str, "contact": dict[str, str] | str}).redact_pii(
        ["contact.email"])
    data = [{"id": "1", "note": LONE, "contact": {"email": "ada@example.com"}},
            {"id": "2", "note": "ok", "contact": "legacy"}]
    out = rows.present(data, select=["id", "contact"])
    assert out.view.data == [{"id": "1", "contact": {"email": "[REDACTED]"}}]


async def test_every_path_answers_the_other_rows():
    crm = Tool("crm")
    rows = Presenter("rows").schema({"id": str, "name": str, "contact": dict[str, str] | str | None}).redact_pii(
        ["contact.email"])

    @crm.action(readonly=True, returns=rows)
    async def list_rows() -> object:
        """List."""
        return [{"id": "c1", "name": "Ada", "contact": {"email": "ada@example.com"}},
                {"id": "c2", "name": "Bob", "contact": "legacy free text"},
                {"id": "c3", "name": LONE, "contact": None},
                {"id": "c4", "name": "Cy", "contact": None}]

    @crm.action(readonly=True, returns=rows)
    async def get_row() -> object:
        """Get."""
        return {"id": "c3", "name": LONE, "contact": None}

    app = app_for(crm)
    answers = await every_path(app, "crm", "list_rows")
    for path in PATHS:
        answer = answers[path]
        assert answer.error is None, (path, answer.raw)
        assert "ada@example.com" not in answer.raw and "legacy free text" not in answer.raw
        assert path == "rest" or "2 of 4 item(s) could not be shown" in answer.raw  # (REST: the data alone)
    assert answers["rest"].data == [{"id": "c1", "name": "Ada", "contact": {"email": "[REDACTED]"}},
                                    {"id": "c4", "name": "Cy", "contact": None}]
    answers = await every_path(app, "crm", "get_row")
    assert {answers[path].error for path in PATHS} == {"INVALID_OUTPUT"}
