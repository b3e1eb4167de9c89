"""Round 6k: what an attached document (or an attach callable's error) may still carry of a redacted value.

1. A document the handler built from its raw rows writes a redacted datetime or number its own way
   (`str(datetime)`, the int it read): censored in those forms too, collected from the rows as given.
2. An error a `Presenter.attach` callable raises quoting a redacted value is censored, as a ui callback's is.
3. Rows that do not fit the schema are read under every name the schema reads them (a validation alias,
   `AliasChoices`, `AliasPath`, ORM objects by attributes): their redacted values are censored too.
4. A document is no block of the wire format: a first line like `<action_suggestions>` exempts nothing.
5. The extra row a keyset page fetched (`page.size + 1`) and `page.keyset` dropped is censored too.
6. Textual blobs are read as a client reads them: a byte order mark contradicting the declared charset and
   text holding NUL characters are refused; iso-8859-1 is read (and censored) as windows-1252.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from fastapi import HTTPException
from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field

from mcpfusion import MCPFusion, Page, Presenter, Tool, ToolError, attach, document
from mcpfusion.censor import Scrubber
from mcpfusion.content import ContentError, EmbeddedResource, scrubbed
from mcpfusion.pagination import PageCall, Paged, Paging
from tests.wire_kit import every_wire

SECRET = re.compile(r"person\d+@secret\.example")






# -- 1. a redacted datetime or number as the handler's own value writes it -----------------------------------


class Person(BaseModel):
    id: str
    born_at: datetime
    salary: float
    joined: date
    bonus: Decimal


PEOPLE = [
    {"id": "p1", "born_at": datetime(1990, 5, 17, 10, 30, tzinfo=UTC), "salary": 85000,
     "joined": date(2019, 3, 4), "bonus": Decimal("1234.50")},
    {"id": "p2", "born_at": datetime(1985, 1, 2, 3, 4, 5), "salary": 123456.5, "joined": date(2020, 11, 30),
     "bonus": Decimal("99999")},
]
# Every way the rows' redacted values are written below: none may reach the agent.
PEOPLE_SECRETS = re.compile(r"1990-05-17|10:30:00|1985-01-02|03:04:05|85,?000|123,?456|2019-03-04|2020-11-30|"
                            r"1,?234\.5|99,?999")


def people_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    for row in rows:
        writer.writerow([row["id"], row["born_at"], row["salary"], row["joined"], row["bonus"]])
        writer.writerow([row["id"], row["born_at"].isoformat(), f"{row['salary']:,}", f"{row['bonus']:,}"])
    naive = PEOPLE[0]["born_at"].replace(tzinfo=None)
    writer.writerow([naive, f"{float(PEOPLE[0]['salary']):.2f}"])  # (a strftime-like form, the money form)
    return out.getvalue()


def people_view() -> Presenter:
    return Presenter("person").schema(Person).redact_pii(["born_at", "salary", "joined", "bonus"])


def test_a_document_of_the_raw_rows_is_censored_of_their_datetimes_and_numbers() -> None:
    response = people_view().present(PEOPLE)
    assert response.view.scrub is not None
    text = people_csv(PEOPLE)
    assert PEOPLE_SECRETS.findall(text)  # (the document does write them)
    censored = response.view.scrub(text)
    assert not PEOPLE_SECRETS.findall(censored), censored
    assert censored.startswith("p1,[REDACTED]")  # the row's id stays


def test_one_row_as_the_handler_gave_it_is_censored_too() -> None:
    response = people_view().present(PEOPLE[1])
    censored = response.view.scrub(f"{PEOPLE[1]['born_at']} earns {PEOPLE[1]['salary']}")  # type: ignore[misc]
    assert censored == "[REDACTED] earns [REDACTED]"


async def test_a_handler_document_of_raw_rows_leaves_no_redacted_value_on_any_wire() -> None:
    hr = Tool("hr")

    @hr.action(readonly=True, returns=people_view(), content_types=["text/csv"])
    async def export() -> object:
        """People with a CSV of them."""
        return attach(PEOPLE, document(people_csv(PEOPLE), "text/csv", uri="hr://people.csv"))

    rest, modern, legacy = await every_wire(MCPFusion("hr", tools=[hr]).build_app(), "hr", "export", {})
    assert rest.status_code == 200, rest.text
    assert not PEOPLE_SECRETS.findall(rest.text)
    for result in (modern, legacy):
        assert result["content"][-1]["resource"]["text"].startswith("p1,[REDACTED]")
        assert not PEOPLE_SECRETS.findall(json.dumps(result))


# -- 2. an error a Presenter.attach callable raises -------------------------------------------------------------

CUSTOMERS = {"c1": {"id": "c1", "name": "Ada", "email": "person1@secret.example"}}


def lookup_raises(shown: dict[str, Any]) -> Any:
    row = CUSTOMERS[shown["id"]]
    raise ToolError("NOT_FOUND", f"No statement on file for {row['name']} <{row['email']}>.",
                    recovery=f"Ask {row['email']} to sign up.", details={"email": row["email"]})


def http_raises(shown: list[dict[str, Any]]) -> Any:
    raise HTTPException(404, f"no statements for {', '.join(CUSTOMERS[row['id']]['email'] for row in shown)}")


def customer_view() -> Presenter:
    return Presenter("cust").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])


def test_an_error_an_attach_callable_raises_is_censored() -> None:
    with pytest.raises(ToolError) as raised:
        customer_view().attach(lookup_raises).present(CUSTOMERS["c1"])
    error = raised.value
    assert error.message == "No statement on file for Ada <[REDACTED]>."
    assert error.recovery == "Ask [REDACTED] to sign up."
    assert error.details == {"email": "[REDACTED]"}
    with pytest.raises(HTTPException) as http:
        customer_view().attach(http_raises).present([CUSTOMERS["c1"]])
    assert http.value.detail == "no statements for [REDACTED]"


def test_an_attach_callables_error_quoting_a_raw_datetime_is_censored() -> None:
    def raises(shown: dict[str, Any]) -> Any:
        raise ToolError("NOT_FOUND", f"no payslip for {PEOPLE[1]['born_at']} at {PEOPLE[1]['salary']}")

    with pytest.raises(ToolError) as raised:
        people_view().attach(raises).present(PEOPLE[1])
    assert raised.value.message == "no payslip for [REDACTED] at [REDACTED]"


async def test_an_attach_callables_error_leaves_censored_on_every_wire() -> None:
    crm = Tool("crm")

    @crm.action(readonly=True, returns=customer_view().attach(lookup_raises), content_types=["text/plain"])
    async def statement(id: str) -> dict[str, Any]:
        """A customer's statement."""
        return CUSTOMERS[id]

    rest, modern, legacy = await every_wire(MCPFusion("crm", tools=[crm]).build_app(), "crm", "statement",
                                            {"id": "c1"})
    assert rest.status_code == 404 and "<[REDACTED]>" in rest.text
    assert not SECRET.findall(rest.text)
    for result in (modern, legacy):
        assert result["isError"] and not SECRET.findall(json.dumps(result))


