"""Tools and actions: schemas, annotations, dependency injection, routing errors, models' guarded/hidden."""

import asyncio
import threading
from typing import Annotated, Literal

import toon_format
from fastapi import Depends, FastAPI, Header, HTTPException, Request
from pydantic import BaseModel, Field

from mcpfusion import Model, Presenter, Tool, ToolError, success, success_structured
from mcpfusion.listing import tool_entries
from mcpfusion.testing import ToolTester


class Invoice(BaseModel):
    id: str
    customer_id: str
    amount_cents: int = Field(ge=0, description="CENTS, divide by 100")
    status: Literal["draft", "paid", "overdue"] = "draft"
    internal_notes: str = ""


InvoiceModel = Model(
    Invoice,
    hidden=["internal_notes"],
    guarded=["id"],
    fillable={"create": ["customer_id", "amount_cents"], "update": ["status"]},
)

STORE = {"inv_1": {"id": "inv_1", "customer_id": "c1", "amount_cents": 1250, "status": "overdue",
                   "internal_notes": "TOP-SECRET-NOTE"}}
events: list[str] = []


def get_db():
    events.append("open")
    try:
        yield STORE
    finally:
        events.append("close")


def current_role(x_role: Annotated[str | None, Header()] = None) -> str:
    if x_role is None:
        raise HTTPException(401, "missing role", headers={"WWW-Authenticate": "Bearer"})
    return x_role


admin_view = Presenter("InvoiceAdmin").schema(InvoiceModel)
support_view = Presenter("InvoiceSupport").schema(InvoiceModel).redact_pii(["customer_id"])


def choose_presenter(role: str = Depends(current_role)) -> Presenter:
    return admin_view if role == "admin" else support_view


def build_tool(**options):
    billing = Tool("billing", description="Invoices and payments", tags=["finance"], **options)

    @billing.action(readonly=True, idempotent=True, returns=choose_presenter, presenters=[admin_view, support_view])
    async def get_invoice(id: Annotated[str, Field(description="Invoice id")], db=Depends(get_db)):
        """Fetch one invoice."""
        if id not in db:
            raise ToolError("NOT_FOUND", f'Invoice "{id}" was not found.', recovery="List invoices first.")
        return db[id]

    @billing.action()
    async def create_invoice(data: InvoiceModel.input_model("create")):
        """Create an invoice."""
        return {"created": data.model_dump()}

    @billing.action(destructive=True)
    def void_invoice(id: str, reason: Literal["duplicate", "error"] = "error"):
        """Void an invoice."""
        return {"voided": id, "reason": reason, "thread": threading.current_thread().name}

    @billing.action(readonly=True, idempotent=True)
    async def total(currency: str = "EUR") -> "Total":
        """Sum of all invoices."""
        return Total(total_cents=1250, currency=currency)

    @billing.action()
    async def crash():
        """Always fails."""
        raise RuntimeError("TOP-SECRET-NOTE leaked?")

    @billing.action()
    async def nothing():
        """Returns None."""

    return billing


class Total(BaseModel):
    total_cents: int
    currency: str


def test_grouped_schema_union_with_required_annotations_and_aggregated_annotations():
    [entry] = tool_entries(build_tool())
    schema = entry["inputSchema"]
    props = schema["properties"]
    assert props["action"]["enum"] == ["get_invoice", "create_invoice", "void_invoice", "total", "crash", "nothing"]
    assert schema["required"] == ["action"]
    # void_invoice takes `id` without a description: the one get_invoice declares names its action
    assert props["id"]["description"] == "get_invoice: Invoice id."
    assert "\nget_invoice(id" in entry["description"] and "\nvoid_invoice(id" in entry["description"]
    assert "description" not in props["action"]  # the tool's description says how to pick one
    assert props["amount_cents"]["minimum"] == 0
    assert props["reason"]["enum"] == ["duplicate", "error"]
    assert "description" not in props["currency"] and "\ntotal(currency?): " in entry["description"]
    for hidden_or_guarded in ("internal_notes", "db", "x_role"):
        assert hidden_or_guarded not in props
    # Undeclared hints take the MCP defaults (destructive, open world): nothing looks safer than declared;
    # advertised only where they differ from MCP's defaults, so nothing at all here.
    assert "annotations" not in entry
    assert build_tool().annotations() == {
        "readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True
    }
    assert "outputSchema" not in entry  # not every action has one
    assert "title" not in str(schema)


