"""What a presenter does, for the docs: fields, rules, redaction, UI block types, suggestions, limit, embeds.

UI blocks, suggestions and function rules are only known by running the presenter's callbacks, so they are
rendered (read-only) on sample items built from the presenter's own schema. Samples cycle through enum
values so conditional blocks (e.g. a reminder suggested for `overdue` invoices) show up.
"""

from __future__ import annotations

import logging
from typing import Any

from ..presenter import Presenter
from . import samples
from .schema_table import rows

logger = logging.getLogger("mcpfusion.docs")
_MAX_VARIANTS = 6


def sample_item(presenter: Presenter, variant: int = 0) -> dict[str, Any]:
    """One raw item that fits the presenter's schema (embeds get a list of two child items)."""
    item: dict[str, Any] = {}
    if presenter.item_model is not None:
        schema = presenter.item_model.model_json_schema()
        item = samples.sample(schema, schema, variant=variant) or {}
    for key, child in presenter.embeds.items():
        item[key] = [sample_item(child, variant + i) for i in range(2)]
    return item


def variants(presenter: Presenter) -> int:
    """How many distinct samples cover the enums of the schema (at least 3)."""
    widest = 0
    for row in rows(presenter.item_model.model_json_schema() if presenter.item_model else None):
        widest = max(widest, len(row["enum"] or ()))
    return max(3, min(widest, _MAX_VARIANTS))


def sample_items(presenter: Presenter, count: int | None = None) -> list[dict[str, Any]]:
    return [sample_item(presenter, i) for i in range(count if count is not None else variants(presenter))]


def describe(presenter: Presenter, ctx: Any = None) -> dict[str, Any]:
    """A JSON-able description of `presenter` (and, recursively, of its embedded children)."""
    info: dict[str, Any] = {
        "name": presenter.name,
        "fields": rows(presenter.item_schema()),
        "automatic_rules": list(presenter.auto_rules),
        "rules": [],
        "redacted_paths": list(presenter.redact_paths),
        "censor": presenter.censor if isinstance(presenter.censor, str | int | float | None) else "(custom)",
        "ui_blocks": [],
        "suggestions": [],
        "directives": [],
        "limit": presenter.max_items,
        "embeds": [{"key": k, "presenter": describe(c, ctx)} for k, c in presenter.embeds.items()],
        "sample_error": None,
    }
    inherited = {r for e in info["embeds"] for r in e["presenter"]["automatic_rules"] + e["presenter"]["rules"]}
    inherited_suggestions = {(s["action"], s["reason"]) for e in info["embeds"] for s in e["presenter"]["suggestions"]}
    items = sample_items(presenter)
    try:
        renders = [presenter.render(item, ctx) for item in items]
        renders.append(presenter.render(items[: presenter.max_items or None], ctx))
    except Exception as exc:  # a callback that needs real dependencies: say so rather than fail the page
        logger.debug("presenter %s could not render a sample", presenter.name, exc_info=True)
        info["sample_error"] = f"{type(exc).__name__}: {exc}"
        return info
    seen_blocks: set[tuple[str, str | None]] = set()
    for rendered in renders:
        for rule in rendered.rules:
            if rule not in presenter.auto_rules and rule not in inherited and rule not in info["rules"]:
                info["rules"].append(rule)
        for block in rendered.ui_blocks:
            if (block.type, block.title) not in seen_blocks:
                seen_blocks.add((block.type, block.title))
                info["ui_blocks"].append({"type": block.type, "title": block.title})
        for s in rendered.suggestions:
            entry = {"action": s.action, "reason": s.reason}
            if (s.action, s.reason) not in inherited_suggestions and entry not in info["suggestions"]:
                info["suggestions"].append(entry)
        for d in rendered.directives:
            if d not in info["directives"]:
                info["directives"].append(d)
    return info
