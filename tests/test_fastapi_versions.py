"""The dependency-injection bridge leans on FastAPI internals (`solve_dependencies` and the `fastapi_*_astack`
scope keys). `make test` runs the DI/dispatch/MCP/REST tests twice: in .venv with the newest FastAPI that
pyproject allows, and in .venv-fastapi-min with the lowest (scripts/fastapi-min-constraints.txt). These
tests keep that pin honest and fail with a clear message when FastAPI moves an internal the bridge uses."""

from __future__ import annotations

import inspect
import re
import tomllib
from importlib import metadata
from pathlib import Path

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.dependencies.utils import solve_dependencies
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "scripts" / "fastapi-min-constraints.txt"


def pins() -> dict[str, Version]:
    found = {}
    for line in CONSTRAINTS.read_text().splitlines():
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if match:
            found[match[1].lower()] = Version(match[2])
    return found


def floor(requirement: str) -> Version:
    specifiers = [s for s in Requirement(requirement).specifier if s.operator == ">="]
    assert len(specifiers) == 1, f"{requirement!r} needs exactly one >= bound"
    return Version(specifiers[0].version)


def project_requirements() -> dict[str, str]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {Requirement(d).name.lower(): d for d in dependencies}


def test_the_min_pins_are_the_floors_pyproject_allows():
    requirements = project_requirements()
    assert pins()["fastapi"] == floor(requirements["fastapi"])
    assert pins()["pydantic"] == floor(requirements["pydantic"])
    assert pins()["fastapi"] in Requirement(requirements["fastapi"]).specifier


def test_the_starlette_pin_is_the_oldest_the_fastapi_floor_accepts():
    if Version(metadata.version("fastapi")) != pins()["fastapi"]:
        return  # only this FastAPI's metadata tells its starlette floor; the min venv always has it
    starlette = next(r for r in metadata.requires("fastapi") or [] if Requirement(r).name == "starlette")
    assert pins()["starlette"] == floor(starlette)


def test_the_installed_stack_is_within_the_allowed_range():
    requirements = project_requirements()
    for name in ("fastapi", "pydantic"):
        assert Version(metadata.version(name)) in Requirement(requirements[name]).specifier, name


def test_solve_dependencies_takes_the_arguments_the_bridge_passes():
    parameters = inspect.signature(solve_dependencies).parameters
    passed = {"request", "dependant", "dependency_overrides_provider", "async_exit_stack", "embed_body_fields"}
    assert passed <= set(parameters), f"fastapi changed solve_dependencies: {sorted(parameters)}"
    required = {n for n, p in parameters.items() if p.default is inspect.Parameter.empty}
    assert required <= passed, f"solve_dependencies now requires {sorted(required - passed)}"


async def test_fastapi_still_sets_the_scope_keys_the_bridge_replaces():
    """`dependencies.resolve` swaps FastAPI's exit stacks in the scope: they must still be these keys."""
    seen: dict[str, bool] = {}

    async def probe(request: Request) -> None:
        seen.update({key: key in request.scope for key in ("fastapi_inner_astack", "fastapi_function_astack")})

    app = FastAPI()

    @app.get("/probe")
    async def route(_: None = Depends(probe)) -> dict[str, bool]:
        return {}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        assert (await client.get("/probe")).status_code == 200
    assert seen == {"fastapi_inner_astack": True, "fastapi_function_astack": True}
