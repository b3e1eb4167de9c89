"""REST problems of the second black-box probe (/tmp/probe2 items 3 to 6): every 422 VALIDATION_ERROR lists
`errors`, a stalled body's 408 is problem details on REST, a foreign Origin's 403 says what to do about the
Origin, and a POST list operation documents no `Link` header."""

from __future__ import annotations

import datetime as dt
import re
import socket

import pytest
import uvicorn
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool, ToolError, server
from mcpfusion.problem import REST_VALIDATION_RECOVERY
from tests.service_kit import asgi_client, auth, mcp, rest, serve

shop = Tool("shop", description="Shop")
DUE = ToolError("VALIDATION_ERROR", "due_date 9999-12-31 is too far away.", recovery="Send a due_date this year.",
                details={"field": "due_date"})
WHOLE = ToolError("VALIDATION_ERROR", "Send either a or b.")


@shop.action()
async def plan(due_date: str) -> dict:
    """Plan."""
    raise DUE


@shop.action()
async def pick(a: str = "", b: str = "") -> dict:
    """Pick."""
    raise WHOLE


@shop.action(readonly=True)
async def echo(text: str) -> str:
    """Echo."""
    return text


@shop.action(readonly=True, paginate=1)
async def rows() -> list[dict]:
    """Rows."""
    return [{"n": 1}, {"n": 2}]


def client() -> TestClient:
    return TestClient(MCPFusion("shop", tools=[shop]).build_app())


# -- 3. every 422 VALIDATION_ERROR carries `errors` ------------------------------------------------------------

def test_a_handlers_validation_error_naming_its_field_lists_it_in_errors():
    answer = client().post("/api/shop/plan", json={"due_date": "9999-12-31"})
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json"
    found = answer.json()
    assert found["errors"] == [{"field": "due_date", "detail": DUE.message}]
    assert found["details"] == {"field": "due_date"}  # kept for clients that read it
    assert found["recovery"] == DUE.recovery  # the handler's own words, not the generic one


def test_a_handlers_validation_error_naming_no_field_lists_the_arguments():
    found = client().post("/api/shop/pick", json={}).json()
    assert found["errors"] == [{"field": "(arguments)", "detail": WHOLE.message}]
    assert found["recovery"] == REST_VALIDATION_RECOVERY and "details" not in found


async def test_the_mcp_answer_of_a_handlers_validation_error_is_unchanged(tool_tester):
    result = await tool_tester([shop]).call("shop", "plan", {"due_date": "9999-12-31"})
    assert result.is_error and result.text == DUE.render()
    assert "errors" not in result.text


async def test_the_reference_services_domain_checks_list_their_field_on_rest_only(service_app):
    today = dt.date.today()
    line = {"description": "Audit", "quantity": 1, "unit_price_cents": 0}
    cases = [("create_invoice", {"customer_id": "cus_0001", "due_date": str(today + dt.timedelta(days=30)),
                                 "lines": [line]}, "lines"),
             ("create_invoice", {"customer_id": "cus_0001", "due_date": "9999-12-31",
                                 "lines": [{**line, "unit_price_cents": 100}]}, "due_date")]
    # (remind's NUL message is refused with the arguments now, before the handler: tests/test_service_remind_nul.py)
    async with asgi_client(service_app) as http:
        for action, args, field in cases:
            answer = await rest(http, "billing", action, args, "demo-admin")
            found = answer.json()
            assert answer.status_code == 422 and found["code"] == "VALIDATION_ERROR", answer.text
            assert found["errors"] == [{"field": field, "detail": found["detail"]}]
            assert found["details"] == {"field": field}
            on_mcp = (await mcp(http, "billing", action, args, "demo-admin")).json()["result"]
            text = on_mcp["content"][0]["text"]
            assert on_mcp["isError"] and re.search(r'<tool_error code="VALIDATION_ERROR"', text), text
            assert f'<detail key="field">{field}</detail>' in text and "<field " not in text


# -- 4. a stalled body's 408 ------------------------------------------------------------------------------------

