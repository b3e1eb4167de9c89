"""Tool `billing`: invoices and payments. A tour of the framework in one file:

- handlers are typed `async def`s; their parameters are the tool's input schema;
- `Depends(...)` brings the tenant-scoped store, the caller's presenter and credentials (never in the schema);
- a Model's fillable profile (`InvoiceModel.input_model("create")`) becomes the action's parameters;
- presenters decide what the agent sees; an output model types a plain result (`revenue_summary`: validated
  by the model once, so it is not checked again against its schema), `toon_success` answers another shape;
- guards: a timeout on `remind`, at most two `export_invoices` at once, and `void_invoice` asks the user first
  (a middleware refuses a void that cannot happen before that; the app adds a rate limit and the audit trail
  to every action, in `app/main.py`);
- OAuth scopes: every action needs `billing:read`, writes `billing:write` too, `record_payment`
  `payments:write` (a caller without them neither sees nor calls the action; see `app/auth.py`).
"""

import datetime as dt
import hashlib
import logging
import secrets
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import Depends
from pydantic import BaseModel, Field, create_model
from pydantic.fields import FieldInfo

from app.auth import current_principal
from app.deps import PresentedBy, get_store, invoice_presenter, invoice_rows_presenter, payment_api_key
from app.pdf import invoice_document
from app.store import BillingStore, invoice_key
from mcpfusion import (
    ActionCall,
    CallNext,
    Concurrency,
    Context,
    Page,
    Timeout,
    Tool,
    ToolResponse,
    attach,
    toon_success,
)
from mcpfusion.content import Attached
from models import (
    INVOICE_STATUSES,
    NO_NUL,
    NOT_BLANK,
    NOT_BLANK_INVOICE_KEY,
    NOT_BLANK_KEY,
    ExportRow,
    InvoiceLineInput,
    InvoiceModel,
    InvoiceStatus,
    OptionalText,
    PaymentMethod,
    PaymentModel,
    RevenueSummary,
)
from presenters import invoice_admin, invoice_rows_admin, invoice_rows_support, invoice_support

logger = logging.getLogger("app.billing")


async def announce_change(call: ActionCall, call_next: CallNext) -> ToolResponse:
    """tells the clients subscribed to invoice://{id} that this write changed the invoice"""
    # (resources/subscribe on the session wire, subscriptions/listen on 2026-07-28: app.main's invoice://{id})
    response = await call_next(call)
    data = response.view.data
    if not response.is_error and isinstance(data, dict) and "id" in data:
        try:
            await call.request.app.state.mcpfusion.notify_resource_updated(f"invoice://{data['id']}")
        except Exception:  # (the write is done: a broker that cannot tell the subscribers does not undo it)
            logger.warning("invoice://%s changed; its subscribers could not be told", data["id"], exc_info=True)
    return response


billing = Tool(
    "billing",
    description="Invoices and payments of your organisation (amounts in cents)",
    tags=["finance", "invoices"],
    exposition="profiles",  # reads (billing_read) apart from writes: list_invoices is advertised read-only
    scopes=["billing:read"],
)

if TYPE_CHECKING:
    # A type checker cannot run `Model.input_model`: these declare the models built below, each field with the
    # type of the entity's own field or the input's own (tests/test_service_typing.py checks that they match).
    class InvoiceCreate(BaseModel):
        customer_id: str
        due_date: dt.date
        lines: list[InvoiceLineInput]
        internal_note: str | None

    class InvoiceUpdate(BaseModel):
        status: InvoiceStatus

    class PaymentCreate(BaseModel):
        amount_cents: int
        method: PaymentMethod
