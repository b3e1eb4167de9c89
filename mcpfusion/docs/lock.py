"""The lockfile of tool contracts (`mcpfusion.lock`): what the agent is promised, pinned and diffed.

For every tool and action: names (the action's and the MCP tool serving it), descriptions, annotations,
input and output schemas (an output model's field descriptions included), its pagination (whether it answers
a page at a time, and how many rows a page holds as served), the headers and cookies its dependencies read
(`Header()`, `Cookie()`: a client that does not send a required one fails) with the schema of each, the
security schemes they require (`Security(APIKeyHeader(...))`, `Depends(HTTPBearer())`: a client without the
credential gets a 401), the MIME types of the content it may send, and each presenter's fields, redactions
(and whether its UI blocks are guarded against the redacted values), rules, limit and embeds; per MCP tool, what
`tools/list` advertises of it (title, description, outputSchema); per raw tool (`MCPFusion.raw_tool`), its
descriptor (description, title, annotations, input and output schemas). Each tool and
action carries a digest of its readable form, so a lockfile is both greppable and cheap to compare.
`check` explains a drift in words a reviewer can act on: a renamed action, a new required parameter, a field
no longer redacted, a hint that changed, a page size; a long value that changed shows the JSON paths that
differ, each side cut around the difference. The branches of an `anyOf` are compared and digested in one
canonical order: listing `presenters=[a, b]` as `[b, a]` changes nothing a client sees. So are the names of
a `required` list (parameters or fields written in another order), and a whole number is one however written
(a JSON formatter writes `5.0` as `5`): the lockfile is compared as data, not as text.

Keys pinned only when they differ from the default (`scopes`, `confirm`, `title`, `content_types`, a presenter's
`guard_blocks: false`) can be added within a format: a lockfile written before one was pinned reads as the
default (anyone may call, no confirmation, no title, no content sent, blocks guarded). It still matches a
service that keeps the default, and `check` names the change for one that does not. Keys pinned always (a
tool's title, `advertised`, an action's `pagination`), and keys whose absence an older lockfile cannot mean
(`request_parameters`: it did not pin them, not that there were none), come with a new format: a lockfile of an
older one is a change ("lockfile format 3 -> 4 (now pinned: ...)") and the keys it lacks are not reported one
by one (nor, before format 4, the field descriptions output schemas gained, nor, before format 5, the schemas
of headers and cookies).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Any

from pydantic import BaseModel

from .. import listing
from ..dependencies import security_schemes, stands_for
from ..dispatch import CallContext, ToolRegistry
from ..rest import request_parameters
from ..schema import lean, without
from ..tool import Action, Tool
from . import presenters

FORMAT = 5
# What each format pinned first (named when `check` reads an older lockfile).
FORMATS = {2: "each tool's title and what tools/list advertises", 3: "each action's pagination and page size",
           4: "the headers and cookies each action requires, and its output model's field descriptions",
           5: "the security schemes each action requires, its headers' and cookies' schemas, and the raw tools"}
# format -> the action keys it pins first
ACTION_KEYS_SINCE = {3: ("pagination",), 4: ("request_parameters",), 5: ("security",)}
DESCRIBED_SINCE = 4  # output schemas derived from a model keep its field descriptions
REQUEST_SCHEMAS_SINCE = 5  # each header's and cookie's schema
CANONICAL_SINCE = 5  # digests of `required` names sorted and whole numbers as ints (advertised outputSchemas')
RAW_TOOLS_SINCE = 5
FILENAME = "mcpfusion.lock"


def command(app: str, path: str = FILENAME, app_dir: str | None = None) -> str:
    """The `mcpfusion lock` command line that writes the lockfile at `path` (for hints to copy and run)."""
    words = ["mcpfusion", "lock", app]
    if app_dir:
        words += ["--app-dir", app_dir]
    if path != FILENAME:
        words += ["--file", path]
    return shlex.join(words)


def digest(value: Any) -> str:
    """A short stable digest of a JSON-able value (canonical JSON, `anyOf` branches in canonical order, sha256)."""
    text = json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def canonical(value: Any) -> Any:
    """`value` with the branches of every `anyOf` in one order (by their canonical JSON): the order a union's
    branches are written in (the presenters an action lists, one after the other) accepts the same results,
    and tools/list merges them into the same schema, so it is no change of contract. `null` goes last, as an
    optional value reads (`str | None`). The names of a `required` list are sorted (parameters or fields
    written in another order require the same), and a whole float is an int (`5.0` and `5` are one JSON
    number: a formatter may write either)."""
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if not isinstance(value, dict):
        return value
    out = {k: canonical(v) for k, v in value.items()}
    branches = out.get("anyOf")
    if isinstance(branches, list):
        out["anyOf"] = sorted(branches, key=_branch_order)
    names = out.get("required")
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        out["required"] = sorted(names)
    return out


def _branch_order(branch: Any) -> tuple[bool, str]:
    return branch == {"type": "null"}, json.dumps(branch, sort_keys=True, ensure_ascii=False, default=str)


def _presenter(info: dict[str, Any]) -> dict[str, Any]:
    """The contract part of the docs' presenter description (no samples, no rendering details)."""
    return {
        "fields": [row["name"] for row in info["fields"]],
        "redacted": sorted(info["redacted_paths"]),
        "censor": info["censor"],
        "rules": info["automatic_rules"] + info["rules"],
        "limit": info["limit"],
        "embeds": {e["key"]: _presenter(e["presenter"]) for e in info["embeds"]},
        # UI blocks that may show what redact_pii removed (absent: guarded, the default)
        **({} if info.get("guard_blocks", True) else {"guard_blocks": False}),
    }


