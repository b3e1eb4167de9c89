"""Demo data for two tenants (acme in EUR, globex in USD), inserted once into an empty database.

Dates are relative to the day of seeding so that some invoices are overdue and others are not.
"""

from __future__ import annotations

import datetime as dt

from .tables import CustomerRecord, InvoiceRecord, LineRecord, PaymentRecord, TenantRecord

TENANTS = [("acme", "Acme Corp", "EUR"), ("globex", "Globex Inc", "USD")]

# tenant: (id, name, email, phone, country) of each customer
CUSTOMERS: dict[str, list[tuple[str, str, str, str | None, str]]] = {
    "acme": [
        ("cus_0001", "Northwind Traders", "ana.lima@northwind.example", "+33 1 40 00 00 01", "FR"),
        ("cus_0002", "Contoso Bakery", "billing@contoso-bakery.example", "+49 30 0000 0002", "DE"),
        ("cus_0003", "Fabrikam Studio", "joe.kim@fabrikam.example", "+34 91 000 0003", "ES"),
        ("cus_0004", "Tailspin Toys", "accounts@tailspin.example", None, "IT"),
        ("cus_0005", "Wingtip Cycles", "mia.ross@wingtip.example", "+31 20 000 0005", "NL"),
    ],
    "globex": [
        ("cus_0101", "Initech", "bill.lumbergh@initech.example", "+1 512 555 0101", "US"),
        ("cus_0102", "Umbrella Labs", "ap@umbrella-labs.example", "+1 206 555 0102", "US"),
        ("cus_0103", "Soylent Foods", "pay@soylent.example", "+1 212 555 0103", "US"),
    ],
}

PRODUCTS = [
    ("Consulting (hour)", 12_000),
    ("Support plan (month)", 4_900),
    ("Onboarding workshop", 75_000),
    ("License seat (year)", 19_900),
    ("Data migration", 150_000),
]

INVOICES_PER_TENANT = {"acme": 24, "globex": 6}
# A cycle of statuses with the due date offset (days from today): negative means in the past.
PATTERN = [("sent", -12), ("paid", -30), ("draft", 20), ("sent", 15), ("paid", -5), ("sent", -40), ("void", -60)]


def demo_rows(today: dt.date | None = None) -> list[object]:
    """Every row of the demo data set, in insertion order."""
    today = today or dt.date.today()
    rows: list[object] = []
    counter = 0
    for tenant, name, currency in TENANTS:
        rows.append(TenantRecord(id=tenant, name=name, currency=currency,
                              next_invoice_number=INVOICES_PER_TENANT[tenant] + 1))
        customers = CUSTOMERS[tenant]
        for cid, cname, email, phone, country in customers:
            rows.append(CustomerRecord(id=cid, tenant=tenant, name=cname, email=email, phone=phone,
                                    country=country, created_on=today - dt.timedelta(days=400)))
        for n in range(1, INVOICES_PER_TENANT[tenant] + 1):
            counter += 1
            status, due_offset = PATTERN[(n - 1) % len(PATTERN)]
            invoice_id = f"inv_{counter:04d}"
            lines = [PRODUCTS[(n + k) % len(PRODUCTS)] for k in range(1 + n % 3)]
            line_rows = [
                LineRecord(invoice_id=invoice_id, position=i, description=desc, quantity=1 + (n + i) % 4,
                        unit_price_cents=price)
                for i, (desc, price) in enumerate(lines)
            ]
            total = sum(line.quantity * line.unit_price_cents for line in line_rows)
            due = today + dt.timedelta(days=due_offset)
            rows.append(InvoiceRecord(
                id=invoice_id, tenant=tenant, number=f"{tenant.upper()}-{n:04d}",
                customer_id=customers[n % len(customers)][0], status=status, currency=currency,
                total_cents=total, paid_cents=total if status == "paid" else 0, margin_cents=total * 3 // 10,
                issued_on=due - dt.timedelta(days=30), due_date=due, reminders_sent=0,
                internal_note=f"Account manager: {'Lea' if n % 2 else 'Sam'}", processor_token=f"tok_{counter:06d}",
            ))
            rows.extend(line_rows)
            if status == "paid":
                rows.append(PaymentRecord(id=f"pay_{counter:04d}", tenant=tenant, invoice_id=invoice_id,
                                       amount_cents=total, method="transfer" if n % 2 else "card",
                                       received_on=due - dt.timedelta(days=2), processor_ref=f"ch_{counter:06d}"))
    return rows
