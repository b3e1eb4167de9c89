"""Cold start: what a server builds on first use instead of at start-up (argument models, REST routes), and
that what it builds then is what it built eagerly before (same routes, same OpenAPI, same answers)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import httpx
import mcp_types
import mcp_types.jsonrpc
import mcp_types.version
import pytest
from fastapi import Depends, FastAPI, Header, HTTPException
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field

from mcpfusion import MCPFusion, Tool
from mcpfusion.mcp import jsonrpc, protocol
from mcpfusion.rest import ActionRoute, LateActions
from mcpfusion.tool import _return_annotation


class Item(BaseModel):
    id: str
    name: str


def build() -> tuple[Tool, MCPFusion]:
    tool = Tool("items", description="Items")

    @tool.action(readonly=True)
    async def get_item(id: Annotated[str, Field(max_length=10)]) -> Item:
        """Get one item"""
        return Item(id=id, name="first")

    @tool.action(idempotent=True)
    async def rename(id: str, name: Annotated[str, Field(min_length=1)]) -> Item:
        """Rename an item"""
        return Item(id=id, name=name)

    return tool, MCPFusion(name="cold", version="1.0.0", tools=[tool], json_response=True)


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def action_routes(app: FastAPI) -> dict[str, ActionRoute]:
    return {r.path: r for r in app.routes if isinstance(r, ActionRoute)}


async def test_argument_model_is_made_on_first_use_and_validates_as_declared():
    tool, _ = build()
    action = tool.actions["get_item"]
    assert "args_model" not in vars(action)  # declaring made no pydantic model
    assert action.input_schema["properties"]["id"] == {"type": "string", "maxLength": 10}
    assert action.args_model is action.args_model  # made once
    assert action.args_model.__name__ == "items_get_item_arguments"
    assert action.validate({"id": "i1"}) == {"id": "i1"}


async def test_rest_routes_are_built_per_action_on_first_request():
    _, fusion = build()
    app = fusion.build_app()
    routes = action_routes(app)
    assert set(routes) == {"/api/items/get_item", "/api/items/rename"}
    assert not any(isinstance(r, APIRoute) and r.path.startswith("/api/") for r in app.routes)
    assert all(route._declare is not None for route in routes.values())  # nothing built yet
    async with client(app) as http:
        got = await http.get("/api/items/get_item", params={"id": "i1"})
        assert (got.status_code, got.json()) == (200, {"id": "i1", "name": "first"})
        assert routes["/api/items/rename"]._declare is not None  # the other action is still unbuilt
        posted = await http.post("/api/items/get_item", json={"id": "i2"})
        assert (posted.status_code, posted.json()["id"]) == (200, "i2")
        too_long = await http.post("/api/items/get_item", json={"id": "x" * 11})
        assert too_long.status_code == 422 and too_long.headers["content-type"] == "application/problem+json"
        # rename has no GET (not read-only): 405 with the methods the path has
        wrong = await http.get("/api/items/rename", params={"id": "i1", "name": "n"})
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
        both = await http.delete("/api/items/get_item")
        assert (both.status_code, both.headers["allow"]) == (405, "GET, HEAD, POST")
    assert app.url_path_for("items.get_item") == "/api/items/get_item"
    assert app.url_path_for("items.get_item.get") == "/api/items/get_item"


async def test_openapi_documents_every_action_before_any_request():
    _, fusion = build()
    app = fusion.build_app()
    paths = app.openapi()["paths"]
    assert set(paths["/api/items/get_item"]) == {"get", "post"}
    assert set(paths["/api/items/rename"]) == {"post"}
    rename = paths["/api/items/rename"]["post"]
    assert rename["operationId"] == "items_rename" and rename["requestBody"]["required"] is True
    body = rename["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["id", "name"] and body["additionalProperties"] is False
    assert [p["name"] for p in paths["/api/items/get_item"]["get"]["parameters"]] == ["id"]
    # (every /api/ route is built lazily; `LateActions` routes the actions added after build_app)
    assert all(isinstance(r, (ActionRoute, LateActions)) for r in app.routes if getattr(r, "path", "").startswith("/api/"))


async def test_app_dependencies_guard_lazily_built_rest_routes():
    async def require_key(x_key: str | None = Header(None)) -> None:
        if x_key != "secret":
            raise HTTPException(401, "missing key")

    app = FastAPI(dependencies=[Depends(require_key)])
    build()[1].mount(app)
    async with client(app) as http:
        assert (await http.post("/api/items/get_item", json={"id": "i1"})).status_code == 401
        ok = await http.post("/api/items/get_item", json={"id": "i1"}, headers={"x-key": "secret"})
        assert ok.status_code == 200
    operation = app.openapi()["paths"]["/api/items/get_item"]["post"]
    assert any(p["name"] == "x-key" for p in operation["parameters"])  # the app's dependency is documented


def test_return_annotation_read_once_with_or_without_extras():
    async def plain() -> list[Item]: ...

    async def annotated() -> Annotated[list[Item], "doc"]: ...

    async def nested() -> dict[str, Annotated[int, Field(ge=0)]]: ...

    hints: dict[str, Any] = {"return": list[Item]}
    assert _return_annotation(plain, hints) == list[Item]
    assert _return_annotation(annotated, {"return": Annotated[list[Item], "doc"]}) == list[Item]
    assert _return_annotation(nested, {"return": dict[str, Annotated[int, Field(ge=0)]]}) == dict[str, int]


# Imports and builds a server, reports which protocol modules that loaded, then answers one MCP request.
PROTOCOL_PROBE = r"""
import asyncio, json, sys
import httpx
from mcpfusion import MCPFusion, Tool

