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
