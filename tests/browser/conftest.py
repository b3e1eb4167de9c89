"""Real headless Chromium (Debian's /usr/bin/chromium, installed by scripts/system_deps.sh) driven by
Playwright, against real uvicorn servers. No browser is ever downloaded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from .server import ROOT, uvicorn_server

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = ROOT / "artifacts"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Module-scoped on purpose: Playwright's sync API keeps an event loop running in this thread while it is
    open, which would break the asyncio tests of the modules collected after these."""
    assert os.path.exists(CHROMIUM), f"{CHROMIUM} is missing: run `make test` (it runs scripts/system_deps.sh)"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def reference_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The reference service with a fresh seeded SQLite database."""
    db = tmp_path_factory.mktemp("reference") / "billing.sqlite3"
    with uvicorn_server("app.main:create_app", {"MCPFUSION_DB_PATH": str(db)}) as base:
        yield base


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS
