"""`present` of a flat presenter (its render's parts straight into the response, see `Presenter._flat_parts`)
gives what the general path gives (`_cache.plan = None`), for every feature a presenter has: static and
auto rules, a child's rules, UI blocks (one, several, None among them), suggestions (one, several,
duplicates, None), directives, key and wildcard redaction paths (its own and its children's, a list child
and an object child), a callback copying a redacted value (the egress guard's full path), `_select`,
pretty JSON, attached documents, lists (with a limit) and data that does not validate."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, Field

from mcpfusion import Presenter, document, suggest, ui
from mcpfusion.presenter import PresenterError


class Card(BaseModel):
    number: str
    holder: str


class Account(BaseModel):
    id: str
    email: str
    amount_cents: int = Field(description="CENTS")
    status: str
    meta: dict[str, Any] = {}


def _ui(acc: dict[str, Any]) -> Any:
    kind = acc["status"]
    if kind == "one":
        return ui.table(["Field", "Value"], [["Id", acc["id"]], ["Mail", acc["email"]]])  # a redacted value
    if kind == "many":
        return [ui.summary(acc["id"]), None, ui.table(["A"], [[acc["amount_cents"] / 100]])]
    if kind == "none":
        return None
    return [ui.summary(f"{acc['id']} | {kind}")]


def _suggest(acc: dict[str, Any], ctx: Any) -> Any:
    kind = acc["status"]
    pay = suggest("acc.pay", f"Pay {acc['id']}")
    if kind == "one":
        return [pay]
    if kind == "many":
        return [pay, None, pay, suggest("acc.close", "Close it"), suggest("acc.pay", f"Pay {acc['id']}")]
    if kind == "none":
        return None
    return suggest("acc.mail", f"Write to {acc['email']}")  # a redacted value, a single suggestion


def _presenters(**options: Any) -> tuple[Presenter, Presenter]:
    cards = Presenter("Card").schema(Card).redact_pii(["number"]).rules(["Card numbers are masked."])
    owner = Presenter("Owner").schema({"name": str, "ssn": str | None}).redact_pii(["ssn"]).rules(["Owner rule."])
    account = (
        Presenter("Account", pretty=options.get("pretty", False))
        .schema(Account)
        .rules(["Accounts rule.", "Accounts rule."])
        .redact_pii(["email", "meta.*"])
        .ui(_ui)
        .suggest(_suggest)
        .embed("cards", cards)
        .embed("owner", owner)
    )
    if options.get("directives"):
        account.directives(["Be brief."])
    if options.get("attach"):
        account.attach(lambda data: [document(f"statement of {data} for ada@example.com", "text/plain", uri="doc://s")])
    if options.get("limit"):
        account.limit(options["limit"])
    account.freeze()
    general = account.copy()
    general.freeze()
    general._cache.plan = None
    general._cache.trusted = frozenset()
    return account, general


ACCOUNT = {
    "id": "a1",
    "email": "ada@example.com",
    "amount_cents": 1250,
    "status": "one",
    "meta": {"token": "secret-token-1", "n": 3},
    "internal": "strip me",
    "cards": [{"number": "4111 1111", "holder": "Ada"}, {"number": "5500 0000", "holder": "Ada", "x": 1}],
    "owner": {"name": "Ada", "ssn": "123-45-6789"},
}

CASES = [
    ACCOUNT,
    {**ACCOUNT, "status": "many"},
    {**ACCOUNT, "status": "none"},
    {**ACCOUNT, "status": "other"},
    {**ACCOUNT, "cards": None, "owner": None},
    {**ACCOUNT, "cards": ({"number": "4111 1111", "holder": "Ada"},)},  # a tuple: validated apart
    {**ACCOUNT, "cards": {"number": "4111 1111", "holder": "Ada"}},  # one object for a list child
    {**ACCOUNT, "cards": [{"number": "4111 1111", "holder": "Ada"}, {"holder": "no number"}]},  # one bad card
    {k: v for k, v in ACCOUNT.items() if k not in ("cards", "owner")},
    {**ACCOUNT, "meta": {"when": "2026-01-01", "nested": {"a": [1, 2]}}},
]


def _state(response: Any) -> Any:
    view = response.view
    return (
        response.texts,
        response.is_error,
        response.structured_content,
        response.written,
        response.content,
        response.to_mcp(),
        view.data,
        view.system_rules,
        view.ui_blocks,
        view.suggestions,
        view.encoding,
        view.rewritten,
        view.error_code,
        view.scrub is None,
    )


@pytest.mark.parametrize("options", [{}, {"pretty": True}, {"directives": True}, {"attach": True}, {"limit": 1}])
@pytest.mark.parametrize("raw", CASES)
def test_flat_present_is_the_general_present(options: dict[str, Any], raw: dict[str, Any]) -> None:
    flat, general = _presenters(**options)
    assert flat._cache.plan is not None
    for select in (None, ["id", "email", "cards"]):
        for data in (raw, [raw, {**raw, "id": "a2"}]):
            before = copy.deepcopy(data)
            ours, theirs = flat.present(data, select=select), general.present(data, select=select)
            assert _state(ours) == _state(theirs)
            assert data == before  # the handler's data is never touched
            assert "ada@example.com" not in ours.text and "4111 1111" not in ours.text
            assert "123-45-6789" not in ours.text and "secret-token-1" not in ours.text


def test_flat_present_refuses_what_the_general_present_refuses() -> None:
    flat, general = _presenters()
    for bad in ({**ACCOUNT, "amount_cents": "lots"}, {**ACCOUNT, "owner": {"ssn": 1}}):
        with pytest.raises(PresenterError) as ours:
            flat.present(bad)
        with pytest.raises(PresenterError) as theirs:
            general.present(bad)
        assert str(ours.value) == str(theirs.value)


def test_a_cyclic_value_under_any_fails_alike() -> None:
    flat, general = _presenters()
    cycle: list[Any] = []
    cycle.append(cycle)
    errors = []
    for presenter in (flat, general):
        with pytest.raises(Exception) as caught:  # noqa: PT011 - both paths must fail the same way
            presenter.present({**ACCOUNT, "meta": {"loop": cycle}})
        errors.append((type(caught.value), str(caught.value)))
    assert errors[0] == errors[1]
