"""Money as humans read it (UI blocks only: the data always carries integer cents)."""


def money(cents: int | None, currency: str = "") -> str:
    # The formatted number never starts or ends with a space: only a currency's own trailing space goes.
    if currency:
        return f"{(cents or 0) / 100:,.2f} {currency}".rstrip()
    return f"{(cents or 0) / 100:,.2f}"
