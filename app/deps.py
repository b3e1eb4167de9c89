"""FastAPI dependencies of the reference service: tenant-scoped store, presenter choice.

They are plain FastAPI dependencies, resolved per call on MCP, REST, stdio and in tests alike, and
overridable with `app.dependency_overrides`. All are `async def`: FastAPI runs a plain `def` dependency in
its thread pool, a thread hand-over per dependency per call for functions that never block. None is a
yield dependency: the store opens a session per write and closes it itself, and a read-only call needs none
(FastAPI runs each yield dependency in a context manager on the call's exit stack).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypedDict

from fastapi import Depends
from starlette.requests import Request

from mcpfusion import Presenter
from mcpfusion.credentials import Credential
from presenters import (
    customer_admin,
    customer_support,
    invoice_admin,
    invoice_rows_admin,
    invoice_rows_support,
    invoice_support,
)

from .auth import Principal, current_principal
from .store import BillingStore


class PresentedBy(TypedDict):
    """`returns=` and `presenters=` of `Tool.action` as one dict that several actions share (`**DETAIL`). A
    TypedDict, so a type checker checks each option against `Tool.action` (a plain dict's values are `object`)."""

    returns: Callable[..., Awaitable[Presenter]]  # a dependency below, choosing among `presenters`
    presenters: list[Presenter]


payment_api_key = Credential("PAYMENT_API_KEY", description="Key of the payment processor")


async def get_store(request: Request, principal: Principal = Depends(current_principal)) -> BillingStore:
    """The caller's tenant's data, and nothing else."""
    return BillingStore(request.app.state.db, principal)


async def cursor_scope(principal: Principal = Depends(current_principal)) -> str:
    """What a pagination cursor is bound to: the caller's tenant and identity (an acme cursor is refused
    for globex, and for another user)."""
    return f"{principal.tenant}/{principal.subject}"


def _whole_invoices(principal: Principal) -> bool:
    """Whether the caller sees whole invoices: an admin whose token may read customers too. A token narrowed to
    `billing:read` (no `customers:read`) is refused the customers tool, so it does not get the customers' email
    and phone through their invoices either: it sees them as support does."""
    return principal.is_admin and "customers:read" in principal.scopes


async def invoice_presenter(principal: Principal = Depends(current_principal)) -> Presenter:
    """Admins see whole invoices; support sees them without internal fields and contact details."""
    return invoice_admin if _whole_invoices(principal) else invoice_support


async def invoice_rows_presenter(principal: Principal = Depends(current_principal)) -> Presenter:
    return invoice_rows_admin if _whole_invoices(principal) else invoice_rows_support


async def customer_presenter(principal: Principal = Depends(current_principal)) -> Presenter:
    return customer_admin if principal.is_admin else customer_support
