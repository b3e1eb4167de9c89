"""Round 7: the public `example_arguments` helper offers only examples the action itself accepts."""

from __future__ import annotations

from pydantic import BaseModel, field_validator

from mcpfusion import Tool
from mcpfusion.docs.examples import example_arguments


class Window(BaseModel):
    start: int
    end: int

    @field_validator("end")
    @classmethod
    def after_start(cls, end: int) -> int:
        if end == 42:  # the sampler's integer guess: a validator the schema cannot show refuses it
            raise ValueError("end must not be 42")
        return end


def test_example_arguments_leaves_out_a_value_the_action_refuses() -> None:
    t = Tool("t")

    @t.action(readonly=True)
    async def span(window: Window, label: str) -> str:
        """A span."""
        return label

    action = t.actions["span"]
    args = example_arguments(action)
    assert set(args) == {"window", "label"} and args["window"]["end"] != 42
    action.validate(dict(args))  # the action takes what the helper offers (it raised on the unchecked 42)
