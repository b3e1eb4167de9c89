"""Round 5k: the reference service's customer search ignores the case of any letter, not only ASCII ones, on
SQLite (its reader and its async engine) and on Postgres."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text

from app.auth import DEMO_TOKENS
from app.db import Database
from app.settings import Settings, database_url
from app.store import BillingStore, customer_key
from app.tables import CustomerRecord
from tests.service_kit import build, in_process
from tests.test_service_postgres import postgres_url  # noqa: F401 (a fixture: a throw-away Postgres cluster)

ADMIN = {"authorization": "Bearer demo-admin"}
NAMES = {"cus_u1": "Émile Études", "cus_u2": "ÖKO Bau", "cus_u3": "Straße Σίσυφος"}
# search -> the customers it finds (by id): any case of any letter, Python's full folding (ß is ss)
SEARCHES = {
    "Émile Études": ["cus_u1"], "émile": ["cus_u1"], "ÉTUDES": ["cus_u1"], "mile": ["cus_u1"],
    "ÖKO Bau": ["cus_u2"], "öko": ["cus_u2"], "bau": ["cus_u2"],
    "Straße": ["cus_u3"], "STRASSE": ["cus_u3"], "σίσυφος": ["cus_u3"], "ΣΊΣΥΦΟΣ": ["cus_u3"],
    "Emile": [], "oko": [],  # a letter is folded, never stripped of its accent
}


async def add_customers(db: Database, names: dict[str, str]) -> None:
    await db.ready()
    async with db.writes() as session:
        session.add_all(CustomerRecord(id=ident, tenant="acme", name=name, email=f"{ident}@x.example", phone=None,
                                       country="FR", created_on=dt.date(2026, 1, 1)) for ident, name in names.items())
        await session.commit()


async def found(store: BillingStore, search: str) -> list[str]:
    return [c["id"] for c in await store.list_customers(search) if c["id"].startswith("cus_u")]


async def test_customers_list_finds_a_customer_by_its_name_in_any_case(service_app):
    await add_customers(service_app.state.db, NAMES)
    t = in_process(service_app)
    for search, ids in SEARCHES.items():
        result = await t.call("customers", "list", {"search": search}, headers=ADMIN)
        assert [c["id"] for c in result.data] == ids, search


@pytest.mark.parametrize("path", ["reader", "engine"])
async def test_sqlite_folds_on_the_reader_and_on_the_async_engine(tmp_path, path):
    app = build(tmp_path)
    db: Database = app.state.db
    await add_customers(db, NAMES)
    if path == "engine":  # what a read does when the reader finds SQLite busy (and on :memory:)
        db.reader = None
    store = BillingStore(db, DEMO_TOKENS["demo-admin"])
    try:
        for search, ids in SEARCHES.items():
            assert await found(store, search) == ids, search
    finally:
        await db.dispose()


async def test_a_search_pages_by_keyset_and_stays_literal(tmp_path):
    app = build(tmp_path)
    db: Database = app.state.db
    names = {f"cus_u{n}": name for n, name in enumerate(
        ["Émile A", "ÉMILE B", "émile c", "Zoë Émile", "Émile 100%_/x", "Emile D"], start=1)}
    await add_customers(db, names)
    store = BillingStore(db, DEMO_TOKENS["demo-admin"])
    try:
        seen: list[str] = []
        after = None
        while True:
            rows = await store.list_customers("émile", after=after, limit=3)
            seen += [r["name"] for r in rows[:2]]
            if len(rows) <= 2:
                break
            after = customer_key(rows[1])
        assert seen == sorted(name for name in names.values() if "émile" in name.casefold())
        assert await found(store, "ÉMILE 100%_/") == ["cus_u5"]
        assert await found(store, "émile 1_0") == [] and await found(store, "mile%b") == []
    finally:
        await db.dispose()


async def test_postgres_folds_both_sides_alike(postgres_url):  # noqa: F811 (the fixture)
    from app.main import create_app

    app = create_app(Settings(database_url=database_url(postgres_url, "")))
    db: Database = app.state.db
    await add_customers(db, NAMES)
    store = BillingStore(db, DEMO_TOKENS["demo-admin"])
    try:
        async with db.engine.connect() as conn:
            ctype = (await conn.execute(text("SHOW lc_ctype"))).scalar_one()
        # Postgres folds by its database's locale; under C (ASCII only) a name is still found as it is written
        folds = ctype not in ("C", "POSIX")
        for search in ("émile", "ÉTUDES", "öko", "BAU", "σίσυφος") if folds else ():
            # (lower() maps one letter to one: never ß to ss, nor Σ to the final ς; Python's casefold does both)
            assert await found(store, search) == SEARCHES.get(search, SEARCHES.get(search.lower())), search
        for ident, name in NAMES.items():
            assert await found(store, name) == [ident], name
        assert await found(store, "mile") == ["cus_u1"] and await found(store, "Emile") == []
    finally:
        await db.dispose()
