"""Resource template matching is linear in the URI: no backtracking regex a long URI of separators' look-alikes
(`report://----...-/` against `report://{year}-{month}-{day}`) could stall the event loop with; and it takes
the same values as the greedy regex it replaces for every URI."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfusion import MCPFusion
from mcpfusion.resources import ResourceTemplate

ROOT = Path(__file__).resolve().parent.parent


def template(uri_template: str) -> ResourceTemplate:
    return ResourceTemplate(uri_template, lambda: None, "t")


def greedy_regex(uri_template: str) -> re.Pattern[str]:
    """The regex templates were matched with (greedy groups, exponential on some URIs: small inputs only)."""
    regex, pos = "", 0
    for m in re.finditer(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", uri_template):
        regex += re.escape(uri_template[pos : m.start()]) + f"(?P<{m.group(1)}>[^/?#]+)"
        pos = m.end()
    return re.compile(regex + re.escape(uri_template[pos:]))


def brute_force(literals: list[str], names: list[str], uri: str) -> dict[str, str] | None:
    """Every way to cut `uri` into the template's pieces, the first variable longest first, then the next."""
    if not names:
        return {} if uri == literals[0] else None
    if not uri.startswith(literals[0]):
        return None
    rest = uri[len(literals[0]) :]
    for length in range(len(rest), 0, -1):
        value = rest[:length]
        if any(c in value for c in "/?#"):
            continue
        tail = brute_force(literals[1:], names[1:], rest[length:])
        if tail is not None:
            return {names[0]: value, **tail}
    return None


ALPHABET = "-/?#.a"
pieces = st.text(ALPHABET, max_size=3)


@st.composite
def template_and_uri(draw: st.DrawFn) -> tuple[list[str], str]:
    literals = draw(st.lists(pieces, min_size=1, max_size=6))
    if draw(st.booleans()):  # a URI of the template's own pieces: splits that may be ambiguous
        uri = literals[0] + "".join(draw(st.text(ALPHABET, min_size=1, max_size=4)) + lit for lit in literals[1:])
    else:
        uri = draw(st.text(ALPHABET + "{}", max_size=14))
    return literals, uri


@settings(max_examples=600, deadline=None)
@given(template_and_uri())
def test_matching_takes_the_values_the_greedy_regex_and_a_brute_force_take(case):
    literals, uri = case
    names = [f"v{i}" for i in range(len(literals) - 1)]
    uri_template = literals[0] + "".join(f"{{{name}}}{lit}" for name, lit in zip(names, literals[1:], strict=True))
    found = greedy_regex(uri_template).fullmatch(uri)
    expected = found.groupdict() if found else None
    assert template(uri_template).match(uri) == expected == brute_force(literals, names, uri)


@pytest.mark.parametrize(("uri_template", "uri", "expected"), [
    ("report://{year}-{month}-{day}", "report://2026-01-02", {"year": "2026", "month": "01", "day": "02"}),
    ("report://{year}-{month}-{day}", "report://a-b-c-d", {"year": "a-b", "month": "c", "day": "d"}),
    ("report://{year}-{month}-{day}", "report://2026-01", None),
    ("report://{year}-{month}-{day}", "report://2026-01-02/x", None),
    ("x://{a}{b}{c}", "x://abcd", {"a": "ab", "b": "c", "c": "d"}),
    ("crm://{kind}/{id}", "crm://customers/42", {"kind": "customers", "id": "42"}),
    ("crm://{kind}/{id}", "crm://customers/42/x", None),
    ("users://{id}/profile", "users://7/profile", {"id": "7"}),
    ("users://{id}/profile", "users:///profile", None),
    ("file://{path}.{ext}", "file://a.tar.gz", {"path": "a.tar", "ext": "gz"}),
    ("q://{a}?x={b}#{c}", "q://1?x=2#3", {"a": "1", "b": "2", "c": "3"}),
])
def test_examples_match_as_before(uri_template, uri, expected):
    assert template(uri_template).match(uri) == expected


def test_an_operator_expression_is_refused_not_read_as_literal_text():
    """Level 1 only: `{+path}` was matched as its own text, by no URI a client would send (probe4 item 5)."""
    with pytest.raises(ValueError, match=r"\{\+path\} \(at offset 8\) uses an RFC 6570 operator"):
        template("plain://{+path}")


