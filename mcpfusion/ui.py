"""UI blocks: what a client renders for a human, passed through to it in `<ui_passthrough>` blocks."""

from __future__ import annotations

import builtins
import datetime
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import markup

# orjson: the text json.dumps(indent=2) writes, ~9x faster
from .serializer import JSON_SCALARS, dumps, scalar
from .slots import writable

Width = Literal["full", "half", "third"]


@dataclass(frozen=True, slots=True, init=False)
class UIBlock:
    """One rendered block: `type` tells the client what the (fenced or markdown) content is."""

    type: str
    content: str
    title: str | None = None
    width: Width | None = None
    priority: int | None = None

    def __init__(self, type: str, content: str, title: str | None = None, width: Width | None = None,
                 priority: int | None = None) -> None:
        # Frozen, yet set through the slots' own setters (below): the frozen dataclass's generated
        # `__init__` goes through `object.__setattr__` per field, about a third of a block's cost.
        if width is not None or priority is not None:
            _check_options(width, priority)
        _type(self, type)
        _content(self, content)
        _title(self, title)
        _width(self, width)
        _priority(self, priority)

    def render(self) -> str:
        kind = self.type
        if kind.__class__ is str and self.title is None and self.width is None and self.priority is None:
            # Most blocks (tables, summaries) carry a type alone: its tag found without the cache's key tuple.
            opening = _TYPE_ONLY.get(kind)
            if opening is None and len(_TYPE_ONLY) < 256:
                opening = _TYPE_ONLY[kind] = _opening.__wrapped__(kind, None, None, None)
            if opening is not None:
                content = self.content
                return f"{opening}\n{sealed(content) if '</' in content else content}\n</ui_passthrough>"
        try:
            opening = _opening(self.type, self.title, self.width, self.priority)
        except TypeError:  # an attribute that does not hash: rendered for this block alone
            opening = _opening.__wrapped__(self.type, self.title, self.width, self.priority)
        content = self.content
        return f"{opening}\n{sealed(content) if '</' in content else content}\n</ui_passthrough>"


def sealed(content: str) -> str:
    """`content` unable to close its block early: a `</ui_passthrough` inside (in any case) loses its `<`, so
    text that follows it cannot pass for the framework's own blocks (rules, errors, suggestions)."""
    if _CLOSING.search(content) is None:
        return content
    return _CLOSING.sub("&lt;", content)


_CLOSING = re.compile(r"<(?=/ui_passthrough)", re.IGNORECASE)  # the `<` of a closing tag, in any case


_type, _content, _title, _width, _priority = (
    UIBlock.__dict__[name].__set__ for name in ("type", "content", "title", "width", "priority"))


_TYPE_ONLY: dict[str, str] = {}  # a block's tag by its type, for blocks with no other attribute (bounded)


@functools.lru_cache(maxsize=1024, typed=True)
def _opening(type: str, title: str | None, width: str | None, priority: int | None) -> str:
    """A block's `<ui_passthrough ...>` tag: the same few per application, rendered once each."""
    attrs = f'type="{markup.attr(type)}"'
    if title is not None:
        attrs += f' title="{markup.attr(title)}"'
    if width is not None:
        attrs += f' width="{markup.attr(width)}"'
    if priority is not None:
        attrs += f' priority="{markup.attr(priority)}"'
    return f"<ui_passthrough {attrs}>"


_WIDTHS = ("full", "half", "third")
_SHORT_NAME = re.compile(r"[\w+#.-]{1,32}", re.ASCII)


def _given(value: object) -> str:
    """A value given where an option was expected, as an error message names it: a short name as written,
    anything else by its kind and size (it may be data, and errors are logged)."""
    if isinstance(value, str) and _SHORT_NAME.fullmatch(value):
        return repr(value)
    if isinstance(value, str | bytes | builtins.list | tuple | dict):
        return f"a {type(value).__name__} of length {len(value)}"
    return f"a {type(value).__name__}"


def _check_options(width: object, priority: object) -> None:
    """Refuse a `width` or `priority` the spec does not know: a client would get a block it cannot lay out."""
    if width is not None and (width.__class__ is not str or width not in _WIDTHS):
        raise ValueError(f"a UI block's width is 'full', 'half' or 'third' (or None), not {_given(width)}")
    if priority is not None and (not isinstance(priority, int) or isinstance(priority, bool)):
        raise ValueError(f"a UI block's priority is an int (or None), not {_given(priority)}")


