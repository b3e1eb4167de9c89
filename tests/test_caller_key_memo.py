"""`ActionCall.caller_key` remembers a named principal's key by identity: the key it gives again is the one it
would work out, another principal (even an equal one) is keyed afresh, and a principal naming no subject is
keyed from its request every time (its key depends on the Authorization header and the client address)."""

from contextlib import nullcontext
from dataclasses import dataclass

from starlette.requests import Request

from mcpfusion import memo, middleware
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


def counted(monkeypatch) -> list[object]:
    """The principals whose subject `caller_key` reads (a key remembered reads none)."""
    read: list[object] = []
    subject_of = middleware.subject_of

    def counting(principal):
        read.append(principal)
        return subject_of(principal)

    monkeypatch.setattr(middleware, "subject_of", counting)
    return read


def test_a_named_principal_is_keyed_once_and_the_same_again(monkeypatch):
    read = counted(monkeypatch)
    alice = Who("alice", "acme", "https://issuer")
    first = key(alice)
    assert key(alice) == first and read == [alice]  # worked out once, then remembered
    assert key(alice, "Bearer other") == first  # a named caller is its subject, whatever the header says
    assert key(Who("alice", "acme", "https://issuer")) == first  # an equal principal: the same key, worked out
    assert key(Who("alice", "globex", "https://issuer")) != first
    claims = {"sub": "alice", "tenant": "acme", "iss": "https://issuer"}
    assert key(claims) == first and key(claims) == first


def test_a_principal_naming_no_subject_is_keyed_from_each_request():
    nobody = Who(None, "acme")
    by_token = key(nobody, "Bearer one")
    assert key(nobody, "Bearer two") != by_token and key(nobody, "Bearer one") == by_token
    assert key(None, client="10.0.0.6") != key(None, client="10.0.0.7")  # no principal: where the call is from


def test_the_memo_starts_again_past_its_size(monkeypatch):
    monkeypatch.setattr(memo, "MEMO_SIZE", 3)
    read = counted(monkeypatch)
    people = [Who(f"u{i}", "acme") for i in range(5)]
    keys = [key(p) for p in people]
    assert len(set(keys)) == 5
    assert [key(p) for p in people] == keys  # the same keys, worked out again once forgotten
    assert len(read) > 5
