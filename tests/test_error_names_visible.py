"""Errors quote a name the caller sent (an argument key, an action, a tool, where a value failed) with its
control, bidi and format characters escaped, as the tools page and `inspect` show descriptions: U+202E in an
unknown key would show the rest of the error reversed, a zero-width space would hide which key was wrong.
The same text on MCP, on REST (problem+json) and in the tester; letters of every script are kept."""

from __future__ import annotations

import json
import sys
import unicodedata
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from mcpfusion import Tool
from mcpfusion.app import MCPFusion
from mcpfusion.docs import page
from mcpfusion.testing import ToolTester
from mcpfusion.visible import visible, visible_name

# An override, a zero-width space, a C1 control (NEL), a line separator, a tab and a tag character, between
# letters an error must keep as they are.
SENT = "a\u202eb\u200bc\x85d\u2028e\tf\U000e0041é中"
SHOWN = "a\\u202eb\\u200bc\\u0085d\\u2028e\\u0009f\\U000e0041é中"

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


class Line(BaseModel):
    description: str


def shop() -> Tool:
    tool = Tool("shop", description="Shop")

    @tool.action(destructive=False)
    async def order(lines: list[Line]) -> dict:
        """Order lines"""
        return {"lines": len(lines)}

    @tool.action(destructive=False)
    async def tag(labels: dict[str, int]) -> dict:
        """Tag"""
        return labels

    return tool


# (what is sent, what the error says of it: the field named and its message, or the message alone)
CASES = {
    "top-level key": ("shop", "order", {"lines": [], SENT: 1},
                      (SHOWN, "Unknown field. This action accepts: lines.")),
    "nested key": ("shop", "order", {"lines": [{"description": "x", SENT: 1}]},
                   (f"lines[0].{SHOWN}", "Unknown field: lines[0] takes description. Remove it.")),
    "validation location": ("shop", "tag", {"labels": {SENT: "x"}},
                            (f"labels.{SHOWN}", "Input should be a valid integer, unable to parse string as an "
                                                'integer. You sent: "x".')),
    # (an action is quoted as the JSON string sent, whose tab JSON writes `\t`)
    "unknown action": ("shop", SENT, {}, f'Tool "shop" has no action "{SHOWN.replace("u0009", "t")}".'),
    "unknown tool": (SENT, "order", {}, f'Tool "{SHOWN}" does not exist.'),
}


def test_visible_name_escapes_every_control_format_and_separator_character_and_keeps_letters():
    escaped = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    for c in range(sys.maxunicode + 1):
        char = chr(c)
        if unicodedata.category(char) in escaped:
            assert visible_name(char) == (f"\\u{c:04x}" if c <= 0xFFFF else f"\\U{c:08x}"), hex(c)
    assert visible_name(SENT) == SHOWN and visible_name("é中 a\u00a0b") == "é中 a\u00a0b"
    # Descriptions keep their lines and (emoji) joiners, as before: the page's helper is the shared one.
    assert page.visible is visible and visible("a\u202e\tb\n\u200d") == "a\\u202e\tb\n\u200d"


async def test_the_tester_quotes_names_escaped():
    tester = ToolTester(MCPFusion("shop", tools=[shop()]).registry)
    for label, (tool, action, arguments, said) in CASES.items():
        result = await tester.call(tool, action, arguments)
        assert result.is_error, label
        if isinstance(said, tuple):
            assert f'<field name="{said[0]}">{said[1]}</field>' in result.text, (label, result.text)
        else:
            assert f"<message>{said}</message>" in result.text, (label, result.text)
        assert "\u202e" not in result.text and "é中" in result.text, label


