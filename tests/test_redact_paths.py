"""Redaction paths followed through the schema (aliases under dicts, lists and `*`; typos refused at declaration
at any depth), errors raised by presenter callbacks scrubbed of redacted values, suggestions naming no action
left out, and UI option errors that do not echo data."""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

import pytest
from fastapi import HTTPException
from pydantic import BaseModel, Field

from mcpfusion import Presenter, Tool, ToolError, suggest, ui
from mcpfusion.errors import ValidationFailed
from mcpfusion.testing import ToolTester
from tests.firewall_kit import app_for, every_path
from tests.service_kit import asgi_client, in_process, mcp, rest

EU, C, G = "eu@example.com", "c@example.com", "g@example.com"


class Contact(BaseModel):
    email_address: str = Field(alias="mail")
    name: str = ""


class Account(BaseModel):
    id: str
    by_region: dict[str, Contact] = {}
    contacts: list[Contact] = []
    main: Contact | None = None
    pair: tuple[Contact, ...] = ()
    groups: dict[str, list[Contact]] = {}
    meta: dict[str, Any] = {}
    blob: Any = None


ROW = {"id": "a1", "by_region": {"eu": {"mail": EU}}, "contacts": [{"mail": C}], "main": {"mail": "m@example.com"},
       "pair": [{"mail": "p@example.com"}], "groups": {"g": [{"mail": G}]}}


# -- 1: aliases through dicts of models, `.*.` on lists, literal dict keys, unions ---------------------------------

@pytest.mark.parametrize(("path", "gone"), [
    ("by_region.*.email_address", [EU]),
    ("by_region.eu.email_address", [EU]),
    ("contacts.*.email_address", [C]),
    ("contacts[*].email_address", [C]),
    ("*.*.email_address", [EU, C, "p@example.com"]),
    ("main.email_address", ["m@example.com"]),
    ("pair[*].email_address", ["p@example.com"]),
    ("groups.*[*].email_address", [G]),
    ("groups.g[*].email_address", [G]),
    ("by_region.*.mail", [EU]),
])
def test_a_path_through_a_dict_or_list_of_models_follows_the_fields_alias(path: str, gone: list[str]) -> None:
    sent = Presenter("account").schema(Account).redact_pii([path]).present(ROW).texts[0]
    for value in gone:
        assert value not in sent, (path, sent)
    assert '"mail":"[REDACTED]"' in sent


def test_a_dict_of_models_path_is_redacted_on_every_transport() -> None:
    t = Tool("t")

    @t.action(readonly=True, returns=Presenter("account").schema(Account).redact_pii(["by_region.*.email_address"]))
    async def get() -> dict:
        """Get."""
        return ROW

    answers = asyncio.run(every_path(app_for(t), "t", "get"))
    for path, answer in answers.items():
        assert answer.error is None and EU not in answer.raw and "[REDACTED]" in answer.raw, path


def test_the_wire_schema_types_the_aliased_path_as_the_censor() -> None:
    schema = Presenter("account").schema(Account).redact_pii(["by_region.*.email_address"]).wire_schema()
    value = schema["properties"]["by_region"]["additionalProperties"]["properties"]["mail"]
    assert value["const"] == "[REDACTED]"


# -- 2: a path is checked at every depth ------------------------------------------------------------------------

class Customer(BaseModel):
    name: str
    email: str


class Invoice(BaseModel):
    id: str
    customer: Customer
    lines: list[Customer] = []
    by_region: dict[str, Customer] = {}
    extra: dict[str, Any] = {}
    loose: Any = None


