"""What the contract promises: the lockfile pins a presenter's guard of its UI blocks and an action's content
types; the docs' example arguments pass the action's own validation; /readyz answers 503 for a check that is
cancelled or raises any BaseException."""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import enum
import ipaddress
import json
import uuid
from typing import Annotated, Any, Literal

import httpx
import jsonschema
import pytest
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Presenter, Tool, ui
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import lock, samples
from mcpfusion.docs.examples import example_arguments
from mcpfusion.errors import ValidationFailed
from mcpfusion.health import Readiness
from tests.service_kit import in_process

ADMIN = {"authorization": "Bearer demo-admin"}


# -- 1. the lockfile pins guard_blocks and content_types ---------------------------------------------------------

def crm(*, guard: bool = True, content_types: tuple[str, ...] = ("image/png",)) -> ToolRegistry:
    view = Presenter("customer").schema({"id": str, "email": str}).redact_pii(["email"], guard_blocks=guard) \
        .ui(lambda c: ui.summary(f"customer {c['email']}"))
    tool = Tool("crm", description="Customers")

    async def get(id: str) -> dict[str, Any]:
        """Get a customer."""
        return {"id": id, "email": "a@b.c"}

    tool.action(readonly=True, returns=view, content_types=list(content_types))(get)
    return ToolRegistry([tool])


def check(pinned: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """What `mcpfusion lock --check` reports: nothing when the lockfile (as read back) matches."""
    pinned = lock.resealed(json.loads(lock.dumps(pinned)))
    changes = lock.diff(pinned, served)
    assert bool(changes) == (pinned["digest"] != served["digest"])
    return changes


def test_check_names_ui_blocks_that_are_no_longer_guarded():
    guarded, unguarded = lock.contract(crm()), lock.contract(crm(guard=False))
    assert unguarded["tools"]["crm"]["actions"]["get"]["presenters"]["customer"]["guard_blocks"] is False
    assert check(guarded, unguarded) == [
        "crm.get [presenter customer]: UI blocks are no longer guarded against redacted values (guard_blocks=False)"]
    assert check(unguarded, guarded) == [
        "crm.get [presenter customer]: UI blocks are guarded against redacted values again"]
    assert check(unguarded, lock.contract(crm(guard=False))) == []


def test_check_names_a_changed_content_type():
    png, svg = lock.contract(crm()), lock.contract(crm(content_types=("image/svg+xml",)))
    assert png["tools"]["crm"]["actions"]["get"]["content_types"] == ["image/png"]
    assert check(png, svg) == ['crm.get: content_types ["image/png"] -> ["image/svg+xml"]']


def test_a_lockfile_written_before_they_were_pinned_reads_as_the_defaults():
    """An older lockfile has neither key: it matches a service that keeps the defaults (guarded blocks, no
    content sent), and names what differs from them, without failing to read."""
    def older(registry: ToolRegistry) -> dict[str, Any]:
        pinned = lock.contract(registry)
        action = pinned["tools"]["crm"]["actions"]["get"]
        action.pop("content_types", None)
        action["presenters"]["customer"].pop("guard_blocks", None)
        return pinned

    assert check(older(crm(content_types=())), lock.contract(crm(content_types=()))) == []
    assert check(older(crm(content_types=())), lock.contract(crm(guard=False))) == [
        'crm.get: content_types null -> ["image/png"]',
        "crm.get [presenter customer]: UI blocks are no longer guarded against redacted values (guard_blocks=False)"]


# -- 2. example arguments pass validation ------------------------------------------------------------------------

class Color(enum.Enum):
    red = "red"


class Line(BaseModel):
    sku: Annotated[str, Field(pattern=r"^SKU-\d{4}$")]
    qty: Annotated[int, Field(gt=0, le=10)]


shop = Tool("shop", exposition="flat")


def act(fn: Any) -> Any:
    shop.action(readonly=True, description=fn.__name__)(fn)
    return fn


@act
async def ratio(r: Annotated[float, Field(gt=0, lt=1)], p: Annotated[float, Field(gt=0.1, le=0.2)]) -> None: ...
@act
async def steps(n: Annotated[int, Field(multiple_of=5)], m: Annotated[int, Field(ge=11, le=14, multiple_of=4)],
                x: Annotated[float, Field(multiple_of=0.25, gt=100)], k: Annotated[int, Field(gt=3, lt=5)]) -> None: ...
@act
async def patterned(code: Annotated[str, Field(pattern=r"^[A-Z]{3}$")],
                    ref: Annotated[str, Field(pattern=r"^(INV|CRN)-\d{2,4}[a-z]?$", min_length=7)],
                    word: Annotated[str, Field(pattern=r"^[^\d\s,]+$", max_length=4)]) -> None: ...
@act
async def typed(addr: ipaddress.IPv4Address, net: ipaddress.IPv6Network, d: dt.timedelta, pair: tuple[int, str],
                raw: bytes, amount: decimal.Decimal, u: uuid.UUID, c: Color, kind: Literal[1, 2]) -> None: ...
@act
async def lengths(e: Annotated[str, Field(max_length=8, description="Email, e.g. someone@example.com")],
                  s: Annotated[str, Field(min_length=3, max_length=3)],
                  n: Annotated[int, Field(description="How many, e.g. 3.5 or so", ge=0)],
                  big: Annotated[int, Field(description="Amount, e.g. 12 cents", ge=100)]) -> None: ...
@act
async def nested(items: list[Line], line: Line | None, tags: Annotated[set[int], Field(min_length=2)],
                 names: Annotated[list[str], Field(min_length=2, max_length=3)],
                 d: dict[str, Annotated[int, Field(gt=100)]]) -> None: ...
@act
async def dates(d: dt.date, when: dt.datetime, at: dt.time) -> None: ...


def valid(action: Any, args: dict[str, Any]) -> None:
    """`args` pass the action's JSON schema (formats checked) and the server's own validation."""
    schema = action.input_schema
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER) \
        .validate(args)
    try:
        action.validate(dict(args))
    except ValidationFailed as exc:
        raise AssertionError(f"{action.label}: {args} -> {exc.fields}") from None


