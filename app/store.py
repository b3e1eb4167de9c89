"""The billing store: every query and write of the service, always scoped to the caller's tenant.

A store is built per call for one principal; there is no method that takes a tenant argument, so a
handler cannot read or write another tenant's rows by mistake. Queries are SQLAlchemy expressions.

Each write is one transaction in a session of its own, opened by the write and closed when it returns or
fails (a failed or cancelled write is rolled back); a read-only call opens no session at all.

The reads every call makes (`get_invoice`, `list_invoices`, `summary`) are one Core query each, built once
with the tenant as a bound parameter, and turned straight into dicts: no ORM objects to build and track
for data that is only serialized. On SQLite they go to the database's reader (`app.sqlite.Reader.fetch`: on
the calling thread, no trip to the database thread, SQLAlchemy's SQL compiled once and run on sqlite3 itself);
a write reading back what it changed, and Postgres, read through a session. Writes use the ORM.
"""

from __future__ import annotations

import datetime as dt
import functools
import secrets
import unicodedata
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic import ValidationError
from sqlalchemy import BindParameter, Executable, Row, Select, and_, bindparam, case, func, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from mcpfusion import ToolError, visible_name
from models import MAX_TOTAL_CENTS, InvoiceModel

from .auth import Principal
from .db import Database, DatabaseBusy
from .sqlite import casefold
from .tables import CustomerRecord, InvoiceRecord, LineRecord, PaymentRecord, ReminderRecord, TenantRecord

# The invoice lifecycle: update_invoice_status makes draft -> sent; record_payment makes a sent invoice paid
# once its payments cover it; void has its own destructive action.
TRANSITIONS = {"draft": {"sent"}, "sent": set(), "paid": set(), "void": set()}
# How far after its issue date an invoice may fall due.
DUE_WITHIN_YEARS = 10
# Seconds a caller is told to wait after BUSY (the database locked by another writer).
BUSY_RETRY_AFTER = 5
# The least time between two reminders of one invoice: a second `remind` within it sends nothing and answers
# when the last one went out (a retry after a lost answer, or twenty identical calls at once, remind once).
REMIND_COOLDOWN = dt.timedelta(hours=1)


def not_found(kind: str, ident: str, list_action: str) -> ToolError:
    shown = ident if len(ident) <= 80 else ident[:77] + "..."  # an id sent can be megabytes: never echoed whole
    return ToolError(
        "NOT_FOUND",
        f'{kind} "{visible_name(shown)}" was not found.',  # its control, bidi and format characters escaped
        recovery=f"Call {list_action} first to find a valid id.",  # the qualified name, whatever the exposition
        available_actions=[list_action],
    )


def never_stored(ident: str) -> bool:
    """Whether no row can have `ident`: one holding NUL (PostgreSQL text cannot, and a query carrying it fails),
    answered as an unknown id without a query, whatever the way in (a tool's id, the invoice://{id} resource).
    Only text to store is refused at validation (`models.Text`); an id is looked up as sent."""
    return "\x00" in ident


def check_text(field: str, value: str | None) -> None:
    """Text to store holds no NUL (see `never_stored`): refused as the field's validation error, before any write.
    (The tools' parameters, `remind`'s message too, are refused at validation already (`models.NO_NUL`): this is
    for the store's other callers.)"""
    if value is not None and never_stored(value):
        raise ToolError("VALIDATION_ERROR", f"{field} must not contain a NUL character (\\u0000).",
                        recovery=f"Send {field} without it and call again.", details={"field": field})


def busy(exc: DatabaseBusy) -> ToolError:
    """A call that could not have the database in time: nothing was written, the same call works later."""
    return ToolError("BUSY", f"The database is busy ({exc}); nothing was changed.",
                     recovery=f"Wait {BUSY_RETRY_AFTER} s and make the same call again.", retry_after=BUSY_RETRY_AFTER)


def conflict(message: str, recovery: str, *actions: str) -> ToolError:
    return ToolError("CONFLICT", message, recovery=recovery, available_actions=list(actions))


def check_voidable(invoice_id: str, status: str, paid_cents: int) -> None:
    """Only draft or sent invoices without payments can be voided."""
    if status not in ("draft", "sent") or paid_cents:
        state = f"{status} with {paid_cents} cents paid" if status in ("draft", "sent") else status
        raise conflict(f'Invoice "{invoice_id}" is {state} and cannot be voided.',
                       "Only draft or sent invoices without payments can be voided.", "billing.get_invoice")