@pytest.mark.parametrize(("path", "said"), [
    ("emial", "names no field of its schema"),
    ("customer.emial", "names no field of 'Customer'"),
    ("lines[*].emial", "names no field of 'Customer'"),
    ("by_region.*.emial", "names no field of 'Customer'"),
    ("customer.email.domain", "goes through the scalar field 'email'"),
    ("lines.email", "goes through the list 'lines'"),
    ("customer[*].email", "'customer' as a list"),
    ("id.*", "goes through the scalar field 'id'"),
])
def test_a_path_that_reaches_no_value_is_refused_at_declaration(path: str, said: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"presenter 'invoice': redaction path '{path}' ")) as raised:
        Presenter("invoice").schema(Invoice).redact_pii([path])
    assert said in str(raised.value)


@pytest.mark.parametrize("path", ["customer.email", "lines[*].email", "lines.*.email", "by_region.*.email",
                                  "by_region.eu.email", "extra.anything.deeper", "loose.x[*].y", "*.email",
                                  "*.nothing_declared", "lines[*]", "customer.*"])
def test_paths_that_may_reach_a_value_are_accepted(path: str) -> None:
    Presenter("invoice").schema(Invoice).redact_pii([path])


def test_a_union_member_that_takes_the_path_is_enough() -> None:
    """The docs' example: a legacy string beside the object (the string fails closed at run time, per row)."""
    contacts = Presenter("contacts").schema({"id": str, "contact": dict[str, str] | str}).redact_pii(["contact.email"])
    assert contacts.present({"id": "c1", "contact": {"email": "ada@example.com"}}).view.data == {
        "id": "c1", "contact": {"email": "[REDACTED]"}}


def test_a_root_key_of_an_embed_is_not_checked_further() -> None:
    child = Presenter("line").schema({"card": str})
    parent = Presenter("invoice").schema({"id": str}).embed("lines", child).redact_pii(["lines[*].card"])
    assert parent.present({"id": "i", "lines": [{"card": "4111"}]}).view.data == {
        "id": "i", "lines": [{"card": "[REDACTED]"}]}


# -- 3: errors raised by callbacks never carry a redacted value ---------------------------------------------------

S = "ada@example.com"


def _crm(view: Presenter) -> Tool:
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view)
    async def get(status: str) -> Any:
        """Get."""
        row = {"id": "c1", "email": S, "status": status}
        return [row, {**row, "id": "c2"}] if status == "list" else row

    return crm


def _rules(c: dict[str, Any]) -> list[str]:
    if c["status"] == "blocked":
        raise ToolError("CONFLICT", f"Customer {c['email']} is blocked.", recovery=f"Ask {c['email']} to call.",
                        details={"who": c["email"], c["email"]: "key"}, available_actions=[f"mail.{c['email']}"])
    return []


def _ui(c: dict[str, Any]) -> Any:
    if c["status"] == "gone":
        raise HTTPException(404, detail={"missing": f"no mailbox {c['email']}"})
    if c["status"] == "invalid":
        raise ValidationFailed("crm.get", [("email", f"{c['email']} is not allowed")])
    return ui.summary(f"{c['email']} is fine")


def _collection(rows: list[dict[str, Any]]) -> Any:
    raise ToolError("CONFLICT", f"rows {', '.join(r['email'] for r in rows)}")


VIEW = Presenter("customer").schema({"id": str, "email": str, "status": str}).redact_pii(["email"]).rules(
    _rules).ui(_ui)


def test_a_tool_error_from_a_callback_is_scrubbed_on_every_transport_and_keeps_its_code() -> None:
    answers = asyncio.run(every_path(app_for(_crm(VIEW)), "crm", "get", {"status": "blocked"}))
    for path, answer in answers.items():
        assert answer.error == "CONFLICT" and S not in answer.raw, (path, answer.raw)
        assert "[REDACTED]" in answer.raw


