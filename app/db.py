"""The database: an async SQLAlchemy engine, created and seeded on first use.

SQLite (aiosqlite) by default, Postgres (asyncpg) when `DATABASE_URL` says so. Run `python -m app.db` to
create and seed the schema ahead of time (docker-compose does, before the replicas start).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import BigInteger, Connection, event, inspect, select, text
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

from . import sqlite
from .seed import demo_rows
from .settings import Settings
from .tables import Base, CustomerRecord, InvoiceRecord, LineRecord, PaymentRecord, TenantRecord

# The money columns of each table (64-bit; a database created before they were is widened at start-up).
MONEY_COLUMNS = {"invoices": ("total_cents", "paid_cents", "margin_cents"), "payments": ("amount_cents",)}

logger = logging.getLogger("app.db")

# How long a write waits for SQLite's write lock while another process (a replica, a backup, a migration) holds
# it, and for its turn among this process's writes: together shorter than the actions' Timeout guards, so a
# write answers DatabaseBusy (a retryable error) instead of being cancelled, or failing after the guard. A
# write waiting in SQLite's busy handler cannot be cancelled (its thread sleeps in SQLite, and cleaning up a
# cancelled write waits for that thread): the busy timeout is the longest a write can outlive its guard.
# Both together (8 s) stay under remind's Timeout(10).
SQLITE_BUSY_TIMEOUT_MS = 3_000
WRITE_TURN_WAIT_S = 5.0
# The execution option of a write's connection: on SQLite its transaction begins IMMEDIATE (`_sqlite_begin`);
# Postgres locks the rows a write reads with FOR UPDATE instead.
WRITE_LOCK = "billing_write_lock"


class DatabaseBusy(Exception):
    """A call could not have the database in time (SQLite's lock held by another process, or this process's
    earlier writes still waiting for it); nothing was written. Retry later."""


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    """Per SQLite connection: foreign keys checked (like Postgres); WAL, so readers never block the writer
    (another replica's included); a busy timeout, so a writer waits and retries for the lock instead of failing
    with "database is locked". A write's transaction takes the write lock before it reads (`_sqlite_begin`).

    `synchronous=NORMAL` is SQLite's recommended setting with WAL: a commit survives a crash of the process
    and the database never corrupts; only a power loss or an OS crash may roll back the last commits (whose
    WAL frames had not reached the disk yet). Use `synchronous=FULL` where that matters more than one fsync
    per commit. And the functions the store's SQL calls (`sqlite.add_functions`: SQLite's `lower()` folds ASCII
    only)."""
    sqlite.add_functions(dbapi_connection)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin(conn: Connection) -> None:
    """A write's transaction (`WRITE_LOCK`) begins with SQLite's write lock, before its first read.

    SQLite ignores FOR UPDATE, and pysqlite emits its BEGIN (deferred) only before the first INSERT, UPDATE or
    DELETE: two writes would both read an invoice, both pass the store's rules and both write (payments over
    the total, a void beside a payment, lost reminders). After BEGIN IMMEDIATE the second write waits (busy
    timeout) until the first commits, then reads what it wrote; pysqlite adds no BEGIN of its own inside an
    open transaction. Any other transaction keeps pysqlite's way: a read (one statement) opens none, so it
    neither waits for a writer nor costs a trip to the SQLite thread to begin and roll back."""
    if conn.get_execution_options().get(WRITE_LOCK):
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _add_missing_columns(conn: Any) -> None:
    """Columns and indexes added since a database file was created (create_all makes missing tables with
    their indexes, never a column or an index of a table that exists)."""
    columns = {c["name"]: c for c in inspect(conn).get_columns("invoices")}
    if "void_reason" not in columns:
        conn.execute(text("ALTER TABLE invoices ADD COLUMN void_reason VARCHAR(200)"))
    if "last_reminded_at" not in columns:
        stamp = "TIMESTAMP WITHOUT TIME ZONE" if conn.dialect.name == "postgresql" else "DATETIME"
        conn.execute(text(f"ALTER TABLE invoices ADD COLUMN last_reminded_at {stamp}"))
    if "idempotency_key" not in columns:
        conn.execute(text("ALTER TABLE invoices ADD COLUMN idempotency_key VARCHAR(64)"))
    # Money columns were 32-bit: widened where the database knows the difference (SQLite's INTEGER is 64-bit).
    if conn.dialect.name == "postgresql":
        payments = {c["name"]: c for c in inspect(conn).get_columns("payments")}
        for table, found in (("invoices", columns), ("payments", payments)):
            for name in MONEY_COLUMNS[table]:
                if name in found and not isinstance(found[name]["type"], BigInteger):
                    conn.execute(text(f"ALTER TABLE {table} ALTER COLUMN {name} TYPE BIGINT"))
    if "idempotency_key" not in {c["name"] for c in inspect(conn).get_columns("payments")}:
        conn.execute(text("ALTER TABLE payments ADD COLUMN idempotency_key VARCHAR(64)"))
    for table in ("invoices", "payments"):
        for index in Base.metadata.tables[table].indexes:
            index.create(conn, checkfirst=True)


@contextmanager
def _busy_is_transient() -> Iterator[None]:
    """SQLite's "database is locked" (its busy timeout passed) as `DatabaseBusy`, logged without a traceback."""
    try:
        yield
    except OperationalError as exc:
        if not sqlite.busy(exc.orig):
            raise
        logger.warning("database busy: SQLite stayed locked for %d ms; answered BUSY", SQLITE_BUSY_TIMEOUT_MS)
        raise DatabaseBusy("the database is locked by another writer") from None


