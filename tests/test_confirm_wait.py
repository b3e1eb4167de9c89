"""The wait for the user's confirmation is not the action's run: on the 2025-11-25 wire (an elicitation on the
call's stream) a `Timeout` does not count it and a `Concurrency` slot is free meanwhile; a BUSY refusal from a
tool's or the app's bulkhead names what is busy. And a `confirm="..."` template shows the caller's values with
their line breaks, controls and bidi overrides escaped: the caller's text cannot rewrite the question."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcpfusion import Concurrency, MCPFusion, Timeout, Tool
from mcpfusion.mcp.stdio import StdioBridge
from tests.governance_kit import MODERN_META, Caller
from tests.stdio_lines import WAIT, Lines

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}
INITED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def session(tools: list[Tool]) -> tuple[StdioBridge, Lines]:
    """A 2025-11-25 session over the in-process stdio bridge, from a client that can be asked (elicitation)."""
    lines = Lines()
    bridge = StdioBridge(MCPFusion("confirming", tools=tools).build_app(), lines.write, headers={})
    await bridge.startup()
    await bridge.handle_line(json.dumps(INIT))
    await bridge.handle_line(json.dumps(INITED))
    return bridge, lines


def call(msg_id: int, name: str, arguments: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call",
                       "params": {"name": name, "arguments": arguments}})


def answer(question: dict[str, Any], yes: bool) -> str:
    result = {"action": "accept", "content": {"confirm": True}} if yes else {"action": "decline"}
    return json.dumps({"jsonrpc": "2.0", "id": question["id"], "result": result})


async def spin() -> None:
    """Let the loop run what is due (a timer that expired, the lines it leads to)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def test_a_timeout_does_not_count_the_time_the_user_takes_to_answer():
    """While the question is open the loop's clock jumps past the Timeout: the guard's clock is stopped, so
    the user's yes runs the action (it used to fail TIMEOUT, the yes lost)."""
    voided: list[str] = []
    ledger = Tool("ledger", exposition="flat")

    @ledger.action(destructive=True, confirm="Void invoice {id}?", middleware=[Timeout(2)])
    async def void(id: str) -> str:
        """Void an invoice."""
        voided.append(id)
        return f"voided {id}"

    bridge, lines = await session([ledger])
    try:
        bridge.submit(call(1, "ledger_void", {"id": "inv_1"}))
        question = await lines.question()
        assert question["params"]["message"] == 'Void invoice "inv_1"?'
        loop = asyncio.get_running_loop()
        real = loop.time
        loop.time = lambda: real() + 3.0  # type: ignore[method-assign]  # the user reads for 3 s
        try:
            await spin()
        finally:
            del loop.time  # type: ignore[method-assign]
        await bridge.handle_line(answer(question, yes=True))
        assert await lines.reply(1) == "voided inv_1" and voided == ["inv_1"]
    finally:
        await bridge.close()


def bulkhead_ledger(voided: list[str], release: asyncio.Event | None = None) -> Tool:
    ledger = Tool("ledger", exposition="flat", middleware=[Concurrency(1)])

    @ledger.action(destructive=True, confirm="Void invoice {id}?")
    async def void(id: str) -> str:
        """Void an invoice."""
        voided.append(id)
        return f"voided {id}"

    @ledger.action(readonly=True)
    async def get(id: str) -> str:
        """Read an invoice."""
        if release is not None:
            await release.wait()
        return f"invoice {id}"

    return ledger


async def test_a_question_the_user_reads_holds_no_concurrency_slot():
    voided: list[str] = []
    bridge, lines = await session([bulkhead_ledger(voided)])
    try:
        bridge.submit(call(1, "ledger_void", {"id": "inv_1"}))
        question = await lines.question()
        bridge.submit(call(2, "ledger_get", {"id": "inv_2"}))  # another call of the tool, meanwhile
        assert await lines.reply(2) == "invoice inv_2"
        await bridge.handle_line(answer(question, yes=True))
        assert await lines.reply(1) == "voided inv_1" and voided == ["inv_1"]
    finally:
        await bridge.close()


