"""A date, a datetime or a time is text in the input schema: a number there (as JSON or as text) is refused
with the form to send, on every transport, rather than read as a Unix timestamp (`86400` is 1970-01-02)."""

from __future__ import annotations

import datetime as dt

import httpx
from pydantic import BaseModel

from mcpfusion import Tool
from mcpfusion.app import MCPFusion
from mcpfusion.testing import ToolTester


class Slot(BaseModel):
    starts: dt.datetime
    at: dt.time | None = None


def calendar() -> Tool:
    tool = Tool("calendar", description="Bookings")

    @tool.action()
    async def book(day: dt.date, slots: list[Slot] | None = None, count: int | dt.date = 1) -> dict:
        """Book a day"""
        return {"day": day.isoformat(), "slots": len(slots or []), "count": str(count)}

    return tool


async def test_numbers_for_dates_are_refused_with_the_form_to_send():
    t = ToolTester(MCPFusion("cal", tools=[calendar()]).registry)
    timestamp = await t.call("calendar", "book", {"day": 86400})
    compact = await t.call("calendar", "book", {"day": "20270101"})
    nested = await t.call("calendar", "book", {"day": "2027-01-01", "slots": [
        {"starts": 1_700_000_000}, {"starts": "2027-01-01T09:00:00Z", "at": " 3600 "}]})
    for result in (timestamp, compact, nested):
        assert result.error_code == "VALIDATION_ERROR", result.text
    assert "YYYY-MM-DD" in timestamp.text and "read as a timestamp" in timestamp.text
    assert "1970" not in timestamp.text and "should have zero time" not in compact.text
    assert "slots[0].starts" in nested.text and "ISO 8601" in nested.text
    assert "slots[1].at" in nested.text and "HH:MM" in nested.text


async def test_dates_as_text_and_numbers_where_a_number_may_go_still_pass():
    t = ToolTester(MCPFusion("cal", tools=[calendar()]).registry)
    fine = await t.call("calendar", "book", {"day": "2027-01-31", "slots": [
        {"starts": "2027-01-31T09:30:00+01:00", "at": "09:30"}], "count": 3})
    assert fine.error_code is None, fine.text
    assert fine.data["day"] == "2027-01-31" and fine.data["count"] == "3"


async def test_rest_refuses_a_timestamp_for_a_date_in_the_body():
    app = MCPFusion("cal", tools=[calendar()]).build_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        refused = await http.post("/api/calendar/book", json={"day": 86400})
        fine = await http.post("/api/calendar/book", json={"day": "2027-01-31"})
    assert refused.status_code == 422 and "YYYY-MM-DD" in refused.text
    assert fine.status_code == 200 and fine.json()["day"] == "2027-01-31"


async def test_a_date_in_a_union_is_not_read_from_a_number_another_choice_does_not_take():
    tool = Tool("when", description="Unions")

    @tool.action(readonly=True)
    async def pick(either: dt.date | dt.datetime | None = None, named: dt.date | str | None = None,
                   counted: dt.date | int | None = None) -> dict:
        """Pick"""
        return {"either": str(either), "named": str(named), "counted": str(counted)}

    t = ToolTester(MCPFusion("when", tools=[tool]).registry)
    for arguments in ({"either": 86400}, {"either": "86400"}, {"named": 86400}, {"counted": "86400"}):
        refused = await t.call("when", "pick", arguments)
        assert refused.error_code == "VALIDATION_ERROR" and "read as a timestamp" in refused.text, arguments
        assert "1970" not in refused.text
    kept = await t.call("when", "pick", {"either": "2027-01-31", "named": "86400", "counted": 86400})
    assert kept.error_code is None, kept.text
    assert kept.data == {"either": "2027-01-31", "named": "86400", "counted": "86400"}
    assert (await t.call("when", "pick", {"counted": True})).error_code == "VALIDATION_ERROR"
