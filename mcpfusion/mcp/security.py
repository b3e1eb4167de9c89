"""DNS-rebinding protection: the Host and Origin of every `/mcp` request are checked against allow-lists.

A browser page on an attacker's domain that re-resolves its name to 127.0.0.1 still sends its own
Host/Origin, so a server that only accepts loopback names (the default) cannot be driven from it.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .settings import LOCAL_HOSTS


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
