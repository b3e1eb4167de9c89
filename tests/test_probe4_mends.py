"""Mends from probe 4: a container of secrets sent a bare value never quotes it back (item 3); resource templates
of one shape, or malformed, are refused when declared (item 5); middleware that cannot be awaited is refused
when declared (item 7); the confirmation question keeps what the agent wrote apart from the server's words
(item 10)."""

from __future__ import annotations

from typing import Annotated

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, Field, SecretStr

from mcpfusion import MCPFusion, Tool
from mcpfusion.errors import secret_at
from mcpfusion.testing import ToolTester

# -- 3: a field that holds secrets is a secret as a whole ----------------------------------------------------


class Login(BaseModel):
    user: str
    password: SecretStr


class Vault(BaseModel):
    name: str
    logins: list[Login] = []


def _keys() -> Tool:
    keys = Tool("keys")

    @keys.action(destructive=True)
    async def store(pins: list[SecretStr] | None = None, named: dict[str, SecretStr] | None = None,
                    maybe: SecretStr | None = None, pair: tuple[str, SecretStr] | None = None,
                    login: Login | None = None, vault: Vault | None = None,
                    nested: Annotated[list[dict[str, SecretStr]] | None, Field(max_length=3)] = None,
                    tags: list[str] | None = None) -> str:
        """Store keys."""
        return "ok"

    @keys.action(destructive=True, input_schema={
        "type": "object", "properties": {
            "tokens": {"type": "array", "items": {"type": "string", "writeOnly": True}},
            "note": {"type": "array", "items": {"type": "string"}}}})
    async def store_raw(tokens: list[str] | None = None, note: list[str] | None = None) -> str:
        """Store tokens."""
        return "ok"

    return keys


@pytest.mark.parametrize(("action", "arguments", "field"), [
    ("store", {"pins": "hunter2"}, "pins"),
    ("store", {"named": "hunter2"}, "named"),
    ("store", {"named": ["hunter2"]}, "named"),
    ("store", {"maybe": ["hunter2"]}, "maybe"),
    ("store", {"pair": "hunter2"}, "pair"),
    ("store", {"login": "hunter2"}, "login"),
    ("store", {"vault": "hunter2"}, "vault"),
    ("store", {"vault": {"name": "v", "logins": "hunter2"}}, "vault.logins"),
    ("store", {"nested": "hunter2"}, "nested"),
    ("store", {"nested": ["hunter2"]}, "nested[0]"),
    ("store_raw", {"tokens": "hunter2"}, "tokens"),
])
async def test_a_container_of_secrets_sent_a_bare_value_never_quotes_it_back(action, arguments, field):
    answer = await ToolTester(MCPFusion("k", tools=[_keys()])).call("keys", action, arguments)
    assert answer.error_code == "VALIDATION_ERROR", answer.text
    assert f'<field name="{field}">' in answer.text
    assert "hunter2" not in answer.text and "You sent" not in answer.text
    problem = TestClient(MCPFusion("k", tools=[_keys()]).build_app()).post(f"/api/keys/{action}", json=arguments)
    assert problem.status_code == 422 and "hunter2" not in problem.text, problem.text


@pytest.mark.parametrize(("action", "arguments", "sent"), [
    ("store", {"tags": "abc"}, '"abc"'),
    ("store", {"login": {"user": 5, "password": "correct-horse"}}, "5"),
    ("store_raw", {"note": "abc"}, '"abc"'),
])
async def test_a_field_holding_no_secret_is_still_quoted_back(action, arguments, sent):
    answer = await ToolTester([_keys()]).call("keys", action, arguments)
    assert f"You sent: {sent}." in answer.text, answer.text


def test_a_recursive_schema_without_a_secret_is_walked_to_its_end():
    schema = {"type": "object", "properties": {"tree": {"$ref": "#/$defs/Node"}},
              "$defs": {"Node": {"type": "object", "properties": {"kids": {"type": "array",
                                                                           "items": {"$ref": "#/$defs/Node"}}}}}}
    assert not secret_at(schema, ("tree",))
    schema["$defs"]["Node"]["properties"]["key"] = {"type": "string", "format": "password"}
    assert secret_at(schema, ("tree",)) and secret_at(schema, ("tree", "kids", 0))
