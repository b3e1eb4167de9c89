"""Redaction that reaches every key the serializer writes: aliases that are no names (`@email`, `user.email`),
the fields of pydantic dataclasses and TypedDicts, a validation alias; a number of a callback's error details;
attached text documents whose charset is ambiguous; suggestions naming a raw tool."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import logging
from decimal import Decimal
from typing import Annotated, Any, Generic, NotRequired, TypeVar

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from pydantic.dataclasses import dataclass as pydantic_dataclass
from typing_extensions import TypedDict  # (pydantic reads a TypedDict of typing_extensions on 3.11)

from mcpfusion import MCPFusion, Presenter, Tool, ToolError, attach, document, suggest
from mcpfusion.redaction import parse_path, write_key
from mcpfusion.testing import ToolTester
from tests.firewall_kit import app_for, every_path, tools_list
from tests.service_kit import asgi_client, in_process, rest

S = "ada.lovelace@example.com"
T = TypeVar("T")


def _sent(presenter: Presenter, row: dict[str, Any]) -> str:
    return presenter.present(row).texts[0]


# -- 1: a key that is no name is quoted in the path, never refused at a call or a listing --------------------------

class AtAlias(BaseModel):
    id: str
    email: str = Field(alias="@email")


@pytest.mark.parametrize("alias", ["@email", "2nd_email", "E-mail Address", "user.email", "*", 'a"]b', "é-mail"])
def test_a_field_whose_alias_is_no_name_is_redacted_and_typed_as_the_censor(alias: str) -> None:
    class Person(BaseModel):
        email: str = Field(alias=alias)

    view = Presenter("person").schema(Person).redact_pii(["email"])
    sent = _sent(view, {alias: S})
    assert S not in sent and "[REDACTED]" in sent
    assert view.wire_schema()["properties"][alias]["const"] == "[REDACTED]"


def test_an_at_alias_leaves_tools_list_and_every_transport_working_and_redacted() -> None:
    people = Tool("people")

    @people.action(readonly=True, returns=Presenter("person").schema(AtAlias).redact_pii(["email"]))
    async def get(id: str) -> dict:
        """Get a person."""
        return {"id": id, "@email": S}

    other = Tool("other")

    @other.action(readonly=True)
    async def ping() -> str:
        """Ping."""
        return "pong"

    app = app_for(people, other)
    listed = {t["name"]: t for t in asyncio.run(tools_list(app))}
    assert set(listed) == {"people", "other"}
    assert listed["people"]["outputSchema"]["properties"]["@email"]["const"] == "[REDACTED]"
    for path, answer in asyncio.run(every_path(app, "people", "get", {"id": "p1"})).items():
        assert answer.error is None and S not in answer.raw and "[REDACTED]" in answer.raw, path


def test_a_path_may_quote_a_key_as_a_json_string() -> None:
    class Holder(BaseModel):
        email: str = Field(alias="@email")
        meta: dict[str, Any] = {}

    view = Presenter("h").schema(Holder).redact_pii(['["@email"]', 'meta["a.b"]'])
    sent = _sent(view, {"@email": S, "meta": {"a.b": "bob@example.com", "a": {"b": "kept"}}})
    assert S not in sent and "bob@example.com" not in sent and '"kept"' in sent
    assert parse_path('contact["user.email"][*]') == (("key", "contact"), ("key", "user.email"), ("each", None))


@pytest.mark.parametrize("key", ["email", "@email", "user.email", "*", "[*]", 'a"]b', "", "2nd", "a b"])
def test_every_key_written_as_a_segment_parses_back_to_itself(key: str) -> None:
    assert parse_path(write_key(key)) == (("key", key),)
    assert parse_path(f"a.{write_key(key)}") == (("key", "a"), ("key", key))


@pytest.mark.parametrize("path", ["a..b", ".a", "a.", "", "@email", '["open', '["\\q"]', "a[0]", "email\n", "a*"])
def test_a_malformed_path_is_refused_at_declaration(path: str) -> None:
    with pytest.raises(ValueError, match="invalid redaction path"):
        Presenter("p").schema({"a": str}).redact_pii([path])


# -- 2: the fields of dataclasses and TypedDicts, as pydantic writes them ------------------------------------------

@pydantic_dataclass
class ContactDC:
    email: str = Field(alias="mail")


class ContactTD(TypedDict):
    email: Annotated[str, Field(alias="mail")]
    note: NotRequired[str]


class WithDC(BaseModel):
    contact: ContactDC


class WithTD(BaseModel):
    contact: ContactTD


class Dotted(BaseModel):
    email: str = Field(alias="user.email")


CASES = {
    "dataclass": (WithDC, "contact.email", {"contact": {"mail": S}}),
    "typeddict": (WithTD, "contact.email", {"contact": {"mail": S}}),
    "dotted": (Dotted, "email", {"user.email": S}),
}


def test_aliased_keys_of_dataclasses_typeddicts_and_dotted_aliases_are_redacted_on_every_transport() -> None:
    t = Tool("t")
    for name, (model, path, row) in CASES.items():
        def declare(name: str = name, model: Any = model, path: str = path, row: dict[str, Any] = row) -> None:
            @t.action(name=name, readonly=True, returns=Presenter(name).schema(model).redact_pii([path]))
            async def handler() -> dict:
                """Get."""
                return row
        declare()
    app = app_for(t)
    for name in CASES:
        for path, answer in asyncio.run(every_path(app, "t", name)).items():
            assert answer.error is None and S not in answer.raw and "[REDACTED]" in answer.raw, (name, path)


@dataclasses.dataclass
class PlainDC:
    contact_email: str


class PlainTD(TypedDict):
    contact_email: str


class Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel)
    td: PlainTD
    dc: PlainDC


class Outer(BaseModel):
    inner: Camel


def test_a_dataclass_or_typeddict_written_with_the_enclosing_models_alias_generator_is_redacted() -> None:
    row = {"inner": {"td": {"contactEmail": S}, "dc": {"contactEmail": "bob@example.com"}}}
    for path in ("inner.td.contact_email", "inner.*.contact_email"):
        sent = _sent(Presenter("o").schema(Outer).redact_pii([path]), row)
        assert S not in sent and '"contactEmail":"[REDACTED]"' in sent, path
    sent = _sent(Presenter("o").schema(Outer).redact_pii(["inner.dc.contact_email"]), row)
    assert "bob@example.com" not in sent


@pydantic_dataclass
class Box(Generic[T]):
    value: T = Field(alias="v")


@pydantic_dataclass
class Secret:
    text: str = Field(alias="@text")


class Boxed(BaseModel):
    box: Box[Secret]


def test_a_generic_dataclass_is_followed_through_its_parameter() -> None:
    sent = _sent(Presenter("b").schema(Boxed).redact_pii(["box.value.text"]), {"box": {"v": {"@text": S}}})
    assert S not in sent and '{"box":{"v":{"@text":"[REDACTED]"}}}' in sent


def test_a_typo_in_a_typeddict_or_dataclass_field_is_refused_at_declaration() -> None:
    with pytest.raises(ValueError, match="names no field of 'ContactTD'"):
        Presenter("p").schema(WithTD).redact_pii(["contact.emial"])
    with pytest.raises(ValueError, match="names no field of 'ContactDC'"):
        Presenter("p").schema(WithDC).redact_pii(["contact.emial"])


def test_a_dataclass_whose_field_types_cannot_be_read_is_refused_when_a_path_goes_into_them() -> None:
    settled = ConfigDict(extra="ignore", from_attributes=True, allow_inf_nan=False)

    def declared() -> type[BaseModel]:
        class Hidden(BaseModel):
            model_config = settled
            e: str = Field(alias="ee")

        @dataclasses.dataclass
        class Holder:
            hidden: Hidden  # (a name of this function: pydantic resolves it here, `get_type_hints` later cannot)
            email: str

        class Held(BaseModel):
            model_config = settled
            holder: Holder

        return Held

    held = declared()
    with pytest.raises(ValueError, match="whose type could not be resolved"):
        Presenter("p").schema(held).redact_pii(["holder.hidden.e"])
    sent = _sent(Presenter("p").schema(held).redact_pii(["holder.email"]),
                 {"holder": {"hidden": {"ee": "x"}, "email": S}})
    assert S not in sent


# -- 6: a validation alias names the field too ---------------------------------------------------------------------

class Split(BaseModel):
    email: str = Field(validation_alias=AliasChoices("in_mail", "e_mail"), serialization_alias="out_mail")


class Splits(BaseModel):
    s: dict[str, Split]


@pytest.mark.parametrize("path", ["s.*.email", "s.*.in_mail", "s.*.e_mail", "s.*.out_mail"])
def test_a_path_may_name_a_field_by_its_validation_alias(path: str) -> None:
    sent = _sent(Presenter("p").schema(Splits).redact_pii([path]), {"s": {"k": {"in_mail": S}}})
    assert S not in sent and '"out_mail":"[REDACTED]"' in sent


# -- 3: a redacted number in a callback's error details ------------------------------------------------------------

SSN = 987654321


def _blocked(c: dict[str, Any]) -> list[str]:
    raise ToolError("CONFLICT", "Customer is blocked.",
                    details={"ssn": c["ssn"], "as_float": float(c["ssn"]), "as_decimal": Decimal(c["ssn"]),
                             "text": str(c["ssn"]), "age": c["age"], "age_text": str(c["age"]), "flag": True,
                             "other": 5})


def test_a_redacted_number_in_a_callbacks_error_details_is_censored_on_every_transport() -> None:
    view = Presenter("cust").schema({"id": str, "ssn": int, "age": int}).redact_pii(["ssn", "age"]).rules(_blocked)
    with pytest.raises(ToolError) as raised:
        view.present({"id": "c1", "ssn": SSN, "age": 42})
    assert raised.value.details == {"ssn": "[REDACTED]", "as_float": "[REDACTED]", "as_decimal": "[REDACTED]",
                                    "text": "[REDACTED]", "age": "[REDACTED]", "age_text": "[REDACTED]",
                                    "flag": True, "other": 5}
    crm = Tool("crm")

    @crm.action(readonly=True, returns=view)
    async def get() -> dict:
        """Get."""
        return {"id": "c1", "ssn": SSN, "age": 42}

    for path, answer in asyncio.run(every_path(app_for(crm), "crm", "get")).items():
        assert answer.error == "CONFLICT" and str(SSN) not in answer.raw, path


# -- 4: an attached text document in an ambiguous charset ----------------------------------------------------------

CSV = f"id,email\nc1,{S}\n"
CHARSETS = {
    "twice": (CSV.encode("utf-16-le"), "text/csv; charset=utf-16-le; charset=utf-8"),
    "utf16_no_bom": (CSV.encode("utf-16-be"), "text/csv; charset=utf-16"),
    "utf32_no_bom": (CSV.encode("utf-32-be"), "text/csv; charset=UTF-32"),
    "utf16_bom_be": (b"\xfe\xff" + CSV.encode("utf-16-be"), "text/csv; charset=utf-16"),
    "utf16_be": (CSV.encode("utf-16-be"), "text/csv; charset=utf-16-be"),
    "utf32_bom": (CSV.encode("utf-32"), "text/csv; charset=utf-32"),
    "text_utf16": (CSV, "text/csv; charset=utf-16"),  # a text: written with its BOM
}


def _documents_app() -> Any:
    view = Presenter("cust").schema({"id": str, "email": str}).redact_pii(["email"])
    t = Tool("t")
    for name, (data, mime) in CHARSETS.items():
        def declare(name: str = name, data: Any = data, mime: str = mime) -> None:
            @t.action(name=name, readonly=True, returns=view)
            async def handler() -> dict:
                """Doc."""
                return attach({"id": "c1", "email": S}, document(data, mime, uri=f"file:///{name}.csv"))
        declare()
    return app_for(t)


def _leaks(raw: bytes) -> bool:
    return any(S.encode(codec) in raw for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))


@pytest.mark.parametrize(("name", "said"), [("twice", "declares its charset 2 times"),
                                            ("utf16_no_bom", "no byte order mark"),
                                            ("utf32_no_bom", "no byte order mark")])
def test_an_ambiguous_charset_is_refused(name: str, said: str) -> None:
    app = _documents_app()

    async def calls() -> None:
        result = await in_process(app).call("t", name, {})
        assert result.error_code == "CONTENT_REFUSED" and said in result.text
        async with asgi_client(app) as client:
            r = await rest(client, "t", name, {})
            assert r.status_code == 422 and r.json()["code"] == "CONTENT_REFUSED" and said in r.text
            assert not _leaks(r.content)

    asyncio.run(calls())


@pytest.mark.parametrize("name", ["utf16_bom_be", "utf16_be", "utf32_bom", "text_utf16"])
def test_a_document_in_a_charset_that_says_its_byte_order_is_censored(name: str) -> None:
    app = _documents_app()

    async def calls() -> None:
        async with asgi_client(app) as client:
            r = await rest(client, "t", name, {})
        assert r.status_code == 200, r.text
        resource = r.json()["content"][0]["resource"]
        if "text" in resource:
            text = resource["text"]
        else:
            raw = base64.b64decode(resource["blob"])
            assert not _leaks(raw)
            text = raw.decode(resource["mimeType"].split("charset=")[1])
        assert S not in text and "c1,[REDACTED]" in text

    asyncio.run(calls())


# -- 5: a suggestion may name a raw tool ---------------------------------------------------------------------------

def test_a_suggestion_naming_a_raw_tool_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    fusion = MCPFusion("s")

    @fusion.raw_tool("thumbnail", description="A thumbnail.",
                     input_schema={"type": "object", "properties": {"id": {"type": "string"}}})
    async def thumbnail(id: str = "") -> str:
        return "ok"

    view = Presenter("inv").schema({"id": str}).suggest(
        lambda inv: [suggest("thumbnail", "See it"), suggest("billing.get", "Reload"), suggest("nothing", "No")])
    billing = Tool("billing")

    @billing.action(readonly=True, returns=view)
    async def get(id: str) -> dict:
        """Get."""
        return {"id": id}

    fusion.add_tool(billing)
    with caplog.at_level(logging.WARNING, logger="mcpfusion"):
        result = asyncio.run(ToolTester(fusion).call("billing", "get", {"id": "i1"}))
    assert [s.action for s in result.suggestions] == ["thumbnail", "billing.get"]
    assert "1 suggestion(s) named no registered action" in caplog.text
    fusion.remove_raw_tool("thumbnail")
    result = asyncio.run(ToolTester(fusion).call("billing", "get", {"id": "i1"}))
    assert [s.action for s in result.suggestions] == ["billing.get"]
