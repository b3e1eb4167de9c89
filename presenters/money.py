"""Money as humans read it (UI blocks only: the data always carries integer cents)."""

# Each cents value's decimals, and each group of three digits after a thousands separator, written once.
_DECIMALS = tuple(f".{n:02d}" for n in range(100))
_THOUSANDS = tuple(f",{n:03d}" for n in range(1000))


def money(cents: int | None, currency: str = "") -> str:
    """`1,234.50 EUR` from 123450 cents: integer arithmetic, exact for any amount (a float is exact only up
    to 2**53) and cheaper than formatting a float, which a page of invoices does once per row."""
    cents = cents or 0
    if cents.__class__ is int:
        units, part = divmod(-cents if cents < 0 else cents, 100)
        if units < 1000:
            digits = str(units)
        elif units < 1_000_000:  # most amounts: one separator, from a table rather than `{:,}` formatting
            high, low = divmod(units, 1000)
            digits = f"{high}{_THOUSANDS[low]}"
        else:
            digits = f"{units:,}"
        number = f"-{digits}{_DECIMALS[part]}" if cents < 0 else f"{digits}{_DECIMALS[part]}"
    else:  # not an int (a float or Decimal a caller kept): formatted as a number
        number = f"{cents / 100:,.2f}"
    # The formatted number never starts or ends with a space: only a currency's own trailing space goes.
    return f"{number} {currency}".rstrip() if currency else number
