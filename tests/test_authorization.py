"""OAuth authorization (mcpfusion.authorization): protected resource metadata (RFC 9728), 401/403 challenges,
per-action scopes enforced alike on MCP (both wires), stdio, REST and the tester, per-caller listings."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import HTTPException, Security
from fastapi.security import SecurityScopes

from mcpfusion import Tool, ToolError
from mcpfusion.app import MCPFusion
from mcpfusion.auth import bearer_token, unauthorized
from mcpfusion.authorization import ProtectedResource, scopes_of
from mcpfusion.mcp.engine import LISTING_CACHE_SIZE
from mcpfusion.mcp.stdio import StdioBridge
from mcpfusion.testing import ToolTester

AS = "https://auth.example.test"
TOKENS = {  # token -> what the authentication keeps (claims, as a JWT verifier returns them)
    "reader": {"sub": "r", "scope": "crm:read"},
    "writer": {"sub": "w", "scope": "crm:read crm:write"},
    "scp": {"sub": "s", "scp": ["crm:read", "crm:write", "crm:admin"]},
    "nobody": {"sub": "n", "scope": "other"},
}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}


async def authenticate(request):
    token = bearer_token(request)
    if token not in TOKENS:
        raise unauthorized("Unknown token.")
    return TOKENS[token]


def tools() -> list[Tool]:
    crm = Tool("crm", description="Customers", toon_description=True, scopes=["crm:read"])

    @crm.action(readonly=True)
    async def get(id: str) -> dict:
        """Get one customer"""
        return {"id": id}

    @crm.action(scopes=["crm:write"], destructive=False)
    async def rename(id: str, name: str) -> dict:
        """Rename a customer"""
        return {"id": id, "name": name}

    @crm.action(scopes=["crm:write", "crm:admin"])
    async def erase(id: str) -> dict:
        """Erase a customer"""
        return {"id": id, "erased": True}

    books = Tool("books", description="Books", exposition="profiles", scopes=["crm:read"])

    @books.action(readonly=True)
    async def list_books() -> list:
        """List books"""
        return []

    @books.action(readonly=True)
    async def count() -> int:
        """Count books"""
        return 0

    @books.action(destructive=False, scopes=["crm:write"])
    async def add(title: str) -> dict:
        """Add a book"""
        return {"title": title}

    @books.action(destructive=False, scopes=["crm:write"])
    async def tag(title: str) -> dict:
        """Tag a book"""
        return {"title": title}

    ping = Tool("ping", description="Anyone", exposition="flat")

    @ping.action(readonly=True)
    async def pong() -> str:
        """Answer pong"""
        return "pong"

    return [crm, books, ping]


def fusion(**resource) -> MCPFusion:
    options = {"authorization_servers": [AS], "authenticate": authenticate, "token_url": AS + "/token", **resource}
    return MCPFusion("crm", tools=tools(), authorization=ProtectedResource(**options), json_response=True)


def client(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def auth(token):
    return {"authorization": f"Bearer {token}"} if token else {}


class Session:
    """One caller on the 2025-11-25 session wire."""

    def __init__(self, http, token):
        self.http, self.token, self.headers = http, token, {"accept": "application/json, text/event-stream",
                                                           **auth(token)}

    async def rpc(self, method, params=None):
        if "mcp-session-id" not in self.headers:
            init = await self.http.post("/mcp", headers=self.headers, json={
                "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            assert init.status_code == 200, init.text
            self.headers.update({"mcp-session-id": init.headers["mcp-session-id"],
                                 "mcp-protocol-version": "2025-11-25"})
        r = await self.http.post("/mcp", headers=self.headers,
                                 json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
        return r.json()


async def modern(http, token, method, params=None):
    """One call on the sessionless 2026-07-28 wire."""
    params = {**(params or {}), "_meta": META}
    headers = {"accept": "application/json", "mcp-protocol-version": "2026-07-28", "mcp-method": method,
               **({"mcp-name": params["name"]} if "name" in params else {}), **auth(token)}
    r = await http.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return r.json()


def names(listed):
    return {t["name"]: t for t in listed["result"]["tools"]}


# -- metadata and challenges ----------------------------------------------------------------------------

async def test_metadata_is_served_at_both_well_known_paths():
    app = fusion(resource_documentation="https://docs.example.test/crm").build_app()
    async with client(app) as http:
        root = await http.get("/.well-known/oauth-protected-resource")
        suffixed = await http.get("/.well-known/oauth-protected-resource/mcp")
    assert root.status_code == suffixed.status_code == 200
    assert root.json() == suffixed.json() == {
        "resource": "http://127.0.0.1/mcp",  # derived from the request: no resource= configured
        "authorization_servers": [AS],
        "scopes_supported": ["crm:admin", "crm:read", "crm:write"],  # every scope the tools declare
        "bearer_methods_supported": ["header"],
        "resource_documentation": "https://docs.example.test/crm",
    }
    assert root.headers["access-control-allow-origin"] == "*"  # browser clients read it cross-origin


async def test_a_configured_resource_is_the_metadata_and_challenge_url():
    app = fusion(resource="https://api.example.test/crm/mcp", scopes_supported=["crm:read"]).build_app()
    async with client(app) as http:
        document = (await http.get("/.well-known/oauth-protected-resource/crm/mcp")).json()
        refused = await http.post("/mcp", json={})
    assert document["resource"] == "https://api.example.test/crm/mcp" and document["scopes_supported"] == ["crm:read"]
    assert refused.headers["www-authenticate"] == \
        'Bearer resource_metadata="https://api.example.test/.well-known/oauth-protected-resource/crm/mcp"'


@pytest.mark.parametrize("path", ["/mcp", "/api/crm/get"])
async def test_every_401_names_the_resource_metadata(path):
    app = fusion().build_app()
    own = "api" if path.startswith("/api/") else "mcp"  # (REST is a resource of its own, RFC 9728 section 3.3)
    metadata = f'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/{own}"'
    async with client(app) as http:
        missing = await http.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        bad = await http.post(path, json={}, headers=auth("forged"))
        modern_wire = await http.post(path, json={}, headers={"mcp-protocol-version": "2026-07-28"})
    assert missing.status_code == bad.status_code == modern_wire.status_code == 401
    assert missing.headers["www-authenticate"] == f"Bearer {metadata}"  # no token: no error code (RFC 6750)
    assert modern_wire.headers["www-authenticate"] == f"Bearer {metadata}"
    assert bad.headers["www-authenticate"] == \
        f'Bearer error="invalid_token", error_description="Unknown token.", {metadata}'


async def test_required_scopes_are_a_403_before_any_json_rpc_is_read():
    app = fusion(required_scopes=["crm:read"]).build_app()
    async with client(app) as http:
        refused = await http.post("/mcp", content=b"not even json", headers=auth("nobody"))
        rest = await http.post("/api/ping/pong", json={}, headers=auth("nobody"))
        unauthenticated = await http.post("/mcp", json={})
        allowed = await Session(http, "reader").rpc("ping")
    assert refused.status_code == rest.status_code == 403
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="insufficient_scope", scope="crm:read", resource_metadata="http://')
    assert refused.headers["content-type"] == "application/problem+json"
    assert unauthenticated.headers["www-authenticate"].endswith(', scope="crm:read"')  # what to ask for
    assert allowed == {"jsonrpc": "2.0", "id": 1, "result": {}}


# -- per-caller listings and calls ------------------------------------------------------------------------

async def test_tools_list_shows_each_caller_only_what_its_scopes_allow_on_both_wires():
    app = fusion().build_app()
    async with client(app) as http:
        for wire in ("session", "modern"):
            async def listed(token, wire=wire):
                return names(await (Session(http, token).rpc("tools/list") if wire == "session"
                                    else modern(http, token, "tools/list")))

            reader, writer, nobody, everything = (await listed("reader"), await listed("writer"),
                                                  await listed("nobody"), await listed("scp"))
            assert set(nobody) == {"ping_pong"}  # the only tool without scopes
            assert set(reader) == {"crm", "books_read", "ping_pong"}  # books' writes hidden
            assert set(writer) == set(everything) == {"crm", "books_read", "books_write", "ping_pong"}
            assert reader["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get"]
            assert writer["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get", "rename"]
            assert everything["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get", "rename", "erase"]
            assert "rename" not in reader["crm"]["description"] and "name" not in reader["crm"]["inputSchema"][
                "properties"]
            assert "[1|]{action|desc|required}" in reader["crm"]["description"]  # the TOON table: one row
            assert "  rename|Rename a customer|id,name" in writer["crm"]["description"]
            assert reader["crm"]["annotations"] == {"readOnlyHint": True}  # the hints of what it sees


async def test_the_profiles_exposition_keeps_its_names_whatever_the_caller_sees():
    app = fusion().build_app()
    async with client(app) as http:
        reader = names(await Session(http, "reader").rpc("tools/list"))
        writer = names(await Session(http, "writer").rpc("tools/list"))
    assert "books_read" in writer and "books_write" in writer
    assert "books_read" in reader and "books_write" not in reader  # same name: a call routes the same way
    assert reader["books_read"]["inputSchema"]["properties"]["action"]["enum"] == ["list_books", "count"]


async def test_a_hidden_action_is_answered_exactly_like_an_unknown_one():
    app = fusion().build_app()
    async with client(app) as http:
        session = Session(http, "reader")
        hidden = await session.rpc("tools/call", {"name": "crm", "arguments": {"action": "rename", "id": "1",
                                                                                "name": "x"}})
        unknown = await session.rpc("tools/call", {"name": "crm", "arguments": {"action": "nosuch", "id": "1",
                                                                                 "name": "x"}})
        hidden_tool = await session.rpc("tools/call", {"name": "books_write", "arguments": {"action": "add"}})
        unknown_tool = await session.rpc("tools/call", {"name": "no_such_tool", "arguments": {"action": "add"}})
        modern_hidden = await modern(http, "reader", "tools/call", {"name": "books_write", "arguments": {}})
        allowed = await Session(http, "writer").rpc("tools/call", {"name": "crm", "arguments": {
            "action": "rename", "id": "1", "name": "x"}})
    text = hidden["result"]["content"][0]["text"]
    assert hidden["result"]["isError"] and text == unknown["result"]["content"][0]["text"].replace("nosuch", "rename")
    assert 'Tool "crm" has no action "rename"' in text and "one of: get." in text
    assert "crm.rename" not in text and "crm.erase" not in text  # available: what the caller may call
    assert hidden_tool["error"]["code"] == unknown_tool["error"]["code"] == -32602
    assert hidden_tool["error"]["data"]["available"] == unknown_tool["error"]["data"]["available"] == \
        ["books_read", "crm", "ping_pong"]
    assert hidden_tool["error"]["message"].replace("books_write", "X") == \
        unknown_tool["error"]["message"].replace("no_such_tool", "X")
    assert modern_hidden["error"]["code"] == -32602 and "Unknown tool: books_write" in modern_hidden["error"]["message"]
    assert allowed["result"]["isError"] is False


async def test_a_call_reads_the_callers_scopes_once_and_each_request_its_own():
    """Routing, authorizing and the header check of one tools/call share the scopes read for its request;
    the next request (another caller) reads its own."""
    seen: list[object] = []

    def counting(auth):
        seen.append(auth)
        return scopes_of(auth)

    app = MCPFusion("crm", tools=tools(), authorization=ProtectedResource(
        authorization_servers=[AS], authenticate=authenticate, scopes_of=counting), json_response=True).build_app()
    async with client(app) as http:
        await modern(http, "reader", "tools/list")
        seen.clear()
        allowed = await modern(http, "writer", "tools/call", {"name": "crm", "arguments": {
            "action": "rename", "id": "1", "name": "x"}})
        assert seen == [TOKENS["writer"]]
        refused = await modern(http, "reader", "tools/call", {"name": "crm", "arguments": {
            "action": "rename", "id": "1", "name": "x"}})
    assert allowed["result"]["isError"] is False
    assert seen == [TOKENS["writer"], TOKENS["reader"]]
    assert refused["result"]["isError"] and 'has no action "rename"' in refused["result"]["content"][0]["text"]


async def test_rest_refuses_a_missing_scope_with_insufficient_scope():
    app = fusion().build_app()
    async with client(app) as http:
        refused = await http.post("/api/crm/erase", json={"id": "1"}, headers=auth("writer"))
        allowed = await http.post("/api/crm/erase", json={"id": "1"}, headers=auth("scp"))
        read = await http.get("/api/crm/get", params={"id": "1"}, headers=auth("reader"))
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["www-authenticate"] == (
        'Bearer error="insufficient_scope", scope="crm:admin crm:read crm:write", '
        'resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/api", '
        'error_description="crm/erase needs the scope(s): crm:admin crm:read crm:write."')
    assert refused.json()["code"] == "FORBIDDEN" and "crm:admin" in refused.json()["detail"]
    assert allowed.status_code == 200 and allowed.json() == {"id": "1", "erased": True}
    assert read.status_code == 200


async def test_stdio_lists_and_refuses_like_http():
    app = fusion().build_app()
    lines: list[dict] = []
    bridge = StdioBridge(app, lambda text: lines.append(json.loads(text)), headers=auth("reader"))
    await bridge.startup()
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "crm", "arguments": {
            "action": "erase", "id": "1"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "crm", "arguments": {
            "action": "get", "id": "1"}}},
    ):
        await bridge.handle_line(json.dumps(message))
    await bridge.close()
    by_id = {m.get("id"): m for m in lines}
    listed = names(by_id[2])
    assert set(listed) == {"crm", "books_read", "ping_pong"}
    assert listed["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get"]
    assert 'Tool "crm" has no action "erase"' in by_id[3]["result"]["content"][0]["text"]
    assert by_id[4]["result"]["isError"] is False


async def test_the_tester_authenticates_and_hides_like_mcp():
    registry = fusion().registry
    tester = ToolTester(registry)
    reader = await tester.call("crm", "rename", {"id": "1", "name": "x"}, headers=auth("reader"))
    writer = await tester.call("crm", "rename", {"id": "1", "name": "x"}, headers=auth("writer"))
    profile = await tester.call("books", "add", {"title": "t"}, auth={"sub": "r", "scope": "crm:read"})
    anonymous = await tester.call("crm", "get", {"id": "1"})
    assert reader.error_code == "UNKNOWN_ACTION" and 'has no action "rename"' in reader.text
    assert writer.is_error is False and writer.data == {"id": "1", "name": "x"}
    # books/add (served on MCP by books_write, hidden as a whole there): addressed by tool and action, it reads
    # as an action books does not have, never naming the MCP tool that serves it.
    assert profile.error_code == "UNKNOWN_ACTION" and 'has no action "add"' in profile.text
    assert "books_write" not in profile.text
    assert anonymous.error_code == "UNAUTHORIZED"


async def test_without_authentication_nothing_is_enforced():
    server = MCPFusion("open", tools=tools(), json_response=True)
    app = server.build_app()
    async with client(app) as http:
        listed = names(await Session(http, None).rpc("tools/list"))
        erased = await http.post("/api/crm/erase", json={"id": "1"})
        missing = await http.get("/.well-known/oauth-protected-resource")
    assert listed["crm"]["inputSchema"]["properties"]["action"]["enum"] == ["get", "rename", "erase"]
    assert erased.status_code == 200 and missing.status_code == 404
    assert (await ToolTester(server.registry).call("crm", "erase", {"id": "1"})).is_error is False


def listings_built(server: MCPFusion) -> list[Any]:
    """The granted scopes of each tools/list the registry builds from now on (a cached one builds nothing)."""
    built: list[Any] = []
    original = server.registry.mcp_tools
    server.registry.mcp_tools = lambda granted=None: built.append(granted) or original(granted)
    return built


async def test_listings_are_cached_per_scope_set_and_bounded():
    server = fusion()
    app = server.build_app()
    built = listings_built(server)
    async with client(app) as http:
        for token in ("reader", "writer", "reader", "writer"):
            await Session(http, token).rpc("tools/list")
    assert built == [frozenset({"crm:read"}), frozenset({"crm:read", "crm:write"})]  # once per scope set
    engine = server.engine
    # Only scopes some action asks for split the cache: this tool makes every s{n} one of them.
    vault = Tool("vault", description="Vault", scopes=[f"s{n}" for n in range(LISTING_CACHE_SIZE + 10)])
    vault.action(readonly=True)(ping)
    server.registry.add(vault)
    for n in range(LISTING_CACHE_SIZE + 10):
        TOKENS[f"t{n}"] = {"sub": "x", "scope": f"crm:read s{n}"}
    try:
        async with client(app) as http:
            for n in range(LISTING_CACHE_SIZE + 10):
                await modern(http, f"t{n}", "tools/list")
    finally:
        for n in range(LISTING_CACHE_SIZE + 10):
            del TOKENS[f"t{n}"]
    assert len(engine._tools_cache) == LISTING_CACHE_SIZE
    server.engine.invalidate_tools()
    assert len(engine._tools_cache) == 0


async def ping() -> dict:
    """Answer pong."""
    return {"pong": True}


# -- declarations, OpenAPI, docs --------------------------------------------------------------------------

def test_scopes_are_checked_when_declared():
    with pytest.raises(TypeError, match="list of scope names"):
        Tool("t", scopes="billing:read")
    with pytest.raises(ValueError, match="not a valid OAuth scope"):
        Tool("t", scopes=["billing read"])
    tool = Tool("t", scopes=["a"])
    with pytest.raises(ValueError, match="not a valid OAuth scope"):
        @tool.action(scopes=['say "hi"'])
        async def hi() -> str:
            """Hi"""
            return "hi"


def test_scopes_of_reads_attributes_scope_strings_and_scp_lists():
    class Principal:
        scopes = ("a", "b")

    assert scopes_of(None) is None
    assert scopes_of({"scope": "a b"}) == scopes_of({"scp": ["a", "b"]}) == scopes_of(Principal()) == {"a", "b"}
    assert scopes_of({"sub": "x"}) == frozenset() and scopes_of(object()) == frozenset()  # says nothing: none


def test_a_principals_frozenset_of_scopes_is_read_as_its_scope_names_every_time():
    class Principal:
        def __init__(self, scopes):
            self.scopes = scopes

    role = frozenset({"a", "", 3, None, "b"})  # one object per role, read call after call
    for _ in range(3):
        assert scopes_of(Principal(role)) == {"a", "b"}
    assert scopes_of(Principal(frozenset({"c"}))) == {"c"}
    assert scopes_of(Principal({"a", 7})) == {"a"}  # a set may change: read anew


async def test_openapi_declares_oauth2_with_each_operations_scopes():
    app = fusion(authorization_url=AS + "/auth", scopes_supported={"crm:read": "Read", "crm:write": "Write",
                                                                   "crm:admin": "Erase"}).build_app()
    async with client(app) as http:
        schema = (await http.get("/openapi.json")).json()
    scheme = schema["components"]["securitySchemes"]["oauth2"]
    assert scheme["flows"]["clientCredentials"] == {"tokenUrl": AS + "/token", "scopes": {
        "crm:read": "Read", "crm:write": "Write", "crm:admin": "Erase"}}
    assert scheme["flows"]["authorizationCode"]["authorizationUrl"] == AS + "/auth"
    assert schema["paths"]["/api/crm/erase"]["post"]["security"] == [{"oauth2": ["crm:admin", "crm:read", "crm:write"]}]
    assert schema["paths"]["/api/crm/get"]["get"]["security"] == [{"oauth2": ["crm:read"]}]
    assert schema["paths"]["/api/ping/pong"]["post"]["security"] == [{"oauth2": []}]


async def test_docs_page_shows_each_actions_scopes():
    app = fusion().build_app()
    async with client(app) as http:
        manifest = (await http.get("/tools.json")).json()
        page = (await http.get("/tools")).text
    actions = {a["qualified_name"]: a for t in manifest["tools"] for a in t["actions"]}
    assert actions["crm.erase"]["scopes"] == ["crm:admin", "crm:read", "crm:write"]
    assert actions["ping.pong"]["scopes"] == []
    assert "OAuth scopes: <code>crm:admin</code> <code>crm:read</code> <code>crm:write</code>" in page


async def test_an_authentication_failure_other_than_401_keeps_its_status():
    async def role_refused(request):
        raise HTTPException(403, "Role 'guest' may not use this service.")

    resource = ProtectedResource(authorization_servers=[AS], authenticate=role_refused)
    app = MCPFusion("crm", tools=tools(), authorization=resource).build_app()
    async with client(app) as http:
        refused = await http.post("/mcp", json={}, headers=auth("reader"))
    assert refused.status_code == 403 and "guest" in refused.json()["detail"]


async def test_the_sdk_clients_oauth_helpers_discover_the_metadata_from_a_401():
    """What the official SDK client does on a 401: read resource_metadata, try the discovery URLs, validate."""
    from mcp.client.auth.utils import (
        build_protected_resource_metadata_discovery_urls,
        extract_resource_metadata_from_www_auth,
        extract_scope_from_www_auth,
    )
    from mcp.shared.auth import ProtectedResourceMetadata

    app = fusion(required_scopes=["crm:read"]).build_app()
    async with client(app) as http:
        refused = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        url = extract_resource_metadata_from_www_auth(refused)
        assert url == "http://127.0.0.1/.well-known/oauth-protected-resource/mcp"
        assert extract_scope_from_www_auth(refused) == "crm:read"
        urls = build_protected_resource_metadata_discovery_urls(None, "http://127.0.0.1/mcp")
        assert urls == ["http://127.0.0.1/.well-known/oauth-protected-resource/mcp",
                        "http://127.0.0.1/.well-known/oauth-protected-resource"]
        for found in {url, *urls}:
            document = ProtectedResourceMetadata.model_validate((await http.get(found)).json())
            assert str(document.resource) == "http://127.0.0.1/mcp"
            assert [str(a) for a in document.authorization_servers] == [AS]
        forbidden = await http.post("/mcp", json={}, headers=auth("nobody"))
        assert extract_scope_from_www_auth(forbidden) == "crm:read"
        assert extract_resource_metadata_from_www_auth(forbidden) == url


async def test_fastapi_security_scopes_count_as_the_actions_own():
    seen: list[list[str]] = []

    async def caller(security_scopes: SecurityScopes) -> str:
        seen.append(security_scopes.scopes)
        return "someone"

    audit = Tool("audit", description="Audit log")

    @audit.action(readonly=True)
    async def read_log(who: str = Security(caller, scopes=["audit:read"])) -> dict:
        """Read the audit log"""
        return {"who": who}

    assert read_log and audit.actions["read_log"].scopes == {"audit:read"}
    server = MCPFusion("audit", tools=[audit], json_response=True,
                       authorization=ProtectedResource(authorization_servers=[AS], authenticate=authenticate))
    app = server.build_app()
    TOKENS["auditor"] = {"sub": "a", "scope": "audit:read"}
    try:
        async with client(app) as http:
            assert names(await Session(http, "reader").rpc("tools/list")) == {}
            assert set(names(await Session(http, "auditor").rpc("tools/list"))) == {"audit"}
            assert (await http.post("/api/audit/read_log", json={}, headers=auth("reader"))).status_code == 403
            allowed = await http.post("/api/audit/read_log", json={}, headers=auth("auditor"))
            document = (await http.get("/.well-known/oauth-protected-resource")).json()
    finally:
        del TOKENS["auditor"]
    assert allowed.status_code == 200 and seen == [["audit:read"]]  # FastAPI hands the dependency its scopes
    assert document["scopes_supported"] == ["audit:read"]


async def test_an_errors_hints_never_name_a_hidden_action():
    shop = Tool("shop", description="Shop")

    @shop.action(readonly=True)
    async def find(id: str) -> dict:
        """Find an order"""
        raise ToolError("NOT_FOUND", f"Order {id} was not found.", available_actions=["shop.browse", "shop.ledger"])

    @shop.action(readonly=True)
    async def browse() -> list:
        """Browse orders"""
        return []

    @shop.action(readonly=True, scopes=["crm:admin"])
    async def ledger() -> list:
        """The internal ledger"""
        return []

    tester = ToolTester(MCPFusion("shop", tools=[shop]).registry)
    reader = await tester.call("shop", "find", {"id": "1"}, auth={"sub": "r", "scope": "crm:read"})
    admin = await tester.call("shop", "find", {"id": "1"}, auth={"sub": "a", "scope": "crm:admin"})
    assert reader.error_code == admin.error_code == "NOT_FOUND"
    assert "shop.browse" in reader.text and "ledger" not in reader.text
    assert "shop.ledger" in admin.text


def test_claims_mappings_are_told_from_principal_objects_per_class():
    from collections.abc import Mapping

    from mcpfusion.identity import identity_of, is_claims

    class Claims(Mapping):
        def __init__(self, **claims):
            self.claims = claims

        def __getitem__(self, key):
            return self.claims[key]

        def __iter__(self):
            return iter(self.claims)

        def __len__(self):
            return len(self.claims)

    class Principal:
        subject, tenant, scopes = "u1", "acme", frozenset({"a"})

    for _ in range(2):  # the second time from the per-class answer
        assert is_claims({"sub": "u1"}) and is_claims(Claims(sub="u1")) and not is_claims(Principal())
        assert scopes_of(Claims(scope="a b")) == {"a", "b"} and scopes_of(Principal()) == {"a"}
        assert identity_of(Claims(sub="u1", tenant="acme")) == identity_of({"sub": "u1", "tenant": "acme"})
        assert identity_of(Principal())[1] == "acme"
    classes = [type(f"P{n}", (), {"subject": str(n)}) for n in range(600)]  # more classes than it keeps
    assert not any(is_claims(cls()) for cls in classes) and is_claims({}) and is_claims(Claims())


async def test_suggestions_name_only_actions_the_caller_may_call():
    from mcpfusion import Presenter, response, suggest

    shop = Tool("shop", description="Shop")
    order = (Presenter("order").suggest(lambda o: [suggest("shop.refund", f"Refund {o['email']}"),
                                                      suggest("shop.browse", "Browse other orders")])
             .redact_pii(["email"]))

    @shop.action(readonly=True, returns=order)
    async def find(id: str) -> dict:
        """Find an order"""
        return {"id": id, "email": "ann@example.test"}

    @shop.action(readonly=True)
    async def only_hidden(id: str):
        """An answer that suggests a hidden action alone"""
        return response({"id": id}).suggest([suggest("shop.refund", "Refund it")]).build()

    @shop.action(readonly=True)
    async def browse() -> list:
        """Browse orders"""
        return []

    @shop.action(destructive=True, scopes=["crm:admin"])
    async def refund(id: str) -> dict:
        """Refund an order"""
        return {"id": id}

    fusion_ = MCPFusion("shop", tools=[shop], authorization=ProtectedResource(
        authorization_servers=[AS], authenticate=authenticate, token_url=AS + "/token"), json_response=True)
    tester = ToolTester(fusion_.registry)
    reader = await tester.call("shop", "find", {"id": "1"}, auth={"sub": "r", "scope": "crm:read"})
    admin = await tester.call("shop", "find", {"id": "1"}, auth={"sub": "a", "scope": "crm:admin"})
    alone = await tester.call("shop", "only_hidden", {"id": "1"}, auth={"sub": "r", "scope": "crm:read"})
    assert [s.action for s in reader.suggestions] == ["shop.browse"]
    assert "refund" not in reader.text and "<action_suggestions>\n- shop.browse: Browse other orders\n" in reader.text
    assert [s.action for s in admin.suggestions] == ["shop.refund", "shop.browse"]
    assert "ann@example.test" not in admin.text  # the redacted value stays out of the block written again
    assert alone.suggestions == [] and "action_suggestions" not in alone.text and "refund" not in alone.text
    async with client(fusion_.build_app()) as http:
        for wire in ("session", "modern"):
            params = {"name": "shop", "arguments": {"action": "find", "id": "1"}}
            got = await (Session(http, "reader").rpc("tools/call", params) if wire == "session"
                         else modern(http, "reader", "tools/call", params))
            texts = [c["text"] for c in got["result"]["content"]]
            assert not any("refund" in t for t in texts) and texts[-1].startswith("<action_suggestions>"), wire


async def test_rest_404s_name_only_what_the_caller_may_see():
    app = fusion().build_app()
    async with client(app) as http:
        reader = await http.post("/api/crm/nope", json={}, headers=auth("reader"))
        writer = await http.post("/api/crm/nope", json={}, headers=auth("writer"))
        no_tool = await http.post("/api/nope/get", json={}, headers=auth("nobody"))
    assert reader.status_code == writer.status_code == no_tool.status_code == 404
    assert "rename" not in reader.text and "erase" not in reader.text and "crm.get" in reader.text
    assert "crm.rename" in writer.text
    assert "crm" not in no_tool.json().get("available_actions", []) and '"books"' not in no_tool.text


# -- resources and prompts declared with scopes ----------------------------------------------------------

def scoped_fusion() -> MCPFusion:
    server = fusion()

    @server.resource_template("crm://{id}", name="card", scopes=["crm:write"])
    async def card(id: str) -> dict:
        """A customer card"""
        return {"id": id, "secret": "only writers"}

    @server.resource("crm://stats", name="stats", scopes=["crm:admin"])
    async def stats() -> dict:
        """Stats"""
        return {"customers": 3}

    @server.resource("crm://about", name="about")
    async def about() -> str:
        """About"""
        return "a CRM"

    @server.prompt(scopes=["crm:write"])
    async def draft(id: str) -> str:
        """Draft a letter"""
        return f"Write to {id}"

    @server.completion(argument="id", resource_template="crm://{id}")
    async def ids(value: str) -> list[str]:
        return ["c1", "c2"]

    return server


@pytest.mark.parametrize("wire", ["2025-11-25", "2026-07-28"])
async def test_resources_and_prompts_with_scopes_exist_only_for_callers_holding_them(wire):
    """A caller without a resource's (or prompt's) scopes neither lists nor reads, subscribes to, completes
    or gets it: it is answered as an unknown one, on both wires; a caller holding them uses them."""
    app = scoped_fusion().build_app()
    async with client(app) as http:
        async def rpc(token, method, params=None):
            if wire == "2025-11-25":
                return await Session(http, token).rpc(method, params)
            named = (params or {}).get("name") or (params or {}).get("uri")
            r = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                              "params": {**(params or {}), "_meta": META}},
                                headers={"accept": "application/json", "mcp-protocol-version": wire, "mcp-method": method,
                                         **({"mcp-name": named} if named else {}), **auth(token)})
            return r.json()

        for token, seen in (("reader", set()), ("writer", {"card", "draft"}), ("scp", {"card", "draft", "stats"})):
            resources = (await rpc(token, "resources/list"))["result"]["resources"]
            templates = (await rpc(token, "resources/templates/list"))["result"]["resourceTemplates"]
            prompts = (await rpc(token, "prompts/list"))["result"]["prompts"]
            listed = {r["name"] for r in resources + templates + prompts}
            assert listed == seen | {"about"}, (token, listed)
            read = await rpc(token, "resources/read", {"uri": "crm://c1"})
            got = await rpc(token, "prompts/get", {"name": "draft", "arguments": {"id": "c1"}})
            completed = await rpc(token, "completion/complete", {"ref": {"type": "ref/resource", "uri": "crm://{id}"},
                                                                 "argument": {"name": "id", "value": "c"}})
            if "card" in seen:
                assert "only writers" in json.dumps(read["result"]) and "result" in got and "result" in completed
            else:
                assert read["error"]["code"] == (-32002 if wire == "2025-11-25" else -32602)
                assert "Resource not found" in read["error"]["message"]
                assert "only writers" not in json.dumps(read)
                assert got["error"]["code"] == -32602 and "Unknown prompt" in got["error"]["message"]
                assert "draft" not in got["error"]["message"].split("Available prompts:")[1]
                assert completed["error"]["code"] == -32602, completed
            if wire == "2025-11-25":
                subscribed = await rpc(token, "resources/subscribe", {"uri": "crm://stats"})
                assert ("error" in subscribed) == ("stats" not in seen), (token, subscribed)


async def test_resource_and_prompt_scopes_are_advertised_in_the_metadata():
    app = scoped_fusion().build_app()
    async with client(app) as http:
        document = (await http.get("/.well-known/oauth-protected-resource")).json()
    assert document["scopes_supported"] == ["crm:admin", "crm:read", "crm:write"]
    server = MCPFusion("x", authorization=ProtectedResource(authorization_servers=[AS], authenticate=authenticate))
    server.resource("x://a", scopes=["docs:read"])(lambda: "a")
    async with client(server.build_app()) as http:
        assert (await http.get("/.well-known/oauth-protected-resource")).json()["scopes_supported"] == ["docs:read"]


async def test_a_hidden_templates_completion_is_not_reached_through_a_visible_template_matching_its_text():
    """A completion target is a template by its exact text (or a static resource by its URI): a visible
    template whose pattern happens to match the hidden one's text runs nothing of the hidden one."""
    server = fusion()

    @server.resource_template("crm://customers/{id}", name="customer", scopes=["crm:admin"])
    async def customer(id: str) -> dict:
        """A customer"""
        return {"id": id}

    @server.resource_template("crm://{kind}/{id}", name="anything")
    async def anything(kind: str, id: str) -> dict:
        """Anything"""
        return {"id": id}

    @server.completion(argument="id", resource_template="crm://customers/{id}")
    async def ids(value: str) -> list[str]:
        return ["SECRET-1"]

    async with client(server.build_app()) as http:
        for token, hidden in (("reader", True), ("scp", False)):
            completed = await Session(http, token).rpc("completion/complete", {
                "ref": {"type": "ref/resource", "uri": "crm://customers/{id}"}, "argument": {"name": "id", "value": ""}})
            if hidden:
                assert completed["error"]["code"] == -32602 and "SECRET" not in json.dumps(completed)
            else:
                assert completed["result"]["completion"]["values"] == ["SECRET-1"]
