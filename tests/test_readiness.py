"""/readyz of the reference service: 503 while Redis or the database is down, 200 once they are back.
Real `redis-server` and Postgres processes are stopped and started under the running app."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.main import create_app
from app.settings import Settings, database_url
from mcpfusion import MCPFusion
from tests.service_kit import free_socket, settings_for
from tests.test_service_postgres import as_owner, pg_bin


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


class Postgres:
    """A throw-away cluster that a test can stop and start again on the same port."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="mcpfusion-pg-ready-"))
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
        sock = free_socket()
        self.port = sock.getsockname()[1]
        sock.close()
        subprocess.run(as_owner([pg_bin("initdb"), "-D", str(self.base / "data"), "-A", "trust", "-U", "mcpfusion",
                                 "--no-sync"]), check=True, capture_output=True, timeout=120)

    @property
    def url(self) -> str:
        return f"postgresql://mcpfusion@127.0.0.1:{self.port}/postgres"

    def pg_ctl(self, *args: str) -> None:
        subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(self.base / "data"), *args]),
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self.pg_ctl("-l", str(self.base / "log"), "-w", "-o",
                    f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -F", "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "immediate", "-w", "stop")


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    server = Postgres()
    server.start()
    try:
        yield server
    finally:
        subprocess.run(as_owner([pg_bin("pg_ctl"), "-D", str(server.base / "data"), "-m", "immediate", "-w",
                                 "stop"]), capture_output=True, timeout=120)
        shutil.rmtree(server.base, ignore_errors=True)


async def test_readyz_follows_redis(tmp_path, redis_server, monkeypatch):
    monkeypatch.setenv("MCPFUSION_REDIS_URL", redis_server.url)
    app = create_app(settings_for(tmp_path))
    async with client(app) as http:
        ready = await http.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}
        redis_server.stop()
        down = await http.get("/readyz")
        assert down.status_code == 503 and down.headers["retry-after"] == "5"
        assert down.json()["checks"]["database"] == "ok"
        assert down.json()["checks"]["redis"] != "ok"
        assert (await http.get("/healthz")).status_code == 200  # liveness is not readiness
        redis_server.start()
        back = await http.get("/readyz")
        assert back.status_code == 200, back.text


async def test_readyz_follows_the_database(postgres):
    app = create_app(Settings(database_url=database_url(postgres.url, "")))
    async with client(app) as http:
        assert (await http.get("/readyz")).status_code == 200
        postgres.stop()
        down = await http.get("/readyz")
        assert down.status_code == 503
        assert down.json()["checks"]["database"].startswith("unavailable")
        assert "mcpfusion@" not in down.text  # no connection string in the answer
        postgres.start()
        back = await http.get("/readyz")
        assert back.status_code == 200, back.text
        assert back.json()["checks"] == {"database": "ok"}


async def test_a_hanging_check_times_out_into_503():
    import asyncio

    fusion = MCPFusion("slow")
    fusion.readiness.timeout = 0.2

    @fusion.readiness_check("queue")
    async def queue() -> None:
        await asyncio.sleep(30)

    @fusion.readiness_check("cache")
    async def cache() -> bool:
        return False

    async with client(fusion.build_app()) as http:
        r = await http.get("/readyz")
    assert r.status_code == 503
    assert r.json()["checks"] == {"queue": "timeout", "cache": "unavailable"}
