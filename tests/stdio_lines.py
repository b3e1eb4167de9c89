"""What an in-process stdio bridge writes, read line by line by the stdio tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

WAIT = 30  # a guard against a hang, never a timing assertion


class Lines:
    """What the bridge writes, with a way to wait for a line."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()

    def write(self, text: str) -> None:
        self.items.append(json.loads(text))
        self.arrived.set()

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        async def find() -> dict[str, Any]:
            while True:
                for item in self.items:
                    if predicate(item):
                        return item
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(find(), WAIT)

    async def question(self) -> dict[str, Any]:
        return await self.wait_for(lambda m: m.get("method") == "elicitation/create")

    async def reply(self, msg_id: int) -> str:
        """The text of the answer to request `msg_id`, once it is written."""
        found = await self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m)
        return str(found["result"]["content"][0]["text"])

    def with_id(self, msg_id: Any) -> list[dict[str, Any]]:
        return [m for m in self.items if m.get("id") == msg_id and "method" not in m]
