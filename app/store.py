"""The billing store: every query and write of the service, always scoped to the caller's tenant.

A store is built per call for one principal; there is no method that takes a tenant argument, so a
handler cannot read or write another tenant's rows by mistake. Queries are SQLAlchemy expressions.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from sqlalchemy import Select, and_, case, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mcpfusion import ToolError

from .auth import Principal
from .db import INVOICE_DETAIL, INVOICE_ROW
from .tables import CustomerRecord, InvoiceRecord, LineRecord, PaymentRecord, TenantRecord

# Status changes update_invoice_status may make (void has its own destructive action).
TRANSITIONS = {"draft": {"sent"}, "sent": {"paid"}, "paid": set(), "void": set()}


def not_found(kind: str, ident: str, list_action: str) -> ToolError:
    return ToolError(
        "NOT_FOUND",
        f'{kind} "{ident}" was not found.',
        recovery=f"Call {list_action.replace('.', ' with action ')} first to find a valid id.",
        available_actions=[list_action],
    )


def conflict(message: str, recovery: str, *actions: str) -> ToolError:
    return ToolError("CONFLICT", message, recovery=recovery, available_actions=list(actions))


def _customer_ref(row: CustomerRecord) -> dict[str, Any]:
    return {"id": row.id, "name": row.name, "email": row.email, "phone": row.phone}


def invoice_dict(row: InvoiceRecord, today: dt.date, *, detail: bool) -> dict[str, Any]:
    """An invoice as its models describe it (presenters strip what an audience may not see)."""
    data: dict[str, Any] = {
        "id": row.id, "tenant": row.tenant, "number": row.number, "customer_id": row.customer_id,
        "customer": _customer_ref(row.customer), "status": row.status, "currency": row.currency,
        "total_cents": row.total_cents, "paid_cents": row.paid_cents, "issued_on": row.issued_on,
        "due_date": row.due_date, "overdue": row.status == "sent" and row.due_date < today,
        "reminders_sent": row.reminders_sent, "internal_note": row.internal_note,
        "margin_cents": row.margin_cents, "processor_token": row.processor_token,
    }
    if detail:
        data["lines"] = [
            {"description": li.description, "quantity": li.quantity, "unit_price_cents": li.unit_price_cents}
            for li in row.lines
        ]
        data["payments"] = [
            {"id": p.id, "invoice_id": p.invoice_id, "amount_cents": p.amount_cents, "method": p.method,
             "received_on": p.received_on, "processor_ref": p.processor_ref}
            for p in row.payments
        ]
    return data


def invoice_key(row: dict[str, Any]) -> list[str]:
    """An invoice's position in list order (due date descending, then number): a page ends there."""
    return [row["due_date"].isoformat(), row["number"]]


def customer_key(row: dict[str, Any]) -> list[str]:
    """A customer's position in list order (name, then id)."""
    return [row["name"], row["id"]]