# -- 3. rows that do not fit, read under a validation alias -----------------------------------------------------


class ByAlias(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: str
    name: str
    email: str = Field(validation_alias="contact_email")


class ByChoices(BaseModel):
    id: str
    name: str
    email: str = Field(validation_alias=AliasChoices("email", "mail"))


class ByPath(BaseModel):
    id: str
    name: str
    email: str = Field(validation_alias=AliasPath("contact", "email"))


class Record:
    def __init__(self, id: str, name: str | None, contact_email: str) -> None:
        self.id, self.name, self.contact_email = id, name, contact_email


UNFIT = {  # the second row of each does not fit (name is None): left out, never redacted
    "validation_alias": (ByAlias, [{"id": "c0", "name": "N0", "contact_email": "person0@secret.example"},
                                   {"id": "c1", "name": None, "contact_email": "person1@secret.example"}]),
    "alias_choices": (ByChoices, [{"id": "c0", "name": "N0", "mail": "person0@secret.example"},
                                  {"id": "c1", "name": None, "mail": "person1@secret.example"}]),
    "alias_path": (ByPath, [{"id": "c0", "name": "N0", "contact": {"email": "person0@secret.example"}},
                            {"id": "c1", "name": None, "contact": {"email": "person1@secret.example"}}]),
    "orm_objects": (ByAlias, [Record("c0", "N0", "person0@secret.example"),
                              Record("c1", None, "person1@secret.example")]),
}


@pytest.mark.parametrize("case", list(UNFIT))
def test_a_row_left_out_is_censored_under_the_name_the_schema_reads(case: str) -> None:
    model, rows = UNFIT[case]
    response = Presenter(case).schema(model).redact_pii(["email"]).present(rows)
    assert [row["id"] for row in response.view.data] == ["c0"]
    assert response.view.scrub is not None
    assert response.view.scrub("person0@secret.example person1@secret.example") == "[REDACTED] [REDACTED]"


class Node(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    name: str
    email: str
    parent: Node | None = None
    children: list[Node] = []


class NodeRecord:
    def __init__(self, name: str, email: str) -> None:
        self.name, self.email = name, email
        self.parent: NodeRecord | None = None
        self.children: list[NodeRecord] = []


def test_rows_whose_objects_loop_are_read_once_and_censored() -> None:
    root, leaf = NodeRecord("root", "person1@secret.example"), NodeRecord("leaf", "person2@secret.example")
    root.children, leaf.parent = [leaf], root  # a cycle: the schema cannot take it, the row is left out
    view = Presenter("nodes").schema(Node).redact_pii(["email", "children[*].email"])
    response = view.present([NodeRecord("ok", "person3@secret.example"), root])
    assert [row["name"] for row in response.view.data] == ["ok"]
    assert response.view.scrub is not None
    text = "person1@secret.example, person2@secret.example, person3@secret.example"
    assert response.view.scrub(text) == "[REDACTED], [REDACTED], [REDACTED]"


# -- 4. a document that looks like the wire format's markup -----------------------------------------------------

CARDS = [{"id": f"k{i}", "card": f"4111-0000-0000-000{i}", "title": title}
         for i, title in enumerate(["<action_suggestions>", "Visa", "Amex"])]
CARD = re.compile(r"4111-\d{4}-\d{4}-\d{4}")


@pytest.mark.parametrize("text", [
    "<action_suggestions>\n" + "".join(f"- {c['card']}: {c['title']}\n" for c in CARDS),
    f'<ui_passthrough type="{CARDS[1]["card"]}">\ncard on file\n</ui_passthrough>',
    f'<ui_passthrough type="markdown" card="{CARDS[2]["card"]}">\n{CARDS[0]["card"]}\n</ui_passthrough>',
    f"<action_suggestions>\n- billing.{CARDS[0]['card']}: pay\n</action_suggestions>",
])
def test_a_document_like_a_block_of_the_wire_format_is_censored_whole(text: str) -> None:
    response = Presenter("cards").schema({"id": str, "card": str, "title": str}).redact_pii(["card"]).present(CARDS)
    assert response.view.scrub is not None
    censored = response.view.scrub(text)
    assert not CARD.findall(censored) and "[REDACTED]" in censored


def test_a_block_the_framework_writes_again_keeps_its_markup_a_document_does_not() -> None:
    scrub = Scrubber(["crm.mail_ada"])
    block = "<action_suggestions>\n- crm.mail_ada: write to crm.mail_ada\n</action_suggestions>"
    assert scrub.block(block) == "<action_suggestions>\n- crm.mail_ada: write to [REDACTED]\n</action_suggestions>"
    assert scrub(block) == "<action_suggestions>\n- [REDACTED]: write to [REDACTED]\n</action_suggestions>"


# -- 5. the extra row of a keyset page --------------------------------------------------------------------------

ROWS = [{"id": f"c{i}", "name": f"N{i}", "email": f"person{i}@secret.example"} for i in range(6)]


def test_keyset_keeps_the_rows_it_was_given_and_take_passes_them_on() -> None:
    fetched = ROWS[:3]
    paged = Page(size=2).keyset(fetched, key=lambda r: [r["id"]])
    assert list(paged) == ROWS[:2] and paged.given is fetched
    last = Page(size=2).keyset(ROWS[4:], key=lambda r: [r["id"]])
    assert last.next_key is None and last.given is None  # nothing left off
    call = PageCall(Paging(b"k"), "crm.keyset", "crm with action keyset", "f", Page(size=2))
    page, _ = call.take(attach(paged, document("x", "text/plain", uri="a://b")))
    assert page.data == ROWS[:2] and call.given is fetched
    plain = PageCall(Paging(b"k"), "crm.keyset", "crm with action keyset", "f", Page(size=2))
    plain.take(Paged(ROWS[:2], None))
    assert plain.given is None


async def test_a_keyset_documents_extra_row_is_censored() -> None:
    crm = Tool("crm")

    @crm.action(readonly=True, returns=customer_view(), paginate=2, content_types=["text/csv"])
    async def keyset(page: Page) -> object:
        """Keyset: fetch size+1 rows, the extra one only says there is more."""
        after = page.after[0] if page.after else ""
        rows = [r for r in ROWS if r["id"] > after][: page.size + 1]
        text = "".join(f"{r['id']},{r['email']}\n" for r in rows)
        return attach(page.keyset(rows, key=lambda r: [r["id"]]), document(text, "text/csv", uri="crm://p.csv"))

    rest, modern, legacy = await every_wire(MCPFusion("crm", tools=[crm]).build_app(), "crm", "keyset", {})
    assert rest.status_code == 200, rest.text
    assert [r["id"] for r in rest.json()["data"]] == ["c0", "c1"]
    assert not SECRET.findall(rest.text)
    for result in (modern, legacy):
        assert result["content"][-1]["resource"]["text"] == "c0,[REDACTED]\nc1,[REDACTED]\nc2,[REDACTED]\n"
        assert not SECRET.findall(json.dumps(result))


# -- 6. textual blobs read as a client reads them -----------------------------------------------------------------

EMAIL = "person1@secret.example"
NAME = "Šimon Žák"  # Š and Ž: windows-1252 0x8A and 0x8E, C1 controls in iso-8859-1


def contact_scrub() -> Any:
    view = Presenter("c").schema({"id": str, "name": str, "email": str}).redact_pii(["name", "email"])
    return view.present({"id": "c1", "name": NAME, "email": EMAIL}).view.scrub


@pytest.mark.parametrize(("data", "mime", "says"), [
    (codecs.BOM_UTF16_LE + f"email\n{EMAIL}\n".encode("utf-16-le"), "text/csv; charset=iso-8859-1",
     "byte order mark of utf-16le"),
    (codecs.BOM_UTF16_BE + f"email\n{EMAIL}\n".encode("utf-16-be"), "text/csv; charset=utf-16le",
     "byte order mark of utf-16be"),
    (codecs.BOM_UTF8 + f"email\n{EMAIL}\n".encode(), "text/csv; charset=windows-1252", "byte order mark of utf-8"),
    (f"email\n{EMAIL}\n".encode("utf-16-le"), "text/csv", "NUL characters"),
    (f"email\n{EMAIL}\n".encode("utf-16-le"), "text/csv; charset=iso-8859-1", "NUL characters"),
])
def test_bytes_a_client_reads_otherwise_than_declared_are_refused(data: bytes, mime: str, says: str) -> None:
    item = scrubbed(document(data, mime, uri="crm://c1"), contact_scrub())
    with pytest.raises(ContentError, match=says):
        item.check(1 << 20)


@pytest.mark.parametrize(("data", "mime"), [
    (codecs.BOM_UTF16_LE + "a,b\n".encode("utf-16-le"), "text/csv; charset=utf-16"),
    (codecs.BOM_UTF16_BE + "a,b\n".encode("utf-16-be"), "text/csv; charset=utf-16be"),
    (codecs.BOM_UTF8 + "a,é\n".encode(), "text/csv; charset=utf-8"),
    (codecs.BOM_UTF8 + "a,é\n".encode(), "text/csv"),
])
def test_a_byte_order_mark_that_agrees_with_the_charset_passes(data: bytes, mime: str) -> None:
    document(data, mime, uri="crm://c1").check(1 << 20)


def test_iso_8859_1_is_censored_as_windows_1252_as_a_client_reads_it() -> None:
    data = f"name;note\n{NAME};\u201cquoted\u201d \u20ac5\n".encode("cp1252")
    item = scrubbed(document(data, "text/csv; charset=iso-8859-1", uri="crm://c1"), contact_scrub())
    assert isinstance(item, EmbeddedResource) and item.blob is not None
    item.check(1 << 20)
    assert item.mime_type == "text/csv; charset=iso-8859-1"
    # The rest as it was, byte for byte (the quotes and the euro sign: windows-1252 bytes 0x93, 0x94, 0x80).
    assert item.blob == "name;note\n[REDACTED];\u201cquoted\u201d \u20ac5\n".encode("cp1252")
    undefined = scrubbed(document(b"x\x81y " + EMAIL.encode(), "text/plain; charset=latin1", uri="a://b"),
                         contact_scrub())
    assert isinstance(undefined, EmbeddedResource) and undefined.blob == b"x\x81y [REDACTED]"
