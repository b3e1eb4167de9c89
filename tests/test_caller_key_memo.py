"""`ActionCall.caller_key` remembers a named principal's key by identity: the key it gives again is the one it
would work out, another principal (even an equal one) is keyed afresh, and a principal naming no subject is
keyed from its request every time (its key depends on the Authorization header and the client address)."""

from contextlib import nullcontext
from dataclasses import dataclass

from starlette.requests import Request

from mcpfusion import middleware
from mcpfusion.identity import AUTH_SCOPE_KEY
from mcpfusion.middleware import ActionCall, GuardState


@dataclass(frozen=True)
class Who:
    sub: str | None
    tenant: str | None
    iss: str = ""


def key(principal, authorization: str | None = None, client: str = "10.0.0.5") -> str:
    headers = [(b"authorization", authorization.encode())] if authorization else []
    request = Request({"type": "http", "headers": headers, "client": (client, 1), AUTH_SCOPE_KEY: principal})
    return ActionCall(None, {}, {}, request, "rest", GuardState(signing_key=b"k" * 32),
                      lambda _: nullcontext()).caller_key


def test_a_named_principal_is_keyed_once_and_the_same_again():
    middleware._NAMED_KEYS.clear()
    alice = Who("alice", "acme", "https://issuer")
    first = key(alice)
    assert middleware._NAMED_KEYS[id(alice)] == (alice, first)
    assert key(alice, "Bearer other") == first  # a named caller is its subject, whatever the header says
    assert key(Who("alice", "acme", "https://issuer")) == first  # an equal principal: the same key, worked out
    assert key(Who("alice", "globex", "https://issuer")) != first
    claims = {"sub": "alice", "tenant": "acme", "iss": "https://issuer"}
    assert key(claims) == first and key(claims) == first


def test_a_principal_naming_no_subject_is_keyed_from_each_request():
    middleware._NAMED_KEYS.clear()
    nobody = Who(None, "acme")
    by_token = key(nobody, "Bearer one")
    assert key(nobody, "Bearer two") != by_token and key(nobody, "Bearer one") == by_token
    assert key(None, client="10.0.0.6") != key(None, client="10.0.0.7")  # no principal: where the call is from
    assert not middleware._NAMED_KEYS


def test_the_memo_starts_again_past_its_size(monkeypatch):
    middleware._NAMED_KEYS.clear()
    monkeypatch.setattr(middleware, "_NAMED_KEYS_SIZE", 3)
    people = [Who(f"u{i}", "acme") for i in range(5)]
    keys = [key(p) for p in people]
    assert len(middleware._NAMED_KEYS) <= 3 and len(set(keys)) == 5
    assert [key(p) for p in people] == keys
