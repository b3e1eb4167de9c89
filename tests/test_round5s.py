"""Round 5s: what a row left out of a list contributes is never sent (its children's blocks, suggestions,
cut counts); a redaction path under one that hides its value whole is a no-op, in any order, on one presenter
or across an embed; an embedded value the presenter hides whole gets no notice nor count."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from pydantic import BaseModel

from mcpfusion import Presenter, Tool, suggest, ui
from mcpfusion.redaction import RedactionError
from tests.firewall_kit import PATHS, app_for, every_path

CARD_A, CARD_B = "4111111111111111", "4222222222222222"


@pytest.fixture(autouse=True)
def _quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="mcpfusion")  # rows left out are logged: expected here


def _paths(presenter: Presenter, data: Any) -> dict[str, Any]:
    tool = Tool("t")

    @tool.action(readonly=True, returns=presenter)
    async def get() -> Any:
        """Get."""
        return data

    return asyncio.run(every_path(app_for(tool), "t", "get", {}))


# -- 1. a row left out of a list sends nothing of its children --------------------------------------------


def _order() -> Presenter:
    line = (Presenter("line").schema({"sku": str, "card": str}).redact_pii(["card"])
            .ui(lambda line: ui.summary(f"line {line['sku']} paid with {line['card']}"))
            .suggest(lambda line: [suggest("t.refund", f"Refund the payment of card {line['card']}")]))
    meta = Presenter("meta").schema({"n": int})
    return Presenter("order").schema({"id": str}).embed("lines", line).embed("meta", meta)


def test_a_left_out_rows_child_block_never_leaves_on_any_path():
    rows = [{"id": "o1", "lines": [{"sku": "a", "card": CARD_A}], "meta": {"n": 1}},
            {"id": "o2", "lines": [{"sku": "b", "card": CARD_B}], "meta": {"n": "not a number"}}]
    answers = _paths(_order(), rows)
    for path in PATHS:
        answer = answers[path]
        assert answer.error is None, (path, answer.raw)
        assert CARD_A not in answer.raw and CARD_B not in answer.raw, (path, answer.raw)
        assert "line b" not in answer.raw, path  # the left-out row's block is not sent, even censored
    texts = answers["mcp-2026"].texts
    assert '"id":"o2"' not in texts[0] and '"card":"[REDACTED]"' in texts[0]
    assert any("line a paid with [REDACTED]" in text for text in texts)  # the kept row's block is
    assert any("1 of 2 item(s) could not be shown" in text for text in texts)


def test_a_row_left_out_one_level_down_drops_its_childs_blocks_and_suggestions():
    pay = (Presenter("pay").schema({"card": str}).redact_pii(["card"])
           .ui(lambda p: ui.summary(f"card {p['card']}"))
           .suggest(lambda p: [suggest("t.refund", f"Refund {p['card'][-4:]}x{p['card']}")]))
    tax = Presenter("tax").schema({"rate": float})
    line = Presenter("line").schema({"sku": str}).embed("payment", pay).embed("tax", tax)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    response = order.present({"id": "o1", "lines": [
        {"sku": "a", "payment": {"card": CARD_A}, "tax": {"rate": 0.2}},
        {"sku": "b", "payment": {"card": CARD_B}, "tax": {"rate": "n/a"}}]})
    assert response.view.data == {"id": "o1", "lines": [{"sku": "a", "payment": {"card": "[REDACTED]"},
                                                         "tax": {"rate": 0.2}}]}
    text = "".join(response.texts)
    assert CARD_B not in text and "2222x" not in text  # neither its UI block nor its suggestion
    assert [s.reason for s in response.view.suggestions] == ["Refund 1111x[REDACTED]"]
    assert sum("card [REDACTED]" in t for t in response.texts) == 1


def test_embedded_cut_counts_count_only_the_rows_sent():
    line = Presenter("line").schema({"sku": str}).limit(1)
    meta = Presenter("meta").schema({"n": int})
    order = Presenter("order").schema({"id": str}).embed("lines", line).embed("meta", meta)
    response = order.present([{"id": "o1", "lines": [{"sku": "a"}, {"sku": "b"}], "meta": {"n": 1}},
                              {"id": "o2", "lines": [{"sku": "c"}] * 50, "meta": {"n": "bad"}}])
    assert response.view.data == [{"id": "o1", "lines": [{"sku": "a"}], "meta": {"n": 1}}]
    notices = [t for t in response.texts if "Embedded list truncated" in t]
    assert len(notices) == 1
    assert "(1 order item(s) cut, 1 entries hidden in all)" in notices[0]


# -- 2. a path under a path that hides its value whole ----------------------------------------------------


class Cust(BaseModel):
    name: str
    email: str


class Order(BaseModel):
    id: str
    customer: Cust


ROW = {"id": "o1", "customer": {"name": "Ada Lovelace", "email": "ada@example.com"}}
HIDDEN = {"id": "o1", "customer": "[REDACTED]"}


def test_a_variant_redacting_under_a_redacted_path_answers_on_every_path():
    base = Presenter("order").schema(Order).redact_pii(["customer"])
    brief = base.copy("order_brief").redact_pii(["customer.email"])
    for data, expected in ((ROW, HIDDEN), ([ROW, ROW], [HIDDEN, HIDDEN])):
        answers = _paths(brief, data)
        for path in PATHS:
            answer = answers[path]
            assert answer.error is None, (path, answer.raw)
            assert "ada@example.com" not in answer.raw and "Ada Lovelace" not in answer.raw
        assert answers["rest"].data == expected
        assert answers["inproc"].data == expected


@pytest.mark.parametrize("paths", [["customer", "customer.email"], ["customer.email", "customer"],
                                   ["*", "customer.email"], ["customer", "customer.*"]])
def test_overlapping_paths_of_one_call_in_any_order(paths):
    presenter = (Presenter("order").schema(Order).redact_pii(paths)
                 .ui(lambda o: ui.summary(f"mail {o['customer']['email']}, {o['customer']['name']}")))
    expected = {"id": "[REDACTED]", "customer": "[REDACTED]"} if "*" in paths else HIDDEN
    response = presenter.present(ROW)
    assert response.view.data == expected
    assert "ada@example.com" not in response.text and "Ada Lovelace" not in response.text
    assert presenter.present([ROW]).view.data == [expected]


def test_overlapping_paths_of_two_censors_in_either_order():
    first = Presenter("a").schema(Order).redact_pii(["customer"], censor="***").redact_pii(["customer.email"])
    second = Presenter("b").schema(Order).redact_pii(["customer.email"]).redact_pii(["customer"], censor="***")
    for presenter in (first, second):
        presenter.ui(lambda o: ui.summary(f"mail {o['customer']['email']}"))
        response = presenter.present(ROW)
        assert response.view.data == {"id": "o1", "customer": "***"}
        assert "ada@example.com" not in response.text


def test_a_parent_hiding_an_embed_key_whose_child_redacts_inside_it():
    line = Presenter("line").schema({"sku": str, "card": str}).redact_pii(["card"])
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    data = {"id": "o1", "lines": [{"sku": "a", "card": CARD_A}]}
    brief = order.copy("brief").redact_pii(["lines"])
    assert brief.present(data).view.data == {"id": "o1", "lines": "[REDACTED]"}
    assert brief.present([data]).view.data == [{"id": "o1", "lines": "[REDACTED]"}]
    every = order.copy("every").redact_pii(["*"], censor="xx")
    assert every.present({"id": "o1", "lines": {"sku": "a", "card": CARD_A}}).view.data == {"id": "xx", "lines": "xx"}


def test_a_stored_string_where_an_object_is_declared_still_fails_closed():
    looks_censored = "".join(["[REDACT", "ED]"])  # the censor's text, but no redaction put it there
    presenter = Presenter("p").schema({"id": str, "customer": Any}).redact_pii(["customer.email"])
    with pytest.raises(RedactionError):
        presenter.present({"id": "o1", "customer": looks_censored})
    assert presenter.present([{"id": "o1", "customer": looks_censored}]).view.data == []


# -- 3. an embedded value the presenter hides whole: no notice, no count ----------------------------------


def test_no_cut_notice_nor_count_for_an_embed_key_the_presenter_redacts():
    line = Presenter("line").schema({"sku": str}).limit(1).ui(lambda line: ui.summary(f"line {line['sku']}"))
    public = Presenter("order").schema({"id": str}).embed("lines", line)
    brief = public.copy("order_brief").redact_pii(["lines"])
    answers = _paths(brief, [{"id": "o1", "lines": [{"sku": f"s{i}"} for i in range(7)]}])
    assert answers["rest"].data == [{"id": "o1", "lines": "[REDACTED]"}]
    for path in ("inproc", "mcp-2026", "mcp-2025"):
        texts = answers[path].texts
        assert texts[1:] == [], (path, texts)  # no block of the hidden lines, no cut notice
    strict = Presenter("sline").schema({"sku": str, "qty": int})
    brief2 = public.copy("order_brief2").redact_pii(["lines"]).embed("lines", strict)
    response = brief2.present([{"id": "o1", "lines": [{"sku": "a", "qty": 1}] + [{"sku": "b", "qty": "?"}] * 4}])
    assert response.view.data == [{"id": "o1", "lines": "[REDACTED]"}]
    assert "could not be shown" not in response.text and "4 of 5" not in response.text
    # Not hidden: the same presenters say both.
    assert "6 entries hidden in all" in public.present([{"id": "o1", "lines": [{"sku": "s"}] * 7}]).text


def test_a_parent_path_going_into_a_child_hides_its_nested_cut():
    tax = Presenter("tax").schema({"code": str}).limit(1)
    line = Presenter("line").schema({"sku": str}).embed("taxes", tax)
    order = Presenter("order").schema({"id": str}).embed("lines", line)
    data = {"id": "o1", "lines": [{"sku": "a", "taxes": [{"code": "v"}, {"code": "w"}, {"code": "z"}]}]}
    assert "'lines.taxes' shows at most 1" in order.present(data).text
    for paths in (["lines[*].taxes"], ["lines[*]"], ["*.taxes"]):
        response = order.copy("o2").redact_pii(paths).present(data)
        assert "truncated" not in response.text and "hidden in all" not in response.text, paths
    kept = order.copy("o3").redact_pii(["lines[*].sku"]).present(data)  # another field: the cut is said
    assert "'lines.taxes' shows at most 1" in kept.text
