"""`mcpfusion install CLIENT APP`: write an MCP client's configuration entry for a server.

Clients and the file each reads (its `mcpServers` object; other entries are kept):

- claude-desktop: `claude_desktop_config.json` in the app's configuration folder. Stdio entries
  (command/args/env); with `--url`, a stdio bridge `npx -y mcp-remote URL` (the file has no HTTP entries).
- claude-code: `.mcp.json` in the current folder (project scope). Stdio, or `{"type": "http", "url", "headers"}`.
- cursor: `~/.cursor/mcp.json`. Stdio, or `{"url", "headers"}`.

A stdio entry runs this installation's `mcpfusion stdio APP --app-dir DIR`, so the client may start it from any
folder; a token goes into `env` as `MCPFUSION_AUTHORIZATION`, never into the arguments. `.mcp.json` is shared
with the project (usually committed), so it gets `Bearer ${MCPFUSION_TOKEN}`, which Claude Code expands from its
environment, never the token itself (`project_notice` says what to export); the other files are the user's own.
A token (or a header setting in `--env`) the server would refuse at start-up is refused here; `redacted(entry)`
is the entry to show.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CLIENTS = ("claude-desktop", "claude-code", "cursor")
PROJECT_SCOPED = ("claude-code",)  # their file lives in the project, which others read: no secret goes in it
TOKEN_VARIABLE = "MCPFUSION_TOKEN"
TOKEN_REFERENCE = f"Bearer ${{{TOKEN_VARIABLE}}}"  # Claude Code expands ${VAR} in env, url and headers
_HIDDEN = "***"


class InstallError(Exception):
    """A problem the user can fix from the message alone."""


def default_config_path(client: str, *, home: Path | None = None, platform: str = sys.platform,
                        environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Path:
    """Where `client` reads its MCP servers on this machine."""
    home = home or Path.home()
    environ = os.environ if environ is None else environ
    if client == "claude-desktop":
        if platform == "darwin":
            folder = home / "Library" / "Application Support" / "Claude"
        elif platform.startswith("win"):
            folder = Path(environ.get("APPDATA") or home / "AppData" / "Roaming") / "Claude"  # (empty: unset)
        else:
            folder = _base_folder(environ.get("XDG_CONFIG_HOME"), home / ".config") / "Claude"
        return folder / "claude_desktop_config.json"
    if client == "claude-code":
        return (cwd or Path.cwd()) / ".mcp.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    raise InstallError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")


def _base_folder(value: str | None, default: Path) -> Path:
    """The folder an XDG variable names, or `default` when it is unset, empty or relative: the XDG Base
    Directory spec ignores such a value (it would write into whatever the current folder is)."""
    return Path(value) if value and Path(value).is_absolute() else default


def mcpfusion_command() -> list[str]:
    """The command that runs this installation's `mcpfusion`, as an absolute path."""
    script = Path(sys.executable).with_name("mcpfusion")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "mcpfusion"]


def authorization(client: str, token: str | None) -> str | None:
    """The Authorization value the entry holds: the token, or a reference to it in a project-scoped file."""
    if not token:
        return None
    return TOKEN_REFERENCE if client in PROJECT_SCOPED else f"Bearer {token}"


def stdio_entry(app: str, app_dir: Path, bearer: str | None, env: Mapping[str, str]) -> dict[str, Any]:
    command, *args = mcpfusion_command()
    variables = dict(env)
    if bearer:
        variables["MCPFUSION_AUTHORIZATION"] = bearer
    entry: dict[str, Any] = {"command": command, "args": [*args, "stdio", app, "--app-dir", str(app_dir)]}
    if variables:
        entry["env"] = variables
    return entry


def http_entry(client: str, url: str, bearer: str | None) -> dict[str, Any]:
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise InstallError(f"--url must be the server's http(s) MCP endpoint, e.g. http://127.0.0.1:8000/mcp, "
                           f"not {url!r}")
    headers = {"Authorization": bearer} if bearer else {}
    if client == "claude-desktop":
        bridge: dict[str, Any] = {"command": "npx", "args": ["-y", "mcp-remote", url]}
        if bearer:  # from env, as mcp-remote reads it: the token never shows in a process listing
            bridge["args"] += ["--header", "Authorization:${MCPFUSION_AUTHORIZATION}"]
            bridge["env"] = {"MCPFUSION_AUTHORIZATION": bearer}
        return bridge
    entry: dict[str, Any] = {"type": "http", "url": url} if client == "claude-code" else {"url": url}
    if headers:
        entry["headers"] = headers
    return entry