def _made(type: str, content: str, title: str | None, width: Width | None, priority: int | None) -> UIBlock:
    """`UIBlock(type, content, title, width, priority)` without the call of `__init__` (every helper below
    ends here: a presented answer makes a few blocks per item). The helpers take the options as keywords of
    their own, not as `**options`: no dict to make and read per block."""
    if width is not None or priority is not None:
        _check_options(width, priority)
    block = _Writable()
    block.type, block.content, block.title, block.width, block.priority = type, content, title, width, priority
    block.__class__ = UIBlock
    return block  # type: ignore[no-any-return]


_Writable = writable(UIBlock)


def fence(language: str, body: str) -> str:
    """The only place that builds a fenced block; a longer fence is used when the body holds backticks."""
    ticks = "```"
    while ticks in body:
        ticks += "`"
    return f"{ticks}{language}\n{body}\n{ticks}"


def table_cell(text: str) -> str:
    """A table cell's text as written: a cell is data (stored text a writer chose), it may not end its row or
    the block, nor open a tag of the wire format, and it shows as stored once rendered (the egress guard
    looks for values in this form too)."""
    if "|" in text or "<" in text or "&" in text:
        # `&` first, so the `&lt;` added next is not escaped twice; without it `&lt;x` stored would show `<x`.
        text = text.replace("&", "&amp;").replace("|", "\\|").replace("<", "&lt;")
    return text if text.isprintable() else markup.fold_breaks(text)


def line(text: str) -> str:
    """A one-line text as written into a summary or a list item: stored text a writer chose may not start a
    line of its own (a forged rule or suggestion after the block), nor open a tag of the wire format, and it
    shows as stored once rendered (the egress guard looks for values in this form too)."""
    if "<" in text or "&" in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;")  # `&` first: see `table_cell`
    return text if text.isprintable() else markup.fold_breaks(text)


def _text(value: Any) -> str:
    """A cell's text: a string's own characters (`str.__str__` of a subclass: what joining it writes), a
    missing value (`None`) an empty cell, a boolean as the data block's JSON writes it (`true`), anything else
    as `str()` writes it."""
    if isinstance(value, str):
        return str.__str__(value)
    if value is None:
        return ""
    if value.__class__ is bool:
        return "true" if value else "false"
    return str(value)


def _item(value: Any) -> str:
    """A list item's text: a string's own characters, anything else as `str()` writes it."""
    return str.__str__(value) if isinstance(value, str) else str(value)


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], *, title: str | None = None,
          width: Width | None = None, priority: int | None = None) -> UIBlock:
    """A markdown table."""
    body: Sequence[Sequence[Any]] = rows if rows.__class__ is builtins.list else [*rows]
    if len(body) <= 64 and headers.__class__ in _SIZED and headers:
        # Tables sit on the hot path: a rectangular one is its layout (cached) with each cell's text in its gap,
        # unless a cell's text holds a `|`, `<`, `&` or a line break of its own and needs escaping. A row of
        # another width than the header's goes to the general path, to be refused.
        columns = len(headers)
        cells = [*headers]
        for row in body:
            if row.__class__ not in _SIZED or len(row) != columns:
                break
            cells += row
        else:
            # Every cell a string (the usual table): joining them is the check. Otherwise each cell's text is
            # the one the general path writes (`_text`), and the text is joined again.
            try:
                joined = "".join(cells)
            except TypeError:
                cells = [cell if cell.__class__ is str else _cell_text(cell) for cell in cells]
                joined = "".join(cells)
            # Their characters looked through at once for a `|`, `<`, `&` or line break (any kind ends a row,
            # not only `\n`: see `_one_line`).
            if "|" not in joined and "<" not in joined and "&" not in joined and _one_line(joined):
                parts = [*_layout(columns, len(body))]  # the text between the cells, the cells in its gaps
                parts[1::2] = cells
                return _made("markdown", "".join(parts), title, width, priority)
    head = [_text(h) for h in headers]
    if not head:
        raise ValueError("ui.table needs at least one column header")
    cells_text = [[_text(c) for c in row] for row in body]
    for index, row in enumerate(cells_text):
        if len(row) != len(head):
            # Markdown drops a cell past the header's and leaves a missing one blank: the reader never sees it.
            raise ValueError(f"ui.table's row {index} has {len(row)} cells, its header {len(head)}")
    text = _table([table_cell(h) for h in head], [[table_cell(c) for c in row] for row in cells_text])
    return _made("markdown", text, title, width, priority)


def _one_line(text: str) -> bool:
    """Whether `text` holds no line break of any kind `str.splitlines` knows: ASCII text (known at once) is
    looked through for each of its seven (memchr), cheaper than splitting it; other text is split (text with
    none is its one line, the string itself; one ending in a break is not: the break is left out)."""
    if text.isascii():
        return "\n" not in text and _no_other_break(text)
    return text.splitlines() == [text]


