"""Optional features live in pip extras; importing one that is not installed says which extra to add.

    jwt = require("jwt", extra="auth", feature="JWTVerifier")
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType


class MissingExtra(ImportError):
    """An optional dependency is not installed; the message names the pip extra that brings it."""


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import `module`, or raise `MissingExtra` telling to `pip install 'mcpfusion[extra]'`."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the package is there but broken: show the real error
        raise MissingExtra(
            f"{feature} needs the optional dependency {module!r}: pip install 'mcpfusion[{extra}]'", name=module
        ) from None


def available(module: str) -> bool:
    """True when `module` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None
