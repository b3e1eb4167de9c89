"""Declaration checks: reserved argument names reached through an alias or a flattened model, a `returns=` the
handler's return annotation contradicts, and the request `ToolTester` builds (lifespan state, MCP path)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, TypedDict

import pytest
from fastapi import Request
from fastapi.testclient import TestClient
from pydantic import AliasChoices, BaseModel, Field, computed_field, model_validator

from mcpfusion import Flatten, MCPFusion, Page, Paged, Presenter, Tool, testing
from mcpfusion import tool as tool_module
from mcpfusion.confirm import CONFIRM_PARAM
from mcpfusion.response import ToolResponse, success_structured
from mcpfusion.testing import ToolTester


# -- reserved names --------------------------------------------------------------------------------------------
class Filters(BaseModel):
    q: str
    action: str = "any"  # e.g. an audit-log filter: which action was logged


class SelectFilter(BaseModel):
    q: str
    fields: str = Field("all", alias="_select")


class Renamed(BaseModel):
    q: str
    action: str = Field("any", alias="logged_action")  # sent as `logged_action`: not reserved


def test_confirm_name_is_the_confirm_modules():
    assert tool_module._CONFIRM_PARAM == CONFIRM_PARAM


def test_a_flattened_field_named_action_is_refused():
    tool = Tool("audit")
    with pytest.raises(ValueError, match=r"Filters's field 'action', flattened .* is reserved \(the discriminator"):
        @tool.action(readonly=True)
        async def search(f: Annotated[Filters, Flatten]) -> dict:
            """Search."""
            return f.model_dump()


def test_a_flattened_field_aliased_to_select_is_refused():
    tool = Tool("audit")
    with pytest.raises(ValueError, match=r"field 'fields', flattened .* is sent as '_select' \(its alias\), which is "
                                         r"reserved"):
        @tool.action(readonly=True)
        async def search(f: Annotated[SelectFilter, Flatten]) -> dict:
            """Search."""
            return f.model_dump()


@pytest.mark.parametrize("annotation", [
    Annotated[str, Field(alias="action")],
    Annotated[str, Field(validation_alias="action")],
    Annotated[str, Field(validation_alias=AliasChoices("x", "action"))],
    Annotated[str, Field(alias="_select")],
])
def test_a_parameter_aliased_to_a_reserved_name_is_refused(annotation: Any):
    tool = Tool("t")

    async def handler(x: str = "dflt") -> str:
        """Handler."""
        return x

    handler.__annotations__ = {"x": annotation, "return": str}
    with pytest.raises(ValueError, match=r"parameter 'x' is sent as '(action|_select)' \(its alias\), which is "
                                         r"reserved .*: give it another alias"):
        tool.action()(handler)


def test_an_alias_in_the_default_field_is_checked_too():
    tool = Tool("t")
    with pytest.raises(ValueError, match="parameter 'x' is sent as 'action'"):
        @tool.action()
        async def handler(x: str = Field("dflt", alias="action")) -> str:
            """Handler."""
            return x


def test_cursor_is_reserved_only_when_paginated_and_confirm_only_with_confirm():
    tool = Tool("t")
    with pytest.raises(ValueError, match=r"'cursor' \(its alias\), which is reserved \(the page cursor"):
        @tool.action(paginate=5)
        async def paged(x: Annotated[str, Field(alias="cursor")] = "dflt") -> list:
            """Paged."""
            return [x]
    with pytest.raises(ValueError, match=r"'_confirm' \(its alias\), which is reserved \(the confirmation token"):
        @tool.action(destructive=True, confirm=True)
        async def purge(token: Annotated[str, Field(alias="_confirm")] = "none") -> str:
            """Purge."""
            return token

    @tool.action()
    async def plain_cursor(x: Annotated[str, Field(alias="cursor")] = "dflt") -> str:
        """Not paginated: `cursor` is the agent's to send."""
        return x

    @tool.action()
    async def plain_confirm(x: Annotated[str, Field(alias="_confirm")] = "dflt") -> str:
        """No confirm=: `_confirm` is the agent's to send."""
        return x


def test_an_input_schema_property_with_a_reserved_name_is_refused():
    tool = Tool("t")
    with pytest.raises(ValueError, match="input_schema property 'action' is reserved"):
        @tool.action(input_schema={"type": "object", "properties": {"action": {"type": "string"}}})
        async def handler(action: str = "") -> str:
            """Handler."""
            return action


