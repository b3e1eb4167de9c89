"""The customers search finds a name whatever Unicode form the search is typed in: "Mu" + a combining
diaeresis (how macOS writes it) finds the "Müller" stored, on SQLite and on Postgres."""

from __future__ import annotations

import datetime as dt
import unicodedata

import pytest

from app.auth import Principal
from app.db import Database
from app.settings import database_url
from app.store import BillingStore
from app.tables import CustomerRecord
from tests.test_service_postgres import postgres_url  # noqa: F401  (the fixture: a throw-away cluster)

NFC_NAME = "Zoë Müller AG"  # stored as written (NFC: what the seed and most writers store)


def nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


async def _store(url: str) -> tuple[Database, BillingStore]:
    db = Database(url)
    await db.ready()
    async with db.write() as session:
        session.add(CustomerRecord(id="cus_0900", tenant="acme", name=NFC_NAME, email="zoe@muller.example",
                                   phone=None, country="CH", created_on=dt.date.today()))
        await session.commit()
    return db, BillingStore(db, Principal("demo-admin", "acme", "admin"))


async def _found(store: BillingStore, search: str) -> list[str]:
    return [row["id"] for row in await store.list_customers(search)]


@pytest.mark.parametrize("search", ["Müller", "müller", "MÜLLER", "Zoë"])
async def test_sqlite_finds_a_name_typed_in_either_form(tmp_path, search):
    db, store = await _store(database_url(None, tmp_path / "billing.sqlite3"))
    try:
        assert nfd(search) != search  # (the test means something: the two forms differ)
        assert await _found(store, search) == ["cus_0900"]
        assert await _found(store, nfd(search)) == ["cus_0900"]
    finally:
        await db.dispose()


async def test_postgres_finds_a_name_typed_in_either_form(postgres_url):  # noqa: F811
    db, store = await _store(database_url(postgres_url, ""))
    try:
        for search in ("Müller", "MÜLLER", "Zoë"):
            assert await _found(store, search) == ["cus_0900"], search
            assert await _found(store, nfd(search)) == ["cus_0900"], search
    finally:
        await db.dispose()


async def test_sqlite_finds_a_name_stored_decomposed(tmp_path):
    # SQLite's `casefold` writes both sides in NFC: a name some importer stored decomposed is found too.
    db, store = await _store(database_url(None, tmp_path / "billing.sqlite3"))
    try:
        async with db.write() as session:
            session.add(CustomerRecord(id="cus_0901", tenant="acme", name=nfd("Jürgen Bäcker"),
                                       email="j@backer.example", phone=None, country="DE",
                                       created_on=dt.date.today()))
            await session.commit()
        for search in ("Bäcker", nfd("BÄCKER"), "jürgen"):
            assert await _found(store, search) == ["cus_0901"], search
    finally:
        await db.dispose()
