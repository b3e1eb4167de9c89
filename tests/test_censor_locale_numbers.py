"""The egress guard censors a removed amount written as other locales write numbers.

A black-box tester redacted a salary of 850000 and a Decimal bonus of 98765.40: `850,000` was censored, but a
UI block or a rule formatting them for its readers sent `850.000` (German), `850 000` with a space, a no-break
or a narrow no-break space (French), `850'000` (Swiss) and `98.765,40`. The guard knew only the forms
Python's format mini-language writes; it now knows these groupings and decimal commas too
(`censor._locale_forms`).
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from mcpfusion import Presenter, ui

SALARY, BONUS = 850000, Decimal("98765.40")
WRITTEN = ["850.000", "850 000", "850\u00a0000", "850\u202f000", "850'000", "850.000,00", "850 000,00",
           "98.765,40", "98 765,40", "98\u202f765,40", "98'765.40", "98765,40"]


@pytest.mark.parametrize("written", WRITTEN)
def test_a_removed_amount_in_another_locales_form_is_censored_in_blocks_and_rules(written: str) -> None:
    view = (Presenter("employee").schema({"id": str, "salary": int, "bonus": Decimal})
            .redact_pii(["salary", "bonus"])
            .ui(lambda e: [ui.summary(f"Pay: {written} EUR"), ui.table(["pay"], [[written]])])
            .rules(lambda e: [f"Band {written}"]))
    response = view.present({"id": "e1", "salary": SALARY, "bonus": BONUS})
    wire = "\n".join(response.texts)
    assert written not in wire and wire.count("[REDACTED]") >= 3, wire


def test_numbers_that_are_no_removed_amount_are_kept() -> None:
    view = (Presenter("employee").schema({"id": str, "salary": int}).redact_pii(["salary"])
            .ui(lambda e: ui.summary("Headcount 850 in 2026, budget 851.000,00 EUR, ratio 0,85")))
    wire = "\n".join(view.present({"id": "e1", "salary": SALARY}).texts)
    assert "Headcount 850 in 2026, budget 851.000,00 EUR, ratio 0,85" in wire