async def test_names_that_are_not_reserved_still_reach_the_handler_on_every_path():
    tool = Tool("audit")

    @tool.action(readonly=True)
    async def search(f: Annotated[Renamed, Flatten]) -> dict:
        """Search."""
        return f.model_dump()

    @tool.action(readonly=True)
    async def echo(x: Annotated[str, Field(alias="cursor")] = "dflt") -> str:
        """Echo."""
        return x

    app = MCPFusion("audit", tools=[tool]).build_app()
    schema = tool.grouped_input_schema()
    assert schema["properties"]["action"]["enum"] == ["search", "echo"]
    tester = ToolTester(app)
    got = await tester.call("audit", "search", {"q": "a", "logged_action": "login"})
    assert got.data == {"q": "a", "action": "login"}
    assert (await tester.call("audit", "echo", {"cursor": "zzz"})).data == "zzz"
    rest = TestClient(app).post("/api/audit/search", json={"q": "a", "logged_action": "login"})
    assert rest.json() == {"q": "a", "action": "login"}


# -- returns= against the return annotation --------------------------------------------------------------------
class Invoice(BaseModel):
    id: str
    amount: int = 0
    secret: str = "s"


class InvoicePublic(BaseModel):
    id: str
    amount: int


class Customer(BaseModel):
    name: str


class Shaped(TypedDict):
    id: str
    amount: int


def declare(returns: Any, fn: Any, **options: Any) -> Tool:
    tool = Tool("t")
    tool.action(returns=returns, **options)(fn)
    return tool


async def one() -> Invoice:
    """One."""
    return Invoice(id="1", amount=3)


async def many() -> list[Invoice]:
    """Many."""
    return [Invoice(id="1", amount=3)]


async def text() -> str:
    """Text."""
    return "a"


async def customer() -> Customer:
    """A customer."""
    return Customer(name="a")


@pytest.mark.parametrize(("returns", "fn", "reason"), [
    (Customer, one, r"returns=Customer contradicts the return annotation -> Invoice: Invoice has no field 'name'"),
    (Invoice, many, r"-> list\[Invoice\]: it answers one Invoice, and the handler returns a list\. Declare "
                    r"returns=list\[Invoice\]"),
    (list[Invoice], one, r"it answers a list of Invoice, and the handler returns one\. Declare returns=Invoice"),
    (Presenter("inv").schema(Invoice), customer, r"returns=<presenter 'inv'> contradicts .* -> Customer: Customer "
                                                 r"has no field 'id'"),
    (Invoice, text, r"-> str: it answers objects of Invoice, and the handler returns a str"),
])
def test_a_returns_the_annotation_contradicts_is_refused(returns: Any, fn: Any, reason: str):
    with pytest.raises(TypeError, match=rf"\(action t/{fn.__name__}\): .*{reason}"):
        declare(returns, fn)


@pytest.mark.parametrize(("returns", "message"), [
    (dict, "returns= takes a presenter, a dependency returning one .* not dict"),
    (int, "not int"),
    (dict[str, Any], r"not dict\[str, Any\]"),
    (BaseModel, "returns=BaseModel names pydantic's base class"),
])
def test_returns_of_something_it_does_not_take_says_what_it_takes(returns: Any, message: str):
    with pytest.raises(TypeError, match=message):
        declare(returns, one)


def test_returns_model_and_output_schema_together_are_refused():
    with pytest.raises(TypeError, match="returns=Invoice and output_schema= both declare the output model"):
        declare(Invoice, one, output_schema=Customer)
    # A presenter with an explicit output schema is another matter: the schema documents what it answers.
    declare(Presenter("inv").schema(Invoice), one, output_schema={"type": "object", "required": ["id"]})


class Derived(BaseModel):
    label: str

    @model_validator(mode="before")
    @classmethod
    def from_id(cls, data: Any) -> Any:
        return {"label": f"#{getattr(data, 'id', '?')}"}


class WithTotal(BaseModel):
    total: int


class Priced(BaseModel):
    amount: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return self.amount * 2


class Aliased(BaseModel):
    invoice_id: str = Field(alias="id")