def pagination(action: Action) -> dict[str, Any] | None:
    """How it pages, as served (None: it answers whole): `page_size` is `Action.page_size` with each presenter
    it may answer with (the declared size capped by the presenter's limit), one number when they agree, else
    one per presenter; `at_most` when the presenter chosen per call is not declared (its limit may cap it)."""
    if not action.paginate:
        return None
    sizes = {p.name: action.page_size(p) for p in action.presenters}
    if not sizes:
        undeclared = action.presenter_dependency is not None
        return {"page_size": action.page_size(None), **({"at_most": True} if undeclared else {})}
    return {"page_size": next(iter(sizes.values())) if len(set(sizes.values())) == 1 else sizes}


def paging_text(paging: Any) -> str:
    """A pinned `pagination` in words: "not paginated", "20 per page", "50 per page (a), 20 per page (b)"."""
    if not isinstance(paging, dict):
        return "not paginated"
    size = paging.get("page_size")
    if isinstance(size, dict):
        return ", ".join(f"{n} per page ({name})" for name, n in size.items())
    return f"{'at most ' if paging.get('at_most') else ''}{size} per page"


def action_contract(action: Action) -> dict[str, Any]:
    ctx = CallContext(action, {}, None)
    schema = action.input_schema
    body: dict[str, Any] = {
        "mcp_tool": listing.mcp_name(action),
        "description": action.description,
        "annotations": action.annotations(),
        "required": sorted(schema.get("required", [])),
        "input_schema": canonical(schema),
        "output_schema": canonical(action.output_schema),
        "pagination": pagination(action),  # a page of 7 rows where 50 were promised is a change of contract
        "presenters": {p.name: _presenter(presenters.describe(p, ctx, presenters.many(action)))
                       for p in action.presenters},
    }
    if action.scopes:  # who may call it is part of the contract (absent: anyone the server lets in)
        body["scopes"] = sorted(action.scopes)
    if action.confirm:  # whether the user is asked first (absent: it runs as called)
        body["confirm"] = action.confirm
    if action.title:  # the name clients show (absent: none)
        body["title"] = action.title
    if action.content_types:  # the images, documents... it may send (absent: none, anything else is refused)
        body["content_types"] = sorted(action.content_types)
    sent = request_sent(action)
    if sent:  # what a client must send beside the arguments (absent: nothing)
        body["request_parameters"] = sent
    schemes = security(action)
    if schemes:  # the credentials a call needs (absent: none beyond what the server asks of every call)
        body["security"] = schemes
    return {"digest": digest(body), **body}


def request_sent(action: Action) -> list[dict[str, Any]]:
    """The headers and cookies the action's dependencies read (`Header()`, `Cookie()`), as REST documents
    them: where, the name, whether a call without it fails (on REST and MCP alike) and the values it takes
    (a `Literal` narrowing them refuses the others)."""
    found = [{"in": p["in"], "name": p["name"], "required": bool(p.get("required")),
              "schema": canonical(lean(p.get("schema") or {}))}
             for p in request_parameters(action)]
    return sorted(found, key=lambda p: (p["in"], p["name"]))


