"""Per-caller state keyed by one unambiguous encoding of (issuer, tenant, principal): a `/` (or any other
character) in a tenant or subject never lets a caller of one tenant use another's rate limit or confirmation
(tenant "acme" with subject "x/y" is not tenant "acme/x" with subject "y"), in memory and in Redis."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import httpx
from starlette.requests import Request

from mcpfusion import MCPFusion, ProtectedResource, RateLimit, Tool
from mcpfusion.auth import bearer_token, unauthorized
from mcpfusion.confirm import CONFIRM_PARAM
from mcpfusion.identity import AUTH_SCOPE_KEY, credential_digest
from mcpfusion.mcp import wire
from mcpfusion.middleware import ActionCall, GuardState
from mcpfusion.redis import connect
from mcpfusion.redis.buckets import RedisBuckets
from mcpfusion.redis.spent import RedisSpent
from tests.service_kit import confirm_token

RESOURCE = "http://127.0.0.1/mcp"
# Callers whose names, joined with "/" (the key of callers without an issuer), or spelled like the JSON key of
# a caller with one, all came out as one key.
CALLERS = {
    "mallory": {"sub": "x/y", "tenant": "acme"},
    "victim": {"sub": "y", "tenant": "acme/x"},
    "tenantless": {"sub": "acme/x/y"},
    "federated": {"iss": "https://as.example", "sub": "alice", "tenant": "acme"},
    "lookalike": {"sub": '["https://as.example","acme","alice"]'},
}


async def authenticate(request):
    found = CALLERS.get(bearer_token(request))
    if found is None:
        raise unauthorized("Unknown token.")
    return dict(found)


def ops(*middleware) -> MCPFusion:
    tool = Tool("ops", exposition="flat")
    runs: list[str] = []

    @tool.action(readonly=True)
    async def status() -> dict:
        """Status"""
        return {"runs": len(runs)}

    @tool.action(destructive=True, confirm="Wipe {target}?")
    async def wipe(target: str) -> dict:
        """Wipe a target"""
        runs.append(target)
        return {"wiped": target}

    fusion = MCPFusion("ops", tools=[tool], authorization=ProtectedResource(resource=RESOURCE, authenticate=authenticate),
                       middleware=list(middleware), json_response=True)
    fusion.runs = runs  # type: ignore[attr-defined]
    return fusion


def client_of(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1", timeout=30)


async def call_as(client: httpx.AsyncClient, who: str, action: str, args: dict | None = None) -> httpx.Response:
    return await client.post(f"/api/ops/{action}", json=args or {}, headers={"authorization": f"Bearer {who}"})


async def each_caller_keeps_its_own_bucket(fusion: MCPFusion) -> None:
    async with client_of(fusion.build_app()) as client:
        for who in CALLERS:  # the first call of each: none is charged to another's bucket
            first = await call_as(client, who, "status")
            assert first.status_code == 200, (who, first.text)
        for who in CALLERS:  # and each one's bucket is spent now
            assert (await call_as(client, who, "status")).status_code == 429, who


async def test_names_holding_a_slash_share_no_rate_limit_bucket():
    await each_caller_keeps_its_own_bucket(ops(RateLimit(1, per=3600)))


async def test_names_holding_a_slash_share_no_rate_limit_bucket_in_redis(redis_server):
    fusion = ops(RateLimit(1, per=3600))
    client = connect(redis_server.url)
    try:
        fusion.registry.guards.buckets = RedisBuckets(client, prefix="round5c:rl:")
        await each_caller_keeps_its_own_bucket(fusion)
        assert len(await client.keys("round5c:rl:*")) == len(CALLERS)
    finally:
        await client.aclose()


async def confirmations_belong_to_their_caller(fusion: MCPFusion) -> None:
    async with client_of(fusion.build_app()) as client:
        for asker, other in [("mallory", "victim"), ("mallory", "tenantless"), ("victim", "mallory"),
                             ("lookalike", "federated"), ("federated", "lookalike")]:
            asked = await call_as(client, asker, "wipe", {"target": "db"})
            assert asked.status_code == 428, asked.text
            token = confirm_token(asked.text)
            stolen = await call_as(client, other, "wipe", {"target": "db", CONFIRM_PARAM: token})
            assert stolen.status_code == 428 and "another caller" in stolen.json()["detail"], (asker, other)
            assert fusion.runs == []  # type: ignore[attr-defined]  # nothing ran for the other caller
            done = await call_as(client, asker, "wipe", {"target": "db", CONFIRM_PARAM: token})
            assert done.status_code == 200, done.text  # still good for the caller it was given to
            fusion.runs.clear()  # type: ignore[attr-defined]


async def test_a_confirmation_is_refused_to_a_caller_whose_names_join_the_same():
    await confirmations_belong_to_their_caller(ops())


async def test_a_confirmation_is_refused_to_a_caller_whose_names_join_the_same_in_redis(redis_server):
    fusion = ops()
    client = connect(redis_server.url)
    try:
        fusion.registry.guards.spent = RedisSpent(client, prefix="round5c:spent:")
        await confirmations_belong_to_their_caller(fusion)
    finally:
        await client.aclose()


def key_of(principal: Any, authorization: str | None = None, guards: GuardState | None = None) -> str:
    headers = [(b"authorization", authorization.encode())] if authorization else []
    request = Request({"type": "http", "headers": headers, "client": ("10.0.0.5", 1), AUTH_SCOPE_KEY: principal})
    return ActionCall(None, {}, {}, request, "rest", guards or GuardState(), lambda _: nullcontext()).caller_key


def test_distinct_callers_never_share_a_key_whatever_their_names_hold():
    guards = GuardState(signing_key=b"k" * 32)
    digest = credential_digest("Bearer secret", guards.signing_key)
    principals = [
        *CALLERS.values(), {"sub": "x/y", "tenant": "acme", "iss": "i"}, {"sub": "y", "tenant": "acme/x", "iss": "i"},
        {"sub": "alice"}, {"sub": "alice", "tenant": "null"}, {"sub": "null", "tenant": "alice"}, "bob",
        {"sub": 'a","b', "tenant": "t"}, {"sub": "b", "tenant": 't","a'}, {"sub": "\ud800", "tenant": "acme"},
        {"sub": f"token:{digest}"}, {"sub": "anonymous:10.0.0.5"},
    ]
    keys = [key_of(p, guards=guards) for p in principals]
    # Callers that name no subject: keyed by their credentials' digest, else their address (never a subject's)
    keys += [key_of({"tenant": "acme"}, "Bearer secret", guards), key_of(None, "Bearer secret", guards),
             key_of(None, None, guards)]
    assert len(set(keys)) == len(keys), keys
    for key in keys:
        key.encode()  # a lone surrogate in a claim still makes a key an HMAC or Redis can take


def test_the_mcp_caller_key_is_one_unambiguous_encoding(monkeypatch):
    """What the 2026 wire binds requestState and listen streams to: (tenant, principal), never joined."""
    pairs = [("y", "acme/x"), ("x/y", "acme"), ("acme/x/y", None), ("", "acme/x/y"), (None, "acme/x/y/")]
    keys = set()
    for principal, tenant in pairs:
        monkeypatch.setattr(wire, "default_principal", lambda _, found=(principal, tenant): found)
        keys.add(wire.caller_key(Request({"type": "http", "headers": []})))
    assert len(keys) == len(pairs)
