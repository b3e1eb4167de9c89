"""Round 7: what a handler may return through a presenter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from mcpfusion import MCPFusion, Presenter, Tool
from tests.wire_kit import every_wire


class Row(BaseModel):
    id: int


rows_view = Presenter("row").schema(Row)


def app() -> Any:
    t = Tool("t")

    @t.action(readonly=True, returns=rows_view)
    async def streamed() -> Any:
        """Rows from an async generator."""
        async def rows() -> AsyncIterator[dict[str, Any]]:
            yield {"id": 1, "email": "hidden@example.com"}
            yield {"id": 2, "email": "hidden@example.com"}
        return rows()

    return MCPFusion("results", tools=[t]).build_app()


async def test_an_async_generator_returned_is_read_as_the_rows_it_yields() -> None:
    rest, modern, legacy = await every_wire(app(), "t", "streamed", {})
    assert rest.status_code == 200 and rest.json() == [{"id": 1}, {"id": 2}]
    for result in (modern, legacy):
        assert not result["isError"]
        assert result["structuredContent"]["items"] == [{"id": 1}, {"id": 2}]
        assert "hidden@example.com" not in str(result)


async def test_callbacks_see_the_data_in_json_types_as_the_docs_say() -> None:
    import datetime as dt
    import decimal
    import enum
    import uuid

    from mcpfusion.testing import ToolTester

    class Tier(enum.Enum):
        gold = "gold"

    class Account(BaseModel):
        due: dt.date
        total: decimal.Decimal
        tier: Tier
        ref: uuid.UUID

    seen: dict[str, Any] = {}
    view = Presenter("account").schema(Account).ui(lambda a: seen.update(a) or [])
    t = Tool("t")

    @t.action(readonly=True, returns=view)
    async def get() -> dict[str, Any]:
        """An account."""
        return {"due": dt.date(2026, 1, 2), "total": decimal.Decimal("1.50"), "tier": Tier.gold,
                "ref": uuid.UUID(int=7)}

    result = await ToolTester([t]).call("t", "get", {})
    assert seen == result.data == {"due": "2026-01-02", "total": "1.50", "tier": "gold",
                                   "ref": "00000000-0000-0000-0000-000000000007"}


async def test_an_async_generator_a_write_returns_is_read_under_its_timeout() -> None:
    import asyncio

    from fastapi import Depends

    from mcpfusion import Timeout
    from mcpfusion.testing import ToolTester

    async def session() -> Any:
        yield "db"  # a session that commits on close: the write's clock stops only for this

    t = Tool("t")
    never = asyncio.Event()

    @t.action(middleware=[Timeout(0.2)])
    async def purge(db: str = Depends(session)) -> Any:
        """Purge, row by row."""
        async def rows() -> AsyncIterator[dict[str, Any]]:
            yield {"deleted": 0}
            await never.wait()  # the work goes on in the generator: its Timeout must cut it
            yield {"deleted": 1}
        return rows()

    result = await asyncio.wait_for(ToolTester([t]).call("t", "purge", {}), 20)
    assert result.is_error and result.error_code == "TIMEOUT"


async def test_a_plain_def_handlers_generator_is_read_in_the_thread_pool() -> None:
    import threading

    from mcpfusion.testing import ToolTester

    readers: list[int] = []
    t = Tool("t")

    @t.action(readonly=True, returns=rows_view)
    def export() -> Any:
        """Rows from a blocking cursor."""
        def rows() -> Any:
            for i in range(3):
                readers.append(threading.get_ident())  # (a cursor's fetch would block here)
                yield {"id": i}
        return rows()

    result = await ToolTester([t]).call("t", "export", {})
    assert result.data == [{"id": 0}, {"id": 1}, {"id": 2}]
    assert readers and threading.get_ident() not in readers  # never on the event loop's thread
