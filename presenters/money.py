"""Money as humans read it (UI blocks only: the data always carries integer cents)."""

# Each cents value's decimals, written once.
_DECIMALS = tuple(f".{n:02d}" for n in range(100))


def money(cents: int | None, currency: str = "") -> str:
    """`1,234.50 EUR` from 123450 cents: integer arithmetic, exact for any amount (a float is exact only up
    to 2**53) and cheaper than formatting a float, which a page of invoices does once per row."""
    cents = cents or 0
    if cents.__class__ is int:
        units, part = divmod(-cents if cents < 0 else cents, 100)
        digits = str(units) if units < 1000 else f"{units:,}"
        number = ("-" if cents < 0 else "") + digits + _DECIMALS[part]
    else:  # not an int (a float or Decimal a caller kept): formatted as a number
        number = f"{cents / 100:,.2f}"
    # The formatted number never starts or ends with a space: only a currency's own trailing space goes.
    return f"{number} {currency}".rstrip() if currency else number