def write_entry(path: Path, name: str, entry: dict[str, Any], *, private: bool = False,
                make_folder: bool = False) -> None:
    """Set `mcpServers[name]` in the JSON file at `path`, keeping everything else; written atomically.

    The file keeps its permissions (a private 0600 config stays private); a new one is created 0600 when
    `private` (it will hold a token or the server's environment), else as the umask says. A missing folder is
    created only with `make_folder` (the client's own, `~/.cursor`): a mistyped `--config` path would
    otherwise be written where no client reads it."""
    config: Any = {}
    if path.exists() and path.read_text().strip():
        try:
            config = json.loads(path.read_text())
        except ValueError as exc:
            raise InstallError(f"{path} is not valid JSON ({exc}); fix or move it, then run install again") from None
        if not isinstance(config, dict) or not isinstance(config.get("mcpServers", {}), dict):
            raise InstallError(f"{path} does not hold a JSON object with an 'mcpServers' object")
    config.setdefault("mcpServers", {})[name] = entry
    target = Path(os.path.realpath(path))  # a symlinked config (dotfiles) stays a symlink
    if make_folder:
        target.parent.mkdir(parents=True, exist_ok=True)
    elif not target.parent.is_dir():
        raise InstallError(f"cannot write {path}: no folder {target.parent} (--config creates no folders)")
    _replace(target, json.dumps(config, indent=2, ensure_ascii=False) + "\n", _mode(target, private))


def _mode(path: Path, private: bool) -> int:
    """The permissions the written file gets: its current ones, else 0600 or what the umask leaves of 0666."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        pass
    if private:
        return 0o600
    umask = os.umask(0)  # (read, then restored: there is no other way to read it)
    os.umask(umask)
    return 0o666 & ~umask


def _replace(path: Path, text: str, mode: int) -> None:
    """Write `text` to a private temporary file next to `path` (unpredictable name, 0600 from the start: the
    token is never readable by others, even for a moment), give it `mode`, and move it over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_settings(token: str | None, env: Mapping[str, str]) -> None:
    """Refuse, as the stdio server would at start-up, a token or a header setting no HTTP header can carry
    (a line break, a character outside Latin-1): the client would start a server that exits at once."""
    from .mcp.stdio import StdioConfigError, check_header, env_headers

    try:
        if token:
            check_header("authorization", f"Bearer {token}", "--token")
        env_headers({k: v for k, v in env.items() if k in ("MCPFUSION_AUTHORIZATION", "MCPFUSION_STDIO_HEADERS")})
    except StdioConfigError as exc:
        raise InstallError(str(exc).replace("MCPFUSION_", "--env MCPFUSION_", 1)) from None


def redacted(entry: dict[str, Any]) -> dict[str, Any]:
    """`entry` fit to print: the values of its `env` and `headers` (the token, secrets given with --env) hidden;
    the configuration file holds them."""
    shown = dict(entry)
    for key in ("env", "headers"):
        if isinstance(shown.get(key), dict):
            shown[key] = {name: _hidden(value) for name, value in shown[key].items()}
    return shown


def _hidden(value: Any) -> str:
    if value == TOKEN_REFERENCE:  # a reference, not a secret: the user needs to see it
        return TOKEN_REFERENCE
    scheme, space, _ = str(value).partition(" ")
    return f"{scheme} {_HIDDEN}" if space and scheme.lower() == "bearer" else _HIDDEN  # (the scheme tells nothing)


def install(client: str, app: str, *, name: str, app_dir: Path, config: Path | None = None, url: str | None = None,
            token: str | None = None, env: Mapping[str, str] | None = None) -> tuple[Path, dict[str, Any]]:
    """Write the entry of server `name` into `client`'s configuration; returns (file, entry)."""
    if client not in CLIENTS:
        raise InstallError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")
    if url is not None and env:
        raise InstallError("--env applies to stdio servers only; an HTTP server reads its own environment")
    check_settings(token, env or {})
    bearer = authorization(client, token)
    entry = http_entry(client, url, bearer) if url else stdio_entry(app, app_dir, bearer, env or {})
    path = config or default_config_path(client)
    write_entry(path, name, entry, private=bool(env) or (bearer is not None and bearer != TOKEN_REFERENCE),
                make_folder=config is None)
    return path, entry


def project_notice(client: str, token: str | None, env: Mapping[str, str] | None = None) -> str | None:
    """What to tell the user after writing a project-scoped file: the variable to export, and that `--env`
    values are written as given (they may be secrets, in a file others read)."""
    if client not in PROJECT_SCOPED:
        return None
    notes = []
    if token:
        notes.append(f"the file references ${{{TOKEN_VARIABLE}}}, not the token: export {TOKEN_VARIABLE}=<token> "
                     f"where {client} starts")
    if env:
        notes.append(f"--env values are written in clear to a file shared with the project: pass secrets as "
                     f"${{VAR}} references ({', '.join(sorted(env))})")
    return "; ".join(notes) or None


def parse_env(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InstallError(f"--env takes KEY=VALUE, not {pair!r}")
        out[key] = value
    return out
