"""A client that answers a confirmation's `elicitation/create` with an error did not fail the server: the
`confirm=` action answers as for a client that cannot ask the user (CONFIRMATION_REQUIRED with a `_confirm`
token, the client's error named, bounded), not a -32603 internal error; nothing is done, and the token works
once the user agrees. A handler's own `ctx.elicit` still sees the protocol error (tests/test_mcp_streams.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service_kit import build, confirm_token, serve
from tests.test_elicit_subscribe_mends import answer_on_session_wire

ADMIN = {"authorization": "Bearer demo-admin"}


@pytest.fixture
def service(tmp_path):
    with serve(build(tmp_path)) as base:
        yield base


async def void_answering_with(base: str, arguments: dict[str, Any], error: Any) -> dict[str, Any]:
    """tools/call billing_void_invoice on a session whose client answers elicitation/create with `error`."""
    return await answer_on_session_wire(base, "billing_void_invoice", arguments, error, member="error", **ADMIN)


async def test_an_error_answer_to_the_confirmation_asks_for_a_token_instead(service):
    async with httpx.AsyncClient(base_url=service, timeout=10) as c:
        arguments = {"id": "inv_0003", "reason": "entered twice"}  # a draft of the demo data
        reply = await void_answering_with(service, arguments, {"code": -32601, "message": "Method not found" + "x" * 5000})
        assert "error" not in reply, reply  # a tool result, not a JSON-RPC error
        result = reply["result"]
        text = result["content"][0]["text"]
        assert result["isError"] is True and 'code="CONFIRMATION_REQUIRED"' in text, text
        assert "could not ask the user" in text and "(-32601): Method not found" in text and "x" * 300 not in text
        still = await c.post("/api/billing/get_invoice", json={"id": "inv_0003"}, headers=ADMIN)
        assert still.json()["status"] == "draft"  # nothing was done
        # The user agreed in the conversation: the token it carries voids the invoice, once.
        done = await c.post("/api/billing/void_invoice",
                            json={**arguments, "_confirm": confirm_token(text)}, headers=ADMIN)
        assert done.status_code == 200 and done.json()["status"] == "void", done.text


async def test_an_error_answer_of_any_shape_is_still_a_confirmation_request(service):
    reply = await void_answering_with(service, {"id": "inv_0003", "reason": "entered twice"},
                                      {"code": "not a number", "message": None})
    assert reply["result"]["isError"] is True
    assert 'code="CONFIRMATION_REQUIRED"' in reply["result"]["content"][0]["text"]