@asynccontextmanager
async def _turn(turns: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]) -> AsyncIterator[None]:
    """This process's turn to write (its event loop's lock in `turns`), waited for up to `WRITE_TURN_WAIT_S`
    (then `DatabaseBusy`)."""
    loop = asyncio.get_running_loop()
    turn = turns.get(loop)
    if turn is None:
        turn = turns[loop] = asyncio.Lock()
    try:
        async with asyncio.timeout(WRITE_TURN_WAIT_S):
            await turn.acquire()
    except TimeoutError:
        logger.warning("database busy: a write waited %.0f s for its turn; answered BUSY", WRITE_TURN_WAIT_S)
        raise DatabaseBusy("earlier writes are still waiting for it") from None
    try:
        yield
    finally:
        turn.release()


class Database:
    """One engine and its session factory; `ready()` creates the schema and demo data once."""

    def __init__(self, url: str, *, seed: bool = True) -> None:
        self.url = url
        self.seed = seed
        if url.startswith("sqlite") and ":memory:" not in url:
            Path(url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        self.engine = create_async_engine(url, pool_pre_ping=not url.startswith("sqlite"))
        if url.startswith("sqlite"):
            # One SQLite file is fine for one process; several replicas should share Postgres (see README).
            event.listen(self.engine.sync_engine, "connect", _sqlite_connect)
            event.listen(self.engine.sync_engine, "begin", _sqlite_begin)
        self.reader: sqlite.Reader | None = None
        if url.startswith("sqlite+aiosqlite"):
            sqlite.install(self.engine)  # one trip to the SQLite thread per statement
            if ":memory:" not in url:  # (each connection to :memory: is a database of its own)
                self.reader = sqlite.Reader(self.engine.url)
        self.sessions = async_sessionmaker(self.engine, expire_on_commit=False)
        # the same pool; a write's transaction takes the write lock first (see `_sqlite_begin`)
        self.writer = self.engine.execution_options(**{WRITE_LOCK: True})
        self.writes = async_sessionmaker(self.writer, expire_on_commit=False)
        # SQLite: this process's writes take turns (per event loop: an asyncio lock belongs to one loop)
        self._turns: WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] | None = (
            WeakKeyDictionary() if url.startswith("sqlite") else None)
        self._ready = False
        self._lock: asyncio.Lock | None = None

    async def ready(self) -> None:
        if self._ready:
            return
        self._lock = self._lock or asyncio.Lock()
        async with self._lock:
            if not self._ready:
                await self._create()
                self._ready = True

    async def _create(self) -> None:
        for attempt in range(2):  # replicas starting together may race on CREATE TABLE: retry once
            try:
                async with self.writer.begin() as conn:
                    await conn.run_sync(Base.metadata.create_all)
                    await conn.run_sync(_add_missing_columns)
                break
            except (IntegrityError, ProgrammingError, OperationalError):
                if attempt:
                    raise
                await asyncio.sleep(0.5)
        if not self.seed:
            return
        async with self.writes() as session:  # a replica seeding meanwhile has committed before this reads
            if await session.scalar(select(TenantRecord.id).limit(1)) is not None:
                return
            rows = demo_rows()
            try:
                # Parents before children: the unit of work only orders tables linked by relationships.
                for table in (TenantRecord, CustomerRecord, InvoiceRecord, LineRecord, PaymentRecord):
                    session.add_all(row for row in rows if isinstance(row, table))
                    await session.flush()
                await session.commit()
                logger.info("database seeded with demo data for tenants acme and globex")
            except IntegrityError:  # another replica seeded first
                await session.rollback()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """The session of one write (`writes`), on SQLite after this process's earlier writes, in order: SQLite
        lets one writer in at a time, and its busy handler polls, so writers of one process racing for the lock
        starve some of them for seconds; an asyncio lock queues them fairly and a queued write stays
        cancellable. A write that cannot have the database in time is `DatabaseBusy`, its session rolled back."""
        if self._turns is None:  # Postgres: writes run side by side, each locking its own rows
            async with self.writes() as session:
                yield session
            return
        async with _turn(self._turns):
            with _busy_is_transient():
                async with self.writes() as session:
                    yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session for reads (`sessions`); SQLite still locked after its busy timeout is `DatabaseBusy`."""
        with _busy_is_transient():
            async with self.sessions() as session:
                yield session

    async def ping(self) -> None:
        """Readiness: one round trip to the database (raises while it is unreachable)."""
        async with self.engine.connect() as conn:
            await conn.execute(text("SELECT 1"))

    async def dispose(self) -> None:
        await self.engine.dispose()
        if self.reader is not None:
            self.reader.dispose()


async def _init() -> None:
    settings = Settings.from_env()
    db = Database(settings.database_url, seed=settings.seed_demo_data)
    await db.ready()
    await db.dispose()
    print(f"database ready: {db.engine.url.render_as_string(hide_password=True)}")


if __name__ == "__main__":
    asyncio.run(_init())