@pytest.mark.parametrize("name", list(shop.actions))
def test_every_example_of_a_constrained_action_validates(name):
    action = shop.actions[name]
    args = example_arguments(action)
    assert set(args) == set(action.input_schema["required"])
    valid(action, args)


def test_constrained_examples_are_the_plain_ones():
    found = {name: example_arguments(a) for name, a in shop.actions.items()}
    assert found["ratio"] == {"r": 0.5, "p": 0.2} and found["steps"]["n"] == 40 and found["steps"]["m"] == 12
    assert found["patterned"]["code"] == "AAA" and found["typed"]["pair"] == [42, "pair_2"]
    assert found["lengths"]["e"] == "e_1" and found["lengths"]["big"] == 100  # the described ones do not fit


def test_example_dates_are_ahead_of_today_and_a_pattern_it_cannot_write_gives_no_value():
    today = dt.date(2031, 5, 1)
    assert samples.arguments(shop.actions["dates"].input_schema, today=today)["d"] == "2031-05-31"
    schema = {"type": "object", "required": ["id", "n"], "properties": {
        "id": {"type": "string", "pattern": r"^(?!x)[a-z]+$"}, "n": {"type": "integer", "minimum": 5, "maximum": 1}}}
    assert samples.arguments(schema) == {}  # neither a look-around nor bounds that exclude each other get a made-up value
    assert samples.pattern_example(r"^\p{L}+$") is None and samples.pattern_example(r"^[[:alpha:]]$") is None


def test_every_example_of_the_reference_service_validates(service_app):
    registry = service_app.state.mcpfusion.registry
    for action in registry.actions():
        args = example_arguments(action)
        assert set(args) == set(action.input_schema.get("required", [])), action.label
        valid(action, args)


async def test_the_reference_create_invoice_example_creates_an_invoice(service_app):
    action = service_app.state.mcpfusion.registry.tools["billing"].actions["create_invoice"]
    args = example_arguments(action)
    assert args["customer_id"] == "cus_0001" and dt.date.fromisoformat(args["due_date"]) > dt.date.today()
    created = await in_process(service_app).call("billing", "create_invoice", args, headers=ADMIN)
    assert not created.is_error, created.text
    assert created.data["customer_id"] == "cus_0001" and created.data["status"] == "draft"


# -- 3. /readyz: a cancelled or BaseException check is a failing one ---------------------------------------------

class Fatal(BaseException):
    """What a client library may raise that is not an Exception."""


async def readyz(fusion: MCPFusion) -> httpx.Response:
    transport = httpx.ASGITransport(app=fusion.build_app(), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        return await client.get("/readyz")


def fusion_with(check: Any) -> MCPFusion:
    fusion = MCPFusion("svc")
    fusion.readiness_check("db")(check)
    fusion.readiness_check("ok")(lambda: True)
    return fusion


async def cancelled_inside() -> bool:
    future = asyncio.get_running_loop().create_future()
    future.cancel()  # a driver's ping whose own operation was cancelled (a pool reset)
    await future
    return True


async def raises_fatal() -> bool:
    raise Fatal


def interrupted_thread() -> bool:
    raise KeyboardInterrupt  # in the check's thread: nothing the process was asked to do


def fatal_thread() -> bool:
    raise Fatal


@pytest.mark.parametrize(("check", "kind"), [(cancelled_inside, "CancelledError"), (raises_fatal, "Fatal"),
                                             (interrupted_thread, "KeyboardInterrupt"), (fatal_thread, "Fatal")])
async def test_a_check_cancelled_or_raising_a_base_exception_is_a_503_naming_it(check, kind):
    fusion = fusion_with(check)
    for _ in range(2):  # (and the server still answers the next probe)
        response = await readyz(fusion)
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        assert response.json() == {"status": "unavailable", "checks": {"db": f"unavailable ({kind})", "ok": "ok"}}


async def test_the_probe_itself_cancelled_is_not_swallowed():
    started = asyncio.Event()

    async def slow() -> bool:
        started.set()
        await asyncio.Event().wait()
        return True

    readiness = Readiness(timeout=60)
    readiness.add("slow", slow)
    probe = asyncio.create_task(readiness.run())
    await started.wait()
    probe.cancel()
    with pytest.raises(asyncio.CancelledError):
        await probe