def payment_refused(invoice_id: str, status: str) -> ToolError:
    """Why an invoice that is not sent takes no payment, and what to do instead (a final one owes nothing)."""
    if status == "draft":
        return conflict(f'Invoice "{invoice_id}" is a draft; payments go to sent invoices.',
                        "Send the invoice first (update_invoice_status status=sent), then record the payment.",
                        "billing.update_invoice_status")
    owed = "it is fully paid" if status == "paid" else "it was voided"
    return conflict(f'Invoice "{invoice_id}" is {status}; {owed}, so nothing is owed on it.',
                    f"Do not record this payment: a {status} invoice is final. Check the invoice and its "
                    "payments with get_invoice (a payment already recorded is listed there).",
                    "billing.get_invoice")


def nothing_owed(invoice_id: str, outcome: str) -> ToolError:
    """A sent invoice that owes nothing (a zero total, from before create_invoice refused them) is settled by
    marking it paid: no payment (at least 1 cent) or reminder applies to it."""
    return conflict(f'Invoice "{invoice_id}" is sent but nothing is owed on it (0 cents); {outcome}.',
                    "Settle it with update_invoice_status status=paid.", "billing.update_invoice_status")


def utc_stamp(moment: dt.datetime) -> str:
    """A stored UTC time (naive) as the caller reads it: ISO 8601 to the second, with its `Z`."""
    return moment.replace(microsecond=0).isoformat() + "Z"


