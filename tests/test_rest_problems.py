"""Every REST error of the reference service is RFC 9457 problem details, and matches what its OpenAPI
operation documents for that status (schema and media type)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.service_kit import asgi_client, auth, build


def _resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return spec["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def check_against_openapi(spec: dict[str, Any], method: str, path: str, response: Any) -> dict[str, Any]:
    """The documented response for this status (or `default`): media type, schema and headers hold."""
    operation = spec["paths"][path][method]
    documented = operation["responses"].get(str(response.status_code)) or operation["responses"]["default"]
    media_type = response.headers["content-type"]
    assert media_type == "application/problem+json", response.text
    schema = _resolve(spec, documented["content"][media_type]["schema"])
    body = response.json()
    jsonschema.validate(body, schema)
    for header in [h for h, d in documented.get("headers", {}).items() if d.get("required")]:  # (always sent)
        assert header.lower() in response.headers, (header, response.headers)
    return body


CASES = [
    # (description, method, path, json body or raw bytes, token, status, code)
    ("no token", "post", "/api/billing/list_invoices", {}, None, 401, "UNAUTHORIZED"),
    ("unknown token", "post", "/api/billing/get_invoice", {"id": "inv_0001"}, "nope", 401, "UNAUTHORIZED"),
    ("other tenant's invoice", "post", "/api/billing/get_invoice", {"id": "inv_0001"}, "demo-globex-admin", 404,
     "NOT_FOUND"),
    ("missing field", "post", "/api/billing/create_invoice", {"customer_id": "cus_0001"}, "demo-admin", 422,
     "VALIDATION_ERROR"),
    ("guarded field", "post", "/api/billing/create_invoice",
     {"customer_id": "cus_0001", "due_date": "2030-01-01", "lines": [], "total_cents": 5}, "demo-admin", 422,
     "VALIDATION_ERROR"),
    ("not an object", "post", "/api/customers/get", b"[1]", "demo-admin", 422, "VALIDATION_ERROR"),
    ("not JSON", "post", "/api/customers/get", b"{", "demo-admin", 422, "VALIDATION_ERROR"),
    ("wrong state", "post", "/api/billing/remind", {"id": "inv_0003"}, "demo-admin", 409, "CONFLICT"),
    ("unknown action", "post", "/api/billing/refund", {}, "demo-admin", 404, "UNKNOWN_ACTION"),
    ("unknown tool", "post", "/api/payroll/run", {}, "demo-admin", 404, "UNKNOWN_TOOL"),
]


@pytest.mark.parametrize(("name", "method", "path", "body", "token", "status", "code"), CASES,
                         ids=[c[0] for c in CASES])
async def test_reference_service_errors_are_documented_problems(tmp_path, name, method, path, body, token, status,
                                                                 code):
    app = build(tmp_path)
    async with asgi_client(app) as client:
        spec = (await client.get("/openapi.json")).json()
        kwargs: dict[str, Any] = {"content": body} if isinstance(body, bytes) else {"json": body}
        response = await client.request(method.upper(), path, headers=auth(token), **kwargs)
        assert response.status_code == status, response.text
        documented_path = path if path in spec["paths"] else "/api/billing/list_invoices"
        problem = check_against_openapi(spec, method, documented_path, response)
    assert problem["code"] == code and problem["status"] == status and problem["instance"] == path
    assert problem["recovery"]  # every one says how to fix the call
    if status == 401:
        assert response.headers["www-authenticate"].startswith("Bearer")
    if code == "VALIDATION_ERROR":
        assert problem["errors"] and all(e["field"] and e["detail"] for e in problem["errors"])


async def test_missing_credential_is_a_documented_503(tmp_path, monkeypatch):
    monkeypatch.delenv("PAYMENT_API_KEY", raising=False)
    app = build(tmp_path, credentials={})
    async with asgi_client(app) as client:
        spec = (await client.get("/openapi.json")).json()
        r = await client.post("/api/billing/record_payment", json={"id": "inv_0001", "amount_cents": 100},
                              headers=auth("demo-admin"))
        assert r.status_code == 503
        problem = check_against_openapi(spec, "post", "/api/billing/record_payment", r)
    assert problem["code"] == "MISSING_CREDENTIAL" and "PAYMENT_API_KEY" in problem["detail"] + problem["recovery"]


def test_a_handlers_own_validation_error_keeps_its_recovery_on_rest():
    """REST's "fix the fields listed in errors" is for pydantic's fields; a handler's own VALIDATION_ERROR keeps
    the recovery it wrote (its `errors` name the arguments as a whole: no field was named)."""
    from fastapi.testclient import TestClient

    from mcpfusion import MCPFusion, Tool, ToolError

    orders = Tool("orders", description="Orders")

    @orders.action()
    async def make(total: int) -> dict:
        """Make an order."""
        if total <= 0:
            raise ToolError("VALIDATION_ERROR", "The lines total 0.", recovery="Add a priced line and send it again.")
        return {}

    client = TestClient(MCPFusion("p", tools=[orders]).build_app())
    own = client.post("/api/orders/make", json={"total": 0}).json()
    assert (own["status"], own["recovery"]) == (422, "Add a priced line and send it again.")
    assert own["errors"] == [{"field": "(arguments)", "detail": "The lines total 0."}]
    listed = client.post("/api/orders/make", json={"total": "x"}).json()
    assert listed["recovery"] == "Fix the fields listed in errors and send the request again." and listed["errors"]
