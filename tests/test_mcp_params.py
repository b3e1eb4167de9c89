"""Request params: the remembered verdicts of `tools/call` never accept what the SDK's own check refuses.

Every case is judged three ways: by the SDK (`mcp_types.methods.validate_client_request`), by `check_params`
with nothing remembered, and by `check_params` after the same params with other (valid) arguments passed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types.methods import validate_client_request
from pydantic import ValidationError

from mcpfusion.mcp import params as params_module
from mcpfusion.mcp.jsonrpc import INVALID_PARAMS, McpError
from mcpfusion.mcp.params import check_params

MODERN, LEGACY = "2026-07-28", "2025-11-25"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _params(version: str, **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "billing_get_invoice", "arguments": {"id": "inv_1"}}
    if version == MODERN:
        base["_meta"] = dict(ENVELOPE)
    for key, value in changes.items():
        if value is _DROP:
            base.pop(key, None)
        else:
            base[key] = value
    return json.loads(json.dumps(base, allow_nan=True))  # what a transport hands over: parsed JSON


_DROP = object()
NAN = float("nan")

# (label, changes): the same name and envelope with other arguments, and variants of every other param.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("other arguments", {"arguments": {"id": "inv_2", "deep": {"x": [1, 2, {"y": None}]}}}),
    ("empty arguments", {"arguments": {}}),
    ("null arguments", {"arguments": None}),
    ("no arguments", {"arguments": _DROP}),
    ("arguments as a list", {"arguments": [1, 2]}),
    ("arguments as a string", {"arguments": "id=inv_1"}),
    ("arguments as a number", {"arguments": 3}),
    ("name as a number", {"name": 5}),
    ("no name", {"name": _DROP}),
    ("another tool", {"name": "billing_list_invoices"}),
    ("request state null", {"requestState": None}),
    ("request state NaN", {"requestState": NAN}),
    ("request state a number", {"requestState": 1}),
    ("request state a string", {"requestState": "abc.def"}),
    ("input responses a list", {"inputResponses": []}),
    ("task a string", {"task": "t"}),
    ("an unknown param", {"extra": {"a": 1}}),
]
META_CASES: list[tuple[str, dict[str, Any]]] = [
    ("capabilities a list", {"io.modelcontextprotocol/clientCapabilities": []}),
    ("client info without a name", {"io.modelcontextprotocol/clientInfo": {"version": "1"}}),
    ("client info null", {"io.modelcontextprotocol/clientInfo": None}),
    ("progress token", {"progressToken": "p-1"}),
    ("progress token an object", {"progressToken": {"a": 1}}),
    ("log level unknown", {"io.modelcontextprotocol/logLevel": "loud"}),
    ("protocol version a number", {"io.modelcontextprotocol/protocolVersion": 2026}),
]


def _sdk_accepts(version: str, params: dict[str, Any]) -> bool:
    try:
        validate_client_request("tools/call", version, params)
    except ValidationError:
        return False
    return True


def _ours_accepts(version: str, params: dict[str, Any]) -> bool:
    try:
        check_params("tools/call", version, params)
    except McpError as exc:
        assert exc.code == INVALID_PARAMS
        return False
    return True


def _all_cases() -> list[tuple[str, str, dict[str, Any]]]:
    cases = [(version, label, _params(version, **changes)) for version in (MODERN, LEGACY) for label, changes in CASES]
    for label, changes in META_CASES:
        cases.append((MODERN, label, _params(MODERN, _meta={**ENVELOPE, **changes})))
        cases.append((LEGACY, label, _params(LEGACY, _meta=changes)))
    return cases


@pytest.mark.parametrize("version,label,params", _all_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_remembered_verdicts_agree_with_the_sdk(version: str, label: str, params: dict[str, Any]) -> None:
    params_module._ACCEPTED.clear()
    fresh = _ours_accepts(version, params)
    # Remember the usual request and every valid neighbour (same params, other arguments), then ask again.
    assert _ours_accepts(version, _params(version))
    for neighbour in ({"id": "inv_9"}, {}, None):
        primed = {**params, "arguments": neighbour}
        if _sdk_accepts(version, primed):
            assert _ours_accepts(version, primed)
    assert (fresh, _ours_accepts(version, params)) == (_sdk_accepts(version, params),) * 2, label


def test_a_refused_request_is_never_remembered() -> None:
    params_module._ACCEPTED.clear()
    bad = _params(MODERN, requestState=NAN)
    for _ in range(2):
        with pytest.raises(McpError, match="requestState"):
            check_params("tools/call", MODERN, bad)
    check_params("tools/call", MODERN, _params(MODERN, requestState=None))
    with pytest.raises(McpError, match="requestState"):  # NaN is not the remembered null
        check_params("tools/call", MODERN, bad)


def test_only_tools_call_verdicts_are_remembered_and_the_set_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    params_module._ACCEPTED.clear()
    check_params("resources/read", MODERN, {"uri": "x://1", "_meta": ENVELOPE})
    check_params("prompts/get", LEGACY, {"name": "p", "arguments": {"a": "b"}})
    assert not params_module._ACCEPTED
    monkeypatch.setattr(params_module, "ACCEPTED_SIZE", 3)
    for n in range(5):
        check_params("tools/call", LEGACY, {"name": f"tool_{n}", "arguments": {}})
        assert 1 <= len(params_module._ACCEPTED) <= 3
    huge = {"name": "t" * (params_module.MAX_KEY_BYTES + 1), "arguments": {}}
    before = dict(params_module._ACCEPTED)
    check_params("tools/call", LEGACY, huge)
    assert before == params_module._ACCEPTED


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("token", [True, False, None, 1.5, [1]])
def test_a_progress_token_is_a_string_or_an_integer(version: str, token: Any) -> None:
    """The typed models read a boolean as an integer: true would be echoed back in notifications/progress."""
    params = _params(version)
    params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
    with pytest.raises(McpError) as refused:
        check_params("tools/call", version, params)
    assert refused.value.code == INVALID_PARAMS and "progressToken must be a string or an integer" in str(refused.value)
    for fine in ("p-1", 7):
        params["_meta"]["progressToken"] = fine
        check_params("tools/call", version, params)