def _no_other_break(text: str) -> bool:
    """No ASCII line break but `\n` in `text` (the six others `str.splitlines` knows)."""
    return ("\r" not in text and "\x0b" not in text and "\x0c" not in text and "\x1c" not in text
            and "\x1d" not in text and "\x1e" not in text)


_SIZED = (builtins.list, tuple)  # rows and headers the fast path reads: lists and tuples, not iterators


def _table(head: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
                       *["| " + " | ".join(row) + " |" for row in rows]])


@functools.lru_cache(maxsize=256)
def _layout(width: int, height: int) -> tuple[str, ...]:
    """A table of `width` columns and `height` rows: the text between its cells with a gap for each cell (at
    the odd places)."""
    text = _table(["%s"] * width, [["%s"] * width] * height)
    between = [""] * (2 * width * (height + 1) + 1)
    between[::2] = text.split("%s")
    return tuple(between)


def _cell_text(value: Any) -> str:
    """`_text(value)`, a date's remembered: a page of rows repeats a few dates, and writing one (`str`)
    costs several times a lookup of it."""
    if value.__class__ is _date:
        found = _DATE_TEXTS.get(value)
        if found is None:
            if len(_DATE_TEXTS) >= 4096:
                _DATE_TEXTS.clear()
            found = _DATE_TEXTS[value] = value.isoformat()
        return found
    return _text(value)


_date = datetime.date
_DATE_TEXTS: dict[datetime.date, str] = {}


def list(items: Iterable[Any], *, title: str | None = None,  # noqa: A001 - mirrors ui.list of the spec
         width: Width | None = None, priority: int | None = None) -> UIBlock:
    """A markdown bullet list: one line per item (see `line`)."""
    return _made("markdown", "\n".join(f"- {line(_item(item))}" for item in items), title, width, priority)


def json_block(obj: Any, *, title: str | None = None, width: Width | None = None,
               priority: int | None = None) -> UIBlock:
    """Formatted JSON in a json fence."""
    return _made("json", fence("json", dumps(obj, pretty=True)), title, width, priority)


def code_block(language: str, code: str, *, title: str | None = None, width: Width | None = None,
               priority: int | None = None) -> UIBlock:
    """Source code; the block's type is its language: one token (`sql`, `c++`, `objective-c`), which the
    fence's first line and the block's type both carry."""
    if not isinstance(language, str) or _LANGUAGE.fullmatch(language) is None:
        raise ValueError(f"ui.code_block's language is one word (letters, digits, _ + # . -), not {_given(language)}")
    return _made(language, fence(language, code), title, width, priority)


_LANGUAGE = re.compile(r"[\w+#.-]+")


def echarts(config: Any, *, title: str | None = None, width: Width | None = None,
            priority: int | None = None) -> UIBlock:
    """An ECharts configuration, as formatted JSON in an echarts fence."""
    return _made("echarts", fence("echarts", dumps(config, pretty=True)), title, width, priority)


class Slot:
    """A value of a chart template left open (`ui.slot("paid")`), given by each call of the template."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ui.slot({self.name!r})"


def slot(name: str) -> Slot:
    """An open value of `echarts_template`'s config."""
    return Slot(name)


# JSON scalars (`JSON_SCALARS`) are one line wherever they sit in indented JSON: written alone, they are the
# same text.
_MARK = "\ue000slot\ue000"  # a private-use character: never in a template's own text


def _filled(node: Any, fill: Any) -> Any:
    """`node` (dicts and lists) with every `Slot` replaced by `fill(slot)`."""
    if node.__class__ is Slot:
        return fill(node)
    if isinstance(node, dict):
        return {k: _filled(v, fill) for k, v in node.items()}
    if isinstance(node, (builtins.list, tuple)):
        return [_filled(v, fill) for v in node]
    return node


def _slot_json(value: Any, pad: str) -> str:
    """`value` as the encoder writes it within the indented config, on a line starting with `pad` (a newline
    and that line's indentation): a scalar alone, anything else (a list, a dict, a subclass) as its own
    indented JSON, each of its lines indented by `pad` (strings escape their newlines: these are its lines)."""
    if value.__class__ in JSON_SCALARS:
        return scalar(value)
    return dumps(value, pretty=True).replace("\n", pad)


