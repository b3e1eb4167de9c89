"""Fixtures shared by the test modules. Helpers that are plain functions live in modules of this package
(`tests.service_kit` for the reference service, `tests.mcp_app` for the MCP test app, `tests.redis_helpers`
for real Redis and uvicorn replicas) and are imported by their full name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from tests.redis_helpers import RedisServer, running_redis

# `tool_tester`: the factory fixture mcpfusion ships for its users' own tests.
pytest_plugins = ["mcpfusion.testing"]


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on a free 127.0.0.1 port, stopped after the test."""
    with running_redis() as server:
        yield server


@pytest.fixture
def service_app(tmp_path: Path) -> FastAPI:
    """The reference billing service on a fresh SQLite database in `tmp_path`."""
    # Imported here: `tests.service_kit` loads mcpfusion.testing, which pytest_plugins must import first.
    from tests.service_kit import build

    return build(tmp_path)
