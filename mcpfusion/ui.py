"""UI blocks: what a client renders for a human, passed through to it in `<ui_passthrough>` blocks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import markup
from .serializer import dumps  # the Rust encoder: the text json.dumps(indent=2) writes, ~9x faster

Width = Literal["full", "half", "third"]


@dataclass(frozen=True, slots=True)
class UIBlock:
    """One rendered block: `type` tells the client what the (fenced or markdown) content is."""

    type: str
    content: str
    title: str | None = None
    width: Width | None = None
    priority: int | None = None

    def render(self) -> str:
        attrs = f'type="{markup.attr(self.type)}"'
        if self.title is not None:
            attrs += f' title="{markup.attr(self.title)}"'
        if self.width is not None:
            attrs += f' width="{markup.attr(self.width)}"'
        if self.priority is not None:
            attrs += f' priority="{markup.attr(self.priority)}"'
        return f"<ui_passthrough {attrs}>\n{self.content}\n</ui_passthrough>"


def fence(language: str, body: str) -> str:
    """The only place that builds a fenced block; a longer fence is used when the body holds backticks."""
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{language}\n{body}\n{ticks}"


def _cell(text: str) -> str:
    if "|" in text or "\n" in text:
        text = text.replace("|", "\\|").replace("\n", " ")
    return text


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], **options: Any) -> UIBlock:
    """A markdown table."""
    cells = [[c if isinstance(c, str) else str(c) for c in row] for row in rows]
    head = [h if isinstance(h, str) else str(h) for h in headers]
    text = _table(head, cells)
    # Tables sit on the hot path: cells are escaped only when the table holds a `|` or a newline of theirs.
    pipes = 2 * len(head) + 2 + sum([len(row) + 1 for row in cells])
    if text.count("|") != pipes or text.count("\n") != len(cells) + 1:
        text = _table([_cell(h) for h in head], [[_cell(c) for c in row] for row in cells])
    return UIBlock("markdown", text, **options)


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def list(items: Iterable[Any], **options: Any) -> UIBlock:  # noqa: A001 - mirrors ui.list of the spec
    """A markdown bullet list."""
    return UIBlock("markdown", "\n".join(f"- {item}" for item in items), **options)


def json_block(obj: Any, **options: Any) -> UIBlock:
    """Formatted JSON in a json fence."""
    return UIBlock("json", fence("json", dumps(obj, pretty=True)), **options)


def code_block(language: str, code: str, **options: Any) -> UIBlock:
    """Source code; the block's type is its language."""
    return UIBlock(language, fence(language, code), **options)


def echarts(config: Any, **options: Any) -> UIBlock:
    """An ECharts configuration, as formatted JSON in an echarts fence."""
    return UIBlock("echarts", fence("echarts", dumps(config, pretty=True)), **options)


def mermaid(source: str, **options: Any) -> UIBlock:
    """A Mermaid diagram in a mermaid fence."""
    return UIBlock("mermaid", fence("mermaid", source), **options)


def markdown(text: str, **options: Any) -> UIBlock:
    """Raw markdown, passed through as written."""
    return UIBlock("markdown", text, **options)


def summary(text: str, **options: Any) -> UIBlock:
    """`📊 **Summary**: {text}` as markdown."""
    return UIBlock("markdown", f"📊 **Summary**: {text}", **options)


json = json_block  # `ui.json(obj)`, as the spec names it