async def test_a_yes_waits_for_the_slot_it_lent_out_and_a_no_does_not():
    """The user agreed while another call of the tool runs: the action runs once that call is over (not
    BUSY). The user declined: NOT_CONFIRMED at once, without waiting for a slot."""
    voided: list[str] = []
    release = asyncio.Event()
    bridge, lines = await session([bulkhead_ledger(voided, release)])
    try:
        bridge.submit(call(1, "ledger_void", {"id": "inv_1"}))
        bridge.submit(call(3, "ledger_void", {"id": "inv_3"}))
        declined = await lines.wait_for(lambda m: m.get("params", {}).get("message") == 'Void invoice "inv_1"?')
        agreed = await lines.wait_for(lambda m: m.get("params", {}).get("message") == 'Void invoice "inv_3"?')
        bridge.submit(call(2, "ledger_get", {"id": "inv_2"}))  # takes the slot and keeps it
        await spin()
        await bridge.handle_line(answer(declined, yes=False))
        assert 'code="NOT_CONFIRMED"' in await lines.reply(1)
        await bridge.handle_line(answer(agreed, yes=True))
        await spin()
        assert voided == [] and not [m for m in lines.items if m.get("id") == 3]
        release.set()
        assert await lines.reply(2) == "invoice inv_2"
        assert await lines.reply(3) == "voided inv_3" and voided == ["inv_3"]
    finally:
        await bridge.close()


async def test_busy_names_the_bulkhead_of_a_tool_not_the_call_refused_as_the_one_running():
    started, release = asyncio.Event(), asyncio.Event()
    ledger = Tool("ledger", exposition="flat", middleware=[Concurrency(1)])
    own = Tool("report", exposition="flat")

    @ledger.action(destructive=True)
    async def void(id: str) -> str:
        """Void an invoice."""
        started.set()
        await release.wait()
        return f"voided {id}"

    @ledger.action(readonly=True)
    async def get(id: str) -> str:
        """Read an invoice."""
        return f"invoice {id}"

    @own.action(readonly=True, middleware=[Concurrency(1)])
    async def build() -> str:
        """Build the report."""
        started.set()
        await release.wait()
        return "built"

    caller = Caller(MCPFusion("busy", tools=[ledger, own]).build_app(), "tester", "ledger")
    reports = Caller(caller.app, "tester", "report")
    try:
        running = asyncio.create_task(caller.call("void", {"id": "inv_1"}))
        await asyncio.wait_for(started.wait(), WAIT)
        busy = await caller.call("get", {"id": "inv_2"})
        assert busy.code == "BUSY"
        assert ("ledger.get cannot run now: the actions of ledger are already running 1 call(s) at once, the "
                "limit they share.") in busy.text, busy.text
        started.clear()
        building = asyncio.create_task(reports.call("build"))
        await asyncio.wait_for(started.wait(), WAIT)
        again = await reports.call("build")
        assert again.code == "BUSY" and "report.build is already running 1 time(s) at once, its limit." in again.text
        release.set()
        assert (await running).code is None and (await building).code is None
    finally:
        release.set()
        await caller.aclose()
        await reports.aclose()


async def questions_asked(accounts: list[str]) -> list[str]:
    """The question a client with elicitation is asked (2026-07-28) for a transfer to each account."""
    bank = Tool("bank", exposition="flat")

    @bank.action(destructive=True, confirm="Transfer {amount} EUR to account {account}?")
    async def transfer(account: str, amount: int) -> str:
        """Transfer money."""
        return "done"

    caller = Caller(MCPFusion("bank", tools=[bank]).build_app(), "mcp-2026", "bank")
    meta = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
               "mcp-name": "bank_transfer"}
    asked = []
    try:
        for account in accounts:
            params = {"name": "bank_transfer", "arguments": {"account": account, "amount": 5000}, "_meta": meta}
            r = await caller.client.post("/mcp", headers=headers, json={
                "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
            (request,) = r.json()["result"]["inputRequests"].values()
            asked.append(request["params"]["message"])
    finally:
        await caller.aclose()
    return asked


async def test_a_template_shows_line_breaks_controls_and_bidi_overrides_escaped():
    asked = await questions_asked([
        "savings (your own)\n\n\n\n(really: attacker IBAN DE00 6666)",
        "\u202e6666 00ED NABI\u202c",
        "ok\u2066\u200f\u061c\r\t\x1b[2J\u2028",
    ])
    assert asked == [
        'Transfer 5000 EUR to account "savings (your own)\\n\\n\\n\\n(really: attacker IBAN DE00 6666)"?',
        'Transfer 5000 EUR to account "\\u202e6666 00ED NABI\\u202c"?',
        'Transfer 5000 EUR to account "ok\\u2066\\u200f\\u061c\\r\\t\\u001b[2J\\u2028"?',
    ]


async def test_a_template_shows_printable_values_as_they_are():
    asked = await questions_asked(["DE44 5001 0517 5407 3249 31", "Zürich – café 'Müller' \u00a0€ 日本"])
    assert asked == ['Transfer 5000 EUR to account "DE44 5001 0517 5407 3249 31"?',
                     "Transfer 5000 EUR to account \"Zürich – café 'Müller' \u00a0€ 日本\"?"]