tool = Tool("items", description="Items")

@tool.action(readonly=True)
async def get_item(id: str) -> dict:
    "Get one item"
    return {"id": id}

app = MCPFusion(name="cold", version="1.0.0", tools=[tool], json_response=True).build_app()
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp_types", "mcp") or m == "pydantic.v1")

async def main():
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", "accept": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        reply = await http.post("/mcp", headers=headers,
                                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
        bad = await http.post("/mcp", headers={**headers, "content-type": "application/json"}, content=b"{not json")
    return [t["name"] for t in reply.json()["result"]["tools"]], bad.status_code, bad.json()["error"]["code"]

answer = asyncio.run(main())
from mcpfusion.mcp.modern import _ladder
print(json.dumps({"loaded": loaded, "answer": answer, "sdk_after": sorted(m for m in sys.modules if m.split(".")[0] == "mcp"),
                  "ladder": _ladder().__file__}))
"""


def test_import_and_build_leave_the_protocol_types_for_the_first_mcp_request():
    """`mcp_types` (every protocol model: a third of importing mcpfusion) is loaded by the first MCP request,
    not by importing the framework and building a server; its constants are still what the engine uses.
    Nor do the built-in routes make FastAPI import `pydantic.v1` (a typed parameter or response model does)."""
    out = subprocess.run([sys.executable, "-c", PROTOCOL_PROBE], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    probe = json.loads(out.strip().splitlines()[-1])
    assert probe["loaded"] == []
    assert probe["answer"] == [["items"], 400, mcp_types.jsonrpc.PARSE_ERROR]
    # The 2026-07-28 request ran the SDK's own ladder module, without the SDK package's `__init__` (its client
    # and server): no module of the `mcp` package was imported.
    assert probe["sdk_after"] == []
    sdk = importlib.util.find_spec("mcp")
    assert probe["ladder"] == str(Path(sdk.submodule_search_locations[0], "shared", "inbound.py"))


def test_the_ladder_is_the_sdks_module_once_the_sdk_is_loaded():
    import mcp.shared.inbound

    from mcpfusion.mcp.modern import _ladder

    _ladder.cache_clear()
    try:
        assert _ladder() is mcp.shared.inbound
    finally:
        _ladder.cache_clear()


def test_protocol_constants_are_read_from_mcp_types():
    assert jsonrpc.INVALID_PARAMS == mcp_types.jsonrpc.INVALID_PARAMS
    assert jsonrpc.http_status(mcp_types.jsonrpc.METHOD_NOT_FOUND) == 404
    assert jsonrpc.http_status(jsonrpc.REQUEST_TIMEOUT) == 200
    # Those of mcp_types this server serves (the older ones require JSON-RPC batches).
    served = tuple(v for v in mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS if v >= protocol.OLDEST_SERVED_VERSION)
    assert served == protocol.HANDSHAKE_PROTOCOL_VERSIONS
    assert "2025-03-26" not in protocol.HANDSHAKE_PROTOCOL_VERSIONS
    assert protocol.PROTOCOL_VERSION_META_KEY == mcp_types.PROTOCOL_VERSION_META_KEY
    with pytest.raises(AttributeError, match="NOT_A_CODE"):
        _ = jsonrpc.NOT_A_CODE


def test_healthz_is_documented_as_fastapi_documents_its_return_type():
    """`/healthz` has no response model (FastAPI would import `pydantic.v1` for it at start-up): its written-out
    OpenAPI answer is the one FastAPI generates from `-> dict[str, str]`."""
    from mcpfusion.health import healthz

    inferred = FastAPI()
    inferred.add_api_route("/healthz", healthz, methods=["GET"], tags=["health"], summary="Liveness")
    served = MCPFusion(name="cold", version="1.0.0").build_app()
    assert served.openapi()["paths"]["/healthz"] == inferred.openapi()["paths"]["/healthz"]


# Handlers declared as a module with `from __future__ import annotations` declares them: every annotation a string.
STRING_ANNOTATED = '''
from __future__ import annotations
from typing import Annotated, Any, Callable, ClassVar, List, Literal, Optional, Union
from pydantic import BaseModel, Field

class Row(BaseModel):
    id: str

def plain(a: int, b: str | None = None, c: Annotated[Literal["x", "y"] | None, Field(description="d")] = None,
          d: dict[str, Any] = {}, e: Any = 1, f: None = None, g: Callable[[int], str] = None) -> list[Row]: ...
def forward(a: list["Row"], b: List["Row"], c: Optional["Row"], d: Union[int, "Row"]) -> "Row": ...
def extras(a: Annotated[int, "meta"], b: type[Row], c: tuple[int, ...], d: "Annotated[str, Field(max_length=3)]"): ...
def refused(a: ClassVar[int]): ...
def unknown(a: Nowhere): ...
'''


def test_type_hints_are_typings_own():
    """`mcpfusion.hints.type_hints` compiles each annotation string once; what it returns, and what it raises,
    is what `typing.get_type_hints(fn, include_extras=True)` gives (forward references and failures are left
    to typing itself)."""
    import typing

    from mcpfusion.hints import type_hints

    namespace: dict[str, Any] = {}
    exec(compile(STRING_ANNOTATED, "<handlers>", "exec"), namespace)  # noqa: S102 - the handlers under test
    for name in ("plain", "forward", "extras"):
        fn = namespace[name]
        expected = typing.get_type_hints(fn, include_extras=True)
        got = type_hints(fn)
        assert repr(got) == repr(expected) and list(got) == list(expected)  # FieldInfo compares by identity
        assert all(type(got[k]) is type(expected[k]) for k in got)
    assert type_hints(namespace["plain"])["f"] is type(None)
    with pytest.raises(TypeError, match="not valid as type argument"):
        type_hints(namespace["refused"])
    with pytest.raises(NameError, match="Nowhere"):
        type_hints(namespace["unknown"])


def test_an_annotation_that_cannot_be_evaluated_fails_at_declaration():
    namespace: dict[str, Any] = {"__name__": "handlers"}
    exec(compile(STRING_ANNOTATED, "<handlers>", "exec"), namespace)  # noqa: S102 - the handler under test
    tool = Tool("items", description="Items")
    with pytest.raises(TypeError, match=r"^handlers\.unknown: its annotations cannot be evaluated \(NameError: name 'Nowhere' "
                                        r"is not defined\)"):
        tool.action(readonly=True, description="Unknown")(namespace["unknown"])
    assert not tool.actions


@pytest.mark.parametrize("doc", ["Get one item", "  Get\tone item  ", "Get one.\n\n    More.", "\n    Get one\n    item.\n",
                                 "", None])
def test_one_line_docstrings_describe_as_cleandoc_would(doc):
    import inspect

    from mcpfusion.tool import _first_line

    expected = inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ").strip() if doc else ""
    assert _first_line(doc) == expected


# The same annotations in several handlers, as a module of many tools declares them.
SHARED_ANNOTATIONS = '''
from __future__ import annotations
import typing
from typing import Annotated, Literal
from annotated_types import Gt
from fastapi import Depends, Query
from pydantic import Field

def store(): ...
class Note:
    __repr__ = lambda self: "Note()"

def note(): return Note()

def first(a: Annotated[str, Field(max_length=3)], b: Literal["x"] | None, c: Annotated[int, Gt(0), Query()],
          d: Annotated[int, Depends(store)], e: Annotated[int, note()], f: typing.Optional[int], g: int): ...
def second(a: Annotated[str, Field(max_length=3)], b: Literal["x"] | None, c: Annotated[int, Gt(0), Query()],
           d: Annotated[int, Depends(store)], e: Annotated[int, note()], f: typing.Optional[int], g: int): ...
'''


def test_type_hints_share_the_value_of_an_annotation_its_names_decide():
    """An annotation made of names and declarative constructors (`Field`, `Query`, `Depends`, annotated-types'
    constraints) is evaluated once per binding of its names, its value shared as an alias's would be; one
    calling anything else is evaluated anew, as typing does; every value is typing's."""
    import typing

    from mcpfusion.hints import type_hints

    namespace: dict[str, Any] = {}
    exec(compile(SHARED_ANNOTATIONS, "<handlers>", "exec"), namespace)  # noqa: S102 - the handlers under test
    first, second = type_hints(namespace["first"]), type_hints(namespace["second"])
    for fn, got in (("first", first), ("second", second)):
        expected = typing.get_type_hints(namespace[fn], include_extras=True)
        assert repr(got) == repr(expected) and list(got) == list(expected)
    assert all(first[name] is second[name] for name in "abcdg")
    assert first["e"] is not second["e"]  # `note()` may answer anything: called for each handler
    assert typing.get_args(first["e"])[1] is not typing.get_args(second["e"])[1]
    namespace["Field"] = lambda **kwargs: kwargs  # a name bound to something else: evaluated again, with it
    assert type_hints(namespace["first"])["a"] == Annotated[str, {"max_length": 3}]
    namespace["Field"] = Field
    assert type_hints(namespace["first"])["a"] is first["a"]


