"""SQLite connections for the async engine that make one trip to the database thread per statement.

aiosqlite runs each SQLite connection in its own thread and hands it one function per call: SQLAlchemy's
adapter makes four such trips for every statement (open a cursor, execute, fetch the rows, close the cursor)
and one per rollback, even when nothing was written. On a one-core worker each trip costs a thread wake-up
and two hand-overs of the GIL, which made the trips most of a read's cost. Here a statement is executed and
fully fetched in one trip, and commit/rollback make no trip when SQLite has no transaction open (the pool's
rollback of a connection handed back after its commit).

`install(engine)` makes an aiosqlite engine connect this way (SQLAlchemy's `do_connect` event); everything
else (SQL, pooling, transactions, errors) stays SQLAlchemy's and aiosqlite's.

`Reader` goes further for the reads a call makes outside a transaction: it runs them on the calling thread
(the event loop's) through SQLAlchemy's synchronous engine on the same file. A read of the store is tens of
microseconds of SQLite; a trip to the aiosqlite thread, the async adapter and its greenlets cost several times
that. In WAL mode a reader never waits for a writer, so such a read does not hold up the loop any more than the
Python that builds its rows; when SQLite does answer busy or locked (a checkpoint or a recovery in progress),
the read is handed back to the caller, which repeats it through the async engine, where waiting blocks no one.

`Reader.fetch` goes further still for the store's queries built once: SQLAlchemy compiles each of them once
(`Prepared`: its SQL, its parameters in order, the result processors of its columns) and the read is that SQL
on the connection's sqlite3 connection. SQLAlchemy's execution of an already compiled and cached statement
(execution context, cache lookup, result metadata, `Row` objects) cost more than SQLite running the query.

`casefold(text)` is a text folded for comparing without case, in one Unicode form (NFC: a name typed as "u" +
combining diaeresis, as macOS writes it, is the "ü" stored): SQLite's `lower()` folds ASCII letters only, so
every connection made here (`add_functions`) has `casefold`, Python's `str.casefold` of the NFC text; on another
database it is `lower()` (Postgres folds any letter its database's locale knows; the store writes the search
term in NFC, the form its names are stored in, since `normalize()` needs a UTF-8 database).
"""

from __future__ import annotations

import re
import sqlite3
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

import aiosqlite
from sqlalchemy import URL, Connection, Dialect, Executable, Row, Select, String, create_engine, event
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement


class casefold(FunctionElement[str]):  # (named like the SQL function it is)
    """`casefold(text)`: the text folded for a comparison without case (see the module docstring)."""

    type = String()
    inherit_cache = True


@compiles(casefold)
def _lower(element: casefold, compiler: SQLCompiler, **kw: Any) -> str:
    return f"lower({compiler.process(element.clauses, **kw)})"


@compiles(casefold, "sqlite")
def _casefold(element: casefold, compiler: SQLCompiler, **kw: Any) -> str:
    return f"casefold({compiler.process(element.clauses, **kw)})"


def _fold(value: Any) -> Any:
    return unicodedata.normalize("NFC", value).casefold() if isinstance(value, str) else value  # (NULL stays NULL)


def add_functions(dbapi_connection: Any) -> None:
    """Give a new SQLite connection (sqlite3's, or SQLAlchemy's adapter of aiosqlite's) the functions the
    store's SQL uses: `casefold`. Deterministic: SQLite may use it wherever a built-in function goes."""
    dbapi_connection.create_function("casefold", 1, _fold, deterministic=True)


