"""A test MCP app (presenter-backed, structured, context-using actions; resources; prompts) and a
uvicorn server on a free 127.0.0.1 port, shared by the tests/test_mcp_*.py modules."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Literal

import uvicorn
import uvloop
from fastapi import Depends, Header, HTTPException
from pydantic import BaseModel, Field

from mcpfusion import Context, Presenter, Tool, success_structured
from mcpfusion.app import MCPFusion

TINY_PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


class Invoice(BaseModel):
    id: str
    customer_email: str
    amount_cents: int = Field(description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"]


class Total(BaseModel):
    count: int
    amount_cents: int


INVOICES = {
    "inv_1": {"id": "inv_1", "customer_email": "ada@example.com", "amount_cents": 1250, "status": "overdue"},
}

invoice_presenter = (
    Presenter("Invoice").schema(Invoice).rules(["amount_cents is in CENTS."]).redact_pii(["customer_email"])
)


async def tenant(x_tenant: str = Header(default="acme")) -> str:
    return x_tenant


def build_fusion(**settings: object) -> MCPFusion:
    billing = Tool("billing", description="Invoices", exposition="flat")

    @billing.action(readonly=True, returns=invoice_presenter)
    async def get_invoice(id: str, tenant: str = Depends(tenant)) -> dict:
        """Fetch one invoice."""
        if id not in INVOICES:
            raise HTTPException(404, "no such invoice") if id == "http" else KeyError(id)
        return INVOICES[id]

    @billing.action(readonly=True, output_schema=Total)
    async def totals() -> object:
        """Totals of all invoices."""
        return success_structured(Total(count=1, amount_cents=1250))

    @billing.action()
    async def whoami(tenant: str = Depends(tenant)) -> str:
        """The caller's tenant."""
        return f"tenant={tenant}"

    @billing.action()
    async def slow_export(steps: int, ctx: Context) -> str:
        """Export with progress and logs."""
        for i in range(steps):
            await ctx.progress(i + 1, steps, f"step {i + 1}")
            await ctx.info(f"step {i + 1} done")
        return "exported"

    @billing.action()
    async def confirm_delete(id: str, ctx: Context) -> str:
        """Ask the user before deleting."""
        answer = await ctx.elicit(f"Delete {id}?", {"type": "object", "properties": {"ok": {"type": "boolean"}},
                                                     "required": ["ok"]}, key="confirm")
        ok = answer.get("action") == "accept" and (answer.get("content") or {}).get("ok") is True
        return "deleted" if ok else "kept"

    @billing.action()
    async def summarize(text: str, ctx: Context) -> str:
        """Ask the client's LLM."""
        result = await ctx.sample(f"Summarize: {text}", max_tokens=50, key="llm")
        return f"LLM said: {result['content']['text']}"

    @billing.action()
    async def roots(ctx: Context) -> str:
        """Count the client's roots."""
        return f"{len(await ctx.list_roots(key='roots'))} root(s)"

    @billing.action()
    async def reconnect(ctx: Context) -> str:
        """Close the SSE stream mid-call; the client resumes with Last-Event-ID."""
        await ctx.info("before disconnect")
        ctx.close_stream()
        await asyncio.sleep(0.05)
        await ctx.info("after reconnect")
        return "reconnected"

    fusion = MCPFusion("test-billing", "1.2.3", instructions="Billing tools.", tools=[billing], **settings)

    @fusion.resource("file:///readme.txt", name="readme", mime_type="text/plain")
    def readme() -> str:
        return "Read me."

    @fusion.resource("file:///logo.png", name="logo", mime_type="image/png")
    def logo() -> bytes:
        return TINY_PNG

    @fusion.resource_template("invoices://{id}/summary", name="invoice-summary")
    async def invoice_summary(id: str) -> dict:
        return {"id": id, "known": id in INVOICES}

    @fusion.prompt(description="Write a reminder")
    def reminder(invoice_id: str, tone: str = "polite") -> str:
        return f"Write a {tone} reminder for {invoice_id}."

    @fusion.completion(prompt="reminder", argument="tone")
    def tones(value: str) -> list[str]:
        return [t for t in ("polite", "firm", "playful") if t.startswith(value)]

    return fusion


@contextlib.contextmanager
def serve(app: object) -> Iterator[str]:
    """Run `app` with uvicorn in a thread on a free port; yield the base URL; stop it on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)

    def run() -> None:
        # uvloop, like uvicorn's CLI: the stdlib loop adds ~40 ms per response here (Nagle vs delayed ACK).
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(server.serve(sockets=[sock]))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def __getattr__(name: str) -> object:
    # `python -m mcpfusion.mcp.stdio tests.mcp_app:stdio_app` builds the app on first access.
    if name == "stdio_app":
        return build_fusion().build_app()
    raise AttributeError(name)
