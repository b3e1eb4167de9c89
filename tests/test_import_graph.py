"""The import graph of `mcpfusion` has no cycle: not between modules, not between packages.

Every import counts, including those inside functions and under `TYPE_CHECKING`: a lazy import that only
dodges a cycle is still a cycle in the design. The graph is read from the source by grimp.
"""

from __future__ import annotations

import grimp
import pytest

ROOT = "mcpfusion"
# The composition modules import every layer by design (`MCPFusion` wires the engine to the tools, the CLI
# and the package's public re-exports sit on top); everything else in the root package is the core.
COMPOSITION = frozenset({"mcpfusion", "mcpfusion.__main__", "mcpfusion.app", "mcpfusion.cli"})
SUBPACKAGES = ("mcpfusion.mcp", "mcpfusion.redis", "mcpfusion.docs")
# Leaves every layer may use (they import nothing of mcpfusion, so they cannot close a cycle): the one JSON
# serializer shared by MCP and REST, o200k token counting (docs and telemetry), the version, the
# optional-extra importer, request bodies (limit, JSON parsing) of both HTTP adapters, the caller
# identity sessions are bound to, the plain classes' dataclass behaviours (`slots`: content items,
# sessions and transport settings alike), and text as a reader sees it (`visible`: what any error quotes).
FOUNDATION = frozenset({"mcpfusion.serializer", "mcpfusion.tokens", "mcpfusion.version", "mcpfusion.extras",
                        "mcpfusion.body", "mcpfusion.identity", "mcpfusion.slots", "mcpfusion.visible"})


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(ROOT, cache_dir=None)


def strongly_connected(nodes: set[str], edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the groups of nodes that import each other (directly or not), size > 1."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(nodes):
        if node not in index:
            visit(node)
    return groups


def explain(graph: grimp.ImportGraph, group: list[str], part_of: dict[str, str]) -> list[str]:
    """The import lines that tie a group together (for the failure message)."""
    lines = []
    for module in sorted(graph.modules):
        if part_of.get(module, module) not in group:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if part_of.get(imported, imported) in group and part_of.get(imported) != part_of.get(module):
                for detail in graph.get_import_details(importer=module, imported=imported):
                    lines.append(f"{module}:{detail['line_number']}: {detail['line_contents']}")
    return lines


def part(module: str) -> str:
    """The package-level node a module belongs to."""
    for package in SUBPACKAGES:
        if module == package or module.startswith(package + "."):
            return package
    if module in FOUNDATION:
        return "foundation"
    return "composition" if module in COMPOSITION else "core"


def test_foundation_modules_are_leaves(graph):
    assert {m: graph.find_modules_directly_imported_by(m) for m in FOUNDATION} == {m: set() for m in FOUNDATION}


def test_the_graph_sees_lazy_and_type_checking_imports(graph):
    # The walker must not miss what it is meant to forbid: a function-level import and a TYPE_CHECKING one.
    assert "mcpfusion.redis" in graph.find_modules_directly_imported_by("mcpfusion.app")  # inside a function
    assert "mcpfusion.mcp.events" in graph.find_modules_directly_imported_by("mcpfusion.mcp.broker")  # TYPE_CHECKING


def test_no_cycle_between_modules(graph):
    modules = set(graph.modules)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in modules}
    cycles = strongly_connected(modules, edges)
    identity = {m: m for m in modules}
    assert not cycles, "\n".join(f"cycle {c}:\n  " + "\n  ".join(explain(graph, c, identity)) for c in cycles)


def test_no_cycle_between_packages(graph):
    part_of = {m: part(m) for m in graph.modules}
    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            if part_of[imported] != part_of[module]:
                edges.setdefault(part_of[module], set()).add(part_of[imported])
    cycles = strongly_connected(set(part_of.values()), edges)
    assert not cycles, "\n".join(f"cycle {c}:\n  " + "\n  ".join(explain(graph, c, part_of)) for c in cycles)


def imports_leaving(graph: grimp.ImportGraph, source: str, forbidden) -> list[str]:
    """Imports from modules of part `source` into a part for which `forbidden(part)` holds."""
    return [
        f"{module} -> {imported}"
        for module in graph.modules
        if part(module) == source
        for imported in graph.find_modules_directly_imported_by(module)
        if forbidden(part(imported))
    ]


def test_the_engine_imports_nothing_outside_itself(graph):
    """mcp/ knows tools through `ToolBackend` and stores through its protocols: no import leaves it (but
    for the foundation leaves)."""
    inside = {"mcpfusion.mcp", "foundation"}
    assert imports_leaving(graph, "mcpfusion.mcp", lambda target: target not in inside) == []


def test_stores_and_adapters_stay_out_of_the_core(graph):
    """The core (tools, dispatch, perception) never reaches the Redis stores, the docs site or the composition."""
    outside = {"mcpfusion.redis", "mcpfusion.docs", "composition"}
    assert imports_leaving(graph, "core", outside.__contains__) == []
