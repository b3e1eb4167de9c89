"""`ui.echarts_template`: the block `ui.echarts` makes of the config with the same values, byte for byte."""

from enum import StrEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfusion import ui

CONFIG = {
    "title": {"text": ui.slot("title")},
    "tooltip": {"trigger": "item"},
    "series": [{"type": "pie", "radius": ["40%", "70%"], "data": [
        {"name": "Paid", "value": ui.slot("paid")},
        {"name": "Outstanding", "value": ui.slot("outstanding")},
    ]}],
    "legend": (ui.slot("legend"), "fixed"),
}


def _filled(node, values):
    if isinstance(node, ui.Slot):
        return values[node.name]
    if isinstance(node, dict):
        return {k: _filled(v, values) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_filled(v, values) for v in node]
    return node


class Color(StrEnum):
    RED = "red"


@pytest.mark.parametrize("values", [
    {"title": "Invoice ACME-0002", "paid": 4546.0, "outstanding": 0.0, "legend": True},
    {"title": 'Quotes " and \\ and\nnewlines\t', "paid": 1e16, "outstanding": 1e-7, "legend": None},
    {"title": "Ünïcødé ✓ and ``` fences ````", "paid": 12345678901234567890, "outstanding": -0.5, "legend": False},
    {"title": "</ui_passthrough> & <x>", "paid": float("inf"), "outstanding": float("nan"), "legend": 3},
    # Not JSON scalars of their own class: written in place by the encoder, still the same block.
    {"title": ["a", "b"], "paid": {"nested": [1, 2]}, "outstanding": 1, "legend": "x"},
    {"title": Color.RED, "paid": 1, "outstanding": 2, "legend": "x"},
    {"title": "", "paid": True, "outstanding": 2, "legend": ["x", {"y": None}]},
])
def test_template_is_echarts_of_the_filled_config(values):
    template = ui.echarts_template(CONFIG, title="Paid vs outstanding", width="half")
    expected = ui.echarts(_filled(CONFIG, values), title="Paid vs outstanding", width="half")
    block = template(**values)
    assert block == expected and block.render() == expected.render()


def test_template_without_options_and_missing_value():
    template = ui.echarts_template({"value": ui.slot("v")})
    assert template(v=2) == ui.echarts({"value": 2})
    with pytest.raises(TypeError, match="takes the slots v: missing v"):
        template()


def test_template_needs_slots_as_values():
    with pytest.raises(ValueError):
        ui.echarts_template({"no": "slots"})
    with pytest.raises(ValueError):
        ui.echarts_template({ui.slot("key"): 1})  # type: ignore[dict-item]


@pytest.mark.parametrize("config", [
    {"note": "static ``` and ```` fences", "value": ui.slot("v"), "tail": ui.slot("w")},
    {"note": "no fence", "value": ui.slot("v"), "tail": ui.slot("w")},
    {"value": ui.slot("v"), "tail": ui.slot("w"), "end": "``"},
])
@pytest.mark.parametrize("values", [
    {"v": "plain", "w": 1.5},
    {"v": "``` in a value", "w": "and ````` in the last one"},
    {"v": "``", "w": "`"},
    {"v": 2, "w": ["a list", "```"]},
])
def test_template_fence_is_the_one_echarts_picks(config, values):
    # The fence is written once with the template unless its text or a value holds backticks.
    block = ui.echarts_template(config)(**values)
    assert block == ui.echarts(_filled(config, values))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
DEPTHS = {"top": ui.slot("v"), "deep": [{"a": {"b": [1, ui.slot("w"), {"c": (ui.slot("x"), "```")}]}}]}


@settings(max_examples=300, deadline=None)
@given(v=_JSON, w=_JSON, x=_JSON)
def test_template_writes_any_value_in_place_as_echarts_does(v, w, x):
    # Lists and dicts are written where they stand, each line indented as the whole config indents it.
    values = {"v": v, "w": w, "x": x}
    block = ui.echarts_template(DEPTHS, title="T", priority=1)(**values)
    assert block == ui.echarts(_filled(DEPTHS, values), title="T", priority=1)


def test_every_helper_refuses_an_unknown_option():
    for make in [lambda **o: ui.table(["a"], [["1"]], **o), lambda **o: ui.list(["a"], **o),
                 lambda **o: ui.json_block({}, **o), lambda **o: ui.code_block("py", "x", **o),
                 lambda **o: ui.echarts({}, **o), lambda **o: ui.mermaid("x", **o), lambda **o: ui.markdown("x", **o),
                 lambda **o: ui.summary("x", **o), lambda **o: ui.echarts_template({"v": ui.slot("v")}, **o)]:
        with pytest.raises(TypeError, match="colour"):
            make(title="T", colour="red")