class EChartsTemplate:
    """`echarts(config, title=..., ...)` for a config whose shape is the same call after call, only some values
    (`ui.slot(name)`) changing: the indented JSON is written once, each call writes only its values into it
    (a presenter's chart otherwise serializes the whole config per answer). A call gives the block
    `echarts` makes of the config with those values, byte for byte, whatever the values are."""

    __slots__ = ("config", "title", "width", "priority", "slots", "_head", "_parts", "_fenced")

    def __init__(self, config: Any, *, title: str | None = None, width: Width | None = None,
                 priority: int | None = None) -> None:
        _check_options(width, priority)  # refused now, not at the template's first call
        self.config, self.title, self.width, self.priority = config, title, width, priority
        names: builtins.list[str] = []

        def mark(s: Slot) -> str:
            names.append(s.name)
            return f"{_MARK}{len(names) - 1}{_MARK}"

        text = dumps(_filled(config, mark), pretty=True)
        pieces = text.split(f'"{_MARK}')
        if len(pieces) != len(names) + 1 or not names:
            raise ValueError("an echarts template needs its slots as values (not keys) and at least one of them")
        self.slots = frozenset(names)
        self._head = before = pieces[0]
        parts = []
        for piece in pieces[1:]:
            index, rest = piece.split(f'{_MARK}"', 1)
            line = before.rpartition("\n")[2]
            parts.append((names[int(index)], "\n" + " " * (len(line) - len(line.lstrip(" "))), rest))
            before = rest
        self._parts = tuple(parts)
        # The fence written around the text once, too, when the template's own text holds no run of three
        # backticks: a value then decides alone whether `fence` needs a longer one (its JSON starts and ends
        # with a digit, a quote or a bracket: its backticks cannot join a run of the template's text).
        self._fenced: tuple[str, tuple[tuple[str, str, str], ...]] | None = None
        if not any("```" in piece for piece in [self._head, *(rest for _, _, rest in parts)]):
            *middle, (last_name, last_pad, last_rest) = parts
            self._fenced = (f"```echarts\n{self._head}", (*middle, (last_name, last_pad, f"{last_rest}\n```")))

    def __call__(self, **values: Any) -> UIBlock:
        """The block for these slot values: every slot, and nothing else (a `TypeError` names them)."""
        if values.keys() != self.slots:
            raise self._mismatch(values)
        if self._fenced is None:
            return self._unfenced(values)
        head, parts = self._fenced
        out = [head]
        for name, pad, rest in parts:
            value = values[name]  # a scalar written here (`_slot_json`'s first case, without its call)
            written = scalar(value) if value.__class__ in JSON_SCALARS else _slot_json(value, pad)
            if "```" in written:
                return self._unfenced(values)  # backticks of its own: `fence` decides on the whole text
            out += (written, rest)
        return _made("echarts", "".join(out), self.title, self.width, self.priority)

    def _mismatch(self, values: dict[str, Any]) -> TypeError:
        """What a call giving other values than the slots is told, as a function called with other keywords."""
        missing, unknown = sorted(self.slots - values.keys()), sorted(values.keys() - self.slots)
        wrong = [f"{what} {', '.join(names)}" for what, names in (("missing", missing), ("unknown", unknown)) if names]
        title = _given(self.title)
        name = (f"echarts template {title}" if title.startswith("'") else f"an echarts template (its title is {title})"
                if self.title else "an echarts template (no title)")
        return TypeError(f"{name} takes the slots {', '.join(sorted(self.slots))}: {'; '.join(wrong)}")

    def _unfenced(self, values: dict[str, Any]) -> UIBlock:
        """The block with its fence worked out from the whole text (backticks in a value or the template)."""
        out = [self._head]
        for name, pad, rest in self._parts:
            out += (_slot_json(values[name], pad), rest)
        return _made("echarts", fence("echarts", "".join(out)), self.title, self.width, self.priority)


def echarts_template(config: Any, *, title: str | None = None, width: Width | None = None,
                     priority: int | None = None) -> EChartsTemplate:
    """`echarts` of a config with open values (`ui.slot`), serialized once: `chart(paid=..., due=...)`."""
    return EChartsTemplate(config, title=title, width=width, priority=priority)


def mermaid(source: str, *, title: str | None = None, width: Width | None = None,
            priority: int | None = None) -> UIBlock:
    """A Mermaid diagram in a mermaid fence."""
    return _made("mermaid", fence("mermaid", source), title, width, priority)


def markdown(text: str, *, title: str | None = None, width: Width | None = None,
             priority: int | None = None) -> UIBlock:
    """Raw markdown, passed through as written."""
    return _made("markdown", text, title, width, priority)


def summary(text: str, *, title: str | None = None, width: Width | None = None,
            priority: int | None = None) -> UIBlock:
    """`📊 **Summary**: {text}` as markdown, on one line (see `line`)."""
    return _made("markdown", f"📊 **Summary**: {line(text)}", title, width, priority)


json = json_block  # `ui.json(obj)`, as the spec names it