def test_a_trailing_newline_is_no_part_of_a_template_ending_in_text():
    """The regex's `$` also matched before a final newline: `users://7/profile\\n` was that resource."""
    assert template("users://{id}/profile").match("users://7/profile\n") is None
    assert template("report://{a}-{b}-{c}").match("report://1-2-3\n") == {"a": "1", "b": "2", "c": "3\n"}


def test_a_variable_named_twice_is_refused_at_declaration():
    with pytest.raises(ValueError, match="names a variable twice"):
        template("pair://{id}/{id}")


ADVERSARIAL = """
import asyncio, httpx
from mcpfusion import MCPFusion
from mcpfusion.mcp.jsonrpc import McpError
fusion = MCPFusion("reports")

@fusion.resource_template("report://{year}-{month}-{day}", name="report")
async def report(year: str, month: str, day: str) -> str:
    return year

@fusion.resource_template("log://{a}-{b}-{c}-{d}-{e}", name="log")
async def log(a: str, b: str, c: str, d: str, e: str) -> str:
    return a

def sized(head, body, last):  # 2,048 characters: the longest URI the wire takes
    return head + (body * 2048)[: 2048 - len(head) - 1] + last

uris = [sized("report://", "-", "/"), sized("log://", "-", "/"), sized("log://", "-a", "#")]
assert {len(uri) for uri in uris} == {2048}
for template in fusion.resources.templates:
    for uri in uris:
        assert template.match(uri) is None, uri
for uri in uris:
    assert not fusion.resources.exists(uri)  # (what resources/subscribe asks)
    try:
        asyncio.run(fusion.resources.read(uri))
    except McpError as error:
        assert error.code == -32602 and error.data == {"uri": uri}, error
    else:
        raise AssertionError("read")

async def wire():
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"}}
    transport = httpx.ASGITransport(app=fusion.build_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answer = await http.post("/mcp", headers={
            "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
            "mcp-method": "resources/read", "mcp-name": uris[1]}, json={
            "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uris[1], "_meta": meta}})
        body = answer.json()
        assert body["error"]["code"] == -32602 and body["error"]["data"] == {"uri": uris[1]}, body

asyncio.run(wire())
print("refused")
"""


def test_a_2048_character_uri_against_3_and_5_variables_is_refused_without_backtracking():
    """Run apart so that a match stuck backtracking (seconds to hours, holding the GIL) can be stopped: the
    10-second bound is a hang guard, not a speed assertion (the answer comes in milliseconds)."""
    try:
        done = subprocess.run([sys.executable, "-c", ADVERSARIAL], cwd=ROOT, capture_output=True, text=True,
                              timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("matching a 2,048-character URI against a template did not finish in 10 seconds")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused"


async def test_a_three_variable_template_reads_over_the_wire():
    fusion = MCPFusion("reports")

    @fusion.resource_template("report://{year}-{month}-{day}", name="report", mime_type="text/plain")
    async def report(year: str, month: str, day: str) -> str:
        return f"{day}.{month}.{year}"

    transport = httpx.ASGITransport(app=fusion.build_app())
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        for uri, text in [("report://2026-01-02", "02.01.2026"), ("report://a-b-c-d", "d.c.a-b")]:
            answer = await http.post("/mcp", headers={
                "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                "mcp-method": "resources/read", "mcp-name": uri}, json={
                "jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": uri, "_meta": meta}})
            assert answer.json()["result"]["contents"][0]["text"] == text


def test_many_variables_over_many_runs():
    """Eight variables, a URI cut by many separators: the regex's answer where it has one quickly, and a
    refusal where its class never matches."""
    uri_template = "x://" + "".join(f"{{v{i}}}." for i in range(8)) + "end"
    uri = "x://" + ".".join(itertools.repeat("a", 12)) + ".end"
    found = greedy_regex(uri_template).fullmatch(uri)
    assert template(uri_template).match(uri) == (found.groupdict() if found else None)
    assert template(uri_template).match("x://" + "/." * 100_000 + "end") is None
