"""The collector's serving profile once a server has started (mcpfusion.collector): the start-up heap frozen and
a larger young generation when asked, off by default in a library user's process, undone at shutdown, and the
app serves as before."""

from __future__ import annotations

import gc

import pytest
from fastapi.testclient import TestClient

from mcpfusion import MCPFusion, Tool, collector


def _server(**options: object) -> MCPFusion:
    tool = Tool("echo", description="Echo")

    @tool.action(readonly=True)
    async def say(text: str) -> str:
        """Say it back."""
        return text

    return MCPFusion("frozen", tools=[tool], **options)


@pytest.mark.parametrize(("setting", "env", "frozen"), [
    (True, None, True), (False, "1", False), (None, "1", True), (None, "on", True), (None, None, False),
    (None, "0", False),
])
def test_the_serving_profile_once_started_when_asked(monkeypatch, setting, env, frozen):
    if env is None:
        monkeypatch.delenv(collector.ENV, raising=False)
    else:
        monkeypatch.setenv(collector.ENV, env)
    gc.unfreeze()
    before = gc.get_threshold()
    app = _server(gc_tuning=setting).build_app()
    with TestClient(app) as client:
        assert (gc.get_freeze_count() > 0) is frozen
        assert gc.get_threshold() == ((max(collector.YOUNG, before[0]), *before[1:]) if frozen else before)
        assert client.post("/api/echo/say", json={"text": "hi"}).status_code == 200
        # What is made after start-up is still collected: a cycle dies with the next collection.
        cycle: list[object] = []
        cycle.append(cycle)
        del cycle
        assert gc.collect() >= 1
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before  # undone at shutdown


def test_serve_asks_for_it_unless_told_otherwise(monkeypatch):
    import mcpfusion.cli as cli

    seen: list[str | None] = []
    monkeypatch.delenv(collector.ENV, raising=False)

    def served(*args: object) -> None:  # (where serve imports the app)
        import os

        seen.append(os.environ.get(collector.ENV))
        raise cli.CliError("stop here")

    monkeypatch.setattr(cli, "served", served)
    with pytest.raises(cli.CliError):
        cli.cmd_serve(type("Args", (), {"app": "x:app", "app_dir": None})())
    monkeypatch.setenv(collector.ENV, "0")
    with pytest.raises(cli.CliError):
        cli.cmd_serve(type("Args", (), {"app": "x:app", "app_dir": None})())
    assert seen == ["1", "0"]