def test_flat_exposition_one_tool_per_action_with_output_schema():
    entries = {e["name"]: e for e in tool_entries(build_tool(exposition="flat"))}
    assert sorted(entries) == sorted(
        f"billing_{a}" for a in ["get_invoice", "create_invoice", "void_invoice", "total", "crash", "nothing"]
    )
    total = entries["billing_total"]
    assert total["outputSchema"]["properties"] == {
        "total_cents": {"type": "integer"}, "currency": {"type": "string"}
    }
    assert total["annotations"]["readOnlyHint"] is True
    assert entries["billing_void_invoice"]["inputSchema"]["required"] == ["id"]
    assert entries["billing_create_invoice"]["inputSchema"]["required"] == ["customer_id", "amount_cents"]


def test_grouped_output_schema_only_when_every_action_has_one():
    tool = Tool("stats")

    @tool.action()
    async def a() -> Total:
        return Total(total_cents=1, currency="EUR")

    @tool.action()
    async def b() -> Total:
        return Total(total_cents=2, currency="EUR")

    assert tool_entries(tool)[0]["outputSchema"]["required"] == ["total_cents", "currency"]


def test_toon_description_exact_and_strictly_decodable():
    tool = Tool("tasks", description="Task management", toon_description=True)

    @tool.action()
    async def list(project_id: str):  # noqa: A001
        """List tasks"""

    @tool.action()
    async def create(project_id: str, title: str, due: str | None = None):
        """Create a task"""

    @tool.action()
    async def close(task_id: str):
        """Close a task"""

    @tool.action()
    async def ping():
        """"""

    description = tool_entries(tool)[0]["description"]
    assert description == (  # SPEC §7: the description, the selection sentence, then the action|desc|required table
        "Task management. Select operation via the `action` parameter.\n\n[4|]{action|desc|required}:\n"
        '  list|List tasks|project_id\n  create|Create a task|project_id,title,due?\n  close|Close a task|task_id\n'
        '  ping|""|""'
    )
    table = description.split("\n\n", 1)[1]
    assert toon_format.decode(table, strict=True) == [
        {"action": "list", "desc": "List tasks", "required": "project_id"},
        {"action": "create", "desc": "Create a task", "required": "project_id,title,due?"},
        {"action": "close", "desc": "Close a task", "required": "task_id"},
        {"action": "ping", "desc": "", "required": ""},
    ]


async def test_returns_dependency_chooses_presenter_per_role_and_yield_cleanup():
    tester = ToolTester([build_tool()])
    events.clear()
    admin = await tester.call("billing", "get_invoice", {"id": "inv_1"}, headers={"x-role": "admin"})
    assert admin.data["customer_id"] == "c1"
    assert events == ["open", "close"]
    support = await tester.call("billing", "get_invoice", {"id": "inv_1"}, headers={"x-role": "support"})
    assert support.data["customer_id"] == "[REDACTED]"
    assert "c1" not in support.text
    for result in (admin, support):
        assert "TOP-SECRET-NOTE" not in result.text and "internal_notes" not in result.text


async def test_http_exception_from_dependency_propagates_on_transports_and_is_an_error_in_tests():
    tester = ToolTester([build_tool()])
    result = await tester.call("billing", "get_invoice", {"id": "inv_1"})
    assert result.is_error and result.error_code == "UNAUTHORIZED"


