"""Escaping for the XML-ish blocks of the wire format (the one place that decides it)."""

from __future__ import annotations

_ATTR = str.maketrans({"&": "&amp;", "<": "&lt;", '"': "&quot;"})
_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", '"': "&quot;"})
# Error messages quote identifiers for the agent (`Invoice "inv_9" ...`): keep quotes readable there.
_MESSAGE = str.maketrans({"&": "&amp;", "<": "&lt;"})


def attr(value: object) -> str:
    """Escape an attribute value (`&`, `<`, `"`)."""
    return str(value).translate(_ATTR)


def text(value: object) -> str:
    """Escape element text of perception blocks (`&`, `<`, `"`)."""
    return str(value).translate(_TEXT)


def message(value: object) -> str:
    """Escape element text of error blocks (`&`, `<`); quotes stay as written."""
    return str(value).translate(_MESSAGE)


def bullet_block(tag: str, lines: list[str]) -> str:
    """`<tag>` + one `- line` per entry + `</tag>`."""
    body = "\n".join(f"- {text(line)}" for line in lines)
    return f"<{tag}>\n{body}\n</{tag}>"
