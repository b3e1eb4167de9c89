"""Database tables (SQLAlchemy 2 ORM). Every row belongs to a tenant; queries always filter on it.

Amounts in cents are `Money` columns, 64-bit (BIGINT; SQLite's integers are 64-bit anyway): an invoice may
total up to `models.MAX_TOTAL_CENTS`, far beyond a 32-bit INTEGER's 21,474,836.47.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Date, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

# Amounts in cents (a line's own unit price and quantity have smaller maxima and stay INTEGER).
Money = BigInteger


class Base(DeclarativeBase):
    pass


class TenantRecord(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    currency: Mapped[str] = mapped_column(String(3))
    next_invoice_number: Mapped[int] = mapped_column(Integer, default=1)


class CustomerRecord(Base):
    __tablename__ = "customers"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    email: Mapped[str] = mapped_column(String(320))
    phone: Mapped[str | None] = mapped_column(String(40))
    country: Mapped[str] = mapped_column(String(2))
    created_on: Mapped[dt.date] = mapped_column(Date)


class InvoiceRecord(Base):
    __tablename__ = "invoices"
    __table_args__ = (
        UniqueConstraint("tenant", "number"),
        # The list's order (latest due date first, then number) within a tenant: a page is read in index order
        # and stops at its limit, instead of sorting every invoice of the tenant first.
        Index("ix_invoices_list_order", "tenant", text("due_date DESC"), "number"),
        # The caller's key for this invoice (`create_invoice(idempotency_key=...)`): a retry with the same key
        # creates nothing more. Unique per tenant; NULLs (invoices created without one) never collide.
        Index("ux_invoices_idempotency_key", "tenant", "idempotency_key", unique=True),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    number: Mapped[str] = mapped_column(String(40))
    customer_id: Mapped[str] = mapped_column(ForeignKey("customers.id"), index=True)
    status: Mapped[str] = mapped_column(String(10))
    currency: Mapped[str] = mapped_column(String(3))
    total_cents: Mapped[int] = mapped_column(Money, default=0)
    paid_cents: Mapped[int] = mapped_column(Money, default=0)
    margin_cents: Mapped[int | None] = mapped_column(Money)
    issued_on: Mapped[dt.date] = mapped_column(Date)
    due_date: Mapped[dt.date] = mapped_column(Date)
    reminders_sent: Mapped[int] = mapped_column(Integer, default=0)
    # When the last reminder was sent (UTC, naive): `remind` sends none within `store.REMIND_COOLDOWN` of it.
    last_reminded_at: Mapped[dt.datetime | None] = mapped_column(DateTime)
    internal_note: Mapped[str | None] = mapped_column(String(500))
    void_reason: Mapped[str | None] = mapped_column(String(200))
    processor_token: Mapped[str | None] = mapped_column(String(80))
    idempotency_key: Mapped[str | None] = mapped_column(String(64))

    customer: Mapped[CustomerRecord] = relationship(lazy="raise")
    lines: Mapped[list[LineRecord]] = relationship(
        lazy="raise", order_by="LineRecord.position", cascade="all, delete-orphan"
    )
    payments: Mapped[list[PaymentRecord]] = relationship(lazy="raise", order_by="PaymentRecord.received_on")


class LineRecord(Base):
    __tablename__ = "invoice_lines"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(200))
    quantity: Mapped[int] = mapped_column(Integer)
    unit_price_cents: Mapped[int] = mapped_column(Integer)


class PaymentRecord(Base):
    __tablename__ = "payments"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), index=True)
    amount_cents: Mapped[int] = mapped_column(Money)
    method: Mapped[str] = mapped_column(String(10))
    received_on: Mapped[dt.date] = mapped_column(Date)
    processor_ref: Mapped[str | None] = mapped_column(String(80))
    # The caller's key for this payment (`record_payment(idempotency_key=...)`): a retry with the same key
    # records nothing more. Unique per tenant; NULLs (payments sent without one) never collide.
    idempotency_key: Mapped[str | None] = mapped_column(String(64))

    __table_args__ = (Index("ux_payments_idempotency_key", "tenant", "idempotency_key", unique=True),)


class ReminderRecord(Base):
    """One payment reminder sent for an invoice, with the personal line the sender added (if any)."""

    __tablename__ = "reminders"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(ForeignKey("tenants.id"), index=True)
    invoice_id: Mapped[str] = mapped_column(ForeignKey("invoices.id"), index=True)
    sent_on: Mapped[dt.date] = mapped_column(Date)
    message: Mapped[str | None] = mapped_column(String(500))
