"""An app whose own texts try to run script in its /docs and /redoc pages: a markdown `javascript:` link in
a tool, an action and a parameter description, and a title that closes the page's <title>."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI
from pydantic import Field

from mcpfusion import MCPFusion, Tool

TITLE = 'Notes</title><script>alert("title")</script>'
notes = Tool("notes", description="Notes [tool](javascript:alert('tool'))")


@notes.action(readonly=True)
async def get(id: Annotated[str, Field(description="The id [param](javascript:alert('param'))")]) -> dict[str, Any]:
    """Get one note [action](javascript:alert('action'))"""
    return {"id": id}


def build_app() -> FastAPI:
    return MCPFusion("notes", tools=[notes], title=TITLE).build_app()