else:
    # The docs' example calls (try-it, curl) are legal on the demo data: an invoice for a demo customer, due a
    # month after today; a draft (inv_0003, see app/seed.py) sent. Text the agent sends to store holds no NUL
    # (`models.Text`): checked on these inputs, not on every invoice read back through the entity's fields.
    _create = InvoiceModel.input_model("create")
    _customer = FieldInfo.merge_field_infos(_create.model_fields["customer_id"], examples=["cus_0001"])
    InvoiceCreate = create_model(_create.__name__, __base__=_create, customer_id=(str, _customer),
                                 lines=(list[InvoiceLineInput], _create.model_fields["lines"]),
                                 internal_note=(OptionalText, _create.model_fields["internal_note"]))
    _update = InvoiceModel.input_model("update")
    _sent = FieldInfo.merge_field_infos(_update.model_fields["status"], examples=["sent"])
    InvoiceUpdate = create_model(_update.__name__, __base__=_update, status=(InvoiceStatus, _sent))
    PaymentCreate = PaymentModel.input_model("create")
InvoiceId = Annotated[str, Field(description="Invoice id, e.g. inv_0001 (see list_invoices).", max_length=40)]
IdempotencyKey = Annotated[str | None, Field(
    description="A new key per payment; resend it on a retry and the payment is recorded once.",
    min_length=8, max_length=64), NO_NUL, NOT_BLANK_KEY]  # (limits before the rules: a string's; null passes)
# create_invoice's key: up to 64 characters some of which show. No least length, unlike the payment's: a key
# used again with other arguments is a CONFLICT, never a lost invoice, and what the schema says of it holds
# (the grouped tool's line for record_payment says its own `minLength`).
InvoiceKey = Annotated[str | None, Field(max_length=64), NO_NUL, NOT_BLANK_INVOICE_KEY]
DraftId = Annotated[InvoiceId, Field(examples=["inv_0003"])]  # (the docs' example: a draft of the demo data)
StatusFilter = Annotated[
    Literal[(*INVOICE_STATUSES, "overdue")] | None,  # type: ignore[valid-type]
    Field(description="Only invoices with this status (or overdue)."),
]
DETAIL: PresentedBy = {"returns": invoice_presenter, "presenters": [invoice_admin, invoice_support]}
# MCP hints default to destructive and open world: say what each action really does. Only the tenant's own
# database is touched (open_world=False), except where an action reaches a customer or a payment processor.
WRITE = ["billing:write"]


@billing.action(readonly=True, returns=invoice_rows_presenter, presenters=[invoice_rows_admin, invoice_rows_support],
                paginate=True, open_world=False)
async def list_invoices(
    page: Page,
    status: StatusFilter = None,
    customer_id: Annotated[str | None, Field(description="Only this customer's invoices.")] = None,
    store: BillingStore = Depends(get_store),
) -> list[dict[str, Any]]:
    """List invoices, latest due date first (one page at a time: follow next_cursor)"""
    rows = await store.list_invoices(status, customer_id, after=page.after, limit=page.size + 1)
    return page.keyset(rows, key=invoice_key)


@billing.action(readonly=True, open_world=False, **DETAIL)
async def get_invoice(id: InvoiceId, store: BillingStore = Depends(get_store)) -> dict[str, Any]:
    """Get one invoice with its lines and payments"""
    return await store.get_invoice(id)


@billing.action(destructive=False, scopes=WRITE, open_world=False, middleware=[announce_change], **DETAIL)
async def create_invoice(
    invoice: InvoiceCreate, idempotency_key: InvoiceKey = None, store: BillingStore = Depends(get_store)
) -> dict[str, Any]:
    """Create a draft invoice for a customer; lines must total 1 to 10^12 cents (free items beside paid ones)"""
    return await store.create_invoice(invoice.customer_id, invoice.due_date, invoice.lines, invoice.internal_note,
                                      idempotency_key)


@billing.action(idempotent=True, destructive=False, scopes=WRITE, open_world=False, middleware=[announce_change],
                **DETAIL)
async def update_invoice_status(
    id: DraftId, change: InvoiceUpdate, store: BillingStore = Depends(get_store)
) -> dict[str, Any]:
    """Send a draft invoice (status=sent); payments make it paid"""
    return await store.set_status(id, change.status)


@billing.action(open_world=True, destructive=False, middleware=[announce_change, Timeout(10)], scopes=WRITE,
                **DETAIL)
