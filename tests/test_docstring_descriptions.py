"""An action's description is its docstring cleaned the same way on every Python version and every surface.

A docstring closing on a line of its own (`\"\"\"Other.\\n    \"\"\"`) kept that line of spaces in tools/list,
tools.json, /tools and the lockfile under Python 3.11's `inspect.cleandoc` (later versions drop it), while
OpenAPI showed it cleaned: the lockfile could differ between Python versions for the same code.
"""

from __future__ import annotations

from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool
from mcpfusion.tool import _docstring

notes = Tool("notes", description="Notes", exposition="flat")


@notes.action(readonly=True)
async def other(id: str) -> dict:
    """Other.
    """
    return {}


async def get(id: str) -> dict:
    return {}


# (trailing spaces on two lines, which an editor would strip from a docstring written out)
get.__doc__ = "Get one note.   \n\n    Longer explanation here,  \n        an indented example line.\n\n    "
notes.action(readonly=True)(get)


def test_a_docstring_is_one_description_on_every_surface():
    app = MCPFusion("notes", tools=[notes]).build_app()
    client = TestClient(app)
    listed = {t["name"]: t["description"] for t in client.post("/mcp", json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}},
        headers={"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list"},
    ).json()["result"]["tools"]}
    assert listed["notes_other"] == "Other."
    assert listed["notes_get"] == "Get one note.\n\nLonger explanation here,\n    an indented example line."
    documented = {a["name"]: a["description"] for t in client.get("/tools.json").json()["tools"] for a in t["actions"]}
    assert documented == {"other": listed["notes_other"], "get": listed["notes_get"]}
    paths = client.get("/openapi.json").json()["paths"]
    assert paths["/api/notes/other"]["post"]["description"] == "Other."


def test_the_cleaning_keeps_inner_lines_and_indentation():
    assert _docstring("Other.\n    ") == "Other."
    assert _docstring("\n    A.\n\n      b  \n    c\n  \t\n") == "A.\n\n  b\nc"
