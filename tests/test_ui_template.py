"""`ui.echarts_template`: the block `ui.echarts` makes of the config with the same values, byte for byte."""

from enum import StrEnum

import pytest

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
    # Not JSON scalars of their own class: written by `ui.echarts` itself, still the same block.
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
    with pytest.raises(KeyError):
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