async def remind(
    id: InvoiceId,
    ctx: Context,
    message: Annotated[str | None, Field(description="A personal line added to the reminder.", max_length=500),
                       NO_NUL] = None,
    store: BillingStore = Depends(get_store),
) -> dict[str, Any]:
    """Send a payment reminder for a sent invoice"""
    # (the hour is app.store.REMIND_COOLDOWN; a reminder within it is a CONFLICT saying when the last one went out)
    # The line is kept with the reminder's record (never echoed to the logs; one holding NUL is refused at
    # validation, as every text the service stores); none: a plain reminder.
    invoice = await (store.remind(id, message) if message else store.remind(id))
    added = " with the personal line" if message else ""
    await ctx.info(f"reminder #{invoice['reminders_sent']} queued for {invoice['number']}{added}")
    return invoice


async def voidable(call: ActionCall, call_next: CallNext) -> ToolResponse:
    """refuses a void that cannot happen (missing invoice, paid...) before the user is asked to confirm it"""
    # Middleware run before the confirmation: asking the user about a void that is bound to fail wastes their
    # attention and teaches them to confirm blindly. The void checks again in its own transaction.
    store = BillingStore(call.request.app.state.db, await current_principal(call.request))
    await store.can_void(call.arguments["id"])
    return await call_next(call)


@billing.action(destructive=True, confirm="Void invoice {id} (reason: {reason})? This cannot be undone.", scopes=WRITE,
                middleware=[announce_change, voidable], open_world=False, **DETAIL)
async def void_invoice(
    id: InvoiceId,
    reason: Annotated[str, Field(min_length=3, max_length=200, description="Why the invoice is voided."), NO_NUL,
                      NOT_BLANK],
    store: BillingStore = Depends(get_store),
) -> dict[str, Any]:
    """Void an unpaid invoice (cannot be undone)"""
    return await store.void(id, reason)


@billing.action(open_world=True, destructive=False, scopes=["payments:write"], middleware=[announce_change],
                **DETAIL)
async def record_payment(
    id: InvoiceId,
    payment: PaymentCreate,
    idempotency_key: IdempotencyKey = None,
    api_key: str = Depends(payment_api_key),
    store: BillingStore = Depends(get_store),
) -> dict[str, Any]:
    """Capture a payment for a sent invoice"""
    # A real service would call the payment processor with api_key (and the idempotency key, so that a retry
    # is the same charge), which answers each charge's own id; the demo makes one from the key and a nonce (two
    # payments of the same amount are two charges) or from the idempotency key.
    nonce = secrets.token_hex(8) if idempotency_key is None else idempotency_key
    reference = "ch_" + hashlib.sha256(f"{api_key}:{id}:{payment.amount_cents}:{nonce}".encode()).hexdigest()[:16]
    return await store.record_payment(id, payment.amount_cents, payment.method, reference, idempotency_key)


@billing.action(readonly=True, idempotent=True, output_schema=RevenueSummary, open_world=False)
async def revenue_summary(store: BillingStore = Depends(get_store)) -> dict[str, Any]:
    """Receivables at a glance (structured content)"""
    return await store.summary()


@billing.action(readonly=True, idempotent=True, output_schema=list[ExportRow], middleware=[Concurrency(2)],
                open_world=False)
async def export_invoices(
    status: StatusFilter = None,
    store: BillingStore = Depends(get_store),
) -> ToolResponse:
    """Every invoice as a compact TOON table"""
    rows = await store.list_invoices(status)
    return toon_success([
        {"id": r["id"], "number": r["number"], "customer": r["customer"]["name"], "status": r["status"],
         "total_cents": r["total_cents"], "due_date": r["due_date"].isoformat(), "overdue": r["overdue"]}
        for r in rows
    ])


@billing.action(readonly=True, idempotent=True, content_types=["application/pdf"], content_only=True,
                open_world=False, **DETAIL)
async def invoice_pdf(id: InvoiceId, store: BillingStore = Depends(get_store)) -> Attached:
    """Get one invoice as a PDF document (also at invoice://{id})"""
    # Drawn from the invoice as presented to this caller: the support role's PDF is redacted like its data.
    return attach(await store.get_invoice(id), invoice_document, data_block=False)
