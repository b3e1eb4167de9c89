"""File-based discovery: every `Tool` defined in the Python files of a folder, with no hand-kept list.

    tools = discover_tools("routers")      # a folder path (or a dotted package name)

Files (and folders) whose name starts with `_` are skipped. A folder that is a package importable from
`sys.path` is imported under its real module names, so tests that import `routers.billing` share the same
`Tool` objects; any other folder is loaded under private module names. Each tool's `source` is set to the
file that defines it. Two tools with the same name, or the same action declared twice, fail at start-up
with a `DiscoveryError` naming both files.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from .tool import Tool


class DiscoveryError(Exception):
    """A tool folder cannot be served as it is (duplicate names, or a module that fails to import)."""


def _package_name(folder: Path) -> str | None:
    """The dotted name `folder` is importable under, when it is a package reachable from sys.path."""
    parts: list[str] = []
    current = folder
    while (current / "__init__.py").is_file():
        parts.insert(0, current.name)
        current = current.parent
    if not parts:
        return None
    roots = {Path(p or ".").resolve() for p in sys.path}
    return ".".join(parts) if current.resolve() in roots else None


def _python_files(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        if path.name.startswith(("_", ".")):
            continue
        if path.is_dir():
            yield from _python_files(path)
        elif path.suffix == ".py":
            yield path


def _module_name(folder: Path, package: str | None, file: Path) -> str:
    relative = file.relative_to(folder).with_suffix("")
    if package is not None:
        return ".".join([package, *relative.parts])
    digest = hashlib.sha1(str(folder.resolve()).encode()).hexdigest()[:10]
    return ".".join([f"_mcpfusion_tools_{digest}", *relative.parts])


def _load(name: str, file: Path, package: str | None) -> ModuleType:
    if package is not None or name in sys.modules:
        return importlib.import_module(name) if package is not None else sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise DiscoveryError(f"{file}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _action_file(tool: Tool, action_name: str) -> str:
    action = tool.actions[action_name]
    try:
        return inspect.getsourcefile(action.fn) or "?"
    except TypeError:
        return "?"


def _duplicate_action(error: ValueError, tools: list[Tool], file: Path) -> DiscoveryError | None:
    for tool in tools:
        for action_name in tool.actions:
            if str(error) == f"tool {tool.name!r} already has an action {action_name!r}":
                return DiscoveryError(
                    f"duplicate action {tool.name}.{action_name}: declared in {_action_file(tool, action_name)} "
                    f"and in {file}"
                )
    return None


def _resolve(target: str | Path) -> tuple[Path, str | None]:
    path = Path(target)
    if path.is_dir():
        return path.resolve(), _package_name(path.resolve())
    if isinstance(target, str):  # a dotted package name
        module = importlib.import_module(target)
        locations = list(getattr(module, "__path__", []))
        if locations:
            return Path(locations[0]).resolve(), target
    raise DiscoveryError(f"{target}: not a folder or a package of tool modules")


def _home(tool: Tool, found_in: list[tuple[str, Path]]) -> Path:
    """The file that defines `tool`: where its first action was declared, if that file was discovered
    (a module that only imports the tool is not its home), else the first file it was found in."""
    for action in tool.actions.values():
        for module_name, file in found_in:
            if action.fn.__module__ == module_name:
                return file
    return found_in[0][1]


def discover_tools(target: str | Path) -> list[Tool]:
    """Import every module under `target` and return the `Tool`s they define, in file order."""
    folder, package = _resolve(target)
    tools: list[Tool] = []
    found_in: dict[int, list[tuple[str, Path]]] = {}
    for file in _python_files(folder):
        name = _module_name(folder, package, file)
        try:
            module = _load(name, file, package)
        except DiscoveryError:
            raise
        except ValueError as exc:
            raise (_duplicate_action(exc, tools, file) or DiscoveryError(f"{file}: {exc}")) from exc
        except Exception as exc:
            raise DiscoveryError(f"{file}: import failed: {type(exc).__name__}: {exc}") from exc
        for value in list(vars(module).values()):
            if isinstance(value, Tool):
                if id(value) not in found_in:
                    tools.append(value)
                    found_in[id(value)] = []
                found_in[id(value)].append((name, file))
    seen: dict[str, Tool] = {}
    for tool in tools:
        tool.source = str(_home(tool, found_in[id(tool)]))
        other = seen.setdefault(tool.name, tool)
        if other is not tool:
            raise DiscoveryError(f"duplicate tool name {tool.name!r}: defined in {other.source} and in {tool.source}")
    return tools