def test_per_annotation_remembers_each_annotation_object(monkeypatch):
    """What depends on an annotation alone is worked out once per annotation object (by identity: unhashable
    ones included, equal ones apart), and the memo stays bounded."""
    from mcpfusion import hints, memo

    seen: list[Any] = []
    remembered = hints.per_annotation(lambda annotation: seen.append(annotation) or len(seen))
    unhashable = Annotated[list[int], ["metadata"]]
    assert remembered(unhashable) == remembered(unhashable) == 1
    equal = Annotated[list[int], ["metadata"]]
    assert equal == unhashable and equal is not unhashable and remembered(equal) == 2
    monkeypatch.setattr(memo, "MEMO_SIZE", 2)
    assert remembered(str) == 3 and remembered(unhashable) == 4 and remembered(str) == 3


def test_an_action_reads_and_prints_as_the_dataclass_it_was():
    """`Action` is a plain class (a dataclass compiles its methods at import): same fields in the same order,
    same defaults, the dataclass's repr, compared by identity."""
    import inspect

    from mcpfusion.tool import Action

    tool, _ = build()
    action = tool.actions["get_item"]
    parameters = list(inspect.signature(Action).parameters.values())
    assert tuple(p.name for p in parameters) == Action._FIELDS
    assert {p.name: p.default for p in parameters if p.default is not p.empty} == {
        "paginate": None, "middleware": (), "confirm": False, "content_types": None, "json_schema": None,
        "json_validator": None, "own_scopes": frozenset(), "content_only": False}
    assert repr(action) == "Action(" + ", ".join(f"{n}={getattr(action, n)!r}" for n in Action._FIELDS) + ")"
    assert repr(action).startswith("Action(tool=Tool('items', actions=['get_item', 'rename']), name='get_item', ")
    assert action == action and action != tool.actions["rename"]


