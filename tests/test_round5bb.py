"""Round 5bb: a list or mapping censor a parent placed is never walked into nor edited by a child presenter
whose tree holds several censors (`presenter._compiled`'s grouped path), as `compile_tree`'s code already
does: the user's censor object and the original presenter's answers stay the same on every call."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from pydantic import BaseModel

from mcpfusion import Presenter, Tool
from mcpfusion.testing import ToolTester


class Line(BaseModel):
    sku: str
    card: str


class Order(BaseModel):
    id: str
    lines: list[Line]


ORDER = {"id": "o1", "lines": [{"sku": "A-1", "card": "4242424242424242"}]}


def _calls(presenter: Presenter, data: Any, *, times: int = 2, also: Presenter | None = None) -> list[Any]:
    """The data of `times` calls of an action returning `data` through `presenter` (after one call through
    `also`, a variant, when given)."""
    tool = Tool("t")

    @tool.action(readonly=True, returns=presenter)
    async def get() -> dict:
        """Get."""
        return copy.deepcopy(data)

    if also is not None:
        @tool.action(readonly=True, returns=also)
        async def getv() -> dict:
            """Get the variant."""
            return copy.deepcopy(data)

    async def run() -> list[Any]:
        tester = ToolTester([tool])
        out = []
        if also is not None:
            answer = await tester.call("t", "getv", {})
            assert answer.error_code is None, answer.text
        for _ in range(times):
            answer = await tester.call("t", "get", {})
            assert answer.error_code is None, answer.text
            out.append(answer.data)
        return out

    return asyncio.run(run())


def test_a_two_censor_child_leaves_its_parents_list_censor_alone() -> None:
    censor = [{"a": "hidden"}]
    line = Presenter("line").schema(Line).redact_pii(["card"]).redact_pii(["*"], "#")
    order = Presenter("order").schema(Order).embed("lines", line).redact_pii(["lines[*]"], censor)
    for data in _calls(order, ORDER, times=3):
        assert data == {"id": "o1", "lines": [[{"a": "hidden"}]]}
    assert censor == [{"a": "hidden"}]


def test_a_variants_two_censor_child_leaves_the_original_alone() -> None:
    censor = [{"a": "hidden"}]
    line = Presenter("line").schema(Line).redact_pii(["card"])
    order = Presenter("order").schema(Order).embed("lines", line).redact_pii(["lines[*]"], censor)
    brief = order.copy("order_brief").embed("lines", line.copy("line_brief").redact_pii(["*"], "#"))
    for data in _calls(order, ORDER, also=brief):
        assert data == {"id": "o1", "lines": [[{"a": "hidden"}]]}
    assert censor == [{"a": "hidden"}]


class Cell(BaseModel):
    f5: list[list[dict[str, str]]]
    f6: list[list[dict[str, str]]]


class Sheet(BaseModel):
    f3: list[Cell]


def test_each_item_censor_passed_by_a_variant_child_of_two_censors() -> None:
    """min_3256: `f3[*]` hides each item with a list censor; the variant's child copy adds a second censor."""
    censor = [{"a": 1}]
    cell = Presenter("cell").schema(Cell).redact_pii(["f5"], -1)
    sheet = Presenter("sheet").schema(Sheet).redact_pii(["f3[*]"], censor).embed("f3", cell)
    variant = sheet.copy("sheet_v").embed("f3", cell.copy("cell_v").redact_pii(["f6", "*"], []))
    data = {"f3": [{"f5": [[{"k": "v"}]], "f6": [[{"k": "w"}]]}, {"f5": [], "f6": []}]}
    for answer in _calls(sheet, data, also=variant):
        assert answer == {"f3": [[{"a": 1}], [{"a": 1}]]}
    assert censor == [{"a": 1}]


class Leaf(BaseModel):
    f46: str = ""
    f48: list[dict[str, int]] = []


class Mid(BaseModel):
    f38: str


class Top(BaseModel):
    f27: float


class Root(BaseModel):
    f25: bool


def test_a_censor_placed_above_a_grouped_grandchild() -> None:
    """min_3845: `*` puts a list censor at an embed key; the child there (a grouped grandchild under it)
    must pass it by."""
    censor = [{"a": 1}]
    leaf = Presenter("leaf").schema(Leaf).redact_pii(["f48"], {"": ""}).redact_pii(["f48[*]"], 0)
    mid = Presenter("mid").schema(Mid).redact_pii(["*"], "#").embed("side", leaf)
    top = Presenter("top").schema(Top).redact_pii(["*"], censor).embed("side", mid)
    root = Presenter("root").schema(Root).embed("side", top)
    data = {"f25": False, "side": {"f27": 1.5, "side": [{"f38": "x", "side": {"f48": [{"k": 1}]}}]}}
    for answer in _calls(root, data):
        assert answer == {"f25": False, "side": {"f27": [{"a": 1}], "side": [{"a": 1}]}}
    assert censor == [{"a": 1}]


class Box(BaseModel):
    f10: list[bool] = []


class Crate(BaseModel):
    f2: Box | None = None


def test_a_variant_hiding_a_whole_embed_whose_child_copy_redacts_everything() -> None:
    """min_2094: the variant hides the embed's key whole with a list censor, its child copy redacts `*` and
    holds a grouped grandchild."""
    censor = [{"a": 1}]
    side = Presenter("side").schema(Box).redact_pii(["f10[*]"], "[REDACTED]").redact_pii(["f10"], [])
    box = Presenter("box").schema(Box).embed("side", side)
    crate = Presenter("crate").schema(Crate).embed("f2", box)
    variant = crate.copy("crate_v").redact_pii(["f2"], censor).embed("f2", box.copy("box_v").redact_pii(["*"], "#"))
    data = {"f2": {"f10": [True]}}
    assert _calls(variant, data, times=2) == [{"f2": [{"a": 1}]}] * 2
    assert censor == [{"a": 1}]
    assert _calls(crate, data, times=1) == [{"f2": {"f10": [True]}}]


def test_a_mapping_censor_is_not_walked_into_by_the_childs_embeds() -> None:
    censor = {"sub": {"x": "y"}}
    inner = Presenter("inner").schema(Box).redact_pii(["*"], "#")
    box = Presenter("box").schema(Box).redact_pii(["f10"], "a").redact_pii(["f10[*]"], "b").embed("sub", inner)
    crate = Presenter("crate").schema(Crate).redact_pii(["f2"], censor).embed("f2", box)
    for answer in _calls(crate, {"f2": {"f10": [True]}}):
        assert answer == {"f2": {"sub": {"x": "y"}}}
    assert censor == {"sub": {"x": "y"}}
