"""Malformed Host and Origin headers are refused like foreign ones (421/403), never a 500."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp.security import HostOriginGuard

BAD_ORIGINS = ["http://[::1", "http://[evil]", "http://a]b", "http://[::1]x"]


def app():
    tool = Tool("t")

    @tool.action(readonly=True)
    async def ping() -> str:
        """Ping."""
        return "pong"

    return MCPFusion("t", tools=[tool]).build_app()


@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_an_origin_that_is_no_url_is_a_403_on_every_method_and_on_rest(origin: str) -> None:
    client = TestClient(app(), base_url="http://127.0.0.1", raise_server_exceptions=False)
    headers = {"Origin": origin, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    for method in ("POST", "GET", "DELETE"):
        answer = client.request(method, "/mcp", headers=headers, content=b"{}" if method == "POST" else None)
        assert answer.status_code == 403, (method, answer.status_code, answer.text)
        assert "Invalid Origin header" in answer.text
    rest = client.post("/api/t/ping", headers={"Origin": origin}, json={})
    assert rest.status_code == 403, rest.text


@pytest.mark.parametrize("host", ["[::1]]", "127.0.0.1:80]", "localhost:８０", "[::1]x", "localhost:80:80"])
def test_a_host_that_is_no_name_and_port_is_not_the_loopback(host: str) -> None:
    assert HostOriginGuard(None, None).refusal(host, None) == (421, HostOriginGuard(None, None).check(host, None))
    assert HostOriginGuard(["localhost", "127.0.0.1", "[::1]"], None).check(host, None) is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8000", "localhost:", "[::1]:80", "[::1]"])
def test_loopback_hosts_with_or_without_a_port_pass(host: str) -> None:
    assert HostOriginGuard(None, None).check(host, None) is None
