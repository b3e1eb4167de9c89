"""The /mcp endpoint names a body that is not UTF-8 as REST and stdio do, and an unsupported protocol version
it quotes back in -32022's data is cut as its message quotes it: an answer never grows with the input."""

from __future__ import annotations

from tests.test_mcp_probe1_mends import MODERN_JSON, client, notes_fusion

META = '{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}'


async def test_a_body_that_is_not_utf8_is_named_on_mcp_and_rest():
    latin1 = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "inv_\xe9", "_meta": '
              + META + "}}").encode("latin-1")
    async with client(notes_fusion().build_app()) as http:
        mcp = await http.post("/mcp", content=latin1, headers=MODERN_JSON)
        rest = await http.post("/api/notes/read", content='{"id": "n\xe9"}'.encode("latin-1"),
                               headers={"content-type": "application/json"})
    assert mcp.status_code == 400 and mcp.json()["error"]["code"] == -32700
    assert "not UTF-8 (byte 0xe9 at offset" in mcp.json()["error"]["message"]
    assert rest.status_code == 422 and "not UTF-8 (byte 0xe9 at offset 9)" in rest.text


async def test_an_unsupported_version_is_quoted_cut_in_the_data_too():
    long = "9" * 60_000
    async with client(notes_fusion().build_app()) as http:
        refused = await http.post("/mcp", headers={**MODERN_JSON, "mcp-protocol-version": long},
                                  content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == -32022
    assert error["data"]["requested"] == "9" * 120 + "…" and len(refused.content) < 2_000
    assert "2026-07-28" in error["data"]["supported"]


def test_an_egress_limit_is_a_whole_number_above_zero():
    import math

    import pytest

    from mcpfusion import EgressLimit

    for given in ({"bytes": math.nan}, {"bytes": True}, {"tokens": 0}, {"bytes": 1.5}, {"tokens": math.inf},
                  {"bytes": "100"}):
        with pytest.raises(ValueError, match="must be a whole number of"):
            EgressLimit(**given)  # type: ignore[arg-type]
    assert EgressLimit(bytes=100, tokens=None).bytes == 100 and EgressLimit(tokens=50).tokens == 50
