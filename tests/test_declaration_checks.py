"""Declarations that could never serve are refused when the action is declared, naming it (a parameter without
a JSON schema, one named `_x`, an upload or a WebSocket, a dependency's query parameter, a flat MCP name
past 128 characters); BackgroundTasks run as FastAPI runs them; an action's description is its docstring."""

import asyncio
import collections.abc as abc
import logging
import sys
import typing
from typing import Annotated, Any

import httpx
import pytest
import typing_extensions
from fastapi import BackgroundTasks, Depends, Header, UploadFile, WebSocket
from pydantic import BaseModel, Field, WithJsonSchema

from mcpfusion import Flatten, MCPFusion, Tool
from mcpfusion.listing import tool_entries
from mcpfusion.testing import ToolTester


class OldTypedDict(typing.TypedDict):  # pydantic makes no schema of it on Python < 3.12
    street: str


class NewTypedDict(typing_extensions.TypedDict):
    street: str


class HoldsCallable(BaseModel):
    callback: typing.Callable[[], int]


def _handler(annotation: Any) -> Any:
    async def run(x: Any) -> int:
        """Run."""
        return 1

    run.__annotations__ = {"x": annotation, "return": int}
    return run


# -- parameter types without a JSON schema -------------------------------------------------------------------

UNLISTABLE = [typing.Callable[[], int], abc.Iterator[int], list[abc.Callable[[int], int]] | None, HoldsCallable]
if sys.version_info < (3, 12):
    UNLISTABLE.append(OldTypedDict)


@pytest.mark.parametrize("annotation", UNLISTABLE)
def test_a_parameter_type_without_a_json_schema_is_refused_at_declaration(annotation):
    bad = Tool("bad", description="One mistaken action")
    with pytest.raises(TypeError, match=r"action bad\.run\): parameter 'x' has the type .*, which has no JSON "
                                        r"schema"):
        bad.action()(_handler(annotation))
    assert not bad.actions


@pytest.mark.parametrize("annotation", [NewTypedDict, dict, list[int], dict[str, Any] | None,
                                        Annotated[typing.Callable[[], int], WithJsonSchema({"type": "string"})]])
