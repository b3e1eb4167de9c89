"""The 2026-07-28 header ladder: remembered verdicts never differ from the SDK's own ladder.

Every case is judged by `mcp.shared.inbound.classify_inbound_request` and by the wire's `_classify`, once with
nothing remembered and once after the usual request (same envelope and headers, other arguments) passed.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from mcp.shared.inbound import InboundLadderRejection, classify_inbound_request

from mcpfusion.mcp import modern
from mcpfusion.mcp.params import envelope_key

MODERN = "2026-07-28"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1.0.0"},
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
}
HEADERS = {"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "billing_get_invoice"}
_DROP = object()


def _message(meta: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "billing_get_invoice", "arguments": {"id": "inv_1"},
                            "_meta": copy.deepcopy(ENVELOPE)}
    body["_meta"].update(meta or {})
    for key, value in params.items():
        if value is _DROP:
            body.pop(key, None)
        else:
            body[key] = value
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": body}


CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    ("the usual request", _message(), HEADERS),
    ("other arguments", _message(arguments={"id": "inv_2", "deep": [1, {"x": None}]}), HEADERS),
    ("no arguments", _message(arguments=_DROP), HEADERS),
    ("version header differs", _message(), {**HEADERS, "mcp-protocol-version": "2025-11-25"}),
    ("no version header", _message(), {k: v for k, v in HEADERS.items() if k != "mcp-protocol-version"}),
    ("method header differs", _message(), {**HEADERS, "mcp-method": "tools/list"}),
    ("name header differs", _message(), {**HEADERS, "mcp-name": "billing_void_invoice"}),
    ("body names another tool", _message(name="billing_void_invoice"), HEADERS),
    ("unsupported version in both", _message({"io.modelcontextprotocol/protocolVersion": "2099-01-01"}),
     {**HEADERS, "mcp-protocol-version": "2099-01-01"}),
    ("capabilities missing", _message({"io.modelcontextprotocol/clientCapabilities": _DROP}), HEADERS),
    ("other client info", _message({"io.modelcontextprotocol/clientInfo": {"name": "other", "version": "2"}}),
     HEADERS),
    ("no client info", _message({"io.modelcontextprotocol/clientInfo": _DROP}), HEADERS),
    ("_meta not an object", _message(_meta=[1, 2]), HEADERS),
    ("no _meta", _message(_meta=_DROP), HEADERS),
]


def _drop_marked(message: dict[str, Any]) -> dict[str, Any]:
    meta = message["params"].get("_meta")
    if isinstance(meta, dict):
        message["params"]["_meta"] = {k: v for k, v in meta.items() if v is not _DROP}
    return message


def _sdk(message: dict[str, Any], headers: dict[str, str]) -> Any:
    verdict = classify_inbound_request(message, headers=headers)
    if isinstance(verdict, InboundLadderRejection):
        return ("refused", verdict.code, verdict.message, verdict.data)
    return (verdict.protocol_version, verdict.client_info, verdict.client_capabilities)


def _ours(message: dict[str, Any], headers: dict[str, str]) -> Any:
    params = message.get("params")
    verdict = modern._classify(message, headers, envelope_key(params) if isinstance(params, dict) else None)
    if isinstance(verdict, tuple):
        return verdict
    return ("refused", verdict.code, verdict.message, verdict.data)


@pytest.mark.parametrize("label,message,headers", CASES, ids=[c[0] for c in CASES])
def test_remembered_ladder_verdicts_agree_with_the_sdk(label: str, message: dict[str, Any],
                                                       headers: dict[str, str]) -> None:
    message = _drop_marked(copy.deepcopy(message))
    modern._PASSED.clear()
    expected = _sdk(message, headers)
    assert _ours(message, headers) == expected, label
    for _ in range(2):  # the usual request passes (and is remembered), then the case is asked again
        assert _ours(_message(), HEADERS)[0] == MODERN
        assert _ours(message, headers) == expected, label


def test_remembered_values_come_from_the_request_itself() -> None:
    modern._PASSED.clear()
    first, second = _message(), _message()
    assert _ours(first, HEADERS) == _sdk(first, HEADERS)
    assert modern._PASSED, "the passing envelope is remembered"
    verdict = _ours(second, HEADERS)
    assert verdict[1] is second["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]
    assert verdict[2] is second["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]


def test_refusals_are_never_remembered_and_the_set_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    modern._PASSED.clear()
    for _ in range(2):
        assert _ours(_message(), {**HEADERS, "mcp-name": "other"})[0] == "refused"
    assert not modern._PASSED
    monkeypatch.setattr(modern, "ACCEPTED_SIZE", 3)
    for n in range(6):
        message = _message(name=f"tool_{n}")
        assert _ours(message, {**HEADERS, "mcp-name": f"tool_{n}"})[0] == MODERN
        assert 1 <= len(modern._PASSED) <= 3


def test_envelope_keys_tell_nan_and_infinities_from_null_and_keep_big_integers():
    keys = [envelope_key({"_meta": {"x": value}, "arguments": {"a": 1}})
            for value in (None, float("nan"), float("inf"), float("-inf"), 2**70, 2**70 + 1, 1, 1.0)]
    assert None not in keys and len(set(keys)) == len(keys)
    # The arguments never matter; anything else does.
    assert envelope_key({"name": "a", "arguments": {"x": 1}}) == envelope_key({"name": "a", "arguments": {"y": 2}})
    assert envelope_key({"name": "a"}) != envelope_key({"name": "b"})
    assert envelope_key({"name": "a", "arguments": {1: 2}}) is None  # (no JSON object: nothing to remember by)