class OneTripCursor:
    """The cursor SQLAlchemy's aiosqlite adapter drives, with each statement's rows buffered in one trip."""

    def __init__(self, connection: OneTripConnection) -> None:
        self._connection = connection
        self.description: Any = None
        self.rowcount = -1
        self.lastrowid: int | None = None
        self.arraysize = 1
        self._rows: list[Any] = []

    async def __aenter__(self) -> OneTripCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def _run(self, method: str, sql: str, parameters: Any) -> OneTripCursor:
        conn = self._connection._conn

        def run() -> tuple[Any, int, int | None, list[Any]]:
            cursor = conn.cursor()
            try:
                getattr(cursor, method)(sql, parameters)
                rows = cursor.fetchall() if cursor.description else []
                return cursor.description, cursor.rowcount, cursor.lastrowid, rows
            finally:
                cursor.close()

        # aiosqlite's `_execute` (queue a function for the connection's thread) has no annotations
        self.description, self.rowcount, self.lastrowid, self._rows = await self._connection._execute(run)  # type: ignore[no-untyped-call]
        return self

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> OneTripCursor:
        return await self._run("execute", sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> OneTripCursor:
        return await self._run("executemany", sql, parameters)

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        size = size or self.arraysize
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def close(self) -> None:
        self._rows = []


class OneTripConnection(aiosqlite.Connection):
    """An aiosqlite connection whose cursors make one trip per statement and whose commit and rollback make
    none when no transaction is open (`in_transaction` is SQLite's own flag, readable from any thread)."""

    def cursor(self) -> OneTripCursor:  # type: ignore[override]
        return OneTripCursor(self)

    async def commit(self) -> None:
        if self.in_transaction:
            await super().commit()

    async def rollback(self) -> None:
        if self.in_transaction:
            await super().rollback()


def connect(database: str, **kwargs: Any) -> OneTripConnection:
    """Like `aiosqlite.connect`, for a `OneTripConnection` (its thread a daemon, as SQLAlchemy sets it)."""

    def connector() -> sqlite3.Connection:
        connection: sqlite3.Connection = sqlite3.connect(database, **kwargs)
        return connection

    connection = OneTripConnection(connector, 64)
    connection._thread.daemon = True
    return connection


def install(engine: AsyncEngine) -> None:
    """Make the aiosqlite `engine` open `OneTripConnection`s (with the arguments SQLAlchemy computed)."""

    @event.listens_for(engine.sync_engine, "do_connect")
    def one_trip(dialect: Any, _record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
        return dialect.loaded_dbapi.connect(*cargs, async_creator_fn=connect, **cparams)


class Prepared:
    """A Core query compiled once for SQLite by SQLAlchemy: its SQL, how to read each positional parameter
    from a call's values (a bound parameter by its key, a literal one its own value, through the type's bind
    processor), and which columns SQLAlchemy's result processors convert (SQLite's dates are text)."""

    __slots__ = ("sql", "params", "converters")

    def __init__(self, query: Select[Any], dialect: Dialect) -> None:
        compiled = query.compile(dialect=dialect)
        if compiled.positiontup is None:
            raise ValueError("a prepared read needs a dialect with positional parameters (SQLite's qmark)")
        self.sql = compiled.string
        self.params = tuple(_param(compiled.binds[name], dialect) for name in compiled.positiontup)
        self.converters = tuple(
            (index, process) for index, column in enumerate(query.selected_columns)
            if (process := column.type.dialect_impl(dialect).result_processor(dialect, None)) is not None
        )

    def arguments(self, values: dict[str, Any]) -> list[Any]:
        """The positional parameters of one execution (a bound parameter without a value: `KeyError`)."""
        out = []
        for key, required, default, process in self.params:
            value = values[key] if required else values.get(key, default)
            out.append(value if process is None else process(value))
        return out

    def rows(self, raw: list[tuple[Any, ...]]) -> Sequence[Sequence[Any]]:
        """SQLite's rows with the columns SQLAlchemy would convert converted (None stays None); a converted
        row is a list (a row of the store is read by index and unpacked, never changed)."""
        converters = self.converters
        if not converters:
            return raw
        out = []
        for row in raw:
            values = [*row]
            for index, process in converters:
                values[index] = process(values[index])
            out.append(values)
        return out


def _param(bind: Any, dialect: Dialect) -> tuple[str, bool, Any, Any]:
    return bind.key, bind.required, bind.effective_value, bind.type.dialect_impl(dialect).bind_processor(dialect)


class Reader:
    """Reads of one SQLite file on the calling thread (see the module docstring): `reader(query, params)` is
    the query's rows, or None when SQLite was busy or locked (read through the async engine then).

    Each thread that reads gets one connection of its own, kept open (the event loop's thread is the only one
    in a served app; a test client's portal thread gets its own). They are read-only (`PRAGMA query_only`),
    never wait for a lock (`busy_timeout=0`) and autocommit: each statement sees everything committed before
    it started, and no transaction is left open between reads."""

    def __init__(self, url: URL) -> None:
        self.engine = create_engine(url.set(drivername="sqlite+pysqlite"), poolclass=NullPool,
                                    connect_args={"check_same_thread": False})  # closed from another thread
        event.listen(self.engine, "connect", _read_only)
        self._local = threading.local()
        self._opened: list[Connection] = []
        self._prepared: dict[int, tuple[Select[Any], Prepared]] = {}  # by the query's id, the query kept alive

    def _connection(self) -> Connection:
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._local.conn = conn
            self._local.raw = conn.connection.dbapi_connection  # what `fetch` runs its SQL on
            self._opened.append(conn)
        return conn

    def __call__(self, query: Executable, params: dict[str, Any]) -> Sequence[Row[Any]] | None:
        conn = self._connection()
        try:
            return conn.execute(query, params).all()
        except BaseException as exc:
            self._drop(conn)
            if isinstance(exc, OperationalError) and busy(exc.orig):
                return None
            raise

    def fetch(self, query: Select[Any], params: dict[str, Any]) -> Sequence[Sequence[Any]] | None:
        """`self(query, params)` for a query built once (a module's constant: each one given is compiled once
        and kept), as tuples, run on the sqlite3 connection itself. None when SQLite was busy or locked."""
        prepared = self._prepared.get(id(query))
        if prepared is None or prepared[0] is not query:
            prepared = self._prepared[id(query)] = (query, Prepared(query, self.engine.dialect))
        plan = prepared[1]
        arguments = plan.arguments(params)
        conn = self._connection()
        try:
            raw = self._local.raw.execute(plan.sql, arguments).fetchall()
        except BaseException as exc:
            self._drop(conn)
            if isinstance(exc, sqlite3.Error):
                if busy(exc):
                    return None
                raise DBAPIError.instance(plan.sql, arguments, exc, sqlite3.Error) from exc  # as SQLAlchemy raises it
            raise
        return plan.rows(raw)

    def _drop(self, conn: Connection) -> None:
        """Whatever failed on `conn`, the next read starts on a fresh connection."""
        self._local.conn = None
        self._opened.remove(conn)
        conn.close()

    def dispose(self) -> None:
        for conn in self._opened:
            conn.close()
        self._opened.clear()
        self._local = threading.local()
        self.engine.dispose()


_BUSY = re.compile(r"locked|busy", re.IGNORECASE)


def busy(exc: BaseException | None) -> bool:
    """Whether sqlite3 raised `exc` because the database was busy or locked (held by another connection):
    transient, unlike the other OperationalErrors (a missing table, a full disk...)."""
    return isinstance(exc, sqlite3.OperationalError) and _BUSY.search(str(exc)) is not None


def _read_only(dbapi_connection: Any, _record: Any) -> None:
    add_functions(dbapi_connection)
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA query_only=ON")
    cursor.execute("PRAGMA busy_timeout=0")
    cursor.close()
