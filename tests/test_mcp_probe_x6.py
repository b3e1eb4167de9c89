"""Black-box probe X6: the 2026-07-28 wire names every envelope/header problem of a request at once (with the
first one's code), checks notifications as it checks requests, and both wires refuse a message that is half
request, half response."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcpfusion import MCPFusion, Tool

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
HEADERS = {"accept": "application/json", "mcp-protocol-version": MODERN}
SERVED = ["2025-06-18", "2025-11-25", MODERN]  # what server/discover advertises


def client() -> httpx.AsyncClient:
    notes = Tool("notes", description="Notes")

    @notes.action(readonly=True)
    async def read(id: str) -> dict:
        """Read a note"""
        return {"id": id}

    served = MCPFusion("notes", tools=[notes]).build_app()
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url="http://127.0.0.1")


def request(method: str = "tools/list", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def post(body: dict[str, Any], **headers: str) -> httpx.Response:
    async with client() as http:
        return await http.post("/mcp", json=body, headers={**HEADERS, **headers})


# -- 1. every problem at once, the code of the first ---------------------------------------------------------


async def test_a_broken_envelope_without_mcp_method_names_both_problems_with_the_envelopes_code():
    refused = await post(request(_meta={"io.modelcontextprotocol/protocolVersion": MODERN}))
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == -32602  # the ladder's first rung: the envelope
    assert error["message"].startswith("params._meta is missing the required envelope key(s): "
                                       "io.modelcontextprotocol/clientCapabilities")
    assert "the Mcp-Method header is missing: send Mcp-Method: tools/list" in error["message"]


async def test_a_missing_mcp_method_alone_is_a_header_mismatch():
    refused = await post(request(_meta=META))
    assert refused.status_code == 400 and refused.json()["error"] == {
        "code": -32020, "message": "The Mcp-Method header is missing: send Mcp-Method: tools/list with this request"}


async def test_following_the_answer_fixes_the_request_in_one_retry():
    """Every header the answer asks for, sent with the envelope it asks for, is served: nothing was left out."""
    body = request("tools/call", name="notes", arguments={"action": "read", "id": "n1"},
                   _meta={"io.modelcontextprotocol/protocolVersion": MODERN})  # (no capabilities)
    async with client() as http:
        first = await http.post("/mcp", json=body, headers={"accept": "application/json"})
        message = first.json()["error"]["message"]
        assert first.json()["error"]["code"] == -32602
        for named in ("params._meta is missing", "send MCP-Protocol-Version: 2026-07-28",
                      "send Mcp-Method: tools/call", "send Mcp-Name: notes"):
            assert named in message, message
        retry = await http.post("/mcp", json={**body, "params": {**body["params"], "_meta": META}}, headers={
            **HEADERS, "mcp-method": "tools/call", "mcp-name": "notes"})
    assert retry.status_code == 200 and "n1" in retry.json()["result"]["content"][0]["text"], retry.text


async def test_a_header_mismatch_and_an_unsupported_envelope_version_are_both_named():
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    refused = await post(request(_meta=meta), **{"mcp-method": "tools/list"})
    error = refused.json()["error"]
    assert error["code"] == -32020 and "data" not in error
    assert "does not match the request envelope's protocol version" in error["message"]
    assert ("unsupported protocol version 2099-01-01 in the envelope (params._meta): this server serves "
            "2025-06-18, 2025-11-25, 2026-07-28") in error["message"]


async def test_a_lone_unsupported_version_is_the_structured_answer_naming_the_version_and_where():
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    refused = await post(request(_meta=meta), **{"mcp-method": "tools/list", "mcp-protocol-version": "2099-01-01"})
    error = refused.json()["error"]
    assert error == {"code": -32022, "message": "Unsupported protocol version 2099-01-01 in the envelope "
                     "(params._meta): this server serves 2025-06-18, 2025-11-25, 2026-07-28",
                     "data": {"supported": SERVED, "requested": "2099-01-01"}}


# -- 2. notifications are checked like requests ---------------------------------------------------------------


def notification(**params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, **params}}


NOTIFIED = {"mcp-method": "notifications/cancelled"}


@pytest.mark.parametrize(("params", "headers", "code", "text"), [
    ({"_meta": "x"}, NOTIFIED, -32602, "params._meta must be an object"),
    ({"_meta": {**META, "io.modelcontextprotocol/protocolVersion": True}}, NOTIFIED, -32020,
     "mcp-protocol-version header does not match"),
    ({"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}}, NOTIFIED, -32020,
     "mcp-protocol-version header does not match"),
    ({"_meta": META}, {"mcp-method": "tools/call"}, -32020, "mcp-method header does not match"),
    ({"_meta": META}, {}, -32020, "The Mcp-Method header is missing: send Mcp-Method: notifications/cancelled"),
    ({"_meta": META}, {**NOTIFIED, "mcp-protocol-version": "2099-01-01"}, -32020,
     "mcp-protocol-version header does not match"),
])
async def test_a_notification_failing_a_check_is_a_400_with_a_null_id(params, headers, code, text):
    refused = await post(notification(**params), **headers)
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert body["id"] is None and body["error"]["code"] == code and text in body["error"]["message"]


async def test_a_notification_with_a_broken_meta_and_no_mcp_method_is_told_both():
    refused = await post(notification(_meta=[1]))
    error = refused.json()["error"]
    assert error["code"] == -32602
    assert error["message"] == ("params._meta must be an object; the Mcp-Method header is missing: send Mcp-Method: "
                                "notifications/cancelled with this request")


async def test_a_notification_at_an_unsupported_version_is_told_the_supported_ones():
    refused = await post(notification(), **{**NOTIFIED, "mcp-protocol-version": "2099-01-01"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32022 and refused.json()["error"]["data"]["supported"] == SERVED


@pytest.mark.parametrize("params", [{"_meta": META}, {}, {"_meta": {}},
                                    {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}])
async def test_a_valid_notification_is_accepted(params):
    """A notification's `_meta` is optional and needs no envelope keys (the revision's NotificationMetaObject)."""
    accepted = await post(notification(**params), **NOTIFIED)
    assert accepted.status_code == 202 and accepted.content == b""


# -- 3. half request, half response ---------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [{"result": {}}, {"error": {"code": 1, "message": "x"}}])
async def test_the_session_wire_refuses_a_request_carrying_a_result_or_an_error(extra):
    init = request("initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={"name": "t", "version": "1"})
    async with client() as http:
        started = await http.post("/mcp", json=init, headers={"accept": "application/json"})
        headers = {"accept": "application/json", "mcp-protocol-version": "2025-11-25",
                   "mcp-session-id": started.headers["mcp-session-id"]}
        refused = await http.post("/mcp", json={**request("tools/list"), "id": 7, **extra}, headers=headers)
        noted = await http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized", **extra},
                                headers=headers)
        served = await http.post("/mcp", json={**request("tools/list"), "id": 8}, headers=headers)
    assert refused.status_code == noted.status_code == 400
    assert refused.json()["id"] == 7 and refused.json()["error"]["code"] == -32600
    assert "'result' or 'error'" in refused.json()["error"]["message"]
    assert noted.json()["id"] is None and noted.json()["error"]["code"] == -32600
    assert served.status_code == 200 and "tools" in served.json()["result"]  # the session is fine


@pytest.mark.parametrize("extra", [{"result": {}}, {"error": {"code": 1, "message": "x"}}])
async def test_the_2026_wire_refuses_a_request_carrying_a_result_or_an_error(extra):
    refused = await post({**request(_meta=META), **extra}, **{"mcp-method": "tools/list"})
    noted = await post({**notification(_meta=META), **extra}, **NOTIFIED)
    assert refused.status_code == noted.status_code == 400
    assert (refused.json()["id"], noted.json()["id"]) == (1, None)
    assert refused.json()["error"]["code"] == noted.json()["error"]["code"] == -32600


@pytest.mark.parametrize("version", [20260728, None, ["2026-07-28"], {"v": 1}])
async def test_an_envelope_version_that_is_not_text_is_invalid_params_not_a_header_mismatch(version):
    refused = await post(request(_meta={**META, "io.modelcontextprotocol/protocolVersion": version}))
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == -32602, error
    assert error["message"] == ('Invalid params: params._meta["io.modelcontextprotocol/protocolVersion"] must be a '
                                'string (e.g. "2026-07-28")')