def security(action: Action) -> list[dict[str, Any]]:
    """The security schemes among the action's dependencies (`Security(APIKeyHeader(...))`,
    `Depends(HTTPBearer())`, OAuth2...), as OpenAPI describes them (without their description), with the
    scopes asked of each and `"optional": true` for one that lets a call without the credential through
    (`auto_error=False`): a call without a required one is refused (401/403) on REST and MCP alike."""
    optional = _optional_schemes(action.dependant)
    found = []
    for name, (model, scopes) in security_schemes(action.dependant).items():
        scheme = model.model_dump(mode="json", by_alias=True, exclude_none=True) \
            if isinstance(model, BaseModel) else {"type": str(getattr(model, "type", name))}
        scheme.pop("description", None)
        found.append({**scheme, **({"scopes": sorted(scopes)} if scopes else {}),
                      **({"optional": True} if name in optional else {})})
    return sorted(found, key=lambda s: json.dumps(s, sort_keys=True))


def _optional_schemes(dependant: Any) -> set[str]:
    """The names of the schemes of the tree that do not refuse a call without their credential."""
    found: set[str] = set()
    pending = [dependant]
    while pending:
        node = pending.pop()
        pending.extend(node.dependencies)
        call = stands_for(node.call) or node.call
        if getattr(call, "auto_error", True) is False and isinstance(getattr(call, "scheme_name", None), str):
            found.add(call.scheme_name)
    return found


def raw_contract(descriptor: dict[str, Any]) -> dict[str, Any]:
    """A raw tool's contract: its tools/list entry as every client gets it."""
    body = {
        "title": descriptor.get("title"),
        "description": descriptor.get("description"),
        "annotations": descriptor.get("annotations") or {},
        "input_schema": canonical(descriptor.get("inputSchema") or {}),
        "output_schema": canonical(descriptor.get("outputSchema")),
    }
    return {"digest": digest(body), **body}


def advertised(tool: Tool, output_schemas: bool = True) -> dict[str, dict[str, Any]]:
    """What `tools/list` says of each MCP tool `tool` is served as: its title, its description as sent (the
    TOON table too) and the digest of its outputSchema (None: none advertised)."""
    out = {}
    for entry in listing.tool_entries(tool):
        schema = entry.get("outputSchema") if output_schemas else None
        out[entry["name"]] = {"title": entry.get("title"), "description": entry["description"],
                              "output_schema": digest(schema) if schema else None}
    return out


def tool_contract(tool: Tool, output_schemas: bool = True) -> dict[str, Any]:
    """A tool's contract; `output_schemas` False: the server advertises no outputSchema."""
    actions = {a.name: action_contract(a) for a in tool.actions.values()}
    body: dict[str, Any] = {
        "title": tool.title,
        "description": tool.description,
        "exposition": tool.exposition,
        "mcp_tools": [e.name for e in listing.exposed(tool)],
        "advertised": advertised(tool, output_schemas),
        "actions": actions,
    }
    return {"digest": digest(body), **body}


def contract(registry: ToolRegistry, server: Any = None) -> dict[str, Any]:
    """The whole lockfile content for a registry (JSON-able, deterministic); with `server` (the MCPFusion),
    also what else it tells every client: its instructions, resources, resource templates and prompts."""
    tools = {t.name: tool_contract(t, registry.output_schemas) for t in registry.tools.values() if t.actions}
    lock: dict[str, Any] = {"mcpfusion_lock": FORMAT, "digest": digest(tools), "tools": tools}
    offered = server_contract(server) if server is not None else {}
    if offered:
        lock["server"] = {"digest": digest(offered), **offered}
    raw = getattr(server, "raw_tools", None)
    if isinstance(raw, dict) and raw:
        lock["raw_tools"] = {name: raw_contract(t.descriptor) for name, t in sorted(raw.items())}
    return lock


def server_contract(server: Any) -> dict[str, Any]:
    """The server's instructions, resources, templates and prompts as every client is told them (scopes
    included); parts the server does not have are left out."""
    def scoped(descriptor: dict[str, Any], item: Any) -> dict[str, Any]:
        return {**descriptor, "scopes": sorted(item.scopes)} if item.scopes else descriptor

    resources = server.resources
    parts = {
        "instructions": server.instructions,
        "resources": {r.uri: scoped(r.descriptor(), r) for r in resources.resources.values()},
        "resource_templates": {t.uri_template: scoped(t.descriptor(), t) for t in resources.templates},
        "prompts": {p.name: scoped(p.descriptor(), p) for p in server.prompts.prompts.values()},
    }
    return {key: value for key, value in parts.items() if value}