async def test_types_with_a_json_schema_are_accepted_and_listed(annotation):
    tool = Tool("fine", description="Fine")
    tool.action()(_handler(annotation))
    app = MCPFusion("svc", tools=[tool]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        assert (await client.get("/openapi.json")).status_code == 200
    assert "x" in tool_entries(tool)[0]["inputSchema"]["properties"]


def test_a_model_completed_after_the_action_is_declared_is_accepted():
    class Order(BaseModel):
        line: "Line | None" = None  # noqa: F821 (defined below: the model is rebuilt then)

    tool = Tool("orders", description="Orders")

    async def place(order: Order) -> int:
        """Place."""
        return 1

    tool.action()(place)

    class Line(BaseModel):
        sku: str

    Order.model_rebuild()
    assert "Line" in tool.actions["place"].input_schema["$defs"]


def test_a_flattened_model_without_a_json_schema_is_refused():
    tool = Tool("flat", description="Flat")

    async def run(options: Annotated[HoldsCallable, Flatten]) -> int:
        """Run."""
        return 1

    with pytest.raises(TypeError, match=r"action flat\.run\): parameter 'options' has the type HoldsCallable"):
        tool.action()(run)


# -- a parameter named with a leading underscore ----------------------------------------------------------------

async def test_an_underscore_parameter_is_refused_and_an_alias_sends_that_name():
    notes = Tool("notes", description="Notes")

    async def add(_text: str) -> str:
        """Add a note."""
        return _text

    with pytest.raises(ValueError, match=r"action notes\.add\): parameter '_text' starts with an underscore"):
        notes.action()(add)

    @notes.action()
    async def add_aliased(text: Annotated[str, Field(alias="_text")]) -> str:
        """Add a note."""
        return text

    assert (await ToolTester([notes]).call("notes", "add_aliased", {"_text": "hi"})).data == "hi"


# -- UploadFile and WebSocket ---------------------------------------------------------------------------------

async def _upload(doc: UploadFile) -> str:
    """Upload."""
    return ""


async def _uploads(docs: list[UploadFile] | None = None) -> str:
    """Upload several."""
    return ""


async def _live(ws: WebSocket) -> str:
    """Live."""
    return ""


@pytest.mark.parametrize(("fn", "says"), [
    (_upload, r"parameter 'doc' is an UploadFile, which FastAPI reads from a multipart form"),
    (_uploads, r"parameter 'docs' is an UploadFile"),
    (_live, r"parameter 'ws' is a WebSocket, which only a FastAPI WebSocket route receives"),
])
def test_upload_and_websocket_parameters_are_refused_at_declaration(fn, says):
    files = Tool("files", description="Files")
    with pytest.raises(TypeError, match=says):
        files.action()(fn)


# -- a dependency's own query parameters ----------------------------------------------------------------------

async def common_parameters(q: str, skip: int = 0) -> dict[str, Any]:
    return {"q": q, "skip": skip}


async def outer(commons: Annotated[dict[str, Any], Depends(common_parameters)]) -> dict[str, Any]:
    return commons


class Filters(BaseModel):
    status: str


async def with_body(filters: Filters) -> Filters:
    return filters


@pytest.mark.parametrize(("dependency", "says"), [
    (common_parameters, r"the dependency common_parameters takes 'q', which FastAPI reads as a query parameter"),
    (outer, r"the dependency common_parameters takes 'q'"),  # however deep
    (with_body, r"the dependency with_body takes 'filters', which FastAPI reads as a field of the request body"),
])
def test_a_dependency_parameter_no_tool_call_can_set_is_refused(dependency, says):
    items = Tool("items", description="Items")

    async def search(commons: Annotated[Any, Depends(dependency)]) -> Any:
        """Search."""
        return commons

    with pytest.raises(TypeError, match=r"action items\.search\): " + says + r".*Declare it on the action"):
        items.action(readonly=True)(search)


async def test_a_dependency_reading_headers_and_other_dependencies_is_accepted():
    async def tenant(x_tenant: Annotated[str, Header()] = "acme") -> str:
        return x_tenant

    async def scoped(name: Annotated[str, Depends(tenant)]) -> str:
        return f"tenant {name}"

    items = Tool("items", description="Items")

    @items.action(readonly=True)
    async def who(value: Annotated[str, Depends(scoped)]) -> str:
        """Who."""
        return value

    assert (await ToolTester([items]).call("items", "who", headers={"x-tenant": "globex"})).data == "tenant globex"


# -- flat MCP names -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("exposition", ["flat", "profiles"])
def test_a_flat_mcp_name_longer_than_128_characters_is_refused(exposition):
    tool = Tool("t" * 64, description="x", exposition=exposition)

    async def recalc(region: str) -> str:
        """Recalculate."""
        return region

    with pytest.raises(ValueError, match=rf"tool 't{{64}}', action 'a{{64}}': under the {exposition} exposition its "
                                         r"MCP tool name t{64}_a{64} would be longer than 128 characters"):
        tool.action(name="a" * 64)(recalc)
    tool.action(name="a" * 63)(recalc)  # 128: the limit itself
    tool.action(name="b", readonly=True)(recalc)  # (profiles: a group of its own, named as under flat)
    assert {len(e["name"]) for e in tool_entries(tool)} == {128, 66}
    Tool("t" * 64, description="x").action(name="a" * 64)(recalc)  # grouped: the MCP name is the tool's


# -- descriptions --------------------------------------------------------------------------------------------

def test_the_agent_reads_the_whole_docstring():
    billing = Tool("billing", description="Invoices", exposition="flat")

    @billing.action(destructive=True)
    async def refund(invoice_id: str) -> str:
        """Refund an invoice.

        Never refund more than the amount paid; call billing_get_invoice first
        to read amount_paid_cents.
        """
        return "ok"

    @billing.action(readonly=True)
    async def get(invoice_id: str) -> str:
        """Get one invoice."""
        return "ok"

    guidance = "Never refund more than the amount paid; call billing_get_invoice first\nto read amount_paid_cents."
    entries = {e["name"]: e for e in MCPFusion("billing", tools=[billing]).registry.mcp_tools()}
    assert entries["billing_refund"]["description"] == f"Refund an invoice.\n\n{guidance}"
    assert entries["billing_get"]["description"] == "Get one invoice."
    assert billing.actions["refund"].summary == "Refund an invoice."
    billing.exposition = "grouped"  # one line per action: the paragraphs joined
    assert "refund(invoice_id): Refund an invoice. " + " ".join(guidance.split()) in \
        tool_entries(billing)[0]["description"].splitlines()
    billing.toon_description = True
    assert "Refund an invoice. Never refund" in tool_entries(billing)[0]["description"]


# -- BackgroundTasks -----------------------------------------------------------------------------------------

class Shop:
    """An action and a dependency queueing e-mails; the calls' outcome decides whether they are sent."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.orders: list[str] = []
        self.release = asyncio.Event()
        self.tool = Tool("shop", description="Shop")

        async def send(to: str, wait: bool = False, fail: bool = False) -> None:
            if wait:
                await self.release.wait()
            if fail:
                raise RuntimeError("SMTP down")
            self.sent.append(to)

        async def audited(tasks: BackgroundTasks) -> BackgroundTasks:
            tasks.add_task(send, "audit")
            return tasks

        @self.tool.action()
        async def place(sku: str, tasks: Annotated[BackgroundTasks, Depends(audited)], wait: bool = False,
                        mail_fails: bool = False, payment_fails: bool = False) -> str:
            """Place an order."""
            tasks.add_task(send, f"confirmation for {sku}", wait, mail_fails)
            if payment_fails:
                raise RuntimeError("payment declined")
            self.orders.append(sku)
            return f"order for {sku} placed"

    def client(self) -> httpx.AsyncClient:
        app = MCPFusion("shop", tools=[self.tool], json_response=True).build_app()
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


async def mcp_call(client: httpx.AsyncClient, arguments: dict[str, Any]) -> dict[str, Any]:
    """One stateless tools/call (MCP 2026-07-28)."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    response = await client.post("/mcp", headers={
        "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call", "mcp-name": "shop"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "shop", "arguments": {"action": "place", **arguments}, "_meta": meta}})
    return typing.cast(dict[str, Any], response.json()["result"])


