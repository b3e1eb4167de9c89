"""A small service of our own for the docs tests: a grouped TOON tool with a rich presenter (rules, redaction,
UI blocks, suggestions, limit, embed, _select) and a flat tool with structured output, behind a bearer token."""

from __future__ import annotations

from typing import Literal

from fastapi import Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Model, Presenter, Tool, success_structured, suggest, ui
from mcpfusion.docs import add_docs_routes

TOKENS = {"demo-admin": "admin"}


def principal(authorization: str | None = Header(None)) -> str:
    token = (authorization or "").removeprefix("Bearer ").strip()
    if token not in TOKENS:
        raise HTTPException(401, "Missing or bad bearer token.", headers={"WWW-Authenticate": "Bearer"})
    return TOKENS[token]


class Line(BaseModel):
    label: str = Field(description="What was sold")
    card: str = Field(description="Card used for this line")
    amount_cents: int


class Invoice(BaseModel):
    id: str = Field(description="Invoice id, e.g. inv_1")
    status: Literal["draft", "open", "paid", "overdue"] = Field(description="draft, open, paid or overdue")
    amount_cents: int = Field(description="Amount in CENTS. Divide by 100.")
    email: str
    notes: str = ""


line_presenter = Presenter("Line").schema(Line).redact_pii(["card"]).rules(["Lines are in invoice order."])
invoice_presenter = (
    Presenter("Invoice")
    .schema(Invoice)
    .rules(lambda data: ["Overdue invoices need a reminder."] if isinstance(data, list) else None)
    .redact_pii(["email"])
    .ui(lambda inv: ui.table(["id", "status"], [[inv["id"], inv["status"]]], title="Invoice"))
    .collection_ui(lambda items: ui.echarts({"series": [{"data": [i["amount_cents"] for i in items]}]},
                                            title="Amounts"))
    .suggest(lambda inv: [suggest("billing.remind", "Send a payment reminder") if inv["status"] == "overdue" else None])
    .limit(5)
    .embed("lines", line_presenter)
)


def invoices(count: int = 12) -> list[dict]:
    statuses = ["draft", "open", "paid", "overdue"]
    return [
        {"id": f"inv_{i}", "status": statuses[i % 4], "amount_cents": 1000 + i, "email": f"c{i}@example.com",
         "notes": "internal note", "secret": "never shown",
         "lines": [{"label": "Consulting", "card": "4242 4242 4242 4242", "amount_cents": 1000 + i}]}
        for i in range(1, count + 1)
    ]


billing = Tool("billing", description="Invoices and payments", tags=["finance"], toon_description=True, select=True)


@billing.action(readonly=True, returns=invoice_presenter)
async def list_invoices(
    status: Literal["draft", "open", "paid", "overdue"] | None = None, who: str = Depends(principal)
) -> list[dict]:
    """List invoices, optionally by status."""
    return [i for i in invoices() if status in (None, i["status"])]


@billing.action(readonly=True, returns=invoice_presenter)
async def get_invoice(id: str = Field(description="The invoice id"), who: str = Depends(principal)) -> dict:
    """Fetch one invoice."""
    return next(i for i in invoices() if i["id"] == id)


@billing.action(idempotent=True)
async def remind(id: str, message: str = "Friendly reminder", who: str = Depends(principal)) -> str:
    """Send a payment reminder."""
    return f"Reminder sent for {id}."


@billing.action(destructive=True)
async def void_invoice(id: str, who: str = Depends(principal)) -> str:
    """Void an invoice."""
    return f"{id} voided."


class Totals(BaseModel):
    count: int
    total_cents: int = Field(description="Sum in cents")
    currency: str


reports = Tool("reports", description="Reporting", tags=["analytics", "finance"], exposition="flat")


@reports.action(readonly=True, output_schema=Totals)
async def totals(who: str = Depends(principal)):
    """Totals over all invoices."""
    items = invoices()
    return success_structured({"count": len(items), "total_cents": sum(i["amount_cents"] for i in items),
                               "currency": "EUR"})


class CustomerRecord(BaseModel):
    id: str
    name: str = Field(description="Legal name")
    tier: Literal["free", "pro"] = "free"
    password_hash: str = "x"  # hidden: must never reach the agent, the docs or an example
    created_by: str = "system"  # guarded: the agent can never write it


customer_model = Model(CustomerRecord, hidden=["password_hash"], guarded=["created_by"],
                       fillable={"create": ["name", "tier"]})
customer_presenter = Presenter("Customer").schema(customer_model)
customers = Tool("customers", description="Customers", tags=["crm"])


@customers.action(returns=customer_presenter)
async def create(data: customer_model.input_model("create"), who: str = Depends(principal)) -> dict:
    """Create a customer."""
    return {"id": "cus_1", **data.model_dump(), "password_hash": "secret-hash", "created_by": who}


TOOLS = [billing, reports, customers]


def build_fusion() -> MCPFusion:
    return MCPFusion(name="Docs test service", version="1.0.0", tools=TOOLS)


def build_app() -> FastAPI:
    fusion = build_fusion()
    app = fusion.build_app()
    add_docs_routes(app, fusion.registry, title=fusion.name)
    return app


def build_app_serving_export() -> FastAPI:
    """The sample app that also serves a static export (from $DOCS_SITE_DIR) at /site, same origin."""
    import os

    from fastapi.staticfiles import StaticFiles

    app = build_app()
    app.mount("/site", StaticFiles(directory=os.environ["DOCS_SITE_DIR"], html=True), name="site")
    return app
