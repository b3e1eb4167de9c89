"""Peer of `bench/tokens.py`: the same 8 billing/customers actions as the reference service, written the
way a FastMCP developer would (one tool per action, same parameter types, constraints, descriptions and
annotations, typed returns).

`build(output_schemas=...)` gives the server with FastMCP's output schemas derived from the return types, or
with them switched off (`output_schema=None`), so the bench compares like with like.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from mcpfusion.exposition import compact_annotations
from mcpfusion.pagination import CURSOR_SCHEMA
from models import INVOICE_STATUSES, CustomerModel, InvoiceLine, InvoiceModel, InvoiceRowModel
from routers.billing import InvoiceCreate, InvoiceId, InvoiceKey, InvoiceUpdate, StatusFilter, billing
from routers.customers import customers

Invoice = InvoiceModel.schema
InvoiceRow = InvoiceRowModel.schema
Customer = CustomerModel.schema
_create = InvoiceCreate.model_fields
Status = Literal[INVOICE_STATUSES]  # type: ignore[valid-type]
# The same cursor parameter as the paginated actions (same constraints and description).
Cursor = Annotated[str | None, Field(min_length=CURSOR_SCHEMA["minLength"], max_length=CURSOR_SCHEMA["maxLength"],
                                     description=CURSOR_SCHEMA["description"])]


class InvoicePage(BaseModel):
    """One page of invoice rows, as the paginated action answers it."""

    items: list[InvoiceRow]  # type: ignore[valid-type]
    next_cursor: str | None = None


class CustomerPage(BaseModel):
    """One page of customers."""

    items: list[Customer]  # type: ignore[valid-type]
    next_cursor: str | None = None


def _desc(tool: Any, action: str) -> str:
    """The reference action's own description (the docstrings below are for readers of this file)."""
    return str(tool.actions[action].description)


def build(*, output_schemas: bool = True, every_hint: bool = True) -> FastMCP:
    """The FastMCP server, with or without the output schemas FastMCP derives from return types; with all
    four hints declared on every tool, or (`every_hint=False`) only those that differ from MCP's defaults, as
    the reference service declares them (FastMCP sends what is declared)."""
    server = FastMCP("billing")
    off: dict[str, Any] = {} if output_schemas else {"output_schema": None}

    def _hints(readonly: bool = False, destructive: bool = False, idempotent: bool = False,
               open_world: bool = False) -> ToolAnnotations:
        hints = {"readOnlyHint": readonly, "destructiveHint": destructive, "idempotentHint": idempotent,
                 "openWorldHint": open_world}
        return ToolAnnotations(**(hints if every_hint else compact_annotations(hints)))

    @server.tool(description=_desc(billing, "list_invoices"), annotations=_hints(readonly=True), **off)
    async def billing_list_invoices(
        status: StatusFilter = None,
        customer_id: Annotated[str | None, Field(description="Only this customer's invoices.")] = None,
        cursor: Cursor = None,
    ) -> InvoicePage:
        """List invoices, latest due date first"""
        return InvoicePage(items=[])

    @server.tool(description=_desc(billing, "get_invoice"), annotations=_hints(readonly=True), **off)
    async def billing_get_invoice(id: InvoiceId) -> Invoice:  # type: ignore[valid-type]
        """Get one invoice with its lines and payments"""
        raise NotImplementedError

    @server.tool(description=_desc(billing, "create_invoice"), annotations=_hints(), **off)
    async def billing_create_invoice(
        customer_id: Annotated[str, _create["customer_id"]],
        due_date: Annotated[dt.date, _create["due_date"]],
        lines: Annotated[list[InvoiceLine], _create["lines"]],
        internal_note: Annotated[str | None, _create["internal_note"]] = None,
        idempotency_key: InvoiceKey = None,
    ) -> Invoice:  # type: ignore[valid-type]
        """Create a draft invoice for a customer"""
        raise NotImplementedError

    @server.tool(description=_desc(billing, "update_invoice_status"), annotations=_hints(idempotent=True), **off)
    async def billing_update_invoice_status(
        id: InvoiceId, status: Annotated[Status, InvoiceUpdate.model_fields["status"]]
    ) -> Invoice:  # type: ignore[valid-type]
        """Move an invoice to its next status (draft->sent->paid)"""
        raise NotImplementedError

    @server.tool(description=_desc(billing, "remind"), annotations=_hints(open_world=True), **off)
    async def billing_remind(
        id: InvoiceId,
        message: Annotated[str | None, Field(description="A personal line added to the reminder.", max_length=500)]
        = None,
    ) -> Invoice:  # type: ignore[valid-type]
        """Send a payment reminder for a sent invoice"""
        raise NotImplementedError

    @server.tool(description=_desc(billing, "void_invoice"), annotations=_hints(destructive=True), **off)
    async def billing_void_invoice(
        id: InvoiceId,
        reason: Annotated[str, Field(min_length=3, max_length=200, description="Why the invoice is voided.")],
    ) -> Invoice:  # type: ignore[valid-type]
        """Void an unpaid invoice (cannot be undone)"""
        raise NotImplementedError

    @server.tool(description=_desc(customers, "list"), annotations=_hints(readonly=True), **off)
    async def customers_list(
        search: Annotated[str | None, Field(description="Part of the name, or a country code.", max_length=100)]
        = None,
        cursor: Cursor = None,
    ) -> CustomerPage:
        """List customers with their open balance"""
        return CustomerPage(items=[])

    @server.tool(description=_desc(customers, "get"), annotations=_hints(readonly=True), **off)
    async def customers_get(
        id: Annotated[str, Field(description="Customer id, e.g. cus_0001.", max_length=40)],
    ) -> Customer:  # type: ignore[valid-type]
        """Get one customer"""
        raise NotImplementedError

    return server