async def test_dependency_overrides_apply():
    app = FastAPI()
    tester = ToolTester([build_tool()], app=app)
    app.dependency_overrides[current_role] = lambda: "admin"
    app.dependency_overrides[get_db] = lambda: {"inv_9": {**STORE["inv_1"], "id": "inv_9"}}
    result = await tester.call("billing", "get_invoice", {"id": "inv_9"})
    assert result.data["id"] == "inv_9"


async def test_not_found_tool_error_and_internal_error_without_leak():
    tester = ToolTester([build_tool()])
    missing = await tester.call("billing", "get_invoice", {"id": "nope"}, headers={"x-role": "admin"})
    assert missing.is_error and missing.text.startswith('<tool_error code="NOT_FOUND" severity="error">')
    crash = await tester.call("billing", "crash")
    assert crash.is_error and crash.error_code == "INTERNAL_ERROR"
    assert "TOP-SECRET" not in crash.text and "Traceback" not in crash.text and "RuntimeError" not in crash.text


async def test_validation_errors_name_fields_and_echo_values_guarded_rejected_hidden_not_confirmed():
    tester = ToolTester([build_tool()])
    result = await tester.call(
        "billing", "create_invoice", {"customer_id": "c1", "amount_cents": -2, "id": "x", "internal_notes": "n"}
    )
    assert result.is_error and result.error_code == "VALIDATION_ERROR"
    assert result.text == (
        '<validation_error action="billing/create_invoice">\n'
        '<field name="amount_cents">Input should be greater than or equal to 0. You sent: -2.</field>\n'
        '<field name="id">This field is guarded: it cannot be written by the agent. Remove it.</field>\n'
        '<field name="internal_notes">Unknown field. This action accepts: customer_id, amount_cents.</field>\n'
        "<recovery>Fix the fields above and call the tool again.</recovery>\n</validation_error>"
    )
    ok = await tester.call("billing", "create_invoice", {"customer_id": "c1", "amount_cents": 5})
    assert ok.data == {"created": {"customer_id": "c1", "amount_cents": 5}}
    missing = await tester.call("billing", "create_invoice", {"customer_id": "c1"})
    assert '<field name="amount_cents">Field required.</field>' in missing.text
    unknown = await tester.call("billing", "void_invoice", {"id": "i", "color": "red"})
    assert '<field name="color">Unknown field. This action accepts: id, reason.</field>' in unknown.text


async def test_unknown_action_and_missing_discriminator_are_self_healing():
    tester = ToolTester([build_tool()])
    unknown = await tester.call("billing", "explode")
    assert unknown.error_code == "UNKNOWN_ACTION"
    assert "<action>billing.get_invoice</action>" in unknown.text
    assert "<recovery>Call billing again with action set to one of:" in unknown.text
    missing = await tester.call("billing", None, {"id": "x"})
    assert missing.error_code == "MISSING_DISCRIMINATOR"


async def test_unknown_tool_raises_protocol_level_error():
    import pytest

    from mcpfusion.errors import UnknownToolError
    from mcpfusion.testing import make_request

    tester = ToolTester([build_tool()])
    with pytest.raises(UnknownToolError) as info:
        await tester.registry.call("nope", {}, make_request(tester.app))
    assert info.value.available == ["billing"]


async def test_sync_handler_runs_in_threadpool_none_becomes_ok_structured_output():
    tester = ToolTester([build_tool()])
    voided = await tester.call("billing", "void_invoice", {"id": "inv_1"})
    assert voided.data["thread"] != threading.main_thread().name
    nothing = await tester.call("billing", "nothing")
    assert nothing.raw.to_mcp() == {"content": [{"type": "text", "text": "OK"}], "isError": False}
    total = await tester.call("billing", "total", {"currency": "USD"})
    assert total.structured_content == {"total_cents": 1250, "currency": "USD"}
    assert total.raw.texts == ['{"total_cents":1250,"currency":"USD"}']


