"""OAuth scopes declared on what a server offers (actions, resources, prompts): checked when declared, and
whether the caller of a request may see one."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from starlette.requests import Request

Granted = Callable[[Request], "frozenset[str] | None"]  # the caller's scopes; None when nothing is enforced
NO_SCOPES: frozenset[str] = frozenset()


def declared_scopes(scopes: Iterable[str], where: str) -> frozenset[str]:
    """Declared scopes, checked: RFC 6749 scope tokens (printable ASCII, no space, quote or backslash)."""
    if isinstance(scopes, str):
        raise TypeError(f"{where}: scopes= takes a list of scope names, e.g. [{scopes!r}]")
    out = frozenset(scopes) or NO_SCOPES
    for scope in out:
        if not isinstance(scope, str) or not scope or any(c in ' "\\' or not 32 < ord(c) < 127 for c in scope):
            raise ValueError(f"{where}: {scope!r} is not a valid OAuth scope (printable ASCII, no spaces or quotes)")
    return out


def visible(scopes: frozenset[str], granted: Granted | None, request: Request | None) -> bool:
    """Whether the caller of `request` holds `scopes` (always, when nothing is declared or enforced)."""
    if not scopes or granted is None or request is None:
        return True
    held = granted(request)
    return held is None or scopes <= held
