"""DNS-rebinding protection: the Host and Origin of every `/mcp` request are checked against allow-lists.

A browser page on an attacker's domain that re-resolves its name to 127.0.0.1 still sends its own
Host/Origin, so a server that only accepts loopback names (the default) cannot be driven from it.
`HostGuard` applies the check to every path a server serves (its REST routes and pages too), before routing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette._utils import get_route_path
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..body import closing_unless_read, may_stay_unread
from .settings import LOCAL_HOSTS
from .wire import TRANSPORT_SCOPE_KEY, http_error


def _host_name(host: str) -> str:
    """Host header without its port (keeps IPv6 brackets); a header that is no `name[:port]` stays whole (and
    then matches no allowed name): `[::1]]` or `127.0.0.1:80]` is not the loopback."""
    if host.startswith("["):
        end = host.find("]")
        if end == -1:
            return host
        name, rest = host[: end + 1], host[end + 1:]
    elif host.count(":") == 1:
        name, port = host.split(":")
        rest = ":" + port
    else:
        return host
    port = rest[1:]
    if rest and (rest[0] != ":" or not (port.isascii() and (port.isdigit() or not port))):
        return host
    return name


def _matches(value: str, allowed: list[str], with_port: str) -> bool:
    for pattern in allowed:
        if pattern in ("*", value, with_port):
            return True
        # "example.com:*" allows any port of that host.
        if pattern.endswith(":*") and pattern[:-2] == value:
            return True
    return False


# What to change is in the message: the operator reading a 421/403 in a log must not need the source.
INVALID_HOST = ("Invalid Host header: this host name is not allowed. Add it to MCPFUSION_ALLOWED_HOSTS "
                "(comma-separated; the allowed_hosts setting) to serve it.")
INVALID_ORIGIN = ("Invalid Origin header: this origin is not allowed. Add it to MCPFUSION_ALLOWED_ORIGINS "
                  "(comma-separated; the allowed_origins setting).")

class HostOriginGuard:
    def __init__(self, allowed_hosts: list[str] | None, allowed_origins: list[str] | None) -> None:
        self.allowed_hosts = allowed_hosts
        self.allowed_origins = allowed_origins
        self._cache: dict[tuple[str | None, str | None], str | None] = {}

    def check(self, host: str | None, origin: str | None) -> str | None:
        """None when the request may proceed, else the reason to refuse it (the caller answers 421/403)."""
        key = (host, origin)
        try:
            return self._cache[key]
        except KeyError:
            pass
        verdict = self._check(host, origin)
        if len(self._cache) < 1024:  # Few distinct values in practice; bounded against abuse.
            self._cache[key] = verdict
        return verdict

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        """None when the request may proceed, else (HTTP status, reason): 421 Misdirected Request for a
        foreign Host, 403 for a foreign Origin."""
        reason = self.check(host, origin)
        return None if reason is None else (421 if reason is INVALID_HOST else 403, reason)

    def _check(self, host: str | None, origin: str | None) -> str | None:
        if self.allowed_hosts is None:
            if host is None or _host_name(host).lower() not in LOCAL_HOSTS:
                return INVALID_HOST
        elif host is None or not _matches(_host_name(host).lower(), self.allowed_hosts, host.lower()):
            return INVALID_HOST
        if origin is None:
            return None
        if self.allowed_origins is None:
            try:
                parts = urlsplit(origin)
            except ValueError:  # e.g. `http://[::1` or `http://[evil]`: no origin a browser sends
                return INVALID_ORIGIN
            # An origin is `scheme://host[:port]`: its host read as the Host header's (`http://[::1]x` is none).
            if parts.scheme not in ("http", "https") or _host_name(parts.netloc).lower() not in LOCAL_HOSTS:
                return INVALID_ORIGIN
            return None
        if "*" in self.allowed_origins or origin in self.allowed_origins:
            return None
        return INVALID_ORIGIN


Refusal = Callable[[Scope, int, str], Response]  # (the request's scope, status, reason) -> the answer to send


def mcp_refusal(_scope: Scope, status: int, reason: str) -> Response:
    """A refusal as the MCP endpoint answers it: the HTTP status, with a JSON-RPC error body."""
    return http_error(status, reason)


@dataclass(frozen=True, slots=True)
class Guarded:
    """How `HostGuard` treats the paths of one kind: `answer` a refusal; `origin`: check the Origin too (not for a
    public read-only document, which browsers read cross-origin); `serves`: for a prefix the app may share,
    whether a refused path is the server's to answer at all (None: every path)."""

    answer: Refusal
    origin: bool = True
    serves: Callable[[Scope], bool] | None = None


class HostGuard:
    """ASGI middleware: a server's DNS-rebinding guard, answering a foreign Host (421) or Origin (403) on every
    path the server serves before routing and authentication see the request: no trailing-slash redirect to
    the foreign host, no 404 or 405 of the server's routes, no 401 challenge naming it. `exact` paths and
    `prefixes` are matched as the router matches routes (below the `root_path`); the stdio bridge, calling in
    process, is never checked. A request elsewhere costs a dict lookup and a prefix test; one here, a pass over
    its headers (not cached in the scope: a middleware inside this one may still change them). A request here
    with a body answered before that body was read to its end (a REST 413, a refusal, a 401) has the rest read
    and dropped, up to a bound, so that the connection serves the next request; past the bound, its answer says
    `Connection: close` (`closing_unless_read`)."""

    def __init__(self, app: ASGIApp, *, guard: HostOriginGuard, exact: Mapping[str, Guarded],
                 prefixes: Sequence[tuple[str, Guarded]] = ()) -> None:
        self.app = app
        self.guard = guard
        self.exact = dict(exact)
        self.prefixes = tuple(prefixes)
        self.starts = tuple(prefix for prefix, _ in self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get(TRANSPORT_SCOPE_KEY) != "stdio":
            path = get_route_path(scope) if scope.get("root_path") else scope["path"]
            kind = self.exact.get(path)
            if kind is None and path.startswith(self.starts):
                kind = next(k for prefix, k in self.prefixes if path.startswith(prefix))
            if kind is not None:
                if may_stay_unread(scope):  # answered before its body is read (a 413, a refusal, a 401)
                    receive, send = closing_unless_read(scope, receive, send)
                host, origin = _host_and_origin(scope["headers"])
                refusal = self.guard.refusal(host, origin if kind.origin else None)
                if refusal is not None and (kind.serves is None or kind.serves(scope)):
                    await kind.answer(scope, *refusal)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _host_and_origin(headers: Sequence[tuple[bytes, bytes]]) -> tuple[str | None, str | None]:
    """The Host and Origin headers (a repeated one: its last value, as the MCP endpoint reads it)."""
    host = origin = None
    for name, value in headers:
        if name == b"host":
            host = value
        elif name == b"origin":
            origin = value
    return (None if host is None else host.decode("latin-1"), None if origin is None else origin.decode("latin-1"))
