"""Money as humans read it (UI blocks only: the data always carries integer cents)."""


def money(cents: int | None, currency: str = "") -> str:
    value = (cents or 0) / 100
    return f"{value:,.2f} {currency}".strip()