async def test_framework_responses_pass_through_untouched():
    tool = Tool("t")
    sentinel = success("exactly this")

    @tool.action()
    async def raw():
        """Untyped: any framework response goes out as made."""
        return sentinel

    @tool.action()
    async def structured():
        """Untyped, structured."""
        return success_structured({"a": 1})

    @tool.action(returns=Presenter("P").schema({"a": int}))
    async def typed_text():
        """Typed by its presenter, but answers text: it would contradict its outputSchema."""
        return success("exactly this")

    tester = ToolTester([tool])
    assert (await tester.call("t", "raw")).raw is sentinel
    assert (await tester.call("t", "structured")).structured_content == {"a": 1}
    assert (await tester.call("t", "typed_text")).error_code == "INVALID_OUTPUT"


async def test_select_parameter_enum_and_filtering():
    tool = build_tool(select=True)
    props = tool_entries(tool)[0]["inputSchema"]["properties"]
    assert props["_select"]["items"]["enum"] == ["id", "customer_id", "amount_cents", "status", "total_cents", "currency"]
    tester = ToolTester([tool])
    result = await tester.call("billing", "get_invoice", {"id": "inv_1", "_select": ["id", "status"]},
                               headers={"x-role": "admin"})
    assert result.raw.texts[0] == '{"id":"inv_1","status":"overdue"}'
    bad = await tester.call("billing", "get_invoice", {"id": "inv_1", "_select": ["internal_notes"]},
                            headers={"x-role": "admin"})
    assert bad.error_code == "VALIDATION_ERROR" and '<field name="_select">' in bad.text


async def test_context_is_injected_and_detached_outside_mcp():
    from mcpfusion import Context

    tool = Tool("ctx")

    @tool.action()
    async def who(ctx: Context, request: Request):
        await ctx.progress(1, 2)
        return {"detached": ctx.is_detached, "path": request.url.path}

    result = await ToolTester([tool]).call("ctx", "who")
    assert result.data == {"detached": True, "path": "/mcp"}
    assert "ctx" not in str(tool_entries(tool)[0]["inputSchema"]["properties"])


def test_duplicate_action_names_fail():
    import pytest

    tool = Tool("dup")

    @tool.action()
    async def a():
        pass

    with pytest.raises(ValueError, match="already has an action 'a'"):
        tool.action(name="a")(lambda: None)


def test_concurrent_calls_are_independent():
    tester = ToolTester([build_tool()])

    async def run():
        return await asyncio.gather(
            *[tester.call("billing", "void_invoice", {"id": f"i{n}"}) for n in range(20)]
        )

    results = asyncio.run(run())
    assert [r.data["voided"] for r in results] == [f"i{n}" for n in range(20)]


async def test_special_fastapi_parameters_are_injected():
    from fastapi import BackgroundTasks

    tool = Tool("special")
    ran: list[str] = []

    @tool.action()
    async def uses(tasks: BackgroundTasks, q: Annotated[str | None, Header()] = None):
        tasks.add_task(ran.append, "task")
        return {"header": q}

    result = await ToolTester([tool]).call("special", "uses", headers={"q": "v"})
    assert result.data == {"header": "v"}  # (a Response parameter is refused: test_declaration_errors)
    assert ran == ["task"]
    assert tool_entries(tool)[0]["inputSchema"]["properties"].keys() == {"action"}


async def test_protocol_signals_pass_through_the_handler_framework():
    import pytest

    from mcpfusion.mcp.jsonrpc import ProtocolSignal

    class Signal(ProtocolSignal):
        pass

    tool = Tool("sig")

    @tool.action()
    async def ask():
        raise Signal()

    with pytest.raises(Signal):
        await ToolTester([tool]).call("sig", "ask")


