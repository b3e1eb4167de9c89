"""Round 5w: principals told apart by every field (pydantic `exclude=True`, private attributes, extras), censors
never edited by a path under them (and an outer censor winning in either order), and a `RequestValidationError`
of any shape answered as a validation error on every wire."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

import pytest
from fastapi import Depends
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from mcpfusion import MCPFusion, Presenter, ProtectedResource, RateLimit, Tool
from mcpfusion.auth import unauthorized
from mcpfusion.identity import unnamed_identity_of
from mcpfusion.testing import ToolTester


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


# -- 1. principals naming no subject: every field counts ---------------------------------------------------


class ApiClient(BaseModel):
    key_id: str = Field(exclude=True)  # kept out of dumps and logs, still who calls
    tenant: str


class Secretive(BaseModel):
    tenant: str
    _key_id: str = PrivateAttr(default="")


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    tenant: str


class Holder(BaseModel):
    client: ApiClient


@dataclasses.dataclass
class Keyed:
    tenant: str
    key: str = dataclasses.field(repr=False, compare=False)


class Slotted:
    __slots__ = ("key", "tenant")

    def __init__(self, tenant: str, key: str) -> None:
        self.tenant, self.key = tenant, key


def _secretive(key: str) -> Secretive:
    found = Secretive(tenant="acme")
    found._key_id = key
    return found


@pytest.mark.parametrize("make", [
    lambda key: ApiClient(key_id=key, tenant="acme"),
    _secretive,
    lambda key: Open(tenant="acme", key=key),
    lambda key: Holder(client=ApiClient(key_id=key, tenant="acme")),
    lambda key: Keyed("acme", key),
    lambda key: Slotted("acme", key),
], ids=["exclude", "private", "extra", "nested-exclude", "dataclass-compare-false", "slots"])
def test_principals_differing_in_a_hidden_field_are_told_apart(make: Any) -> None:
    alice, bob = unnamed_identity_of(make("alice")), unnamed_identity_of(make("bob"))
    assert alice is not None and bob is not None
    assert not alice[0].startswith("unreadable:")
    assert alice != bob
    assert unnamed_identity_of(make("alice")) == alice  # the same caller keeps its state
    assert alice[1] == bob[1]


def test_a_model_with_a_field_not_set_fails_closed() -> None:
    half = ApiClient.model_construct(tenant="acme")  # key_id never set: nothing to tell callers apart by
    first, second = unnamed_identity_of(half), unnamed_identity_of(half)
    assert first is not None and second is not None
    assert first[0].startswith("unreadable:") and first != second


def test_two_api_keys_of_one_tenant_are_two_callers() -> None:
    keys = {"alice-key": ApiClient(key_id="alice", tenant="acme"), "bob-key": ApiClient(key_id="bob", tenant="acme")}

    async def authenticate(request: Any) -> ApiClient:
        found = keys.get(request.headers.get("x-api-key", ""))
        if found is None:
            raise unauthorized("Unknown key.")
        return found

    shop = Tool("shop")

    @shop.action(readonly=True)
    async def ping() -> str:
        """Ping."""
        return "pong"

    resource = ProtectedResource(authorization_servers=["https://auth.example.com"], authenticate=authenticate)
    app = MCPFusion("shop", tools=[shop], authorization=resource, middleware=[RateLimit(1, per=60)]).build_app()
    with TestClient(app) as client:
        assert client.post("/api/shop/ping", json={}, headers={"x-api-key": "alice-key"}).status_code == 200
        # Bob has a bucket of his own: not Alice's, spent
        assert client.post("/api/shop/ping", json={}, headers={"x-api-key": "bob-key"}).status_code == 200
        assert client.post("/api/shop/ping", json={}, headers={"x-api-key": "alice-key"}).status_code == 429


# -- 2. censors are never edited; an outer censor wins in either order -------------------------------------


class Cust(BaseModel):
    name: str
    email: str


class Line(BaseModel):
    sku: str
    card: str


class Inv(BaseModel):
    id: str
    customer: Cust
    lines: list[Line]


DATA = {"id": "i1", "customer": {"name": "Ada", "email": "ada@example.com"},
        "lines": [{"sku": "SKU-1", "card": "4242424242"}]}


def _present(presenter: Presenter) -> dict[str, Any]:
    return json.loads(presenter.present(json.loads(json.dumps(DATA))).texts[0])  # type: ignore[no-any-return]


def test_a_path_under_a_mapping_censor_leaves_the_censor_alone() -> None:
    censor = {"name": "hidden", "email": "withheld"}
    original = Presenter("inv").schema(Inv).redact_pii(["customer"], censor=censor)
    variant = original.copy("inv_v").redact_pii(["customer.email"], censor="[R]")
    assert _present(variant)["customer"] == {"name": "hidden", "email": "withheld"}
    assert censor == {"name": "hidden", "email": "withheld"}
    assert _present(original)["customer"] == {"name": "hidden", "email": "withheld"}


def test_a_list_censor_is_not_walked_into() -> None:
    censor = [{"sku": "x", "card": "y"}]
    variant = Presenter("inv").schema(Inv).redact_pii(["lines"], censor=censor).copy("v").redact_pii(
        ["lines[*].card"], censor="[C]")
    assert _present(variant)["lines"] == [{"sku": "x", "card": "y"}]
    assert censor == [{"sku": "x", "card": "y"}]


def test_an_embedded_child_leaves_its_parents_mapping_censor_alone() -> None:
    censor = {"name": "hidden", "email": "withheld"}
    child = Presenter("cust").schema(Cust).redact_pii(["email"], censor="[E]")
    parent = Presenter("inv").schema(Inv).embed("customer", child).redact_pii(["customer"], censor=censor)
    for _ in range(2):
        assert _present(parent)["customer"] == {"name": "hidden", "email": "withheld"}
    assert censor == {"name": "hidden", "email": "withheld"}


@pytest.mark.parametrize("order", [[("lines[*]", "[X]"), ("lines[*].card", "[C]")],
                                   [("lines[*].card", "[C]"), ("lines[*]", "[X]")]], ids=["outer-first", "inner-first"])
def test_the_outer_censor_wins_in_either_order(order: list[tuple[str, str]]) -> None:
    presenter = Presenter("inv").schema(Inv)
    for path, censor in order:
        presenter.redact_pii([path], censor=censor)
    assert _present(presenter)["lines"] == ["[X]"]  # each line hidden whole by the outer path


# -- 3 and 4. a RequestValidationError of any shape --------------------------------------------------------

ODD = {"none_loc": [{"type": "value_error", "loc": None, "msg": "bad region"}],
       "int_loc": [{"type": "value_error", "loc": 5, "msg": "m"}],
       "nondict": ["oops"],
       "list_part": [{"type": "value_error", "loc": ([1], "x"), "msg": None}]}


def _odd_tool() -> Tool:
    tool = Tool("t")
    for key, errors in ODD.items():
        def raising(errors: list[Any] = errors) -> Any:
            def dep() -> int:
                raise RequestValidationError(errors)
            return dep

        async def handler(v: int = Depends(raising())) -> int:
            """h"""
            return v
        tool.action(readonly=True, name=key)(handler)
    return tool


@pytest.mark.parametrize("key", list(ODD))
def test_odd_validation_errors_are_validation_errors_on_mcp(key: str) -> None:
    result = asyncio.run(ToolTester([_odd_tool()]).call("t", key, {}))
    assert result.error_code == "VALIDATION_ERROR"
    if key != "list_part":
        assert 'name="(request)"' in result.text


@pytest.mark.parametrize("key", list(ODD))
def test_odd_validation_errors_are_422_on_rest(key: str) -> None:
    app = MCPFusion("w", tools=[_odd_tool()]).build_app()
    with TestClient(app, raise_server_exceptions=False) as client:
        answer = client.post(f"/api/t/{key}", json={})
    assert answer.status_code == 422
    assert answer.json()["code"] == "VALIDATION_ERROR"
    assert "None." not in answer.text
