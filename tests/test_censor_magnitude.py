"""A redacted negative number's magnitude is the same secret: a block writing `abs(v)`, `-v` or their
grouped and money forms is censored as the number itself is."""

from __future__ import annotations

from decimal import Decimal

import pytest

from mcpfusion import Presenter, ui


@pytest.mark.parametrize("value", [-1234567, -1234567.5])
def test_the_magnitude_of_a_redacted_negative_number_is_censored_in_blocks(value):
    presenter = (
        Presenter("Account").schema({"id": str, "balance": type(value)}).redact_pii(["balance"])
        .ui(lambda d: [ui.markdown(f"owed {abs(d['balance'])} | {abs(d['balance']):,} | {-d['balance']:_} | "
                                   f"{abs(d['balance']):,.2f} | {d['balance']:,}")])
    )
    response = presenter.present({"id": "a1", "balance": value})
    text = "\n".join(response.texts)
    for leaked in ("1234567", "1,234,567", "1_234_567", "1,234,567.50", "1,234,567.00"):
        assert leaked not in text, text
    assert "[REDACTED]" in response.texts[1]


def test_the_magnitude_of_a_redacted_negative_decimal_is_censored_in_blocks():
    presenter = (
        Presenter("Account").schema({"id": str, "balance": Decimal}).redact_pii(["balance"])
        .ui(lambda d: [ui.markdown(f"owed {abs(Decimal(d['balance']))} | {abs(float(d['balance'])):,.2f}")])
    )
    text = presenter.present({"id": "a1", "balance": Decimal("-1234567.50")}).texts[1]
    assert "1234567" not in text and "1,234,567" not in text, text


def test_a_short_magnitude_stays_a_word():
    # As for a positive number under MIN_LENGTH significant digits: "123" is no copy of -123.
    presenter = (
        Presenter("Account").schema({"id": str, "balance": int}).redact_pii(["balance"])
        .ui(lambda d: [ui.markdown(f"page 123 of {abs(d['balance'])} rows")])
    )
    assert "page 123 of 123 rows" in presenter.present({"id": "a", "balance": -123}).texts[1]


async def test_no_path_carries_the_magnitude():
    from mcpfusion import Tool
    from tests.firewall_kit import PATHS, app_for, every_path

    presenter = (
        Presenter("Account").schema({"id": str, "balance": int}).redact_pii(["balance"])
        .ui(lambda d: [ui.markdown(f"owed {abs(d['balance']):,} ({-d['balance']})")])
    )
    accounts = Tool("accounts", description="Accounts")

    @accounts.action(readonly=True, returns=presenter)
    async def get(id: str) -> dict[str, object]:
        """One account."""
        return {"id": id, "balance": -1234567}

    answers = await every_path(app_for(accounts), "accounts", "get", {"id": "a1"})
    assert set(answers) == set(PATHS)
    for path, answer in answers.items():
        assert answer.error is None, (path, answer.raw)
        assert "1234567" not in answer.raw and "1,234,567" not in answer.raw, (path, answer.raw)