def test_grouped_schema_merges_optional_and_differing_parameters_without_nesting():
    tool = Tool("merge")

    @tool.action()
    async def a(status: Literal["x", "y"] | None = None, n: int = 0):
        """A."""

    @tool.action()
    async def b(status: Literal["x", "y"] | None = None, n: str = ""):
        """B."""

    props = tool_entries(tool)[0]["inputSchema"]["properties"]
    # optional with a None default: no null branch, no `"default": null` (leaving it out is the same call)
    assert props["status"] == {"enum": ["x", "y"]}
    assert props["n"] == {"anyOf": [{"default": 0, "type": "integer"}, {"default": "", "type": "string"}]}
    assert list(props) == ["action", "status", "n"]


async def test_an_action_of_dependencies_alone_takes_no_argument_and_refuses_any():
    """No parameter for the agent: an empty call runs without an argument model being built, any key sent is
    still refused as unknown, and a parameter with a default still gets it."""
    tool = Tool("stats")
    seen: list[dict[str, object]] = []

    async def tenant(request: Request) -> str:
        return request.headers.get("x-tenant", "acme")

    @tool.action(readonly=True)
    async def summary(who: str = Depends(tenant)):
        """Totals of the caller's tenant."""
        seen.append({"who": who})
        return {"tenant": who}

    @tool.action(readonly=True)
    async def page(size: int = 20):
        """A page of a given size."""
        return {"size": size}

    actions = {a.name: a for a in tool.actions.values()}
    assert actions["summary"].takes_nothing and not actions["page"].takes_nothing
    tester = ToolTester([tool])
    ok = await tester.call("stats", "summary", headers={"x-tenant": "globex"})
    assert ok.data == {"tenant": "globex"} and seen == [{"who": "globex"}]
    stray = await tester.call("stats", "summary", {"who": "x"})
    assert stray.is_error and stray.error_code == "VALIDATION_ERROR" and '<field name="who">' in stray.text
    assert seen == [{"who": "globex"}]  # refused before the handler
    assert (await tester.call("stats", "page")).data == {"size": 20}
    assert (await tester.call("stats", "page", {"size": 3})).data == {"size": 3}


async def test_arguments_read_field_by_field_skip_the_model_and_answer_as_it_would():
    """Plain arguments are validated into a dict (no argument model built); whatever that refuses is the
    model's to judge, so errors read as the model writes them.
    An action whose arguments hold a model keeps the model (its unknown keys are read from it)."""
    tool = Tool("calc")

    class Point(BaseModel):
        x: int

    @tool.action(readonly=True)
    async def scale(factor: float, label: str = "none", times: Annotated[int, Field(ge=1)] = 1):
        """Scale by a factor."""
        return {"factor": repr(factor), "label": label, "times": times}

    @tool.action(readonly=True)
    async def move(to: Point):
        """Move to a point."""
        return {"x": to.x}

    actions = {a.name: a for a in tool.actions.values()}
    assert actions["scale"].field_validator is not None and actions["move"].field_validator is None
    assert actions["scale"].validate({"factor": 2}) == {"factor": 2.0, "label": "none", "times": 1}
    tester = ToolTester([tool])
    assert (await tester.call("calc", "scale", {"factor": 1.5, "times": 3})).data == \
        {"factor": "1.5", "label": "none", "times": 3}
    not_finite = await tester.call("calc", "scale", {"factor": float("nan")})  # refused as the model refuses it
    assert '<field name="factor">Input should be a finite number. You sent: NaN.</field>' in not_finite.text
    bad = await tester.call("calc", "scale", {"factor": "x", "times": 0, "colour": "red"})
    assert bad.is_error and bad.error_code == "VALIDATION_ERROR"
    assert '<field name="factor">' in bad.text and '<field name="times">' in bad.text
    assert '<field name="colour">Unknown field. This action accepts: factor, label, times.</field>' in bad.text
    assert (await tester.call("calc", "move", {"to": {"x": 4}})).data == {"x": 4}
    stray = await tester.call("calc", "move", {"to": {"x": 4, "y": 1}})
    assert stray.is_error and '<field name="to.y">' in stray.text
