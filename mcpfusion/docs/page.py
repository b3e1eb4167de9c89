"""The HTML page, rendered from the manifest alone (no per-tool hand-written content).

Everything is server-rendered so the page reads with JavaScript off; the script only adds live search, the
theme switch and the try-it requests. No inline script or style: the page's CSP allows 'self' only.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import urlsplit

from .. import tokens
from ..visible import visible as visible  # (re-exported: `mcpfusion inspect` reads it here)
from . import search
from .examples import SENT_HEADERS
from .schema_table import rows as schema_rows

HINTS = (("readOnlyHint", "read-only"), ("destructiveHint", "destructive"), ("idempotentHint", "idempotent"),
         ("openWorldHint", "open world"))


def action_id(tool: str, action: str) -> str:
    """The HTML id of an action's section: `action-{tool}-{action}`, a "-" inside a name written "~" (never in
    a name), so that tool "a-b" action "c" and tool "a" action "b-c" get different ids."""
    return f"action-{tool.replace('-', '~')}-{action.replace('-', '~')}"


def _e(value: Any) -> str:
    return escape(visible(str(value)), quote=True)


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _pre(text: str, cls: str = "") -> str:
    return f'<pre class="code {cls}"><code>{_e(text)}</code></pre>'


def _hints(annotations: dict[str, Any], *, declared_only: bool = False) -> str:
    """The four hints, ✓ or ✗; with `declared_only` (a raw tool's own annotations) only those it declares."""
    items = "".join(
        f'<li class="hint {"on" if annotations.get(key) else "off"} {label.replace(" ", "-")}" title="{key}: '
        f'{str(bool(annotations.get(key))).lower()}">{"✓" if annotations.get(key) else "✗"} {label}</li>'
        for key, label in HINTS if not declared_only or key in annotations
    )
    if not items:
        return '<p class="muted">No annotations declared (MCP\'s defaults apply).</p>'
    return f'<ul class="hints" aria-label="Annotations">{items}</ul>'


def _tags(tags: list[str]) -> str:
    if not tags:
        return ""
    return '<ul class="tags" aria-label="Tags">' + "".join(f'<li class="tag">{_e(t)}</li>' for t in tags) + "</ul>"


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    head = "".join(f"<th scope=\"col\">{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _code_list(values: list[Any] | None) -> str:
    if not values:
        return ""
    return " ".join(f"<code>{_e(json.dumps(v, ensure_ascii=False))}</code>" for v in values)


def parameters_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">No parameters.</p>'
    body = []
    for r in rows:
        default = ""
        if "default" in r:
            default = f"<code>{_e(json.dumps(r['default'], ensure_ascii=False, default=str))}</code>"
        desc = _e(r["description"])
        if r.get("constraints"):
            desc += "".join(f' <span class="constraint">{_e(c)}</span>' for c in r["constraints"])
        body.append([
            f"<code>{_e(r['name'])}</code>", f'<span class="type">{_e(r["type"])}</span>',
            '<span class="req">required</span>' if r["required"] else '<span class="muted">optional</span>',
            _code_list(r["enum"]), default, desc,
        ])
    return _table(["name", "type", "required", "enum", "default", "description"], body, "params")


def request_table(parameters: list[dict[str, Any]]) -> str:
    """The headers and cookies the action's dependencies read (`Header()`, `Cookie()`): a call sends the
    required ones beside its arguments (over REST and MCP's HTTP transport alike)."""
    if not parameters:
        return ""
    body = [[
        f"<code>{_e(p['name'])}</code>", _e(p["in"]), f'<span class="type">{_e(p["type"])}</span>',
        '<span class="req">required</span>' if p["required"] else '<span class="muted">optional</span>',
        _code_list([p["example"]]) if p["example"] is not None else "", _e(p["description"]),
    ] for p in parameters]
    return ("<h4>Headers and cookies</h4>"
            + _table(["name", "in", "type", "required", "example", "description"], body, "params request"))


def _fields_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">No declared schema: the data passes as returned.</p>'
    return _table(["field", "type", "description"], [
        [f"<code>{_e(r['name'])}</code>", f'<span class="type">{_e(r["type"])}</span>', _e(r["description"])]
        for r in rows
    ], "fields")


def _ul(items: list[str], empty: str = "none") -> str:
    if not items:
        return f'<span class="muted">{empty}</span>'
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _presenter_summary(p: dict[str, Any]) -> str:
    """One line that says what the collapsed presenter card holds."""
    parts = [f"{len(p['fields'])} fields", f"{len(p['automatic_rules']) + len(p['rules'])} rules"]
    if p["redacted_paths"]:
        parts.append(f"{len(p['redacted_paths'])} redacted")
    if p["ui_blocks"]:
        parts.append("UI: " + ", ".join(dict.fromkeys(b["type"] for b in p["ui_blocks"])))
    if p["suggestions"]:
        parts.append(f"{len(p['suggestions'])} suggestions")
    if p["limit"]:
        parts.append(f"limit {p['limit']}")
    if p["embeds"]:
        parts.append("embeds " + ", ".join(x["key"] for x in p["embeds"]))
    return " · ".join(_e(x) for x in parts)


def presenter_card(p: dict[str, Any], *, level: int = 5, open_: bool = False) -> str:
    """The presenter in a <details> (readable without JS): fields, rules, redaction, UI, suggestions, limit."""
    rows = [
        ("Fields", _fields_table(p["fields"])),
        ("Rules from field descriptions (automatic)", _ul([_e(r) for r in p["automatic_rules"]])),
        ("Rules", _ul([_e(r) for r in p["rules"]])),
        ("Redacted paths", _ul([
            f"<code>{_e(x)}</code> → <code>{_e(p['censor'])}</code>" for x in p["redacted_paths"]
        ])),
        ("UI block types", _ul([
            f'<code>{_e(b["type"])}</code>' + (f" — {_e(b['title'])}" if b.get("title") else "") for b in p["ui_blocks"]
        ])),
        ("Suggestions", _ul([f"<code>{_e(s['action'])}</code>: {_e(s['reason'])}" for s in p["suggestions"]])),
    ]
    if p["directives"]:
        rows.append(("Directives", _ul([_e(d) for d in p["directives"]])))
    rows.append(("Limit", f"{p['limit']} items per response" if p["limit"] else '<span class="muted">none</span>'))
    if p["embeds"]:
        rows.append(("Embeds", "".join(
            f'<div class="embed"><p><code>{_e(x["key"])}</code> rendered by presenter '
            f'<code>{_e(x["presenter"]["name"])}</code></p>'
            f'{presenter_card(x["presenter"], level=min(level + 1, 6))}</div>'
            for x in p["embeds"]
        )))
    note = ""
    if p.get("sample_error"):
        note = f'<p class="muted">UI blocks and suggestions could not be sampled: {_e(p["sample_error"])}</p>'
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return (f'<details class="presenter"{" open" if open_ else ""}><summary>'
            f'<span class="presenter-name">Presenter <code>{_e(p["name"])}</code></span> '
            f'<span class="muted">{_presenter_summary(p)}</span></summary>'
            f'{note}<dl class="props">{dl}</dl></details>')


def definitions(schema: dict[str, Any] | None) -> str:
    """Tables for the nested models an input schema refers to (`$defs`)."""
    defs = (schema or {}).get("$defs") or {}
    return "".join(
        f'<p class="def-name">Object <code>{_e(name)}</code></p>'
        + parameters_table(schema_rows({**sub, "$defs": defs}))
        for name, sub in defs.items()
        if isinstance(sub, dict) and sub.get("properties")
    )


def _saving_row(label: str, s: dict[str, Any]) -> list[str]:
    return [label, str(s["before"]), str(s["after"]),
            f'<strong>{s["saved"]}</strong> ({s["percent"]}%) <meter min="0" max="100" value="{s["percent"]}">'
            f'{s["percent"]}%</meter>']


def action_economy(t: dict[str, Any] | None) -> str:
    if not t:
        return ""
    if t.get("error"):
        return f'<p class="muted">Token sample unavailable: {_e(t["error"])}</p>'
    rows = []
    if t.get("select"):
        s = t["select"]
        rows.append(_saving_row(f"<code>_select</code> = {_code_list(s['keys'])}", s))
    if t.get("limit"):
        s = t["limit"]
        rows.append(_saving_row(f"<code>limit({s['limit']})</code> on {s['items']} items", s))
    return ('<h4>Token economy on a sample response</h4>'
            + _table(["", "tokens before", "tokens after", "saved"], rows, "economy"))


def _hidden(shown: bool) -> str:
    return "" if shown else " hidden"


def _served_path(api_base: str, rest_path: str) -> str:
    """The REST path as a client sends it: under the path the API is served at (a mount prefix, or the
    path of an exported site's base URL)."""
    return urlsplit(api_base).path.rstrip("/") + rest_path


def _missing_note(a: dict[str, Any]) -> str:
    """Which required parameters (headers, cookies) the examples leave out (no value that fits was found):
    fill them in."""
    missing = [f"<code>{_e(m)}</code>" for m in a.get("example_missing") or []]
    missing += [f"{_e(p['in'])} <code>{_e(p['name'])}</code>" for p in a.get("request_parameters") or []
                if p["required"] and p["example"] is None]
    if not missing:
        return ""
    return (f'<p class="muted example-missing">No example value fits the schema of the required parameter(s) '
            f"{', '.join(missing)}: the examples leave them out; add them before sending.</p>")


def _request_fields(a: dict[str, Any]) -> str:
    """A field per required header and cookie of the try-it form (`data-header`, `data-cookie`: the script
    sends them), but those it sends anyway (`SENT_HEADERS`: the token field is the Authorization)."""
    fields = [
        f'<label>{"Cookie" if p["in"] == "cookie" else "Header"} <code>{_e(p["name"])}</code> '
        f'<input type="text" name="{_e(p["in"])}-{_e(p["name"])}" data-{_e(p["in"])}="{_e(p["name"])}" '
        f'value="{_e(p["example"] if p["example"] is not None else "")}" autocomplete="off" spellcheck="false" '
        'required></label>'
        for p in a.get("request_parameters") or []
        if p["required"] and (p["in"] == "cookie" or p["name"].lower() not in SENT_HEADERS)
    ]
    if not fields:
        return ""
    note = ""
    if any(p["in"] == "cookie" for p in a.get("request_parameters") or [] if p["required"]):
        note = ('<p class="muted">A browser sends a cookie only to the origin that set it: the cookie fields work '
                "on the docs the API's own server serves; or use the curl example.</p>")
    return f'<div class="tryit-fields tryit-request">{"".join(fields)}</div>{note}'


def _accept(a: dict[str, Any]) -> str:
    """The try-it request's Accept: the media types the action's REST 200 may be (JSON for a manifest without
    them), and problem details."""
    media = a.get("rest_media_types") or ["application/json"]
    return ", ".join([*media, "application/problem+json"])


def _try_it(a: dict[str, Any], served: str) -> str:
    body = _json(a["example_arguments"])
    return (
        f'<form class="tryit" data-path="{_e(a["rest_path"])}" data-accept="{_e(_accept(a))}" '
        f'aria-label="Try {_e(a["qualified_name"])}">'
        '<div class="tryit-fields">'
        f'<label>Bearer token <input type="text" name="token" autocomplete="off" spellcheck="false" '
        'placeholder="your token, without Bearer"></label>'
        f'<label>JSON body <textarea name="body" rows="{min(12, body.count(chr(10)) + 2)}" spellcheck="false">'
        f"{_e(body)}</textarea></label></div>"
        f"{_request_fields(a)}"
        f'<button type="submit" disabled>POST {_e(served)}</button>'
        '<noscript><p class="muted">The try-it form needs JavaScript; the curl example above does the same.'
        "</p></noscript>"
        '<div class="response" role="status" aria-live="polite" hidden><span class="status"></span>'
        '<a class="download" hidden></a><pre class="code"><code></code></pre></div>'
        "</form>"
    )


def action_section(tool: dict[str, Any], a: dict[str, Any], api_base: str, shown: bool = True) -> str:
    # No REST path: the app serves no REST route (mounted with rest=False), so no curl example, no try-it form.
    served = _served_path(api_base, a["rest_path"]) if a["rest_path"] is not None else None
    route = (f'MCP tool <code>{_e(a["mcp_name"])}</code>'
             + (f' with <code>action="{_e(a["name"])}"</code>' if a.get("discriminated", True) else "")
             + (f' · REST <code>POST {_e(served)}</code>' if served is not None else " · no REST route"))
    output = ""
    if a["presenters"]:
        lead = ('<p class="muted">The presenter is chosen per call by a dependency, among:</p>'
                if a["presenter_by_dependency"] else "")
        output += lead + "".join(presenter_card(p) for p in a["presenters"])
    elif a["presenter_by_dependency"]:
        output += '<p class="muted">The presenter is chosen per call by a dependency.</p>'
    if a["output_schema"]:
        output += ('<details class="schema"><summary>Output schema (<code>outputSchema</code>)</summary>'
                   + _pre(_json(a["output_schema"]), "json") + "</details>")
    if not output:
        output = '<p class="muted">Free-form result (no presenter, no output schema).</p>'
    curl, try_it = "", ""
    if served is not None:
        curl = f'<div><h5>REST (curl)</h5>{_pre(a["examples"]["curl"], "shell")}</div>'
        try_it = f"<h4>Try it</h4>{_try_it(a, served)}"
    title = f' <span class="muted">— {_e(a["title"])}</span>' if a.get("title") else ""
    return (
        f'<article class="action" id="{_e(action_id(tool["name"], a["name"]))}" '
        f'data-keys="{_e(search.action_keys(a))}" data-mcp-name="{_e(a["mcp_name"])}" data-action="{_e(a["name"])}"'
        f'{_hidden(shown)}>'
        f'<h3><code>{_e(a["qualified_name"])}</code>{title}</h3>{_hints(a["annotations"])}'
        f'<p class="desc">{_e(a["description"]) or "<span class=muted>No description.</span>"}</p>'
        f'<p class="route">{route}</p>'
        + (f'<p class="scopes">OAuth scopes: {" ".join(f"<code>{_e(s)}</code>" for s in a["scopes"])}</p>'
           if a.get("scopes") else "")
        + (f'<h4>Guards</h4><div class="guards">{_ul([_e(g) for g in a["guards"]])}</div>'
           if a.get("guards") else "")
        + pagination(a.get("pagination"))
        + f"<h4>Parameters</h4>{parameters_table(a['parameters'])}{definitions(a['input_schema'])}"
        f"{request_table(a.get('request_parameters') or [])}"
        f"<h4>Output</h4>{output}{content_types(a.get('content_types') or [])}"
        f"{action_economy(a['tokens'])}"
        f'<h4>Examples</h4>{_missing_note(a)}<div class="examples">'
        f'<div><h5>MCP <code>tools/call</code> (JSON-RPC body)</h5>{_pre(_json(a["examples"]["mcp"]), "json")}</div>'
        f"{curl}</div>{try_it}"
        "</article>"
    )


RAW_SECTION = "raw-tools"  # (never a tool's id: those are "tool-{name}")


def raw_id(name: str) -> str:
    return f"raw-{name}"


def raw_tool_article(r: dict[str, Any], shown: bool = True) -> str:
    """A raw tool: what tools/list advertises of it (MCP only: raw tools have no REST route)."""
    title = f' <span class="muted">— {_e(r["title"])}</span>' if r.get("title") else ""
    output = ""
    if r.get("output_schema"):
        output = ('<details class="schema"><summary>Output schema (<code>outputSchema</code>)</summary>'
                  + _pre(_json(r["output_schema"]), "json") + "</details>")
    tokens_note = (f'<p class="muted">Its <code>tools/list</code> entry: {r["tokens"]} tokens.</p>'
                   if r.get("tokens") is not None else "")
    return (
        f'<article class="action raw" id="{_e(raw_id(r["name"]))}" data-keys="{_e(r["name"].lower())}"'
        f'{_hidden(shown)}>'
        f'<h3><code>{_e(r["name"])}</code>{title}</h3>{_hints(r["annotations"], declared_only=True)}'
        f'<p class="desc">{_e(r["description"]) or "<span class=muted>No description.</span>"}</p>'
        f'<p class="route">MCP tool <code>{_e(r["name"])}</code> · raw tool: no REST route</p>'
        f"<h4>Parameters</h4>{parameters_table(r['parameters'])}{definitions(r['input_schema'])}"
        f"{output}{tokens_note}"
        f'<h4>Example</h4>{_missing_note(r)}<div class="examples">'
        f'<div><h5>MCP <code>tools/call</code> (JSON-RPC body)</h5>{_pre(_json(r["examples"]["mcp"]), "json")}</div>'
        "</div>"
        f'<details class="schema"><summary>MCP <code>tools/list</code> entry as advertised</summary>'
        f'{_pre(_json(r["mcp_tool"]), "json")}</details>'
        "</article>"
    )


def raw_tools_section(raw: list[dict[str, Any]], kept: set[str] | None = None) -> str:
    """The raw tools (`MCPFusion.raw_tool`), found by name; with `kept`, the others rendered hidden."""
    if not raw:
        return ""
    shown = kept if kept is not None else {r["name"] for r in raw}
    return (
        f'<section class="tool raw-tools" id="{RAW_SECTION}" data-keys=""{_hidden(bool(shown))}>'
        '<header class="tool-head"><h2>Raw tools</h2></header>'
        '<p class="desc">Tools that build their own MCP result, served on MCP only.</p>'
        + "".join(raw_tool_article(r, r["name"] in shown) for r in raw)
        + "</section>"
    )


def raw_matches(raw: list[dict[str, Any]], query: str) -> set[str]:
    """The raw tools a search keeps: every term in the name (the rule `search` applies to an action)."""
    words = search.terms(query)
    return {r["name"] for r in raw if all(w in r["name"].lower() for w in words)}


def pagination(paging: dict[str, Any] | None) -> str:
    """How many rows a page holds and how to get the next one (nothing for an action that answers whole)."""
    if not paging:
        return ""
    return f'<p class="pagination">{_e(paging["summary"][:1].upper() + paging["summary"][1:])}</p>'


def content_types(types: list[str]) -> str:
    """The media an action sends besides its text (images, audio, documents), as REST answers them too."""
    if not types:
        return ""
    listed = ", ".join(f"<code>{_e(t)}</code>" for t in types)
    return f'<p class="content-types">Content: {listed} (MCP content blocks; REST answers the bytes)</p>'


def tool_economy(t: dict[str, Any] | None) -> str:
    if t is None:
        return f'<p class="muted">{_e(tokens.EXTRA_HINT)}</p>'
    s = t["saving"]

    def ratio(value: float | None) -> str:
        return f"<strong>{value}x</strong>" if value is not None else "-"

    # Like for like: the listings are compared without outputSchema on either side, then with it on both.
    rows = [
        ["TOON description (text)", str(t["toon_description"])],
        ["Grouped MCP tool: TOON description + input schema", str(t["grouped_toon_entry"])],
        [f"Plain JSON schemas ({t['flat_tool_count']} MCP tools, one per action, every hint)",
         str(t["flat_json_entries"])],
        ["Saved by grouping with TOON vs flat JSON",
         f'<strong>{s["saved"]}</strong> ({s["percent"]}%) '
         f'<meter min="0" max="100" value="{max(s["percent"], 0)}">{s["percent"]}%</meter>'],
        ["As advertised now in <code>tools/list</code>, without <code>outputSchema</code>",
         str(t["advertised_no_output"])],
        ["Advertised vs plain JSON (FastMCP-style), both without <code>outputSchema</code>",
         ratio(t.get("ratio_vs_plain"))],
        ["As advertised now, with <code>outputSchema</code> (typed results; "
         "<code>MCPFusion(output_schemas=False)</code> drops it)", str(t["advertised"])],
        ["of which <code>outputSchema</code>", str(t.get("output_schemas", 0))],
    ]
    if t.get("ratio_vs_plain_output") is not None:
        rows += [["Plain JSON schemas with each action's output schema", str(t["flat_json_entries_output"])],
                 ["Advertised vs plain JSON, both with <code>outputSchema</code>", ratio(t["ratio_vs_plain_output"])]]
    return _table(["", "tokens (o200k)"], rows, "economy") + exposition_table(t.get("expositions", {}))


def exposition_table(figures: dict[str, dict[str, Any]]) -> str:
    """What the tool costs under each exposition, with and without output schemas, against the plain listing
    (one JSON-schema MCP tool per action, every hint; with each action's declared output schema)."""
    if not figures:
        return ""

    def ratio(value: float | None) -> str:
        return f"{value}x" if value is not None else "-"

    rows = [[f"<code>{_e(name)}</code>", str(f["mcp_tools"]), str(f["no_output"]), ratio(f["no_output_vs_plain"]),
             str(f["tokens"]), ratio(f["vs_plain"])] for name, f in figures.items()]
    return ('<p class="label">Cost of each exposition</p>'
            + _table(["exposition", "MCP tools", "tokens, no <code>outputSchema</code>", "vs plain",
                      "tokens with <code>outputSchema</code>", "vs plain"], rows, "economy expositions"))


def _summary_tokens(t: dict[str, Any] | None) -> list[str]:
    if t is None:  # no tokenizer installed (the `tokens` extra)
        return ["–"] * 4
    return [str(t["advertised_no_output"]), str(t["flat_json_entries"]), f'{t["ratio_vs_plain"]}x',
            f'{t["saving"]["saved"]} ({t["saving"]["percent"]}%)']


def tool_section(tool: dict[str, Any], api_base: str, kept: dict[str, set[str]] | None = None) -> str:
    """A tool and its actions; with `kept` (tool -> actions a search keeps), the others are rendered hidden."""
    shown = kept.get(tool["name"], set()) if kept is not None else {a["name"] for a in tool["actions"]}
    toon = tool["toon_description"]
    state = ("advertised as this tool's description" if toon["advertised"]
             else "not advertised (toon_description is off or the tool is flat); shown for comparison")
    table = _table(["action", "desc", "required (? optional)"], [
        [f"<code>{_e(r.get('action', ''))}</code>", _e(r.get("desc", "")), _e(r.get("required", ""))]
        for r in toon["table"]
    ], "toon-table") if toon["table"] else ""
    badges = f'<span class="badge">{_e(tool["exposition"])}</span>'
    if tool["select"]:
        badges += '<span class="badge">_select</span>'
    title = f' <span class="muted">— {_e(tool["title"])}</span>' if tool.get("title") else ""
    return (
        f'<section class="tool" id="tool-{_e(tool["name"])}" data-keys="{_e(search.tool_keys(tool))}"'
        f'{_hidden(bool(shown))}>'
        f'<header class="tool-head"><h2>{_e(tool["name"])}{title}</h2>{badges}{_tags(tool["tags"])}</header>'
        f'<p class="desc">{_e(tool["description"])}</p>'
        f'<p class="label">Aggregated annotations</p>{_hints(tool["annotations"])}'
        '<div class="grid">'
        f'<div class="card"><h3>TOON description</h3><p class="muted">{state}</p>'
        f'{_pre(toon["text"], "toon")}{table}</div>'
        f'<div class="card"><h3>Token economy</h3>{tool_economy(tool["tokens"])}</div>'
        "</div>"
        f'<details class="schema"><summary>MCP <code>tools/list</code> entries as advertised</summary>'
        f'{_pre(_json(tool["mcp_tools"]), "json")}</details>'
        + "".join(action_section(tool, a, api_base, a["name"] in shown) for a in tool["actions"])
        + "</section>"
    )


def sidebar(manifest: dict[str, Any], kept: dict[str, set[str]] | None = None,
            raw_kept: set[str] | None = None) -> str:
    """Every tool and action, then the raw tools; with `kept` (as `tool_section`) and `raw_kept`, the others
    hidden."""
    items = []
    for tool in manifest["tools"]:
        shown = kept.get(tool["name"], set()) if kept is not None else {a["name"] for a in tool["actions"]}
        actions = "".join(
            f'<li class="nav-action" data-keys="{_e(search.action_keys(a))}"{_hidden(a["name"] in shown)}>'
            f'<a href="#{_e(action_id(tool["name"], a["name"]))}">{_e(a["name"])}</a></li>'
            for a in tool["actions"]
        )
        tags = "".join(f'<span class="tag">{_e(t)}</span>' for t in tool["tags"])
        items.append(
            f'<li class="nav-tool" data-keys="{_e(search.tool_keys(tool))}"{_hidden(bool(shown))}>'
            f'<a href="#tool-{_e(tool["name"])}">{_e(tool["name"])}</a>{tags}<ul>{actions}</ul></li>'
        )
    raw = manifest.get("raw_tools") or []
    raw_shown = raw_kept if raw_kept is not None else {r["name"] for r in raw}
    if raw:
        entries = "".join(
            f'<li class="nav-action" data-keys="{_e(r["name"].lower())}"{_hidden(r["name"] in raw_shown)}>'
            f'<a href="#{_e(raw_id(r["name"]))}">{_e(r["name"])}</a></li>'
            for r in raw
        )
        items.append(f'<li class="nav-tool" data-keys=""{_hidden(bool(raw_shown))}>'
                     f'<a href="#{RAW_SECTION}">Raw tools</a><ul>{entries}</ul></li>')
    nothing = kept is not None and not any(kept.values()) and not raw_shown
    return ('<nav id="sidebar" class="sidebar" aria-label="Tools and actions">'
            f'<ul class="nav">{"".join(items)}</ul>'
            f'<p class="no-results muted"{_hidden(nothing)}>'
            "No tool or action matches.</p></nav>")


def _csp(api_base: str) -> str:
    connect = "'self'"
    if api_base:
        parts = urlsplit(api_base)
        if parts.scheme and parts.netloc:
            connect += f" {parts.scheme}://{parts.netloc}"
    return (f"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
            f"connect-src {connect}; base-uri 'none'; form-action 'self'")


def _cors_note(api_base: str) -> str:
    """What an exported page (another origin than `api_base`) needs for its try-it forms to work."""
    if not urlsplit(api_base).scheme:
        return ""  # same origin: nothing to allow
    return (f'<p class="muted cors-note">The try-it forms call <code>{_e(api_base)}</code>. From another origin '
            "(this file opened from disk has the origin <code>null</code>) the browser only reads the answer when "
            "that server allows this origin with CORS; or use the docs the server serves at "
            f'<code>{_e(api_base)}/tools</code>, or the curl examples.</p>')


def render_page(
    manifest: dict[str, Any],
    *,
    asset_prefix: str = "static/",
    manifest_href: str = "tools",
    api_base: str = "",
    query: str = "",
    links: dict[str, str] | None = None,
) -> str:
    """The whole page. `asset_prefix` locates docs.css/docs.js, `manifest_href` + `.json`/`.toon` the manifests,
    `api_base` is prefixed to REST paths by the try-it forms ("" = same origin). `query` pre-filters (JS off)."""
    shown = search.filter_manifest(manifest, query)
    title = manifest["title"]
    tools = manifest["tools"]
    n_actions = sum(len(t["actions"]) for t in tools)
    extra = "".join(f'<a href="{_e(href)}">{_e(label)}</a>' for label, href in (links or {}).items())
    summary = _table(
        ["tool", "actions", "advertised (no outputSchema)", "plain JSON (one tool per action)", "ratio",
         "saved by TOON grouping"],
        [[f'<a href="#tool-{_e(t["name"])}">{_e(t["name"])}</a>', str(len(t["actions"])), *_summary_tokens(t["tokens"])]
         for t in tools],
        "economy summary",
    )
    # Every tool is on the page (a new search, typed or submitted, may find any of them); what `query` does not
    # match is rendered hidden, so the page reads filtered with JavaScript off too.
    kept = {t["name"]: {a["name"] for a in t["actions"]} for t in shown["tools"]}
    raw = manifest.get("raw_tools") or []
    raw_kept = raw_matches(raw, query)
    body = "".join(tool_section(t, api_base, kept) for t in tools) + raw_tools_section(raw, raw_kept)
    empty = (f'<p class="no-results muted"{_hidden(not shown["tools"] and not raw_kept)}>'
             "No tool or action matches this search.</p>")
    counted = f"{len(tools)} tools, {n_actions} actions" + (f", {len(raw)} raw tools" if raw else "")
    if manifest.get("token_encoding"):
        encoding = f" Token counts use the\n<code>{_e(manifest['token_encoding'])}</code> encoding."
    else:  # no tokenizer installed: no counts, and no encoding to name
        encoding = f" {_e(tokens.EXTRA_HINT)}."
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<meta http-equiv="Content-Security-Policy" content="{_e(_csp(api_base))}">
<title>{_e(title)} · tool documentation</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="{_e(asset_prefix)}docs.css">
</head>
<body data-api-base="{_e(api_base)}">
<a class="skip" href="#main">Skip to content</a>
<header class="topbar">
<p class="brand"><a href="#main">{_e(title)}</a> <span class="muted">tool documentation</span></p>
<form class="search" role="search" method="get">
<label for="search" class="visually-hidden">Search tools, actions and tags</label>
<input id="search" type="search" name="q" value="{_e(query)}" placeholder="Search tools, actions, tags…"
 autocomplete="off">
</form>
<nav class="links" aria-label="Machine-readable"><a href="{_e(manifest_href)}.json">tools.json</a>
<a href="{_e(manifest_href)}.toon">tools.toon</a>{extra}</nav>
<button type="button" class="theme-toggle" hidden aria-label="Switch theme">Theme: auto</button>
</header>
<div class="layout">
{sidebar(manifest, kept, raw_kept)}
<main id="main">
<section class="overview">
<h1>{_e(title)}</h1>
<p>{counted}, generated from the registered tools.{encoding}</p>
{summary}
{_cors_note(api_base)}
</section>
{empty}{body}
</main>
</div>
<footer class="muted">Generated by {_e(manifest["generator"])}.</footer>
<script src="{_e(asset_prefix)}docs.js"></script>
</body>
</html>
"""
