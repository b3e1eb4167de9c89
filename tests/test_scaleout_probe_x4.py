"""Scale-out defects found by black-box probe X4: Redis pub/sub channels of aborted streams, `--workers`
without shared stores, and the tools/list cache key."""

from __future__ import annotations

import asyncio
import sys

import anyio

from mcpfusion.redis.broker import RedisBroker
from mcpfusion.redis.client import connect
from tests.test_authorization import listings_built
from tests.test_cli import FUSION_MODULE


async def _pubsub_channels(client) -> set[str]:
    return {c.decode() for c in await client.pubsub_channels("probe:*")}


async def test_streams_cancelled_at_every_await_still_unsubscribe(redis_server):
    """Aborted GET streams are cancelled by anyio at every await, also in their clean-up: with 25 at once the
    UNSUBSCRIBE waited for the lock and was cancelled, leaving the channel subscribed forever."""
    client = connect(redis_server.url)
    broker = RedisBroker(client, prefix="probe:")
    entered = 0

    async def aborted_stream(i: int) -> None:
        nonlocal entered
        with anyio.CancelScope() as scope:
            async with broker.subscribe(f"session:{i}"):
                entered += 1
                scope.cancel()  # the client went away: every later await in the scope is cancelled
                await anyio.sleep(5)

    async def cancelled_while_subscribing(i: int) -> None:
        with anyio.move_on_after(0):  # cancelled before (or while) Redis confirms the SUBSCRIBE
            async with broker.subscribe(f"early:{i}"):
                await anyio.sleep(5)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(aborted_stream, i)
                tg.start_soon(cancelled_while_subscribing, i)
        assert entered == 50
        for _ in range(100):  # the UNSUBSCRIBEs outlive their cancelled callers: give them a moment
            if not broker._channels:
                break
            await asyncio.sleep(0.02)
        assert broker._topics == {}
        assert broker._channels == set()
        assert await _pubsub_channels(client) == set()
        # Still usable: a new subscriber gets messages.
        async with broker.subscribe("session:again") as sub:
            await broker.publish("session:again", {"n": 1})
            assert await asyncio.wait_for(sub.queue.get(), 5) == {"n": 1}
        await asyncio.sleep(0.1)
        assert broker._channels == set()
    finally:
        await broker.aclose()
        await client.aclose()


# -- `serve --workers N` without shared state ------------------------------------------------------------

WORKERS_APP = FUSION_MODULE  # the small app `serve` is tried on in tests/test_cli.py


def _serve_warnings(tmp_path, monkeypatch, capsys, workers: str, **env: str) -> str:
    """What `mcpfusion serve --workers N` says before uvicorn starts (uvicorn itself is not run)."""
    import uvicorn

    from mcpfusion import cli

    for name in ("MCPFUSION_REDIS_URL", "MCPFUSION_SIGNING_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "workers_probe_x4.py").write_text(WORKERS_APP)
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda target, **options: started.append(options["workers"]))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "workers_probe_x4", raising=False)
    assert cli.main(["serve", "workers_probe_x4:fusion", "--app-dir", str(tmp_path), "--workers", workers]) == 0
    assert started == [int(workers)]
    return capsys.readouterr().err


def test_workers_without_redis_or_signing_key_warn_what_to_set(tmp_path, monkeypatch, capsys):
    """Several workers with in-memory sessions and per-process keys broke sessions (404) and cursors
    (INVALID_CURSOR) without a word: start-up now names what to set."""
    err = _serve_warnings(tmp_path, monkeypatch, capsys, "2")
    assert "warning: each of the 2 workers keeps its own 2025-11-25 sessions" in err
    assert "set MCPFUSION_REDIS_URL" in err
    assert "INVALID_CURSOR; set MCPFUSION_SIGNING_KEY" in err


def test_workers_sharing_redis_and_a_signing_key_do_not_warn(tmp_path, monkeypatch, capsys):
    err = _serve_warnings(tmp_path, monkeypatch, capsys, "2", MCPFUSION_REDIS_URL="redis://127.0.0.1:1/0",
                          MCPFUSION_SIGNING_KEY="probe-x4-signing-key")
    assert "warning" not in err
    only_key = _serve_warnings(tmp_path, monkeypatch, capsys, "2", MCPFUSION_SIGNING_KEY="probe-x4-signing-key")
    assert "MCPFUSION_REDIS_URL" in only_key and "MCPFUSION_SIGNING_KEY" not in only_key


def test_one_worker_does_not_warn(tmp_path, monkeypatch, capsys):
    assert "warning" not in _serve_warnings(tmp_path, monkeypatch, capsys, "1")


# -- the tools/list cache key ------------------------------------------------------------------------------

async def test_scopes_no_action_uses_do_not_split_the_tools_list_cache(monkeypatch):
    """Tokens differing only in scopes no action asks for each got their own cached listing (built again
    for every token): the key is now the granted scopes that some action requires."""
    from tests.test_authorization import TOKENS, client, fusion, modern, names

    tokens = {f"x4-{n}": {"sub": f"u{n}", "scope": f"crm:read unrelated:{n}"} for n in range(20)}
    tokens["x4-writer"] = {"sub": "w", "scope": "crm:read crm:write crm:admin unrelated:w"}
    for token, claims in tokens.items():
        monkeypatch.setitem(TOKENS, token, claims)
    server = fusion()
    app = server.build_app()
    built = listings_built(server)
    async with client(app) as http:
        listings = [names(await modern(http, f"x4-{n}", "tools/list")) for n in range(20)]
        writer = names(await modern(http, "x4-writer", "tools/list"))
        reader = names(await modern(http, "reader", "tools/list"))
    assert built == [frozenset({"crm:read"}), frozenset({"crm:read", "crm:write", "crm:admin"})]
    assert len(server.engine._tools_cache) == 2
    # Each caller still sees exactly what its scopes allow.
    assert all(listing == reader for listing in listings)
    assert reader["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get"]
    assert writer["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get", "rename", "erase"]


GUARDED_APP = '''
from mcpfusion import MCPFusion, RateLimit, Tool

t = Tool("t")


@t.action(destructive=True, confirm=True)
async def wipe(id: str) -> str:
    """Wipe one record."""
    return id


fusion = MCPFusion("guarded", tools=[t], middleware=[RateLimit(5, per=60)])
'''


def test_workers_without_redis_warn_about_confirmations_and_rate_limits(tmp_path, monkeypatch, capsys):
    """Two workers without Redis ran one confirmation twice and let 2x a RateLimit through, warning about
    sessions only: start-up names both, only for an app that uses them, and not once Redis is set."""
    unguarded = _serve_warnings(tmp_path, monkeypatch, capsys, "2", MCPFUSION_SIGNING_KEY="probe-x4-signing-key")
    assert "confirmation" not in unguarded and "RateLimit" not in unguarded
    monkeypatch.setattr(sys.modules[__name__], "WORKERS_APP", GUARDED_APP)
    err = _serve_warnings(tmp_path, monkeypatch, capsys, "2", MCPFUSION_SIGNING_KEY="probe-x4-signing-key")
    assert "a worker refuses the confirmations another issued and the user is asked again" in err
    assert "a caller gets up to 2x each RateLimit" in err
    shared = _serve_warnings(tmp_path, monkeypatch, capsys, "2", MCPFUSION_REDIS_URL="redis://127.0.0.1:1/0",
                             MCPFUSION_SIGNING_KEY="probe-x4-signing-key")
    assert "warning" not in shared