def test_an_http_exception_and_a_validation_error_from_a_callback_are_scrubbed() -> None:
    app = app_for(_crm(VIEW))

    async def calls() -> None:
        gone = await in_process(app).call("crm", "get", {"status": "gone"})
        assert gone.error_code == "NOT_FOUND" and S not in gone.text and "[REDACTED]" in gone.text
        invalid = await in_process(app).call("crm", "get", {"status": "invalid"})
        assert invalid.error_code == "VALIDATION_ERROR" and S not in invalid.text and "[REDACTED]" in invalid.text
        async with asgi_client(app) as client:
            r = await rest(client, "crm", "get", {"status": "gone"})
            assert r.status_code == 404 and S not in r.text and "[REDACTED]" in r.text
            r = await mcp(client, "crm", "get", {"status": "gone"})
            assert S not in r.text and "[REDACTED]" in r.text

    asyncio.run(calls())


def test_a_collection_callback_and_an_embedded_childs_callback_are_scrubbed() -> None:
    rows = Presenter("customer").schema({"id": str, "email": str}).redact_pii(["email"]).collection_ui(_collection)
    with pytest.raises(ToolError) as raised:
        rows.present([{"id": "c1", "email": S}, {"id": "c2", "email": "bob@example.com"}])
    assert raised.value.message == "rows [REDACTED], [REDACTED]" and raised.value.args == (raised.value.message,)
    child = Presenter("customer").schema({"email": str, "status": str}).redact_pii(["email"]).rules(_rules)
    parent = Presenter("order").schema({"id": str}).embed("customer", child)
    with pytest.raises(ToolError) as raised:
        parent.present({"id": "o1", "customer": {"email": S, "status": "blocked"}})
    error = raised.value
    assert error.code == "CONFLICT" and S not in error.render() and "[REDACTED]" in error.message


def test_an_error_of_a_presenter_without_redaction_is_left_as_raised() -> None:
    plain = Presenter("customer").schema({"email": str, "status": str}).rules(_rules)
    with pytest.raises(ToolError, match=f"Customer {S} is blocked"):
        plain.present({"email": S, "status": "blocked"})


# -- 4: a suggestion names a registered action ------------------------------------------------------------------

def test_a_suggestion_naming_no_registered_action_is_left_out_and_logged_without_its_text(
        caplog: pytest.LogCaptureFixture) -> None:
    view = (Presenter("customer").schema({"id": str, "email": str}).redact_pii(["email"])
            .suggest(lambda c: [suggest(f"mail.{c['email'].split('@')[0]}", "Write to the customer"),
                                suggest("crm.get", f"Reload {c['email']}")]))
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view)
    async def get() -> dict:
        """Get."""
        return {"id": "c1", "email": S}

    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        result = asyncio.run(ToolTester([crm]).call("crm", "get", {}, auth={"sub": "u"}))
    assert [s.action for s in result.suggestions] == ["crm.get"]
    assert "mail.ada" not in result.text and "- crm.get: Reload [REDACTED]" in result.text
    assert "named no registered action" in caplog.text and "mail.ada" not in caplog.text


def test_an_action_built_from_data_is_censored_by_the_guard() -> None:
    """An action that is no name (letters, digits, `_.-`) is no markup: the guard censors it like the reason."""
    view = (Presenter("customer").schema({"id": str, "email": str}).redact_pii(["email"])
            .suggest(lambda c: [suggest(f"mail.{c['email']}", "Write"), suggest("crm.get", "Reload")]))
    response = view.present({"id": "c1", "email": S})
    assert S not in response.texts[-1] and "- crm.get: Reload" in response.texts[-1]
    assert [s.action for s in response.view.suggestions] == ["mail.[REDACTED]", "crm.get"]


# -- minor: a UI option's error names the kind of value, not the value -------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: ui.summary("x", width=S),
    lambda: ui.summary("x", priority=S),
    lambda: ui.code_block(f"mail {S}", "x"),
    lambda: ui.echarts_template({"a": ui.slot("v")}, title=f"Report for {S}")(w=1),
])
def test_a_ui_option_error_does_not_echo_the_value(make: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as raised:
        make()
    assert S not in str(raised.value) and "str of length" in str(raised.value)
