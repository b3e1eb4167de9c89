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


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else str(value)
    if "|" in text or "\n" in text:  # escaping only when needed: tables sit on the hot path
        text = text.replace("|", "\\|").replace("\n", " ")
    return text


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], **options: Any) -> UIBlock:
    """A markdown table."""
    lines = ["| " + " | ".join([_cell(h) for h in headers]) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join([_cell(c) for c in row]) + " |" for row in rows]
    return UIBlock("markdown", "\n".join(lines), **options)


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
