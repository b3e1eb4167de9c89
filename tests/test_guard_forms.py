"""The egress guard on every path (tester, REST, MCP on both wires) against the forms a redacted value takes
once an application quotes it: JSON-escaped in a data string or a rule, a removed mapping's keys, a number
inside a computed string; and against stored values that equal the wire format's own words (a key, an enum
member, a tag, an action name), which must never fail the answer nor break its format."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, computed_field

from mcpfusion import Presenter, Tool, suggest, ui
from tests.firewall_kit import PATHS, app_for, every_path

WIRES = ("inproc", "mcp-2026", "mcp-2025")  # the paths that carry the text blocks


def assert_no_leak(answers, *values):
    for path, answer in answers.items():
        assert answer.error is None, (path, answer.raw)
        for value in values:
            assert value not in answer.raw, f"{value!r} leaked on {path}: {answer.raw}"


# -- 1: the JSON-escaped form of a value ---------------------------------------------------------------------


@pytest.mark.parametrize("secret", ['Ada "Ace" Lovelace', "C:\\Users\\ada-secret", "line1\nline2-secret",
                                    "Zoë \"Z\" Ünï-4412"])
async def test_a_json_escaped_copy_is_censored_in_data_strings_rules_suggestions_and_directives(secret):
    view = (Presenter("customer").schema({"id": str, "name": str, "raw": str}).redact_pii(["name"])
            .ui(lambda c: ui.markdown(f"ui: {json.dumps(c['name'])}"))
            .rules(lambda c: [f"rule: {json.dumps(c['name'])}"])
            .directives(lambda c: [f"directive: {json.dumps(c['name'], ensure_ascii=False)}"])
            .suggest(lambda c: [suggest("crm.get", f"suggest: {json.dumps(c['name'])}")]))
    crm = Tool("crm", description="Customers")

    @crm.action(readonly=True, returns=view)
    async def get() -> dict:
        """One customer."""
        return {"id": "c1", "name": secret, "raw": json.dumps({"name": secret})}

    answers = await every_path(app_for(crm), "crm", "get")
    escaped = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    for path, answer in answers.items():
        assert answer.error is None, answer.raw
        assert answer.data["raw"] == '{"name": "[REDACTED]"}', path  # still the JSON text it was
        for form in escaped:
            assert form not in answer.raw and form.replace('"', "&quot;") not in answer.raw, (path, answer.raw)
    for path in WIRES:
        wire = "\n".join(answers[path].texts)
        for line in ('ui: "[REDACTED]"', "- rule: &quot;[REDACTED]&quot;", "- directive: &quot;[REDACTED]&quot;",
                     "- crm.get: suggest: &quot;[REDACTED]&quot;"):
            assert line in wire, (path, wire)


# -- 2: a stored value equal to the format's own words ---------------------------------------------------------


async def test_a_stored_value_equal_to_a_key_leaves_the_keys_and_answers_the_list():
    rows = Presenter("rows").schema({"id": str, "name": str, "email": str, "status": str}).redact_pii(["email"])
    crm = Tool("crm", description="Customers")

    @crm.action(readonly=True, returns=rows)
    async def list() -> list[dict]:  # noqa: A001 - the action's name
        """Customers."""
        return [{"id": "c1", "name": "Ada", "email": "ada@example.com", "status": "active"},
                {"id": "c2", "name": "Mallory", "email": "status", "status": "active"}]

    answers = await every_path(app_for(crm), "crm", "list")
    assert_no_leak(answers, "ada@example.com")
    expected = [{"id": "c1", "name": "Ada", "email": "[REDACTED]", "status": "active"},
                {"id": "c2", "name": "Mallory", "email": "[REDACTED]", "status": "active"}]
    assert answers["rest"].data == expected
    for path in ("inproc", "mcp-2026", "mcp-2025"):
        assert answers[path].data == {"items": expected} or answers[path].data == expected, path
        assert json.loads(answers[path].texts[0]) == expected, path


async def test_a_stored_value_equal_to_an_enum_member_keeps_the_member_and_fits_the_schema():
    rows = (Presenter("rows").schema({"id": str, "name": str, "email": str, "status": Literal["active", "closed"]})
            .redact_pii(["email"]))
    crm = Tool("crm", description="Customers")

    @crm.action(readonly=True, returns=rows)
    async def list() -> list[dict]:  # noqa: A001 - the action's name
        """Customers."""
        return [{"id": "c1", "name": "Bob closed", "email": "bob@example.com", "status": "closed"},
                {"id": "c2", "name": "Mallory", "email": "closed", "status": "active"}]

    answers = await every_path(app_for(crm), "crm", "list")
    assert_no_leak(answers, "bob@example.com")
    # The enum member stays (the schema's word, not the writer's); free text quoting the value is censored.
    assert [(r["name"], r["status"]) for r in answers["rest"].data] == [("Bob [REDACTED]", "closed"),
                                                                          ("Mallory", "active")]
    for path in ("mcp-2026", "mcp-2025"):
        assert answers[path].data["items"][0]["status"] == "closed", path


@pytest.mark.parametrize("stored", ["ui_passthrough", "domain_rules", "action_suggestions", "llm_directives",
                                    "crm.get", "markdown", "type=", "- Status", "</ui_passthrough>"])
async def test_a_stored_value_equal_to_markup_never_breaks_the_blocks(stored):
    rows = (Presenter("rows").schema({"id": str, "name": str, "email": str}).redact_pii(["email"])
            .collection_ui(lambda items: [ui.table(["id", "name"], [[i["id"], i["name"]] for i in items],
                                                   title="Customers"),
                                          ui.markdown(f"{len(items)} customers, see the markdown: {items[1]['email']}")])
            .rules(["Status is one of active, closed."])
            .directives(["Never guess an email."])
            .collection_suggest(lambda items: [suggest("crm.get", f"Open one customer ({items[1]['email']})")]))
    crm = Tool("crm", description="Customers")

    @crm.action(readonly=True, returns=rows)
    async def list() -> list[dict]:  # noqa: A001 - the action's name
        """Customers."""
        return [{"id": "c1", "name": "Ada", "email": "ada@example.com"},
                {"id": "c2", "name": "Mallory", "email": stored}]

    @crm.action(readonly=True)
    async def get(id: str) -> dict:
        """One customer."""
        return {"id": id}

    answers = await every_path(app_for(crm), "crm", "list")
    assert_no_leak(answers, "ada@example.com")
    for path in WIRES:
        texts = answers[path].texts
        assert json.loads(texts[0])[1]["email"] == "[REDACTED]", path
        table, note, directives, rules, suggestions = texts[1:]
        assert table.startswith('<ui_passthrough type="markdown" title="Customers">\n| id | name |\n')
        assert table.endswith("\n</ui_passthrough>") and note.endswith("\n</ui_passthrough>")
        assert note.startswith('<ui_passthrough type="markdown">\n2 customers, see the ')
        assert note.count("[REDACTED]") >= 1, note  # the copied value, censored inside the block
        assert directives.startswith("<llm_directives>\n- ") and directives.endswith("\n</llm_directives>")
        assert rules.startswith("<domain_rules>\n- ") and rules.endswith("\n</domain_rules>")
        assert suggestions.startswith("<action_suggestions>\n- crm.get: Open one customer (")
        assert suggestions.endswith("\n</action_suggestions>")


async def test_a_title_quoting_a_redacted_value_is_censored_but_its_tag_is_kept():
    view = (Presenter("c").schema({"id": str, "email": str}).redact_pii(["email"])
            .ui(lambda c: ui.markdown("details", title=f"Customer {c['email']}")))
    answer = view.present({"id": "c1", "email": "ada@example.com"})
    assert answer.texts[1] == '<ui_passthrough type="markdown" title="Customer [REDACTED]">\ndetails\n</ui_passthrough>'


# -- 3: a removed mapping's keys ---------------------------------------------------------------------------------


async def test_the_keys_of_a_redacted_mapping_are_censored_in_every_block():
    view = (Presenter("account").schema({"id": str, "contacts": dict[str, str], "note": str})
            .redact_pii(["contacts"])
            .ui(lambda a: ui.list([f"{email} ({role})" for email, role in a["contacts"].items()]))
            .rules(lambda a: [f"Primary contact: {next(iter(a['contacts']))}"]))
    tool = Tool("t", description="Accounts")

    @tool.action(readonly=True, returns=view)
    async def get() -> dict:
        """One account."""
        return {"id": "a1", "contacts": {"ada.private@example.com": "owner", "bob.private@example.com": "billing"},
                "note": "ask ada.private@example.com"}

    answers = await every_path(app_for(tool), "t", "get")
    assert_no_leak(answers, "ada.private@example.com", "bob.private@example.com")
    assert answers["rest"].data == {"id": "a1", "contacts": "[REDACTED]", "note": "ask [REDACTED]"}
    for path in WIRES:
        assert "- Primary contact: [REDACTED]" in answers[path].texts[-1], path


# -- 4: a redacted number inside strings of the data -------------------------------------------------------------


class Employee(BaseModel):
    name: str
    ssn: int
    salary: int
    grade: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return f"{self.name} (SSN {self.ssn}, paid {self.salary}, grade {self.grade})"


async def test_a_redacted_number_is_censored_inside_strings_of_the_data():
    view = (Presenter("emp").schema(Employee).redact_pii(["ssn", "salary", "grade"])
            .ui(lambda e: ui.summary(f"{e['name']} earns {e['salary']}")))
    tool = Tool("t", description="Employees")

    @tool.action(readonly=True, returns=view)
    async def get() -> dict:
        """One employee."""
        return {"name": "Ada", "ssn": 123456789, "salary": 98765, "grade": 7}

    answers = await every_path(app_for(tool), "t", "get")
    assert set(answers) == set(PATHS)
    assert_no_leak(answers, "123456789", "98765")
    # A number shorter than 4 digits is not looked for inside text (it would censor ordinary numbers).
    assert answers["rest"].data["label"] == "Ada (SSN [REDACTED], paid [REDACTED], grade 7)"
    for path in ("mcp-2026", "mcp-2025"):
        assert answers[path].data["label"] == answers["rest"].data["label"], path
