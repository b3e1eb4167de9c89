"""A deterministic corpus of arguments per action (valid calls, then each parameter missing, null, of the
wrong type, past its bounds, outside its enum, taken from a sibling action, plus unknown and guarded fields),
and the server's verdict on each: what the advertised schema must never change.

    python tests/validation_corpus.py --write    # record tests/data/validation_verdicts.json

Recorded before the compact exposition landed (the "old" verdicts); re-record only when a contract changes on
purpose (`tests/test_compact_schema.py` names the action and input that changed).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "validation_verdicts.json"
WRONG = [12345, "text", True, 1.5, [], {}, None, "2026-01-15", "5", -1, 0]

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcpfusion.dispatch import ToolRegistry, _pop_select  # noqa: E402
from mcpfusion.docs.samples import resolve, sample  # noqa: E402
from mcpfusion.errors import ValidationFailed  # noqa: E402
from mcpfusion.select import check_audience  # noqa: E402
from mcpfusion.tool import Action  # noqa: E402


def _edges(schema: dict[str, Any], root: dict[str, Any]) -> list[Any]:
    """Values at and past the bounds of one parameter's schema (every branch of a union)."""
    schema = resolve(schema, root)
    out: list[Any] = []
    for branch in schema.get("anyOf", []) + schema.get("oneOf", []):
        out += _edges(branch, root)
    if "maxLength" in schema:
        out += ["m" * schema["maxLength"], "m" * (schema["maxLength"] + 1)]
    if "minLength" in schema:
        out += ["m" * schema["minLength"], "m" * max(schema["minLength"] - 1, 0)]
    for key, step in (("maximum", 1), ("minimum", -1), ("exclusiveMaximum", 0), ("exclusiveMinimum", 0)):
        if key in schema:
            out += [schema[key], schema[key] + step]
    if isinstance(schema.get("enum"), list):
        out += list(schema["enum"]) + ["__not_in_enum__", "overdue"]
    if "const" in schema:
        out += [schema["const"], "__not_const__"]
    if schema.get("type") == "array":
        item = sample(schema.get("items", {}), root)
        out += [[], [item] * (schema.get("maxItems", 3) + 1), ["text"], [item, item]]
    if schema.get("type") == "object" or "properties" in schema:
        full = sample(schema, root)
        out += [full, {**full, "unknown": 1}] if isinstance(full, dict) else []
        for key in schema.get("properties", {}):
            if isinstance(full, dict) and key in full:
                out.append({k: v for k, v in full.items() if k != key})
                out += [{**full, key: w} for w in WRONG[:3]]
    if "pattern" in schema:
        out += ["ABC-1", "abc"]
    return out


def corpus(action: Action) -> list[dict[str, Any]]:
    """Argument objects for `action`, deduplicated, in a stable order."""
    schema = action.input_schema
    props: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    valid = {name: sample(p, schema, name=name) for name, p in props.items()}
    minimal = {k: v for k, v in valid.items() if k in required}
    inputs: list[dict[str, Any]] = [minimal, valid, {}]
    siblings: dict[str, list[Any]] = {}
    for other in action.tool.actions.values():
        other_schema = other.input_schema
        for name, p in other_schema.get("properties", {}).items():
            values = siblings.setdefault(name, [])
            values += [sample(p, other_schema, name=name), *_edges(p, other_schema)]
    for name, p in props.items():
        base = {k: v for k, v in minimal.items()}
        inputs.append({k: v for k, v in valid.items() if k != name})
        for value in [*WRONG, *_edges(p, schema), *siblings.get(name, [])]:
            inputs.append({**base, name: value})
    for name, values in siblings.items():
        if name not in props:
            inputs += [{**minimal, name: v} for v in values[:2]]
    inputs += [{**minimal, "unknown_field": 1}, {**minimal, "id": "x"}, {**minimal, "total_cents": 1},
               {**minimal, "tenant": "acme"}, {**minimal, "_select": ["id"]}, {**minimal, "_select": "id"}]
    seen: set[str] = set()
    out = []
    for item in inputs:
        key = json.dumps(item, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(copy.deepcopy(item))
    return out


def verdict(action: Action, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the server decides for these arguments, as dispatch does it: `_select`, then strict validation."""
    args = dict(arguments)
    try:
        select = _pop_select(action, args)
        if select and action.presenter_dependency is not None:  # the check dispatch makes once the caller's
            check_audience(action.label, select, action.output_keys())  # presenter is chosen (here: all fields)
        action.validate(args)
    except ValidationFailed as exc:
        return {"ok": False, "fields": sorted({name for name, _ in exc.fields})}
    return {"ok": True}


def registries() -> dict[str, ToolRegistry]:
    from app.main import create_app
    from app.settings import Settings
    from tests.tricky_tools import TOOLS

    reference = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:")).state.mcpfusion.registry
    return {"reference": reference, "tricky": ToolRegistry(TOOLS)}


def record() -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for label, registry in registries().items():
        for action in registry.actions():
            out[f"{label}:{action.qualified_name}"] = [
                {"args": args, **verdict(action, args)} for args in corpus(action)
            ]
    return out


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    data = record()
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(data, indent=0, sort_keys=True, default=str) + "\n")
    total = sum(len(v) for v in data.values())
    accepted = sum(e["ok"] for v in data.values() for e in v)
    print(f"{FIXTURE.relative_to(ROOT)}: {len(data)} actions, {total} inputs, {accepted} accepted")