def resealed(lock: Any) -> Any:
    """`lock` (a lockfile as read) with every digest worked out again from the content beside it: a hand
    edit or a merge that kept the old digests is then a change like any other, never a match."""
    if not isinstance(lock, dict) or not isinstance(lock.get("tools"), dict):
        return lock
    tools: dict[str, Any] = {}
    for name, tool in lock["tools"].items():
        if not isinstance(tool, dict):
            tools[name] = tool
            continue
        found = tool.get("actions")
        actions: dict[str, Any] = found if isinstance(found, dict) else {}
        sealed_actions = {a: _sealed(body) if isinstance(body, dict) else body for a, body in actions.items()}
        tools[name] = _sealed({**tool, "actions": sealed_actions})
    server = lock.get("server")
    extra: dict[str, Any] = {"server": _sealed(server)} if isinstance(server, dict) else {}
    raw = lock.get("raw_tools")
    if isinstance(raw, dict):
        extra["raw_tools"] = {name: _sealed(body) if isinstance(body, dict) else body for name, body in raw.items()}
    return {**lock, "digest": digest(tools), "tools": tools, **extra}


def _sealed(body: dict[str, Any]) -> dict[str, Any]:
    content = {k: v for k, v in body.items() if k != "digest"}
    return {"digest": digest(content), **content}