FACTORY = '''
from __future__ import annotations
from typing import Annotated
from pydantic import Field

def make():
    def get(id: Annotated[str, Field(max_length=3)], n: int = 1) -> dict[str, int]: ...
    return get
'''


def test_handlers_of_one_code_object_share_their_hints_while_they_hold():
    """The handlers a factory makes (one code object) get the hints worked out for the first, as long as they
    have its annotations and its names are bound to the same objects; each gets its own dict."""
    import typing

    from mcpfusion.hints import type_hints

    namespace: dict[str, Any] = {}
    exec(compile(FACTORY, "<factory>", "exec"), namespace)  # noqa: S102 - the handlers under test
    first, second = namespace["make"](), namespace["make"]()
    hints = type_hints(first)
    again = type_hints(second)
    assert again == hints and again is not hints and again["id"] is hints["id"]
    assert repr(again) == repr(typing.get_type_hints(second, include_extras=True))
    namespace["int"] = bool  # a builtin shadowed in the module: evaluated again
    assert type_hints(namespace["make"]())["n"] is bool
    del namespace["int"]
    third = namespace["make"]()
    third.__annotations__["n"] = "str"  # annotations changed: its own
    assert type_hints(third)["n"] is str and type_hints(namespace["make"]())["n"] is int


def test_the_grouped_input_schema_reads_the_declared_schemas_without_changing_them():
    """The grouped tool's merge is handed each action's declared schema itself (no copy): it must leave every
    one as it was, nested parts included, and share none of its parts with what it returns."""
    from typing import Literal

    class Body(BaseModel):
        name: str = Field(min_length=1)
        tags: list[Literal["a", "b"]] = []

    tool = Tool("things", description="Things")

    @tool.action(readonly=True)
    async def find(status: Annotated[Literal["on", "off"] | None, Field(description="One of on, off.")] = None,
                   limit: Annotated[int, Field(ge=1)] = 5) -> dict[str, Any]:
        """Find things"""
        return {}

    @tool.action()
    async def make(body: Body, status: Literal["on"] = "on") -> dict[str, Any]:
        """Make a thing"""
        return {}

    declared = [action.read_input_schema() for action in tool.actions.values()]
    assert all(d is a.declared_schema() for d, a in zip(declared, tool.actions.values(), strict=True))
    before = json.dumps(declared)
    merged = tool.grouped_input_schema()
    assert json.dumps(declared) == before

    def containers(node: Any) -> list[int]:
        if isinstance(node, dict):
            return [id(node), *(i for v in node.values() for i in containers(v))]
        if isinstance(node, list):
            return [id(node), *(i for v in node for i in containers(v))]
        return []

    assert not set(containers(merged)) & set(containers(declared))
    assert merged == tool.grouped_input_schema()