class BillingStore:
    """Customers, invoices and payments of one tenant."""

    def __init__(self, session: AsyncSession, principal: Principal) -> None:
        self.session = session
        self.tenant = principal.tenant

    @staticmethod
    def today() -> dt.date:
        return dt.date.today()

    # -- invoices: reads ---------------------------------------------------------------------------
    def _invoices(self, *options: Any) -> Select[tuple[InvoiceRecord]]:
        return select(InvoiceRecord).where(InvoiceRecord.tenant == self.tenant).options(*options)

    async def _invoice_row(self, invoice_id: str, *, for_update: bool = False) -> InvoiceRecord:
        # populate_existing: a row already in the session gets its lines and payments reloaded after writes.
        query = (
            self._invoices(*INVOICE_DETAIL).where(InvoiceRecord.id == invoice_id)
            .execution_options(populate_existing=True)
        )
        if for_update:
            query = query.with_for_update()
        row = (await self.session.scalars(query)).one_or_none()
        if row is None:
            raise not_found("Invoice", invoice_id, "billing.list_invoices")
        return row

    async def list_invoices(
        self, status: str | None = None, customer_id: str | None = None, *, after: list[str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Latest due date first; `after` is the `invoice_key` of the last row already seen (keyset pagination:
        rows inserted meanwhile never shift the next page)."""
        query = self._invoices(*INVOICE_ROW).order_by(InvoiceRecord.due_date.desc(), InvoiceRecord.number)
        if after is not None:
            due, number = dt.date.fromisoformat(after[0]), after[1]
            query = query.where(or_(InvoiceRecord.due_date < due,
                                    and_(InvoiceRecord.due_date == due, InvoiceRecord.number > number)))
        if limit is not None:
            query = query.limit(limit)
        if status == "overdue":
            query = query.where(InvoiceRecord.status == "sent", InvoiceRecord.due_date < self.today())
        elif status is not None:
            query = query.where(InvoiceRecord.status == status)
        if customer_id is not None:
            query = query.where(InvoiceRecord.customer_id == customer_id)
        today = self.today()
        return [invoice_dict(r, today, detail=False) for r in await self.session.scalars(query)]

    async def get_invoice(self, invoice_id: str) -> dict[str, Any]:
        return invoice_dict(await self._invoice_row(invoice_id), self.today(), detail=True)

    async def summary(self) -> dict[str, Any]:
        today = self.today()
        sent = InvoiceRecord.status == "sent"
        overdue = and_(sent, InvoiceRecord.due_date < today)
        owed = InvoiceRecord.total_cents - InvoiceRecord.paid_cents
        counts = await self.session.execute(
            select(InvoiceRecord.status, func.count()).where(InvoiceRecord.tenant == self.tenant)
            .group_by(InvoiceRecord.status)
        )
        totals = (await self.session.execute(
            select(
                func.coalesce(func.sum(case((sent, owed), else_=0)), 0),
                func.coalesce(func.sum(case((overdue, owed), else_=0)), 0),
                func.coalesce(func.sum(case((overdue, 1), else_=0)), 0),
                func.coalesce(func.sum(InvoiceRecord.paid_cents), 0),
            ).where(InvoiceRecord.tenant == self.tenant)
        )).one()
        by_status = {status: 0 for status in TRANSITIONS} | {s: int(n) for s, n in counts.all()}
        currency = await self.session.scalar(select(TenantRecord.currency).where(TenantRecord.id == self.tenant))
        return {
            "currency": currency or "EUR",
            "invoice_count": sum(by_status.values()),
            "count_by_status": by_status,
            "outstanding_cents": int(totals[0]),
            "overdue_cents": int(totals[1]),
            "overdue_count": int(totals[2]),
            "paid_cents": int(totals[3]),
        }

    # -- invoices: writes --------------------------------------------------------------------------
    async def create_invoice(
        self, customer_id: str, due_date: dt.date, lines: list[Any], internal_note: str | None
    ) -> dict[str, Any]:
        customer = await self.session.scalar(
            select(CustomerRecord).where(CustomerRecord.tenant == self.tenant, CustomerRecord.id == customer_id)
        )
        if customer is None:
            raise not_found("Customer", customer_id, "customers.list")
        number = await self.session.scalar(
            update(TenantRecord).where(TenantRecord.id == self.tenant)
            .values(next_invoice_number=TenantRecord.next_invoice_number + 1)
            .returning(TenantRecord.next_invoice_number - 1)
        )
        currency = await self.session.scalar(select(TenantRecord.currency).where(TenantRecord.id == self.tenant))
        invoice_id = f"inv_{secrets.token_hex(6)}"
        total = sum(line.quantity * line.unit_price_cents for line in lines)
        self.session.add(InvoiceRecord(
            id=invoice_id, tenant=self.tenant, number=f"{self.tenant.upper()}-{number:04d}",
            customer_id=customer.id, status="draft", currency=currency, total_cents=total, paid_cents=0,
            margin_cents=None, issued_on=self.today(), due_date=due_date, reminders_sent=0,
            internal_note=internal_note, processor_token=None,
        ))
        self.session.add_all(
            LineRecord(invoice_id=invoice_id, position=i, description=line.description, quantity=line.quantity,
                    unit_price_cents=line.unit_price_cents)
            for i, line in enumerate(lines)
        )
        await self.session.commit()
        return await self.get_invoice(invoice_id)

    async def set_status(self, invoice_id: str, status: str) -> dict[str, Any]:
        row = await self._invoice_row(invoice_id, for_update=True)
        if row.status != status:
            if status == "void":
                raise conflict("Use void_invoice to void an invoice.", "Call billing with action void_invoice.",
                               "billing.void_invoice")
            if status not in TRANSITIONS[row.status]:
                allowed = ", ".join(sorted(TRANSITIONS[row.status])) or "none (it is final)"
                raise conflict(
                    f'Invoice "{invoice_id}" is {row.status}; it cannot become {status}.',
                    f"Allowed next status: {allowed}.", "billing.get_invoice",
                )
            row.status = status
            if status == "paid":
                row.paid_cents = row.total_cents
            await self.session.commit()
        return await self.get_invoice(invoice_id)

    async def remind(self, invoice_id: str) -> dict[str, Any]:
        row = await self._invoice_row(invoice_id, for_update=True)
        if row.status != "sent":
            raise conflict(f'Invoice "{invoice_id}" is {row.status}; only sent invoices can be reminded.',
                           "Pick a sent invoice (list_invoices with status=sent).", "billing.list_invoices")
        row.reminders_sent += 1
        await self.session.commit()
        return await self.get_invoice(invoice_id)

    async def void(self, invoice_id: str, reason: str) -> dict[str, Any]:
        row = await self._invoice_row(invoice_id, for_update=True)
        if row.status not in ("draft", "sent") or row.paid_cents:
            raise conflict(f'Invoice "{invoice_id}" is {row.status} and cannot be voided.',
                           "Only draft or sent invoices without payments can be voided.", "billing.get_invoice")
        row.status = "void"
        row.internal_note = f"Voided: {reason}" + (f" ({row.internal_note})" if row.internal_note else "")
        await self.session.commit()
        return await self.get_invoice(invoice_id)

    async def record_payment(self, invoice_id: str, amount_cents: int, method: str, processor_ref: str
                             ) -> dict[str, Any]:
        row = await self._invoice_row(invoice_id, for_update=True)
        owed = row.total_cents - row.paid_cents
        if row.status != "sent":
            raise conflict(f'Invoice "{invoice_id}" is {row.status}; payments go to sent invoices.',
                           "Send the invoice first (update_invoice_status status=sent).",
                           "billing.update_invoice_status")
        if amount_cents > owed:
            raise conflict(f"The amount exceeds what is owed ({owed} cents).",
                           f"Send amount_cents of at most {owed}.", "billing.record_payment")
        self.session.add(PaymentRecord(
            id=f"pay_{secrets.token_hex(6)}", tenant=self.tenant, invoice_id=row.id, amount_cents=amount_cents,
            method=method, received_on=self.today(), processor_ref=processor_ref,
        ))
        row.paid_cents += amount_cents
        if row.paid_cents == row.total_cents:
            row.status = "paid"
        await self.session.commit()
        return await self.get_invoice(invoice_id)

    # -- customers ---------------------------------------------------------------------------------
    def _customers(self) -> Select[Any]:
        balance = func.sum(InvoiceRecord.total_cents - InvoiceRecord.paid_cents).label("owed")
        owed = (
            select(InvoiceRecord.customer_id, balance)
            .where(InvoiceRecord.tenant == self.tenant, InvoiceRecord.status == "sent")
            .group_by(InvoiceRecord.customer_id)
            .subquery()
        )
        return (
            select(CustomerRecord, func.coalesce(owed.c.owed, 0))
            .outerjoin(owed, owed.c.customer_id == CustomerRecord.id)
            .where(CustomerRecord.tenant == self.tenant)
            .order_by(CustomerRecord.name, CustomerRecord.id)
        )

    @staticmethod
    def _customer_dict(row: CustomerRecord, owed: Any) -> dict[str, Any]:
        return {
            "id": row.id, "tenant": row.tenant, "name": row.name, "email": row.email, "phone": row.phone,
            "country": row.country, "created_on": row.created_on, "open_balance_cents": int(owed),
        }

    async def list_customers(
        self, search: str | None = None, *, after: list[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """By name; `after` is the `customer_key` of the last row already seen (keyset pagination)."""
        query = self._customers()
        if after is not None:
            name, ident = after
            query = query.where(or_(CustomerRecord.name > name,
                                    and_(CustomerRecord.name == name, CustomerRecord.id > ident)))
        if limit is not None:
            query = query.limit(limit)
        if search:
            pattern = f"%{search.lower()}%"  # a bound parameter, not SQL text
            query = query.where(
                or_(func.lower(CustomerRecord.name).like(pattern), CustomerRecord.country == search.upper())
            )
        return [self._customer_dict(row, owed) for row, owed in (await self.session.execute(query)).all()]

    async def get_customer(self, customer_id: str) -> dict[str, Any]:
        found = (await self.session.execute(self._customers().where(CustomerRecord.id == customer_id))).one_or_none()
        if found is None:
            raise not_found("Customer", customer_id, "customers.list")
        return self._customer_dict(*found)