def dumps(lock: dict[str, Any]) -> str:
    return json.dumps(lock, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n"


# -- drift ---------------------------------------------------------------------------------------------------

SHORT = 100  # a value this long (as JSON) is shown whole
CONTEXT = 30  # characters kept either side of a difference in a longer one
_ABSENT = object()


def _json(value: Any) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _change(old: Any, new: Any, most: int = 3) -> str:
    """`old -> new` in a line a reviewer can read: whole when both are short; else the JSON paths that differ
    (`description: "..." -> "..."`, at most `most` of them), each side cut around its difference, so the two
    sides shown are never the same text."""
    before, after = _json(old), _json(new)
    if len(before) <= SHORT and len(after) <= SHORT:
        return f"{before} -> {after}"
    paths = _differences(old, new, "") or [("", old, new)]  # (equal in Python, not as JSON: true and 1)
    shown = [(f"{path}: " if path else "") + _around(_json(a), _json(b)) for path, a, b in paths[:most]]
    more = f" (and {len(paths) - most} more)" if len(paths) > most else ""
    return "; ".join(shown) + more


def _differences(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """(JSON path, old value, new value) of each place `old` and `new` differ, dicts key by key and lists of
    the same length item by item; a key one side lacks is `_ABSENT` there."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new), key=str):
            a, b = old.get(key, _ABSENT), new.get(key, _ABSENT)
            if a != b:
                name = str(key)
                step = (f".{name}" if path else name) if name.isidentifier() else f"[{json.dumps(name)}]"
                out += _differences(a, b, path + step)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) if a != b
                for d in _differences(a, b, f"{path}[{i}]")]
    return [(path, old, new)] if old != new else []


def _around(before: str, after: str) -> str:
    """Two different texts cut to what differs, with CONTEXT characters either side (whole when short)."""
    if len(before) <= SHORT and len(after) <= SHORT:
        return f"{before} -> {after}"
    start = next((i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
                 min(len(before), len(after)))
    room = min(len(before), len(after)) - start
    tail = next((i for i in range(room) if before[-1 - i] != after[-1 - i]), room)  # common ending's length
    lead = max(0, start - CONTEXT)

    def cut(text: str) -> str:
        # The differing middle keeps its first character (they differ there, or one middle is empty), so
        # the two cuts differ too.
        end = len(text) - tail
        middle = text[start:end]
        middle = middle if len(middle) <= 2 * CONTEXT else middle[: 2 * CONTEXT - 3] + "..."
        return ("..." if lead else "") + text[lead:start] + middle + text[end:end + CONTEXT] \
            + ("..." if tail > CONTEXT else "")

    return f"{cut(before)} -> {cut(after)}"


def _schema_changes(where: str, old: dict[str, Any], new: dict[str, Any], noun: str = "parameter") -> list[str]:
    """The parameters (or, of a nested model, the fields) that were added, removed, made (not) required or
    changed; nested models (`$defs`) are compared model by model and field by field."""
    out = []
    old_req, new_req = set(old.get("required", [])), set(new.get("required", []))
    old_props, new_props = old.get("properties", {}), new.get("properties", {})
    for name in sorted(new_req - old_req):
        out.append(f'{where}: new required {noun} "{name}"' if name not in old_props
                   else f'{where}: {noun} "{name}" is now required')
    for name in sorted(old_req - new_req):
        if name in new_props:
            out.append(f'{where}: {noun} "{name}" is no longer required')
    for name in sorted(set(new_props) - set(old_props) - new_req):
        out.append(f'{where}: new optional {noun} "{name}"')
    for name in sorted(set(old_props) - set(new_props)):
        out.append(f'{where}: {noun} "{name}" was removed')
    for name in sorted(set(old_props) & set(new_props)):
        if old_props[name] != new_props[name]:
            out.append(f'{where}: {noun} "{name}" changed: {_change(old_props[name], new_props[name])}')
    out += _defs_changes(where, old.get("$defs") or {}, new.get("$defs") or {})
    skip = ("required", "properties", "$defs")
    rest = [k for k in sorted(set(old) | set(new)) if k not in skip and old.get(k) != new.get(k)]
    schema = "input schema" if noun == "parameter" else "schema"
    out += [f"{where}: {schema} {k!r} changed" for k in rest]
    return out


def _defs_changes(where: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Nested models by name: added, removed, or their fields' changes."""
    out = []
    for name in sorted(set(old) | set(new)):
        label = f'{where}: object "{name}"'
        if name not in new:
            out.append(f"{label} was removed")
        elif name not in old:
            out.append(f"{label} was added")
        elif old[name] != new[name]:
            before, after = old[name], new[name]
            if isinstance(before, dict) and isinstance(after, dict):
                out += _schema_changes(f'{where} object "{name}"', before, after, noun="field")
            else:
                out.append(f"{label} changed: {_change(before, after)}")
    return out


def _presenter_changes(where: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for path in sorted(set(old["redacted"]) - set(new["redacted"])):
        out.append(f'{where}: "{path}" is no longer redacted')
    for path in sorted(set(new["redacted"]) - set(old["redacted"])):
        out.append(f'{where}: "{path}" is now redacted')
    for name in [f for f in new["fields"] if f not in old["fields"]]:
        out.append(f'{where}: new field "{name}" reaches the agent')
    for name in [f for f in old["fields"] if f not in new["fields"]]:
        out.append(f'{where}: field "{name}" no longer reaches the agent')
    for rule in [r for r in old["rules"] if r not in new["rules"]]:
        out.append(f"{where}: rule removed: {rule!r}")
    for rule in [r for r in new["rules"] if r not in old["rules"]]:
        out.append(f"{where}: rule added: {rule!r}")
    for key in ("censor", "limit"):
        if old.get(key) != new.get(key):
            out.append(f"{where}: {key} {_change(old.get(key), new.get(key))}")
    guarded, guards = old.get("guard_blocks", True), new.get("guard_blocks", True)
    if guarded and not guards:
        out.append(f"{where}: UI blocks are no longer guarded against redacted values (guard_blocks=False)")
    elif guards and not guarded:
        out.append(f"{where}: UI blocks are guarded against redacted values again")
    for key in sorted(set(old["embeds"]) | set(new["embeds"])):
        if key not in new["embeds"]:
            out.append(f'{where}: embed "{key}" removed')
        elif key not in old["embeds"]:
            out.append(f'{where}: new embed "{key}"')
        else:
            out += _presenter_changes(f"{where}.{key}", old["embeds"][key], new["embeds"][key])
    return out


def _action_changes(where: str, old: dict[str, Any], new: dict[str, Any], predates: frozenset[str],
                    described: bool = True, request_schemas: bool = True) -> list[str]:
    """What changed of an action; `predates`: keys its lockfile's (older) format did not pin, left unsaid
    (the format change says so); `described` False: its output schemas had no field descriptions yet;
    `request_schemas` False: its headers and cookies had no schemas yet."""
    if not described:  # compared without them: the descriptions they gain are the format change
        old, new = ({**body, "output_schema": without(body.get("output_schema"), {"description"})}
                    for body in (old, new))
    if not request_schemas:
        old, new = ({**body, "request_parameters": [{k: v for k, v in p.items() if k != "schema"}
                                                    for p in body.get("request_parameters") or []
                                                    if isinstance(p, dict)] or None}
                    for body in (old, new))
    out = []
    for key in ("mcp_tool", "description", "scopes", "confirm", "title", "content_types"):
        if old.get(key) != new.get(key):
            out.append(f"{where}: {key} {_change(old.get(key), new.get(key))}")
    for hint in sorted(set(old.get("annotations", {})) | set(new.get("annotations", {}))):
        before, after = old.get("annotations", {}).get(hint), new.get("annotations", {}).get(hint)
        if before != after:
            out.append(f"{where}: {hint} {_change(before, after)}")
    out += _schema_changes(where, old.get("input_schema", {}), new.get("input_schema", {}))
    if old.get("output_schema") != new.get("output_schema"):
        out.append(f"{where}: output schema changed")
    if "pagination" not in predates:
        out += _paging_changes(where, old.get("pagination"), new.get("pagination"))
    if "request_parameters" not in predates:
        out += _request_changes(where, old.get("request_parameters") or [], new.get("request_parameters") or [])
    if "security" not in predates:
        out += _security_changes(where, old.get("security") or [], new.get("security") or [])
    old_p, new_p = old.get("presenters", {}), new.get("presenters", {})
    for name in sorted(set(old_p) | set(new_p)):
        label = f"{where} [presenter {name}]"
        if name not in new_p:
            out.append(f"{label}: removed")
        elif name not in old_p:
            out.append(f"{label}: added")
        else:
            out += _presenter_changes(label, old_p[name], new_p[name])
    keys = (set(old) | set(new)) - predates - {"digest"}  # (an absent key reads as null, its default)
    if not out:
        out += _unexplained(where, {k: old.get(k) for k in keys}, {k: new.get(k) for k in keys})
    return out


def _unexplained(where: str, old: Any, new: Any) -> list[str]:
    """One line for a change no rule above names: the keys (JSON paths) that differ, each side shown."""
    paths = _differences(old, new, "")
    if not paths:
        return []
    shown = "; ".join(f"{path or '(whole)'}: {_around(_json(a), _json(b))}" for path, a, b in paths[:3])
    return [f"{where}: changed at {shown}" + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")]


def _request_changes(where: str, old: list[Any], new: list[Any]) -> list[str]:
    """Headers and cookies the action's dependencies now read, require, no longer require or no longer read:
    a new required one fails every client that does not send it."""
    def by_name(found: list[Any]) -> dict[tuple[Any, Any], bool]:
        return {(p.get("in"), p.get("name")): bool(p.get("required")) for p in found if isinstance(p, dict)}

    def schemas(found: list[Any]) -> dict[tuple[Any, Any], Any]:
        return {(p.get("in"), p.get("name")): p.get("schema") for p in found if isinstance(p, dict) and "schema" in p}

    before, after = by_name(old), by_name(new)
    out = []
    for (kind, name), required in sorted(after.items()):
        if (kind, name) not in before:
            out.append(f'{where}: new {"required" if required else "optional"} {kind} "{name}"')
        elif required != before[kind, name]:
            out.append(f'{where}: {kind} "{name}" is {"now" if required else "no longer"} required')
    out += [f'{where}: {kind} "{name}" is no longer read' for kind, name in sorted(set(before) - set(after))]
    was, now = schemas(old), schemas(new)
    for key in sorted(set(was) & set(now) & set(before) & set(after)):
        if was[key] != now[key]:  # (`Literal[...]` narrowing a header's values refuses the others)
            out.append(f'{where}: {key[0]} "{key[1]}" changed: {_change(was[key], now[key])}')
    return out


def scheme_text(scheme: Any) -> str:
    """A pinned security scheme in words: `API key in header "x-api-key"`, `HTTP bearer`, `OAuth2 (scopes:
    a, b)`."""
    if not isinstance(scheme, dict):
        return _json(scheme)
    kind = scheme.get("type")
    if kind == "apiKey":
        text = f'API key in {scheme.get("in")} "{scheme.get("name")}"'
    elif kind == "http":
        text = f"HTTP {scheme.get('scheme')}"
    elif kind == "oauth2":
        text = "OAuth2"
    elif kind == "openIdConnect":
        text = f"OpenID Connect ({scheme.get('openIdConnectUrl')})"
    else:
        text = f"{kind} scheme"
    scopes = scheme.get("scopes")
    return text + (f" (scopes: {', '.join(map(str, scopes))})" if scopes else "")


def _security_changes(where: str, old: list[Any], new: list[Any]) -> list[str]:
    """Security schemes the action now requires (a client without the credential is refused: 401/403), no
    longer requires, or whose settings changed."""
    def keyed(found: list[Any]) -> dict[str, Any]:
        return {_json({k: v for k, v in s.items() if k not in ("scopes", "optional")}) if isinstance(s, dict)
                else _json(s): s for s in found}

    before, after = keyed(old), keyed(new)
    out = []
    for key in sorted(set(after) - set(before)):
        scheme = after[key]
        optional = isinstance(scheme, dict) and scheme.get("optional")
        out.append(f"{where}: {'now reads (optional)' if optional else 'now requires'} {scheme_text(scheme)}")
    for key in sorted(set(before) - set(after)):
        out.append(f"{where}: no longer requires {scheme_text(before[key])}")
    for key in sorted(set(before) & set(after)):
        was, now = before[key], after[key]
        if was == now or not isinstance(was, dict) or not isinstance(now, dict):
            continue
        if bool(was.get("optional")) != bool(now.get("optional")):
            out.append(f"{where}: {scheme_text(now)} is {'no longer' if now.get('optional') else 'now'} required")
        if was.get("scopes") != now.get("scopes"):
            out.append(f"{where}: {scheme_text(was)} -> {scheme_text(now)}")
    return out


def _raw_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Raw tools removed, added, or whose descriptor changed (description, title, hints, schemas)."""
    out = []
    for name in sorted(set(old) | set(new)):
        where = f"raw tool {name}"
        if name not in new:
            out.append(f"{where}: removed")
            continue
        if name not in old:
            out.append(f"{where}: added")
            continue
        was, now = old[name], new[name]
        if not isinstance(was, dict) or not isinstance(now, dict) or was.get("digest") == now.get("digest"):
            continue
        lines = [f"{where}: {key} {_change(was.get(key), now.get(key))}" for key in ("title", "description")
                 if was.get(key) != now.get(key)]
        hints, hinted = was.get("annotations") or {}, now.get("annotations") or {}
        lines += [f"{where}: {hint} {_change(hints.get(hint), hinted.get(hint))}"
                  for hint in sorted(set(hints) | set(hinted), key=str) if hints.get(hint) != hinted.get(hint)]
        if isinstance(was.get("input_schema"), dict) and isinstance(now.get("input_schema"), dict):
            lines += _schema_changes(where, was["input_schema"], now["input_schema"])
        if was.get("output_schema") != now.get("output_schema"):
            lines.append(f"{where}: output schema changed")
        body = {k: v for k, v in was.items() if k != "digest"}, {k: v for k, v in now.items() if k != "digest"}
        out += lines or _unexplained(where, *body)
    return out


def _paging_changes(where: str, old: Any, new: Any) -> list[str]:
    """Pagination turned on or off, or a page size that changed (the rows an agent gets per call)."""
    if old == new:
        return []
    if not isinstance(new, dict):
        return [f"{where}: no longer paginated (was {paging_text(old)})"]
    if not isinstance(old, dict):
        return [f"{where}: now paginated, {paging_text(new)}"]
    sizes = old.get("page_size"), new.get("page_size")
    if all(isinstance(n, int) for n in sizes) and not old.get("at_most") and not new.get("at_most"):
        return [f"{where}: page size {sizes[0]} -> {sizes[1]} rows"]
    return [f"{where}: pagination {paging_text(old)} -> {paging_text(new)}"]


def _same_shape(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("input_schema", "output_schema", "annotations", "presenters")
    return all(a.get(k) == b.get(k) for k in keys)


def newer_format(lock: Any) -> int | None:
    """The format of a lockfile written by a newer mcpfusion than this one, else None: this one cannot tell
    what it pins, and regenerating it would drop that."""
    found = lock.get("mcpfusion_lock") if isinstance(lock, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > FORMAT else None


def check_shape(lock: Any) -> None:
    """Raise ValueError unless `lock` has the objects `diff` walks: its tools, and each tool's actions (a
    string or a list there would be compared item by item, as tools and actions named by its characters)."""
    tools = lock.get("tools") if isinstance(lock, dict) else None
    if not isinstance(tools, dict):
        raise ValueError("a lockfile's tools are an object")
    for tool in tools.values():
        if not isinstance(tool, dict) or not isinstance(tool.get("actions", {}), dict):
            raise ValueError("a lockfile's tool is an object whose actions are an object")


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What drifted from `old` (a lockfile) to `new` (the served contract), one line per change; ValueError
    for a lockfile not of the shape `contract` writes."""
    check_shape(old)
    out: list[str] = []
    old, new = canonical(old), canonical(new)  # (a lockfile written before its anyOf branches were ordered)
    was, now = old.get("mcpfusion_lock"), new.get("mcpfusion_lock")
    format_ = was if isinstance(was, int) and not isinstance(was, bool) else FORMAT  # (not a number: as ours)
    if was != now:
        since = [what for number, what in sorted(FORMATS.items()) if format_ < number <= FORMAT]
        out.append(f"lockfile format {was} -> {now}" + (f" (now pinned: {'; '.join(since)})" if since else ""))
    predates = frozenset(key for number, keys in ACTION_KEYS_SINCE.items() if format_ < number for key in keys)
    described = format_ >= DESCRIBED_SINCE
    request_schemas = format_ >= REQUEST_SCHEMAS_SINCE
    old_tools, new_tools = old.get("tools", {}), new.get("tools", {})
    for name in sorted(set(old_tools) - set(new_tools)):
        out.append(f"tool {name}: removed")
    for name in sorted(set(new_tools) - set(old_tools)):
        out.append(f"tool {name}: added")
    out += _server_changes(old.get("server") or {}, new.get("server") or {})
    if format_ >= RAW_TOOLS_SINCE:  # (an older lockfile did not pin them: the format change says so)
        out += _raw_changes(old.get("raw_tools") or {}, new.get("raw_tools") or {})
    for name in sorted(set(old_tools) & set(new_tools)):
        before, after = old_tools[name], new_tools[name]
        if before.get("digest") == after.get("digest"):
            continue
        lines = _tool_changes(name, before, after)
        old_actions, new_actions = before.get("actions", {}), after.get("actions", {})
        gone = [a for a in old_actions if a not in new_actions]
        added = [a for a in new_actions if a not in old_actions]
        for a in list(gone):
            twin = next((b for b in added if _same_shape(old_actions[a], new_actions[b])), None)
            if twin is not None:
                lines.append(f"{name}.{a}: renamed to {name}.{twin}")
                gone.remove(a)
                added.remove(twin)
        lines += [f"{name}.{a}: action removed" for a in gone]
        lines += [f"{name}.{a}: new action" for a in added]
        for a in old_actions:
            if a in new_actions and old_actions[a].get("digest") != new_actions[a].get("digest"):
                lines += _action_changes(f"{name}.{a}", old_actions[a], new_actions[a], predates, described,
                                         request_schemas)
        lines += _advertised_changes(name, before, after, explained=bool(lines),
                                     described=format_ >= max(DESCRIBED_SINCE, CANONICAL_SINCE))
        if not lines and was == now:  # (digests differ, nothing named: say where, never "digests differ")
            lines = _unexplained(f"tool {name}", {k: v for k, v in before.items() if k != "digest"},
                                 {k: v for k, v in after.items() if k != "digest"})
        out += lines
    return out


def _tool_changes(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for key in ("title", "description", "exposition", "mcp_tools"):
        if key == "title" and key not in old:
            continue  # a lockfile of format 1 did not pin it: the format change says so
        if old.get(key) != new.get(key):
            out.append(f"tool {name}: {key} {_change(old.get(key), new.get(key))}")
    return out


def _advertised_changes(name: str, old: dict[str, Any], new: dict[str, Any], explained: bool,
                        described: bool = True) -> list[str]:
    """What `tools/list` advertises differently. An outputSchema that appears or goes is always named; a new
    description, title or outputSchema only when nothing else of the tool explains it (a new parameter
    changes a grouped tool's description too: once is enough), and an outputSchema not when the lockfile
    predates field descriptions or canonical digests (`described` False: its digest cannot tell them from
    another change)."""
    before, after = old.get("advertised"), new.get("advertised")
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []  # a lockfile of format 1 did not pin them
    out, rest = [], []
    for mcp in [n for n in after if n in before]:
        was, now = before[mcp] or {}, after[mcp] or {}
        label = f'tool {name}: MCP tool "{mcp}"'
        had, has = was.get("output_schema"), now.get("output_schema")
        if bool(had) != bool(has):
            out.append(f"{label} {'now advertises an' if has else 'no longer advertises its'} outputSchema")
        elif had != has and described:
            rest.append(f"{label}: advertised outputSchema changed")
        if was.get("title") != now.get("title"):
            rest.append(f"{label}: title {_change(was.get('title'), now.get('title'))}")
        if was.get("description") != now.get("description"):
            rest.append(f"{label}: description {_text_change(was.get('description'), now.get('description'))}")
    return out if explained else out + rest


def _text_change(old: Any, new: Any) -> str:
    """A description's change: whole when short, else its first line that differs."""
    if not isinstance(old, str) or not isinstance(new, str) or len(old) + len(new) <= 120:
        return _change(old, new)
    was, now = old.splitlines(), new.splitlines()
    at = next((i for i, (a, b) in enumerate(zip(was, now, strict=False)) if a != b), min(len(was), len(now)))
    was_line, now_line = (lines[at] if at < len(lines) else None for lines in (was, now))
    return f"line {at + 1}: {_change(was_line, now_line)}"


def _server_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The server's instructions, resources, templates and prompts that drifted, one line each."""
    out = []
    if old.get("instructions") != new.get("instructions"):
        out.append(f"server: instructions {_change(old.get('instructions'), new.get('instructions'))}")
    for part, label in (("resources", "resource"), ("resource_templates", "resource template"), ("prompts", "prompt")):
        before, after = old.get(part) or {}, new.get(part) or {}
        for key in sorted(set(before) | set(after)):
            if key not in after:
                out.append(f"{label} {key}: removed")
            elif key not in before:
                out.append(f"{label} {key}: added")
            elif before[key] != after[key]:
                was, now = before[key], after[key]
                changed = sorted(k for k in set(was) | set(now) if was.get(k) != now.get(k))
                out.append(f"{label} {key}: {', '.join(changed)} changed")
    return out