async def test_rest_problems_quote_names_escaped():
    app = MCPFusion("shop", tools=[shop()]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        for label, (tool, action, arguments, said) in CASES.items():
            found = (await http.post(f"/api/{quote(tool)}/{quote(action)}", json=arguments)).json()
            if isinstance(said, tuple):
                assert found["errors"] == [{"field": said[0], "detail": said[1]}], label
            else:
                assert found["detail"] == said, label
                # `instance` is a URI reference: the path as a URI writes those characters (Starlette's
                # `request.url` has dropped the tab, as `urlsplit` does).
                assert found["instance"] == f"/api/{tool}/{action}".replace(
                    SENT, "a%E2%80%AEb%E2%80%8Bc%C2%85d%E2%80%A8ef%F3%A0%81%81é中"), label
            assert "\u202e" not in str(found), label


async def test_mcp_quotes_names_escaped_on_both_wires():
    app = MCPFusion("shop", tools=[shop()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        sid = (await http.post("/mcp", json=init)).headers["mcp-session-id"]
        session = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        for label, (tool, action, arguments, said) in CASES.items():
            params = {"name": tool, "arguments": {"action": action, **arguments}}
            replies = [(await http.post("/mcp", headers=session, json={
                "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})).json()]
            if tool.isascii():  # (the 2026 wire names the tool in a header too)
                replies.append((await http.post("/mcp", json={
                    "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**params, "_meta": META}},
                    headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                             "mcp-name": tool})).json())
            for reply in replies:
                if label == "unknown tool":  # a protocol error, naming the tool as sent
                    assert reply["error"]["message"] == f"Unknown tool: {SHOWN}. Available tools: shop.", reply
                    assert reply["error"]["data"]["name"] == SHOWN
                    continue
                text = reply["result"]["content"][0]["text"]
                if isinstance(said, tuple):
                    assert f'<field name="{said[0]}">{said[1]}</field>' in text, (label, text)
                else:
                    assert f"<message>{said}</message>" in text, (label, text)
                assert "\u202e" not in text, label


# -- what else an error quotes of the caller's: a method, a resource URI, an id, a header ------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
# `SENT` as a URI writes it (`data.uri`): the escaped characters percent-encoded, letters kept.
SENT_IN_URI = "a%E2%80%AEb%E2%80%8Bc%C2%85d%E2%80%A8e%09f%F3%A0%81%81é中"
ESC = "x\x1b[31m\x00"  # an id or a method that would colour a terminal red
ESC_SHOWN = "x\\u001b[31m\\u0000"


async def _session(http: httpx.AsyncClient) -> dict[str, str]:
    sid = (await http.post("/mcp", json=INIT)).headers["mcp-session-id"]
    return {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}


async def test_an_unknown_method_is_quoted_escaped_over_http():
    app = MCPFusion("shop", tools=[shop()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        session = await _session(http)
        old = (await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "id": 2, "method": SENT})).json()
        assert old["error"]["message"] == f"Method not found: {SHOWN}", old
        # (the 2026 wire refuses a method no Mcp-Method header can match before it looks the method up)


async def test_stdio_quotes_an_unknown_method_escaped_before_and_after_initialize():
    from mcpfusion.mcp.stdio import StdioBridge
    from tests.stdio_lines import Lines

    lines = Lines()
    bridge = StdioBridge(MCPFusion("shop", tools=[shop()]).build_app(), lines.write, headers={})
    await bridge.startup()
    try:
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": SENT}))
        (before,) = lines.with_id(1)
        assert before["error"]["message"] == (f"Invalid request: send initialize first ({SHOWN} needs the session "
                                              "it starts)"), before
        await bridge.handle_line(json.dumps({**INIT, "id": 2}))
        await lines.wait_for(lambda m: m.get("id") == 2)
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await bridge.handle_line(json.dumps({"jsonrpc": "2.0", "id": 3, "method": SENT}))
        after = await lines.wait_for(lambda m: m.get("id") == 3)
        assert after["error"]["message"] == f"Method not found: {SHOWN}", after
    finally:
        await bridge.close()


async def test_an_unknown_resource_uri_is_quoted_escaped_on_read_and_subscribe():
    app = MCPFusion("shop", tools=[shop()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        session = await _session(http)
        for method, says in (("resources/read", f"Resource not found: {SHOWN}"),
                             ("resources/subscribe", f"Resource not found: {SHOWN}: subscribe to a listed resource "
                                                     "or one of its templates")):
            reply = (await http.post("/mcp", headers=session, json={
                "jsonrpc": "2.0", "id": 2, "method": method, "params": {"uri": SENT}})).json()
            assert reply["error"]["message"] == says, (method, reply)
            assert reply["error"]["data"]["uri"] == SENT_IN_URI, (method, reply)
        plain = (await http.post("/mcp", headers=session, json={
            "jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "note://é中"}})).json()
        assert plain["error"]["message"] == "Resource not found: note://é中"
        assert plain["error"]["data"]["uri"] == "note://é中"


async def test_an_unsupported_protocol_version_header_is_quoted_escaped():
    app = MCPFusion("shop", tools=[shop()], json_response=True).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        session = await _session(http)
        sent = "2025-11-25\u202eevil\x01é中".encode()  # as a client sends it: UTF-8 bytes
        for verb in ("post", "get"):
            headers = {**session, "mcp-protocol-version": sent}
            kwargs = {"json": {"jsonrpc": "2.0", "id": 2, "method": "ping"}} if verb == "post" else {}
            reply = await http.request(verb.upper(), "/mcp", headers=headers, **kwargs)
            assert reply.status_code == 400, (verb, reply.text)
            message = reply.json()["error"]["message"]
            assert message == "Unsupported MCP-Protocol-Version: 2025-11-25\\u202eevil\\u0001é中", (verb, message)
        latin = await http.post("/mcp", headers={**session, "mcp-protocol-version": b"v\xff\x85x"},
                                json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
        assert latin.json()["error"]["message"] == "Unsupported MCP-Protocol-Version: v\\xff\\x85x", latin.text


BAD_ID = "inv_\u202e9\x1b[31m\u200b"
BAD_ID_SHOWN = "inv_\\u202e9\\u001b[31m\\u200b"


async def test_the_service_quotes_an_unknown_invoice_or_customer_id_escaped(service_app):
    from tests.service_kit import asgi_client, in_process, mcp, rest

    admin = {"authorization": "Bearer demo-admin"}
    tester = in_process(service_app)
    for tool, action, args, kind in (("billing", "get_invoice", {"id": BAD_ID}, "Invoice"),
                                     ("customers", "get", {"id": BAD_ID}, "Customer")):
        said = f'{kind} "{BAD_ID_SHOWN}" was not found.'
        result = await tester.call(tool, action, args, headers=admin)
        assert result.error_code == "NOT_FOUND" and f"<message>{said}</message>" in result.text, result.text
        async with asgi_client(service_app) as http:
            problem = await rest(http, tool, action, args, token="demo-admin")
            assert problem.status_code == 404 and problem.json()["detail"] == said, problem.text
            text = (await mcp(http, tool, action, args, token="demo-admin")).json()["result"]["content"][0]["text"]
            assert f"<message>{said}</message>" in text, text
            read = (await http.post("/mcp", json={
                "jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": f"invoice://{BAD_ID}",
                                                                                   "_meta": META}},
                headers={"mcp-protocol-version": "2026-07-28", "mcp-method": "resources/read",
                         "mcp-name": "invoice://x", **admin})).json()
            assert "\u202e" not in str(read) and "\x1b" not in str(read), read
    # Letters are kept as sent.
    kept = await tester.call("billing", "get_invoice", {"id": "inv_é中"}, headers=admin)
    assert '<message>Invoice "inv_é中" was not found.</message>' in kept.text