def reminded_recently(invoice_id: str, last: dt.datetime, reminders_sent: int) -> ToolError:
    """The refusal of a reminder within `REMIND_COOLDOWN` of the invoice's last one: nothing was sent, and the
    caller learns that the last one did go out (a retry after a lost answer needs nothing more)."""
    window = int(REMIND_COOLDOWN.total_seconds() // 60)
    after = utc_stamp(last + REMIND_COOLDOWN)
    return conflict(f'A reminder for invoice "{invoice_id}" was already sent at {utc_stamp(last)} (reminder '
                    f"#{reminders_sent}); an invoice is reminded at most once every {window} minutes, so none "
                    "was sent now.",
                    "If this call retried one whose answer was lost, that reminder went out: do not send it again. "
                    f"Otherwise send the next reminder after {after}, if the invoice is still unpaid "
                    "(get_invoice shows reminders_sent).", "billing.get_invoice")


def check_due_date(due_date: dt.date, issued_on: dt.date) -> None:
    """A due date from the issue date to `DUE_WITHIN_YEARS` after it (an earlier one is a typo or a made-up
    overdue invoice, a later one a mistyped year)."""
    try:
        latest = issued_on.replace(year=issued_on.year + DUE_WITHIN_YEARS)
    except ValueError:  # issued on 29 February
        latest = issued_on.replace(year=issued_on.year + DUE_WITHIN_YEARS, day=28)
    if issued_on <= due_date <= latest:
        return
    problem = "before" if due_date < issued_on else f"more than {DUE_WITHIN_YEARS} years after"
    raise ToolError("VALIDATION_ERROR",
                    f"due_date {due_date.isoformat()} is {problem} the issue date (the invoice is issued today, "
                    f"{issued_on.isoformat()}).",
                    recovery=f"Send a due_date from {issued_on.isoformat()} to {latest.isoformat()} (YYYY-MM-DD), "
                             "e.g. 30 days after today, and call create_invoice again.",
                    details={"field": "due_date"})


def check_total(lines: list[Any]) -> None:
    """An invoice owes something: a zero total could never be paid (a payment is at least 1 cent), so it would
    stay sent, and be reminded, forever. A free item is a 0-priced line beside priced ones. And it owes at
    most `MAX_TOTAL_CENTS` (what one line can total), so every amount stored fits the database's integers."""
    total = sum(line.quantity * line.unit_price_cents for line in lines)
    if 0 < total <= MAX_TOTAL_CENTS:
        return
    if total:
        raise ToolError("VALIDATION_ERROR",
                        f"The lines total {total} cents; an invoice totals at most {MAX_TOTAL_CENTS} cents.",
                        recovery=f"Split the amount over several invoices of at most {MAX_TOTAL_CENTS} cents each, "
                                 "and call create_invoice for each.",
                        details={"field": "lines"})
    raise ToolError("VALIDATION_ERROR",
                    "The lines total 0 cents; an invoice must total more than 0 (nothing would be owed on it).",
                    recovery="Give at least one line a unit_price_cents above 0 (a free item can stay a 0-priced "
                             "line beside it), or do not create the invoice.",
                    details={"field": "lines"})


_INV, _CUST = InvoiceRecord.__table__, CustomerRecord.__table__
_LINE, _PAY = LineRecord.__table__, PaymentRecord.__table__
_TENANT: BindParameter[str] = bindparam("tenant")

# The columns of a read, in the order `invoice_dict`, `_line` and `_payment` unpack them. Not read: the tenant
# (the caller's own, the value every read filters on) and the customer's id (the invoice's customer_id, by the
# join): each column read costs more than the Python that fills it in.
_INVOICE_READ = [
    _INV.c[name] for name in ("id", "number", "customer_id", "status", "currency", "total_cents", "paid_cents",
                              "margin_cents", "issued_on", "due_date", "reminders_sent", "internal_note",
                              "void_reason", "processor_token")
]
_CUSTOMER_READ = [_CUST.c[name].label(f"c_{name}") for name in ("name", "email", "phone")]
_ROW_COLUMNS = [*_INVOICE_READ, *_CUSTOMER_READ]
_C = len(_ROW_COLUMNS)  # where a detail row's line columns start (line id first), then payment
_INVOICE_ROWS = (
    select(*_ROW_COLUMNS).join_from(_INV, _CUST, _CUST.c.id == _INV.c.customer_id)
    .where(_INV.c.tenant == _TENANT, _CUST.c.tenant == _TENANT)
)
# One invoice with its lines and payments in one query: lines x payments of one invoice are a few rows. Not
# ordered: `_detail` orders the few lines and payments itself (SQLite's sorter for three rows cost more).
_LINE_READ = ("description", "quantity", "unit_price_cents")
_PAYMENT_READ = ("id", "invoice_id", "amount_cents", "method", "received_on", "processor_ref")
_P = _C + 2 + len(_LINE_READ)  # where a detail row's payment columns start (payment id first)
_INVOICE_DETAIL = (
    select(
        *_ROW_COLUMNS, _LINE.c.id.label("line_id"), _LINE.c.position.label("l_position"),
        *(_LINE.c[n].label(f"l_{n}") for n in _LINE_READ), *(_PAY.c[n].label(f"p_{n}") for n in _PAYMENT_READ),
    )
    .join_from(_INV, _CUST, _CUST.c.id == _INV.c.customer_id)
    .outerjoin(_LINE, _LINE.c.invoice_id == _INV.c.id)
    .outerjoin(_PAY, and_(_PAY.c.invoice_id == _INV.c.id, _PAY.c.tenant == _TENANT))
    .where(_INV.c.tenant == _TENANT, _CUST.c.tenant == _TENANT, _INV.c.id == bindparam("invoice_id"))
)
_LIST = _INVOICE_ROWS.order_by(_INV.c.due_date.desc(), _INV.c.number)
# Receivables per status in one query, the tenant's currency alongside (its row even without invoices).
_SENT = _INV.c.status == "sent"
_OVERDUE = and_(_SENT, _INV.c.due_date < bindparam("today"))
_OWED = _INV.c.total_cents - _INV.c.paid_cents
_TEN = TenantRecord.__table__
_SUMMARY = (
    select(
        _TEN.c.currency, _INV.c.status, func.count(_INV.c.id).label("count"),
        func.sum(case((_SENT, _OWED), else_=0)).label("outstanding"),
        func.sum(case((_OVERDUE, _OWED), else_=0)).label("overdue"),
        func.sum(case((_OVERDUE, 1), else_=0)).label("overdue_count"),
        func.sum(_INV.c.paid_cents).label("paid"),
    )
    .select_from(_TEN).outerjoin(_INV, _INV.c.tenant == _TEN.c.id)
    .where(_TEN.c.id == _TENANT)
    .group_by(_TEN.c.currency, _INV.c.status)
)


@functools.cache
def _list_query(after: bool, limit: bool, status: str | bool, customer: bool) -> Select[Any]:
    """The list query of one shape (keyset position, page size, status filter, customer), built once with
    every value a bound parameter: SQLAlchemy works out a statement's cache key once per statement object,
    which for a list query built per call cost more CPU than SQLite running it."""
    query = _LIST
    if after:
        due: BindParameter[dt.date] = bindparam("after_due")
        number: BindParameter[str] = bindparam("after_number")
        query = query.where(or_(_INV.c.due_date < due, and_(_INV.c.due_date == due, _INV.c.number > number)))
    if limit:
        query = query.limit(bindparam("limit"))
    if status == "overdue":
        query = query.where(_INV.c.status == "sent", _INV.c.due_date < bindparam("today"))
    elif status:
        query = query.where(_INV.c.status == bindparam("status"))
    if customer:
        query = query.where(_INV.c.customer_id == bindparam("customer_id"))
    return query


def invoice_dict(row: Sequence[Any], tenant: str, today: dt.date) -> dict[str, Any]:
    """An invoice as its models describe it (presenters strip what an audience may not see), from a row of
    `_INVOICE_ROWS` (`_ROW_COLUMNS`: the invoice's columns, then its customer's) read for `tenant`. One dict
    display each: sized at once, where `dict(zip(...))` grows key by key (about twice the cost)."""
    (ident, number, customer_id, status, currency, total_cents, paid_cents, margin_cents, issued_on, due_date,
     reminders_sent, internal_note, void_reason, processor_token, c_name, c_email, c_phone) = row[:_C]
    return {
        "id": ident, "tenant": tenant, "number": number, "customer_id": customer_id, "status": status,
        "currency": currency, "total_cents": total_cents, "paid_cents": paid_cents, "margin_cents": margin_cents,
        "issued_on": issued_on, "due_date": due_date, "reminders_sent": reminders_sent,
        "internal_note": internal_note, "void_reason": void_reason, "processor_token": processor_token,
        "customer": {"id": customer_id, "name": c_name, "email": c_email, "phone": c_phone},
        "overdue": status == "sent" and due_date < today,
    }


def _line(row: Sequence[Any]) -> dict[str, Any]:
    """A line of an `_INVOICE_DETAIL` row (`_LINE_READ`)."""
    description, quantity, unit_price_cents = row[_C + 2:_P]
    return {"description": description, "quantity": quantity, "unit_price_cents": unit_price_cents}


def _position(line: tuple[int, dict[str, Any]]) -> int:
    return line[0]


def _payment(row: Sequence[Any]) -> dict[str, Any]:
    """The payment of an `_INVOICE_DETAIL` row (`_PAYMENT_READ`)."""
    ident, invoice_id, amount_cents, method, received_on, processor_ref = row[_P:]
    return {"id": ident, "invoice_id": invoice_id, "amount_cents": amount_cents, "method": method,
            "received_on": received_on, "processor_ref": processor_ref}


def invoice_key(row: dict[str, Any]) -> list[str]:
    """An invoice's position in list order (due date descending, then number): a page ends there."""
    return [row["due_date"].isoformat(), row["number"]]


def customer_key(row: dict[str, Any]) -> list[str]:
    """A customer's position in list order (name, then id)."""
    return [row["name"], row["id"]]


class BillingStore:
    """Customers, invoices and payments of one tenant, in `db`."""

    def __init__(self, db: Database, principal: Principal) -> None:
        self.db = db
        self.tenant = principal.tenant

    @staticmethod
    def today() -> dt.date:
        return dt.date.today()

    @staticmethod
    def now() -> dt.datetime:
        """The time a write is made, in UTC (naive: as every dialect stores it)."""
        return dt.datetime.now(dt.UTC).replace(tzinfo=None)

    @asynccontextmanager
    async def _writing(self) -> AsyncIterator[AsyncSession]:
        """The session of one write: rolled back unless `_commit` committed it, closed when the write ends. On
        SQLite it holds the write lock from its first statement (`Database.writes`), so what it reads and checks
        cannot change before it commits. A database too busy to take it is a retryable BUSY error."""
        await self.db.ready()
        try:
            async with self.db.write() as session:
                yield session
        except DatabaseBusy as exc:
            raise busy(exc) from None

    async def _rows(self, query: Executable, params: dict[str, Any], session: AsyncSession | None = None, *,
                    built_once: bool = True) -> Sequence[Any]:
        """The rows of a read (indexed like tuples): in `session` (a write's transaction) when given; else from
        the SQLite reader (compiled once and run on sqlite3 itself when the query is `built_once`, a constant
        of this module), or through a session of its own (Postgres, or SQLite busy: waiting there blocks no
        one)."""
        if session is not None:
            return (await session.execute(query, params)).all()
        await self.db.ready()
        reader = self.db.reader
        if reader is not None:
            rows = reader.fetch(query, params) if built_once else reader(query, params)  # type: ignore[arg-type]
            if rows is not None:
                return rows
        try:
            async with self.db.read() as own:
                return (await own.execute(query, params)).all()
        except DatabaseBusy as exc:
            raise busy(exc) from None

    # -- invoices: reads ---------------------------------------------------------------------------
    async def _invoice_row(self, session: AsyncSession, invoice_id: str) -> InvoiceRecord:
        """The invoice to change, locked until the write commits: `FOR UPDATE` on Postgres, the write lock its
        transaction began with on SQLite (which ignores FOR UPDATE)."""
        if never_stored(invoice_id):
            raise not_found("Invoice", invoice_id, "billing.list_invoices")
        query = (
            select(InvoiceRecord).where(InvoiceRecord.tenant == self.tenant, InvoiceRecord.id == invoice_id)
            .execution_options(populate_existing=True).with_for_update()
        )
        row = (await session.scalars(query)).one_or_none()
        if row is None:
            raise not_found("Invoice", invoice_id, "billing.list_invoices")
        return row

    async def _commit(self, session: AsyncSession, invoice_id: str) -> dict[str, Any]:
        """Commit a write only if the invoice still reads back through its model: the service never stores
        what its own schemas cannot read (a row that breaks them would break every later read)."""
        await session.flush()
        data = await self._detail(invoice_id, session)
        try:
            InvoiceModel.read(data)
        except ValidationError as exc:
            await session.rollback()
            fields = ", ".join(sorted({str(e["loc"][0]) for e in exc.errors() if e["loc"]})) or "the invoice"
            raise conflict(f"This change would store an invoice that cannot be read back ({fields}); nothing was "
                           "saved.", "Send shorter or valid values and call again.", "billing.get_invoice") from None
        await session.commit()
        return data

    async def list_invoices(
        self, status: str | None = None, customer_id: str | None = None, *, after: list[str] | None = None,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Latest due date first; `after` is the `invoice_key` of the last row already seen (keyset pagination:
        rows inserted meanwhile never shift the next page)."""
        if customer_id is not None and never_stored(customer_id):
            return []
        today = self.today()
        params: dict[str, Any] = {"tenant": self.tenant, "today": today, "status": status, "customer_id": customer_id,
                                  "limit": limit}
        if after is not None:
            params["after_due"], params["after_number"] = dt.date.fromisoformat(after[0]), after[1]
        shape = "overdue" if status == "overdue" else status is not None
        query = _list_query(after is not None, limit is not None, shape, customer_id is not None)
        rows = await self._rows(query, params)
        tenant = self.tenant
        return [invoice_dict(row, tenant, today) for row in rows]

    async def get_invoice(self, invoice_id: str) -> dict[str, Any]:
        return await self._detail(invoice_id)

    async def _detail(self, invoice_id: str, session: AsyncSession | None = None) -> dict[str, Any]:
        """One invoice with its customer, lines and payments (read in `session` when given)."""
        rows = [] if never_stored(invoice_id) else await self._rows(
            _INVOICE_DETAIL, {"tenant": self.tenant, "invoice_id": invoice_id}, session)
        if not rows:
            raise not_found("Invoice", invoice_id, "billing.list_invoices")
        data = invoice_dict(rows[0], self.tenant, self.today())
        lines: dict[Any, tuple[int, dict[str, Any]]] = {}
        payments: dict[Any, dict[str, Any]] = {}
        for row in rows:  # the join repeats each line once per payment and each payment once per line
            line_id, payment_id = row[_C], row[_P]
            if line_id is not None and line_id not in lines:
                lines[line_id] = (row[_C + 1], _line(row))
            if payment_id is not None and payment_id not in payments:
                payments[payment_id] = _payment(row)
        data["lines"] = [line for _, line in sorted(lines.values(), key=_position)]
        data["payments"] = sorted(payments.values(), key=lambda p: (p["received_on"], p["id"]))
        return data

    async def summary(self) -> dict[str, Any]:
        rows = await self._rows(_SUMMARY, {"tenant": self.tenant, "today": self.today()})
        by_status = {status: 0 for status in TRANSITIONS}
        totals = [0, 0, 0, 0]
        currency = None
        for row in rows:  # one row per status; a tenant without invoices gets one row with status NULL
            currency, status, count, *sums = row  # the columns of `_SUMMARY`, in order
            if status is None:
                continue
            by_status[status] = int(count)
            for i, value in enumerate(sums):  # outstanding, overdue, overdue_count, paid
                totals[i] += int(value or 0)
        return {
            "currency": currency or "EUR",
            "invoice_count": sum(by_status.values()),
            "count_by_status": by_status,
            "outstanding_cents": totals[0],
            "overdue_cents": totals[1],
            "overdue_count": totals[2],
            "paid_cents": totals[3],
        }

    # -- invoices: writes --------------------------------------------------------------------------
    async def create_invoice(
        self, customer_id: str, due_date: dt.date, lines: list[Any], internal_note: str | None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Create a draft invoice. With `idempotency_key`, an invoice already created under it (a retry after a
        lost answer) is answered as it is and nothing is created again; the key of another invoice (other
        customer, due date, lines or note) is a CONFLICT."""
        check_due_date(due_date, self.today())  # before any session: a refused date costs no transaction
        check_total(lines)
        args = (customer_id, due_date, lines, internal_note, idempotency_key)
        try:
            async with self._writing() as session:
                return await self._create_invoice(session, *args)
        except IntegrityError:
            if idempotency_key is None:
                raise
            # Another transaction stored this key first (Postgres: only the unique index saw it).
            async with self._writing() as session:
                return await self._create_invoice(session, *args)

    async def _created_before(self, session: AsyncSession, idempotency_key: str, customer_id: str,
                              due_date: dt.date, lines: list[Any], internal_note: str | None) -> dict[str, Any] | None:
        """The invoice created under `idempotency_key` if its arguments were these, None if there is none; a
        CONFLICT for the key of another invoice."""
        found = await session.scalar(select(InvoiceRecord.id).where(InvoiceRecord.tenant == self.tenant,
                                                                    InvoiceRecord.idempotency_key == idempotency_key))
        if found is None:
            return None
        data = await self._detail(found, session)
        sent = [(line.description, line.quantity, line.unit_price_cents) for line in lines]
        kept = [(line["description"], line["quantity"], line["unit_price_cents"]) for line in data["lines"]]
        if (data["customer_id"], data["due_date"], data["internal_note"], kept) != (customer_id, due_date,
                                                                                    internal_note, sent):
            raise conflict("This idempotency_key was already used for another invoice (another customer, due date, "
                           "lines or note); nothing was created.",
                           "Send a new idempotency_key for a new invoice; reuse a key only to retry the same "
                           "create_invoice call.", "billing.list_invoices")
        return data

    async def _create_invoice(
        self, session: AsyncSession, customer_id: str, due_date: dt.date, lines: list[Any], internal_note: str | None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        if idempotency_key is not None:
            # (SQLite: the write lock is held from the first statement, so a racing retry waits and finds it here)
            created = await self._created_before(session, idempotency_key, customer_id, due_date, lines,
                                                 internal_note)
            if created is not None:
                return created
        customer = None if never_stored(customer_id) else await session.scalar(
            select(CustomerRecord).where(CustomerRecord.tenant == self.tenant, CustomerRecord.id == customer_id)
        )
        if customer is None:
            raise not_found("Customer", customer_id, "customers.list")
        number = await session.scalar(
            update(TenantRecord).where(TenantRecord.id == self.tenant)
            .values(next_invoice_number=TenantRecord.next_invoice_number + 1)
            .returning(TenantRecord.next_invoice_number - 1)
        )
        currency = await session.scalar(select(TenantRecord.currency).where(TenantRecord.id == self.tenant))
        invoice_id = f"inv_{secrets.token_hex(6)}"
        total = sum(line.quantity * line.unit_price_cents for line in lines)
        session.add(InvoiceRecord(
            id=invoice_id, tenant=self.tenant, number=f"{self.tenant.upper()}-{number:04d}",
            customer_id=customer.id, status="draft", currency=currency, total_cents=total, paid_cents=0,
            margin_cents=None, issued_on=self.today(), due_date=due_date, reminders_sent=0,
            internal_note=internal_note, processor_token=None, idempotency_key=idempotency_key,
        ))
        session.add_all(
            LineRecord(invoice_id=invoice_id, position=i, description=line.description, quantity=line.quantity,
                    unit_price_cents=line.unit_price_cents)
            for i, line in enumerate(lines)
        )
        return await self._commit(session, invoice_id)

    async def set_status(self, invoice_id: str, status: str) -> dict[str, Any]:
        async with self._writing() as session:
            return await self._set_status(session, invoice_id, status)

    async def _set_status(self, session: AsyncSession, invoice_id: str, status: str) -> dict[str, Any]:
        row = await self._invoice_row(session, invoice_id)
        if row.status != status:
            if status == "void":
                raise conflict("Use void_invoice to void an invoice.", "Call billing.void_invoice.",
                               "billing.void_invoice")
            if status == "paid" and row.status == "sent":
                # Paid is what the payments make it: marking it here would leave paid_cents above the sum of
                # the payments on record (and settle it without the payments scope). Only an invoice that owes
                # nothing (a zero total, from before create_invoice refused them) is settled as it stands.
                owed = row.total_cents - row.paid_cents
                if owed:
                    raise conflict(f'Invoice "{invoice_id}" becomes paid when its payments cover it ({owed} cents '
                                   "are owed).", f"Record the payment with record_payment (amount_cents={owed}).",
                                   "billing.record_payment")
            elif status not in TRANSITIONS[row.status]:
                allowed = ", ".join(sorted(TRANSITIONS[row.status])) or (
                    "none here; its payments make it paid (record_payment)" if row.status == "sent"
                    else "none (it is final)")
                raise conflict(
                    f'Invoice "{invoice_id}" is {row.status}; it cannot become {status}.',
                    f"Allowed next status: {allowed}.", "billing.get_invoice",
                )
            row.status = status
            return await self._commit(session, invoice_id)
        return await self._detail(invoice_id, session)

    async def remind(self, invoice_id: str, message: str | None = None) -> dict[str, Any]:
        """Count a reminder of a sent invoice and record it with the sender's personal line (`message`); none
        within `REMIND_COOLDOWN` of the invoice's last one (`reminded_recently`)."""
        check_text("message", message)
        async with self._writing() as session:
            row = await self._invoice_row(session, invoice_id)
            if row.status != "sent":
                raise conflict(f'Invoice "{invoice_id}" is {row.status}; only sent invoices can be reminded.',
                               "Pick a sent invoice (list_invoices with status=sent).", "billing.list_invoices")
            if row.total_cents == row.paid_cents:
                raise nothing_owed(invoice_id, "no reminder was sent")
            # One conditional UPDATE counts the reminder and stamps it, only if the last one is older than the
            # cool-down: the database decides, whatever else runs at the same time.
            now = self.now()
            counted = await session.scalar(
                update(InvoiceRecord)
                .where(InvoiceRecord.tenant == self.tenant, InvoiceRecord.id == row.id,
                       or_(InvoiceRecord.last_reminded_at.is_(None),
                           InvoiceRecord.last_reminded_at <= now - REMIND_COOLDOWN))
                .values(reminders_sent=InvoiceRecord.reminders_sent + 1, last_reminded_at=now)
                .returning(InvoiceRecord.reminders_sent)
                .execution_options(synchronize_session=False)
            )
            if counted is None:
                last, count = (await session.execute(
                    select(InvoiceRecord.last_reminded_at, InvoiceRecord.reminders_sent)
                    .where(InvoiceRecord.tenant == self.tenant, InvoiceRecord.id == row.id))).one()
                raise reminded_recently(invoice_id, last or now, count)  # (a stamp: the update did not pass it)
            session.add(ReminderRecord(tenant=self.tenant, invoice_id=row.id, sent_on=self.today(),
                                       message=message or None))
            return await self._commit(session, invoice_id)

    async def reminders(self, invoice_id: str) -> list[dict[str, Any]]:
        """The reminders recorded for one of the tenant's invoices, oldest first."""
        if never_stored(invoice_id):
            return []
        query = (select(ReminderRecord.sent_on, ReminderRecord.message)
                 .where(ReminderRecord.tenant == self.tenant, ReminderRecord.invoice_id == invoice_id)
                 .order_by(ReminderRecord.id))
        rows = await self._rows(query, {}, built_once=False)
        return [{"sent_on": sent_on, "message": message} for sent_on, message in rows]

    async def void(self, invoice_id: str, reason: str) -> dict[str, Any]:
        async with self._writing() as session:
            row = await self._invoice_row(session, invoice_id)
            check_voidable(invoice_id, row.status, row.paid_cents)  # again: a payment may have come since asking
            row.status = "void"
            row.void_reason = reason  # its own field: the internal note stays as written (and within its limit)
            return await self._commit(session, invoice_id)

    async def can_void(self, invoice_id: str) -> None:
        """Refuse a void that cannot happen (a missing invoice, a paid one...) before the user is asked to
        confirm it: `void` repeats the check in its transaction."""
        invoice = await self.get_invoice(invoice_id)
        check_voidable(invoice_id, invoice["status"], invoice["paid_cents"])

    async def record_payment(self, invoice_id: str, amount_cents: int, method: str, processor_ref: str,
                             idempotency_key: str | None = None) -> dict[str, Any]:
        """Record a payment. With `idempotency_key`, a payment already recorded under it (a retry after a lost
        answer) is answered with the invoice as it is and nothing is recorded again; the key of another payment
        (other invoice, amount or method) is a CONFLICT."""
        try:
            async with self._writing() as session:
                return await self._record_payment(session, invoice_id, amount_cents, method, processor_ref,
                                                  idempotency_key)
        except IntegrityError:
            if idempotency_key is None:
                raise
            # Another transaction stored this key first (for another invoice: only the unique index saw it).
            async with self._writing() as session:
                return await self._record_payment(session, invoice_id, amount_cents, method, processor_ref,
                                                  idempotency_key)

    async def _record_payment(self, session: AsyncSession, invoice_id: str, amount_cents: int, method: str,
                              processor_ref: str, idempotency_key: str | None = None) -> dict[str, Any]:
        row = await self._invoice_row(session, invoice_id)  # (locked first: a retry of this payment waits here)
        if idempotency_key is not None:
            done = (await session.execute(
                select(PaymentRecord.invoice_id, PaymentRecord.amount_cents, PaymentRecord.method)
                .where(PaymentRecord.tenant == self.tenant, PaymentRecord.idempotency_key == idempotency_key)
            )).one_or_none()
            if done is not None:
                if tuple(done) != (row.id, amount_cents, method):
                    raise conflict("This idempotency_key was already used for another payment (another invoice, "
                                   "amount or method); nothing was recorded.",
                                   "Send a new idempotency_key for a new payment; reuse a key only to retry the "
                                   "same payment.", "billing.get_invoice")
                return await self._detail(invoice_id, session)  # recorded before: the invoice as it is now
        owed = row.total_cents - row.paid_cents
        if row.status != "sent":
            raise payment_refused(invoice_id, row.status)
        if not owed:
            raise nothing_owed(invoice_id, "no payment was recorded")
        if amount_cents > owed:
            raise conflict(f"The amount exceeds what is owed ({owed} cents).",
                           f"Send amount_cents of at most {owed}.", "billing.record_payment")
        session.add(PaymentRecord(
            id=f"pay_{secrets.token_hex(6)}", tenant=self.tenant, invoice_id=row.id, amount_cents=amount_cents,
            method=method, received_on=self.today(), processor_ref=processor_ref, idempotency_key=idempotency_key,
        ))
        row.paid_cents += amount_cents
        if row.paid_cents == row.total_cents:
            row.status = "paid"
        return await self._commit(session, invoice_id)

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
            select(*_CUST.c, func.coalesce(owed.c.owed, 0).label("open_balance_cents"))
            .outerjoin_from(_CUST, owed, owed.c.customer_id == _CUST.c.id)
            .where(_CUST.c.tenant == self.tenant)
            .order_by(_CUST.c.name, _CUST.c.id)
        )

    @staticmethod
    def _customer_dict(row: Row[Any]) -> dict[str, Any]:
        customer = dict(row._mapping)
        customer["open_balance_cents"] = int(customer["open_balance_cents"])
        return customer

    async def list_customers(
        self, search: str | None = None, *, after: list[str] | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """By name; `after` is the `customer_key` of the last row already seen (keyset pagination)."""
        query = self._customers()
        if after is not None:
            name, ident = after
            query = query.where(or_(_CUST.c.name > name, and_(_CUST.c.name == name, _CUST.c.id > ident)))
        if limit is not None:
            query = query.limit(limit)
        if search and never_stored(search):
            # No name or country holds NUL (see `never_stored`; SQLite's LIKE would end the pattern at it and
            # match every row), so nothing matches.
            return []
        if search:
            # A literal substring, without case: LIKE's wildcards (% and _) and its escape character escaped,
            # then both sides folded by the same function of the database (`casefold` leaves those three be).
            # In NFC, the form names are stored in: "Mu" + a combining diaeresis (macOS's way) finds "Müller".
            search = unicodedata.normalize("NFC", search)
            pattern = "%" + search.replace("/", "//").replace("%", "/%").replace("_", "/_") + "%"
            query = query.where(or_(casefold(_CUST.c.name).like(casefold(literal(pattern)), escape="/"),
                                    _CUST.c.country == search.upper()))
        return [self._customer_dict(row) for row in await self._rows(query, {}, built_once=False)]

    async def get_customer(self, customer_id: str) -> dict[str, Any]:
        found = [] if never_stored(customer_id) else await self._rows(
            self._customers().where(_CUST.c.id == customer_id), {}, built_once=False)
        if not found:
            raise not_found("Customer", customer_id, "customers.list")
        return self._customer_dict(found[0])