def test_the_408_of_a_stalled_body_is_problem_details_under_api_only():
    import json

    def answer(path: str, root: str = "") -> tuple[bytes, bytes]:
        head, _, body = server.body_timeout_answer({"path": root + path, "root_path": root}).partition(b"\r\n\r\n")
        return head, body

    for path, root in (("/api/t/echo", ""), ("/api", ""), ("/api/t/echo", "/svc")):
        head, body = answer(path, root)
        assert head.startswith(b"HTTP/1.1 408 Request Timeout\r\n") and b"\r\nconnection: close" in head
        assert b"\r\ncontent-type: application/problem+json\r\n" in head
        assert f"content-length: {len(body)}".encode() in head
        found = json.loads(body)
        assert found["status"] == 408 and found["code"] == "REQUEST_TIMEOUT" and found["recovery"]
        assert found["instance"] == root + path
    for path in ("/mcp", "/apis", "/docs"):  # not REST's: as before
        assert answer(path) == (server._BODY_TIMEOUT.partition(b"\r\n\r\n")[0], server._BODY_TIMEOUT_TEXT)


class QuickTimeouts(server.HeaderTimeoutProtocol):
    header_timeout = 0.5


def test_a_rest_body_that_stops_arriving_is_answered_408_problem_json():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    app = MCPFusion("shop", tools=[shop]).build_app()
    original = uvicorn.Config.__init__

    def quick(self, *args, **kwargs):  # (serve() takes no protocol: the quick one, for this server only)
        original(self, *args, **{**kwargs, "http": QuickTimeouts})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(uvicorn.Config, "__init__", quick)
        with serve(app, sock) as base, socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1]))) as conn:
            conn.sendall(b"POST /api/shop/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 17\r\n\r\n{\"tex")
            conn.settimeout(20)
            reply = b""
            while chunk := conn.recv(4096):
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 408 Request Timeout"), reply
    assert b"content-type: application/problem+json" in reply and b'"code":"REQUEST_TIMEOUT"' in reply


# -- 5. a foreign Origin's 403 ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/shop/echo", "/api/nope"])
def test_a_foreign_origins_403_says_what_to_do_about_the_origin(path):
    answer = client().post(path, json={"text": "x"}, headers={"Origin": "http://evil.example"})
    assert answer.status_code == 403 and answer.headers["content-type"] == "application/problem+json"
    found = answer.json()
    assert found["code"] == "FORBIDDEN" and "Origin" in found["detail"]
    assert found["recovery"].startswith("Send no Origin header")
    assert "MCPFUSION_ALLOWED_ORIGINS" in found["recovery"] and "credentials" not in found["recovery"]


def test_a_forbidden_dependency_keeps_the_credentials_recovery():
    from fastapi import Depends, HTTPException

    def deny() -> None:
        raise HTTPException(403, "Not yours.")

    tool = Tool("guarded")

    @tool.action(readonly=True)
    async def read(_: None = Depends(deny)) -> dict:
        """Read."""
        return {}

    found = TestClient(MCPFusion("g", tools=[tool]).build_app()).post("/api/guarded/read", json={}).json()
    assert found["recovery"] == "Use credentials that are allowed to call this action."


# -- 6. OpenAPI: the headers each operation sends ---------------------------------------------------------------

def test_only_the_get_list_operation_documents_link():
    http = client()
    spec = http.get("/openapi.json").json()["paths"]["/api/shop/rows"]
    assert set(spec["get"]["responses"]["200"]["headers"]) == {"Next-Cursor", "Link"}
    assert set(spec["post"]["responses"]["200"]["headers"]) == {"Next-Cursor"}
    assert "408" in spec["post"]["responses"] and "408" in spec["get"]["responses"]


def test_the_reference_services_post_lists_document_no_link(service_app):
    spec = TestClient(service_app).get("/openapi.json").json()["paths"]
    for path in ("/api/billing/list_invoices", "/api/customers/list"):
        assert "Link" not in spec[path]["post"]["responses"]["200"]["headers"]
        assert "Link" in spec[path]["get"]["responses"]["200"]["headers"]


def test_a_post_list_answers_no_link(service_app):
    http = TestClient(service_app)
    posted = http.post("/api/billing/list_invoices", json={}, headers=auth("demo-admin"))
    got = http.get("/api/billing/list_invoices", headers=auth("demo-admin"))
    assert posted.headers["next-cursor"] and "link" not in posted.headers
    assert got.headers["link"].endswith('rel="next"')