async def eventually(check: typing.Callable[[], bool]) -> None:
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never happened")


async def test_background_tasks_run_after_the_answer_without_delaying_it():
    shop = Shop()
    async with shop.client() as client:
        # The task waits until the answer is in: had the answer waited for the task, this would time out.
        result = await asyncio.wait_for(mcp_call(client, {"sku": "lamp", "wait": True}), 5)
        assert result["isError"] is False and shop.sent == ["audit"]
        shop.release.set()
        await eventually(lambda: shop.sent == ["audit", "confirmation for lamp"])
        response = await asyncio.wait_for(client.post("/api/shop/place", json={"sku": "desk", "wait": True}), 5)
        assert response.status_code == 200
        await eventually(lambda: shop.sent[-1] == "confirmation for desk")


async def test_a_failing_background_task_is_logged_and_leaves_the_call_a_success(caplog):
    shop = Shop()
    caplog.set_level(logging.ERROR, logger="mcpfusion")
    async with shop.client() as client:
        result = await mcp_call(client, {"sku": "chair", "mail_fails": True})
        assert result["isError"] is False and result["content"][0]["text"] == "order for chair placed"
        response = await client.post("/api/shop/place", json={"sku": "sofa", "mail_fails": True})
        assert response.status_code == 200 and response.json() == "order for sofa placed"
        await eventually(lambda: len([r for r in caplog.records if "SMTP down" in str(r.exc_info)]) == 2)
    assert shop.orders == ["chair", "sofa"]
    assert "background task" in caplog.records[-1].getMessage() and "send" in caplog.records[-1].getMessage()


async def test_background_tasks_of_a_failed_call_never_run():
    shop = Shop()
    tester = ToolTester([shop.tool])
    failed = await tester.call("shop", "place", {"sku": "sofa", "payment_fails": True})
    assert failed.error_code == "INTERNAL_ERROR"
    await asyncio.sleep(0.05)
    assert shop.sent == [] and shop.orders == []
    # The tester returns once a successful call's tasks have run, as FastAPI's TestClient does.
    assert (await tester.call("shop", "place", {"sku": "lamp"})).data == "order for lamp placed"
    assert shop.sent == ["audit", "confirmation for lamp"]