LAZY_EXPORTS_PROBE = """
import json, sys
import mcpfusion
loaded = sorted(m for m in ("audit", "egress", "guards", "ratelimit", "telemetry") if f"mcpfusion.{m}" in sys.modules)
from mcpfusion import RateLimit, Timeout
import mcpfusion.guards, mcpfusion.ratelimit
same = [RateLimit is mcpfusion.ratelimit.RateLimit, Timeout is mcpfusion.guards.Timeout,
        mcpfusion.Telemetry is mcpfusion.telemetry.Telemetry, mcpfusion.Audit is mcpfusion.audit.Audit]
star = {}
exec("from mcpfusion import *", star)
print(json.dumps({"loaded": loaded, "same": same, "missing": sorted(set(mcpfusion.__all__) - set(star)),
                  "listed": all(n in dir(mcpfusion) for n in ("EgressLimit", "Concurrency", "telemetry"))}))
"""


def test_optional_middleware_and_telemetry_are_imported_on_first_use():
    """Importing the package leaves the optional middleware and telemetry modules alone; their names (and the
    modules as attributes) are still the package's, for `from mcpfusion import ...`, star imports and `dir`."""
    out = subprocess.run([sys.executable, "-c", LAZY_EXPORTS_PROBE], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {"loaded": [], "same": [True] * 4, "missing": [],
                                                        "listed": True}
    import mcpfusion

    with pytest.raises(AttributeError, match="has no attribute 'nowhere'"):
        mcpfusion.nowhere  # noqa: B018 - the attribute access under test


def test_schema_walkers_leave_leaves_as_they_are():
    """The schema walkers test for a dict or a list before descending (a call saved per leaf): leaves of any
    kind, tuples included, come back as the very objects they were."""
    from mcpfusion.exposition import nullable_types, short_enums
    from mcpfusion.schema import copied, inline_refs, rewrite, without

    leaf = ("a", 1)
    schema = {"type": "object", "properties": {"x": {"enum": ["a", "b"], "type": "string", "default": leaf}},
              "examples": [leaf, None, True, 1.5, [leaf]], "$defs": {"D": {"const": leaf}},
              "items": {"$ref": "#/$defs/D"}}
    for walked in (copied(schema), without(schema, {"title"}), rewrite(schema, lambda node, root: node),
                   inline_refs(schema), short_enums(schema), nullable_types(schema)):
        assert walked["examples"][0] is leaf and walked["examples"][4][0] is leaf
        assert walked["properties"]["x"]["default"] is leaf
    assert inline_refs(schema)["items"] == {"const": leaf} and copied(schema) == schema


def _nodes(schema: Any) -> list[Any]:
    """Every dict and list of a JSON schema."""
    if isinstance(schema, dict):
        return [schema, *(node for value in schema.values() for node in _nodes(value))]
    if isinstance(schema, list):
        return [schema, *(node for value in schema for node in _nodes(value))]
    return []


def test_actions_of_one_presenter_derive_equal_schemas_sharing_nothing():
    # The derived output schema is worked out once per (presenters, shape) and each action given its copies.
    from mcpfusion import Presenter

    class Child(BaseModel):
        a: int = Field(description="A")

    class Parent(BaseModel):
        one: Child
        many: list[Child]

    tool = Tool("t")
    presenter = Presenter("p").schema(Parent)

    @tool.action(returns=presenter)
    async def first() -> dict[str, Any]:
        """First"""
        return {}

    @tool.action(returns=presenter)
    async def second() -> dict[str, Any]:
        """Second"""
        return {}

    one, two = tool.actions["first"], tool.actions["second"]
    assert one.output_schema == two.output_schema and one.declared_output() == two.declared_output()
    assert "$defs" in one.output_schema  # Child written once
    ids = {id(node) for node in _nodes(one.output_schema) + _nodes(one.declared_output())}
    assert not ids & {id(node) for node in _nodes(two.output_schema) + _nodes(two.declared_output())}
    one.output_schema["properties"].clear()
    assert two.output_schema["properties"]
