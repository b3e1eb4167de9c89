"""Round 5n: redaction paths and rules add up across builder calls; a presenter `limit` cut is said on REST,
counted on what is sent, and said once for an embedded list."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Presenter, Tool, ui
from mcpfusion.testing import ToolTester

ROW = {"id": "c1", "name": "Ada Lovelace", "email": "ada@example.com"}
FIELDS = {"id": str, "name": str, "email": str}


def _customer() -> Presenter:
    return Presenter("customer").schema(FIELDS).redact_pii(["email"]).rules(["Emails are private."])


# -- 1. redact_pii and rules accumulate -------------------------------------------------------------------


def test_a_second_redact_pii_adds_paths_on_one_presenter_and_on_a_copy():
    twice = Presenter("twice").schema(FIELDS).redact_pii(["email"]).redact_pii(["name"])
    brief = _customer().copy("customer_brief").redact_pii(["name"])
    for presenter in (twice, brief):
        response = presenter.present(ROW)
        assert response.view.data == {"id": "c1", "name": "[REDACTED]", "email": "[REDACTED]"}
        assert "ada@example.com" not in response.text and "Ada Lovelace" not in response.text
        assert presenter.redact_paths == ("email", "name")


def test_a_variant_redacting_one_more_field_still_guards_the_first_one_on_rest():
    customer = _customer()
    brief = customer.copy("customer_brief").redact_pii("name").ui(lambda c: ui.summary(f"mail {c['email']}"))
    crm = Tool("crm")

    @crm.action(readonly=True, returns=brief)
    async def get_brief(id: str) -> dict:
        """Get customer (brief)."""
        return ROW

    body = TestClient(MCPFusion("crm", tools=[crm]).build_app()).post("/api/crm/get_brief", json={"id": "c1"}).json()
    assert body == {"id": "c1", "name": "[REDACTED]", "email": "[REDACTED]"}
    assert "ada@example.com" not in brief.present(ROW).text  # the guard still looks for the first path's value


def test_each_path_keeps_its_censor_and_a_path_given_again_is_fine():
    presenter = (Presenter("c").schema(FIELDS).redact_pii(["email"], censor="***").redact_pii(["name", "email"],
                                                                                              censor="[HIDDEN]"))
    assert presenter.present(ROW).view.data == {"id": "c1", "name": "[HIDDEN]", "email": "[HIDDEN]"}
    mixed = Presenter("m").schema(FIELDS).redact_pii(["email"], censor="***").redact_pii(["name"])
    assert mixed.present(ROW).view.data == {"id": "c1", "name": "[REDACTED]", "email": "***"}
    properties = mixed.wire_schema()["properties"]
    assert (properties["email"]["const"], properties["name"]["const"]) == ("***", "[REDACTED]")
    # The same, embedded under a parent: every item of the child's list, each path with its own censor.
    order = Presenter("order").schema({"id": str}).embed("customers", mixed.copy("m2"))
    data = order.present({"id": "o1", "customers": [ROW, ROW]}).view.data
    assert data["customers"] == [{"id": "c1", "name": "[REDACTED]", "email": "***"}] * 2


def test_a_path_opted_out_of_the_guard_keeps_the_others_guarded():
    presenter = (Presenter("c").schema(FIELDS).redact_pii(["email"], guard_blocks=False).redact_pii(["name"])
                 .ui(lambda c: ui.summary(f"{c['email']} / {c['name']}")))
    text = presenter.present(ROW).texts[1]
    assert "ada@example.com / [REDACTED]" in text  # the operator's block shows the opted-out path only
    assert presenter.guard_blocks is False


def test_a_refused_second_path_leaves_the_earlier_redaction_as_it_was():
    presenter = _customer()
    try:
        presenter.redact_pii(["nmae"])
    except ValueError as exc:
        assert "nmae" in str(exc)
    else:
        raise AssertionError("a path naming no field must be refused")
    assert presenter.redact_paths == ("email",)
    assert presenter.present(ROW).view.data["email"] == "[REDACTED]"


def test_rules_add_up_across_calls_and_copies_and_replace_drops_them():
    brief = _customer().copy("customer_brief").rules(["Brief view."])
    assert brief.present(ROW).view.system_rules == ["Emails are private.", "Brief view."]
    mixed = _customer().rules(lambda c: [f"About {c['id']}."]).rules("Last.")
    assert mixed.present(ROW).view.system_rules == ["Emails are private.", "About c1.", "Last."]
    replaced = _customer().copy("other").rules(["Only this."], replace=True)
    assert replaced.present(ROW).view.system_rules == ["Only this."]


# -- 2. a presenter limit is said on REST ----------------------------------------------------------------


def _listing(presenter: Presenter, rows: list[dict]) -> TestClient:
    tool = Tool("t")

    @tool.action(readonly=True, returns=presenter)
    async def lst() -> list:
        """List."""
        return rows

    return TestClient(MCPFusion("t", tools=[tool]).build_app())


def test_a_presenter_limit_cut_answers_the_truncated_header_on_rest():
    client = _listing(Presenter("p").schema({"id": str}).limit(2), [{"id": f"n{i}"} for i in range(5)])
    answer = client.post("/api/t/lst", json={})
    assert answer.status_code == 200 and answer.json() == [{"id": "n0"}, {"id": "n1"}]
    assert answer.headers["Truncated"] == "shown=2, total=5, unit=rows"
    uncut = _listing(Presenter("q").schema({"id": str}).limit(5), [{"id": "n0"}]).post("/api/t/lst", json={})
    assert "Truncated" not in uncut.headers


def test_a_presenter_limit_cut_keeps_structured_content_to_its_schema():
    tool = Tool("t")

    @tool.action(readonly=True, returns=Presenter("p").schema({"id": str}).limit(2))
    async def lst() -> list:
        """List."""
        return [{"id": f"n{i}"} for i in range(5)]

    result = asyncio.run(ToolTester([tool]).call("t", "lst", {}))
    assert result.structured_content == {"items": [{"id": "n0"}, {"id": "n1"}]}  # no field beyond its schema
    assert "Dataset truncated. 2 shown, 3 hidden." in result.raw.texts[1]
    assert result.raw.view.truncated == (2, 5, "rows")


# -- 3. the notices count what was sent; an embedded cut is said once ------------------------------------


def test_the_truncation_notice_counts_the_rows_really_sent():
    presenter = Presenter("p").schema({"id": str, "n": int}).limit(3)
    rows = [{"id": "a", "n": 1}, {"id": "b", "n": "bad"}, {"id": "c", "n": 3}, {"id": "d", "n": 4}, {"id": "e", "n": 5}]
    response = presenter.present(rows)
    assert response.view.data == [{"id": "a", "n": 1}, {"id": "c", "n": 3}]
    assert "⚠️ Dataset truncated. 2 shown, 2 hidden. Use filters to narrow results." in response.texts[1]
    assert "1 of 3 item(s) could not be shown" in response.texts[2]
    assert response.view.truncated == (2, 5, "rows")
    answer = _listing(Presenter("q").schema({"id": str, "n": int}).limit(3), rows).post("/api/t/lst", json={})
    assert answer.headers["Truncated"] == "shown=2, total=5, unit=rows"


def test_an_embedded_limit_is_said_once_naming_its_key_and_parents():
    line = Presenter("line").schema({"sku": str}).limit(1)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    response = order.present([{"id": f"o{i}", "lines": [{"sku": "x"}, {"sku": "y"}]} for i in range(3)])
    assert response.view.data == [{"id": f"o{i}", "lines": [{"sku": "x"}]} for i in range(3)]
    notices = [t for t in response.texts if "truncated" in t]
    assert len(notices) == 1, response.texts
    assert "'lines' shows at most 1 per order item (3 order item(s) cut, 3 entries hidden in all)" in notices[0]
    assert "Use filters" not in notices[0]
    assert response.view.truncated is None  # the list itself was not cut: no REST header


def test_a_nested_embedded_limit_names_its_path_and_one_object_says_it_too():
    tax = Presenter("tax").schema({"code": str}).limit(1)
    line = Presenter("line").schema({"sku": str}).embed("taxes", tax)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    lines = [{"sku": "a", "taxes": [{"code": "v"}, {"code": "w"}, {"code": "z"}]}, {"sku": "b", "taxes": []}]
    response = order.present({"id": "o1", "lines": lines})
    notices = [t for t in response.texts if "truncated" in t]
    assert len(notices) == 1
    assert "'lines.taxes' shows at most 1 per line item (1 line item(s) cut, 2 entries hidden in all)" in notices[0]
