"""REST answers of the second black-box probe, round 2 (/tmp/probe2 items 6, 8, 9 and 10): 406 and 421 carry a
named code and a recovery, a scalar query parameter sent twice is named as repeated, a body that is not UTF-8
is called so, and the 405 of a probe or metadata route lists the HEAD it serves."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.authorization import WELL_KNOWN, ProtectedResource

shop = Tool("shop", description="Shop")


@shop.action(readonly=True)
async def echo(text: str, times: int = 1) -> str:
    """Echo."""
    return text * times


def client(**options) -> TestClient:
    return TestClient(MCPFusion("shop", tools=[shop], **options).build_app())


# -- 6. 406 and 421: named codes with a recovery ------------------------------------------------------------------

def test_a_406_names_its_code_and_says_what_to_send():
    found = client().get("/api/shop/echo?text=a", headers={"accept": "text/html"})
    assert found.status_code == 406 and found.headers["content-type"] == "application/problem+json"
    problem = found.json()
    assert problem["code"] == "NOT_ACCEPTABLE" and problem["type"] == "urn:mcpfusion:error:NOT_ACCEPTABLE"
    assert "Accept header" in problem["recovery"]


def test_a_421_names_its_code_and_says_what_to_send():
    found = client().get("/api/shop/echo?text=a", headers={"host": "evil.example"})
    assert found.status_code == 421
    problem = found.json()
    assert problem["code"] == "MISDIRECTED_REQUEST" and problem["type"] == "urn:mcpfusion:error:MISDIRECTED_REQUEST"
    assert "host name" in problem["recovery"]


# -- 8. a scalar query parameter sent twice --------------------------------------------------------------------

@pytest.mark.parametrize("query, field, times", [("text=a&text=b", "text", 2), ("text=a&times=1&times=2&times=3",
                                                                                  "times", 3)])
def test_a_scalar_query_parameter_sent_more_than_once_is_named_as_repeated(query, field, times):
    found = client().get(f"/api/shop/echo?{query}")
    assert found.status_code == 422
    assert found.json()["errors"] == [{"field": field, "detail": f"{field} was sent {times} times in the query; "
                                                                  "send it once."}]


def test_a_parameter_sent_once_is_still_read():
    assert client().get("/api/shop/echo?text=a&times=2").json() == "aa"


# -- 9. a body in another encoding than UTF-8 ---------------------------------------------------------------------

def test_a_latin1_body_is_called_not_utf8_rather_than_not_json():
    found = client().post("/api/shop/echo", content='{"text": "caf\u00e9"}'.encode("latin-1"),
                          headers={"content-type": "application/json"})
    assert found.status_code == 422
    (error,) = found.json()["errors"]
    assert error["field"] == "(body)"
    assert "the body is not UTF-8 (byte 0xe9 at offset 13)" in error["detail"] and "not valid JSON" not in error["detail"]


def test_a_utf8_body_that_is_no_json_is_still_called_not_json():
    found = client().post("/api/shop/echo", content='{"text": "caf\u00e9"'.encode(),
                          headers={"content-type": "application/json"})
    assert "the body is not valid JSON" in found.json()["errors"][0]["detail"]


def test_a_utf16_body_is_still_named_by_its_byte_order_mark():
    found = client().post("/api/shop/echo", content='{"text": "a"}'.encode("utf-16"),
                          headers={"content-type": "application/json"})
    assert "UTF-16" in found.json()["errors"][0]["detail"]


# -- 10. the 405 of a route serving GET and HEAD ----------------------------------------------------------------

@pytest.mark.parametrize("path", ["/healthz", "/readyz", WELL_KNOWN, f"{WELL_KNOWN}/mcp"])
def test_the_405_of_a_route_that_serves_head_lists_head_too(path):
    served = client(authorization=ProtectedResource(authenticate=lambda request: None))
    assert served.head(path).status_code == 200
    refused = served.post(path)
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