async def test_what_may_fit_is_still_declared_and_answers():
    async def as_dict() -> dict:
        """A dict."""
        return {"id": "1", "amount": 3}

    async def as_typed() -> dict[str, Any]:
        """A typed dict."""
        return {"id": "1", "amount": 3}

    async def as_any() -> Any:
        """Any."""
        return {"id": "1", "amount": 3}

    async def untyped():  # type: ignore[no-untyped-def]
        """No annotation."""
        return {"id": "1", "amount": 3}

    async def typed_dict() -> Shaped:
        """A TypedDict."""
        return {"id": "1", "amount": 3}

    async def either() -> Invoice | Customer:
        """A union."""
        return Invoice(id="1", amount=3)

    async def maybe() -> Invoice | None:
        """Optional."""
        return Invoice(id="1", amount=3)

    async def priced() -> Priced:
        """A computed field gives what the output requires."""
        return Priced(amount=2)

    async def derived() -> Invoice:
        """The output model's own validator makes its field."""
        return Invoice(id="7")

    async def response() -> ToolResponse:
        """A ToolResponse."""
        return success_structured({"id": "1", "amount": 3})

    async def paged(page: Page) -> Paged[Invoice]:
        """Paged."""
        return page.keyset([Invoice(id="1", amount=3)], key=lambda r: [r.id])

    narrowing = Presenter("public").schema(InvoicePublic)
    cases: list[tuple[Any, Any, dict[str, Any]]] = [
        (narrowing, one, {}), (narrowing, many, {}), (narrowing, as_dict, {}), (narrowing, paged, {"paginate": 5}),
        (InvoicePublic, one, {}), (list[InvoicePublic], many, {}), (InvoicePublic, as_dict, {}),
        (InvoicePublic, as_typed, {}), (InvoicePublic, as_any, {}), (InvoicePublic, untyped, {}),
        (InvoicePublic, typed_dict, {}), (InvoicePublic, either, {}), (InvoicePublic, maybe, {}),
        (Invoice | None, maybe, {}), (WithTotal, priced, {}), (Derived, derived, {}), (Aliased, one, {}),
        (narrowing, response, {}),
    ]
    for returns, fn, options in cases:
        tool = declare(returns, fn, **options)
        got = await ToolTester([tool]).call("t", fn.__name__)
        assert not got.is_error, (returns, fn.__name__, got.text)


# -- the request ToolTester builds -----------------------------------------------------------------------------
def state_tool() -> Tool:
    tool = Tool("t")

    @tool.action(readonly=True)
    async def which(request: Request) -> dict:
        """What the request carries."""
        seen = {"pool": getattr(request.state, "pool", "MISSING"), "path": request.url.path}
        request.state.pool = "changed by the call"  # its own copy: the app's state stays
        return seen

    return tool


async def test_tester_requests_carry_a_copy_of_the_running_lifespan_state():
    app = MCPFusion("t", tools=[state_tool()]).build_app()
    assert (await ToolTester(app).call("t", "which")).data["pool"] == "MISSING"  # no lifespan running
    running = {"pool": "lifespan-pool"}
    setattr(app.state, testing.LIFESPAN_STATE, running)  # what the app's running lifespan yielded
    for tester in (ToolTester(app), ToolTester(app.state.mcpfusion)):
        assert (await tester.call("t", "which")).data["pool"] == "lifespan-pool"
    assert running == {"pool": "lifespan-pool"}


async def test_tester_requests_go_to_the_fusion_mcp_path():
    fusion = MCPFusion("crm", tools=[state_tool()], path="/mcp-crm")
    assert (await ToolTester(fusion).call("t", "which")).data["path"] == "/mcp-crm"  # not served yet
    app = fusion.build_app()
    for tester in (ToolTester(app), ToolTester(fusion), ToolTester(list(fusion.registry.tools.values()), app=app)):
        assert (await tester.call("t", "which")).data["path"] == "/mcp-crm"
    bare = ToolTester([state_tool()])
    assert (await bare.call("t", "which")).data["path"] == "/mcp"


def test_the_running_lifespan_state_reaches_tester_calls_end_to_end():
    from contextlib import asynccontextmanager

    from fastapi import FastAPI

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield {"pool": "lifespan-pool"}

    app = FastAPI(lifespan=lifespan)
    MCPFusion("t", tools=[state_tool()]).mount(app)
    with TestClient(app):
        for tester in (ToolTester(app), ToolTester(app.state.mcpfusion)):
            assert asyncio.run(tester.call("t", "which")).data["pool"] == "lifespan-pool"
    # stopped: nothing is left over for a later in-process call
    assert asyncio.run(ToolTester(app).call("t", "which")).data["pool"] == "MISSING"
