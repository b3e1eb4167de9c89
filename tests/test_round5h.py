"""Round 5h: the lockfile pins a paginated action's page size as served (and the docs show it), an older
lockfile still reads, and `lock --check` shows a long value's change around the difference."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Presenter, Tool
from mcpfusion.dispatch import ToolRegistry
from mcpfusion.docs import lock

ROWS = [{"id": f"n{i:02d}"} for i in range(40)]


def notes(paginate: int | bool | None, limit: int = 50, *, support_limit: int | None = None) -> Tool:
    """A list action paged `paginate` (None: whole); with `support_limit`, a second presenter the caller's
    role picks, with that limit."""
    tool = Tool("notes")
    view = Presenter("note").schema({"id": str}).limit(limit)
    if support_limit is None:
        @tool.action(readonly=True, paginate=paginate, returns=view)
        async def list_all() -> list[dict[str, Any]]:
            """All notes."""
            return ROWS
    else:
        support = Presenter("note_support").schema({"id": str}).limit(support_limit)

        def chosen() -> Presenter:
            return view

        @tool.action(readonly=True, paginate=paginate, returns=chosen, presenters=[view, support])
        async def list_all() -> list[dict[str, Any]]:  # type: ignore[no-redef]
            """All notes."""
            return ROWS
    return tool


def contract(tool: Tool) -> dict[str, Any]:
    return lock.contract(ToolRegistry([tool]))


def check(pinned: dict[str, Any], served: dict[str, Any]) -> list[str]:
    """What `mcpfusion lock --check` reports (the lockfile as written, read back and resealed)."""
    return lock.diff(lock.resealed(json.loads(lock.dumps(pinned))), served)


# -- 1. the page size is part of the contract --------------------------------------------------------------

def test_the_page_size_as_served_is_pinned_and_a_change_is_named():
    twenty, five = contract(notes(20)), contract(notes(5))
    assert twenty["tools"]["notes"]["actions"]["list_all"]["pagination"] == {"page_size": 20}
    assert twenty["digest"] != five["digest"]
    assert check(twenty, five) == ["notes.list_all: page size 20 -> 5 rows"]
    assert check(twenty, contract(notes(20))) == []
    # paginate=True: the presenter's limit; paginate=N above it: capped by it (as `Action.page_size` serves)
    assert contract(notes(True, limit=50))["tools"]["notes"]["actions"]["list_all"]["pagination"] == {"page_size": 50}
    assert check(contract(notes(True, limit=50)), contract(notes(7))) == ["notes.list_all: page size 50 -> 7 rows"]
    assert check(contract(notes(True, limit=50)), contract(notes(80, limit=50))) == []


def test_paging_turned_on_or_off_and_per_presenter_sizes_are_named():
    whole, paged = contract(notes(None)), contract(notes(20))
    assert whole["tools"]["notes"]["actions"]["list_all"]["pagination"] is None
    assert "notes.list_all: now paginated, 20 per page" in check(whole, paged)
    assert "notes.list_all: no longer paginated (was 20 per page)" in check(paged, whole)
    mixed = contract(notes(30, support_limit=10))
    assert mixed["tools"]["notes"]["actions"]["list_all"]["pagination"] == {
        "page_size": {"note": 30, "note_support": 10}}
    assert check(mixed, contract(notes(30, support_limit=5))) == [
        "notes.list_all: pagination 30 per page (note), 10 per page (note_support) -> "
        "30 per page (note), 5 per page (note_support)",
        "notes.list_all [presenter note_support]: limit 10 -> 5"]


def test_a_lockfile_of_format_2_reads_as_one_format_change():
    """A lockfile written before pagination was pinned: one line naming the format and what it now pins, no
    "contract changed" per action, no crash; a real change beside it is still named."""
    served = contract(notes(20))
    older = json.loads(lock.dumps(served))
    older["mcpfusion_lock"] = 2
    for tool in older["tools"].values():
        for action in tool["actions"].values():
            del action["pagination"]
    assert check(older, served) == [
        f"lockfile format 2 -> {lock.FORMAT} (now pinned: "
        + "; ".join(what for number, what in sorted(lock.FORMATS.items()) if number > 2) + ")"]
    older["tools"]["notes"]["actions"]["list_all"]["description"] = "Some notes."
    assert check(older, served)[1:] == ['notes.list_all: description "Some notes." -> "All notes."']


def test_the_docs_page_and_manifest_show_the_page_size():
    app = MCPFusion("notes", tools=[notes(20)]).build_app()
    client = TestClient(app)
    first = client.post("/api/notes/list_all", json={})
    assert len(first.json()) == 20 and first.headers["next-cursor"]  # what the docs promise is what is served
    [entry] = client.get("/tools.json").json()["tools"][0]["actions"]
    assert entry["pagination"]["page_size"] == 20
    assert "20 per page" in entry["pagination"]["summary"] and "next_cursor" in entry["pagination"]["summary"]
    page = client.get("/tools").text
    assert '<p class="pagination">Paginated, 20 per page: follow next_cursor' in page


def test_an_action_that_answers_whole_shows_no_pagination():
    client = TestClient(MCPFusion("notes", tools=[notes(None)]).build_app())
    [entry] = client.get("/tools.json").json()["tools"][0]["actions"]
    assert entry["pagination"] is None
    assert 'class="pagination"' not in client.get("/tools").text


# -- 2. a long value's change is shown around the difference -----------------------------------------------

STATUS = ["draft", "published", "scheduled", "deleted", "archived"]


def statuses(description: str, values: list[str] = STATUS) -> Tool:
    tool = Tool("notes")
    schema = {"type": "object", "properties": {"status": {
        "anyOf": [{"enum": values, "type": "string"}, {"type": "null"}], "default": None,
        "description": description}}}

    @tool.action(readonly=True, input_schema=schema)
    async def list_all(status: str | None = None) -> list[dict[str, Any]]:
        """All notes."""
        return []

    return tool


def sides(line: str) -> tuple[str, str]:
    before, after = line.split(" -> ")
    return before, after


def test_a_change_after_the_first_100_characters_names_the_path_and_both_values():
    changes = check(contract(statuses("Only notes with this status (or archived).")),
                    contract(statuses("Only notes with this status; archived ones are hidden unless asked for.")))
    assert changes == ['notes.list_all: parameter "status" changed: description: "Only notes with this status '
                       '(or archived)." -> "Only notes with this status; archived ones are hidden unless asked for."']
    [line] = check(contract(statuses("x")), contract(statuses("x", [*STATUS[:-1], "hidden"])))
    assert 'anyOf[0].enum[4]: "archived" -> "hidden"' in line


def test_a_long_text_is_cut_around_its_difference_never_to_two_identical_sides():
    long = "Every note of the workspace, newest first, " * 6
    for old, new in [(long + "in pages.", long + "in one list."), (long, long + "!"), ("!" + long, long)]:
        [line] = check(contract(statuses(old)), contract(statuses(new)))
        before, after = sides(line.split("description: ", 1)[1])
        assert before != after and len(before) < 140 and len(after) < 140, line
    [line] = check(contract(statuses(long + "in pages.")), contract(statuses(long + "in one list.")))
    assert line.endswith('description: ...e workspace, newest first, in pages." -> '
                         '...e workspace, newest first, in one list."')
