"""The `mcpfusion` command: serve, develop, inspect and call an application's tools.

    mcpfusion serve app.main:app [--host H] [--port P]     # uvicorn, production-style
    mcpfusion dev app.main:app                              # uvicorn with auto-reload
    mcpfusion stdio app.main:app [--token T] [--server NAME]   # MCP over stdin/stdout (local clients)
    mcpfusion inspect app.main:app [--json]                 # tools, actions, TOON descriptions
    mcpfusion call app.main:app billing get_invoice --json '{"id": "inv_0001"}' [--token T] [--yes]
    mcpfusion docs app.main:app --out site/ [--base-url URL]
    mcpfusion install claude-desktop|claude-code|cursor app.main:app [--token T | --url URL]
    mcpfusion lock app.main:app [--check] [--file mcpfusion.lock]

APP is "module:attribute": a FastAPI app an MCPFusion was built or mounted on (found through
`app.state.mcpfusions`) or an `MCPFusion` object (served by the app it is mounted on, else by one it builds).
An app serving several MCPFusion servers: every command but serve and dev takes the one `--server NAME` names
(`call`: else the one serving its tool); without it, an error lists them. Status lines go to stderr; stdout
carries only results (and the protocol, for stdio).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import sys
import sysconfig
import tempfile
import traceback
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from . import collector
from .app import MCPFusion
from .body import InvalidJSON, parse_json
from .listing import tool_entries
from .version import __version__
from .visible import visible_name


class CliError(Exception):
    """A problem the user can fix from the message alone."""


def status(message: str) -> None:
    print(f"mcpfusion: {message}", file=sys.stderr, flush=True)


def _import_path(app_dir: str | None = None) -> None:
    # `mcpfusion serve app.main:app` run from a project root must find `app` like `python -m` would;
    # `--app-dir DIR` does the same for a client that starts the server from another folder.
    folder = os.path.abspath(app_dir) if app_dir else os.getcwd()
    if app_dir and not os.path.isdir(folder):
        raise CliError(f"--app-dir {app_dir!r} is not a folder")
    if folder not in sys.path:
        sys.path.insert(0, folder)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARIES = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep


def _is_own(filename: str) -> bool:
    """Whether `filename` is one of the app's own files: not a library's, the standard library's, mcpfusion's
    nor generated code (`<frozen importlib._bootstrap>`, `<string>`)."""
    return not (filename.startswith(("<", _PACKAGE, _STDLIB)) or any(part in filename for part in _LIBRARIES))


def _library(filename: str) -> str:
    """The package a library frame's file belongs to (`sqlalchemy`, `json`, `mcpfusion`)."""
    for root in (*_LIBRARIES, _STDLIB, os.path.dirname(_PACKAGE.rstrip(os.sep)) + os.sep):
        if root in filename:
            return filename.split(root, 1)[1].split(os.sep, 1)[0].removesuffix(".py")
    return filename


def _shown(frame: traceback.FrameSummary) -> str:
    path = os.path.relpath(frame.filename) if frame.filename.startswith(os.getcwd() + os.sep) else frame.filename
    return f"{path}:{frame.lineno}"


def described(exc: BaseException) -> str:
    """An exception raised while importing, building or starting an app, on one line: its type and message, and
    where in the app's own files: the line that raised it (`at app/settings.py:116`), or the line that called
    the library that did (`raised in sqlalchemy, called from app/db.py:126`); credentials masked, and what a
    terminal would not show as itself (escape sequences, line breaks, bidi marks) escaped (`\\u001b`). (A
    syntax error's message names its file and line.) No traceback: import the app in Python for the whole of it."""
    if isinstance(exc, SyntaxError):
        try:
            return shown(f"{type(exc).__name__}: {exc}")
        except Exception:  # (a subclass whose __str__ raises: written as traceback writes it)
            pass
    what = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    frames = traceback.extract_tb(exc.__traceback__)
    if frames and _is_own(frames[-1].filename):
        what += f" (at {_shown(frames[-1])})"
    elif frames:
        caller = next((frame for frame in reversed(frames) if _is_own(frame.filename)), None)
        what += f" (raised in {_library(frames[-1].filename)}" + (f", called from {_shown(caller)})" if caller else ")")
    return shown(what)


#: What a `sys.exit()` during each step stopped, when its status says no error (0, None).
_STOPPED = {"start-up": "before the app started", "shutdown": "while the app was stopping"}


def exited(exc: SystemExit, during: str = "import") -> str:
    """A `sys.exit()` called while importing, building or starting an app, on one line as `described` writes an
    exception: its status (the number the process would have exited with: `sys.exit(True)` is status 1), its
    message, or only the type of any other object (a dict may hold a password); and where in the app's own
    files (else `during` what). A status 0 says the app exited before it was built (or started): the command
    never ran. Nothing in it can raise (an object whose `__str__` does is named by its type)."""
    code = exc.code
    if code is None or isinstance(code, int):
        number = 0 if code is None else int.__int__(code)  # (bool is an int: True is 1; no __int__ override)
        what = (f"it exited with status {number}" if number else
                f"it exited (status 0, no error) {_STOPPED.get(during, 'before the app was built')}")
    elif isinstance(code, str):
        what = f"it exited: {str.__str__(code)}"
    else:
        kind = type(code).__name__
        what = f"it exited with {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind}"
    frames = [frame for frame in traceback.extract_tb(exc.__traceback__) if _is_own(frame.filename)]
    where = f" (sys.exit at {_shown(frames[-1])})" if frames else f" (sys.exit at {during})"
    return shown(what + where)


def shown(text: str) -> str:
    """`text` (an app's message) as one line of a terminal or a log: its credentials masked, its control, bidi
    and format characters escaped (`\\u001b`, `\\u202e`, line breaks as `\\u000a`), so that it can neither
    drive the terminal nor forge a line of mcpfusion's own."""
    return visible_name(without_credentials(text))


# A URL's userinfo (`scheme://user:password@`), and `password=...`-like pairs (libpq's "host=h password=p").
_URL_USERINFO = re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]*://)([^/?#\s]*)@")
_SECRET_PAIR = re.compile(r"(?<![A-Za-z0-9])(password|passwd|pwd|secret|token|api[_-]?key)(\s*=\s*)"
                          r"""('[^']*'|"[^"]*"|[^\s,;&]+)""", re.IGNORECASE)


def without_credentials(text: str) -> str:
    """`text` (an exception's message, a traceback) with the passwords it may quote masked: a connection
    string in a start-up error would otherwise be printed to a terminal or a CI log."""

    def userinfo(match: re.Match[str]) -> str:
        user, colon, _ = match[2].partition(":")
        return f"{match[1]}{user}:***@" if colon else f"{match[1]}***@"

    return _SECRET_PAIR.sub(r"\1\2***", _URL_USERINFO.sub(userinfo, text))


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse type)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds


def _port(text: str) -> int:
    """A TCP port number (argparse type; its own message, not argparse's `invalid _port value`)."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a TCP port (0-65535)")
    return port


def _workers(text: str) -> int:
    """A number of worker processes, 1 or more (argparse type)."""
    try:
        workers = int(text)
    except ValueError:
        workers = 0
    if workers < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of worker processes (1 or more)")
    return workers


def _startup_failed(target: str, exc: BaseException | str) -> CliError:
    """The one-line error of an app whose lifespan start-up raised, `described` as an import failure is (no
    traceback, where in the app's files, the credentials a connection string in its message holds masked)."""
    what = (shown(exc) if isinstance(exc, str) else
            exited(exc, "start-up") if isinstance(exc, SystemExit) else described(exc))
    return CliError(f"starting {target} failed (its lifespan start-up raised): {what}")


def _shutdown_failed(target: str, exc: BaseException) -> CliError:
    """The one-line error of an app whose lifespan shutdown raised (as `_startup_failed`)."""
    what = exited(exc, "shutdown") if isinstance(exc, SystemExit) else described(exc)
    return CliError(f"stopping {target} failed (its lifespan shutdown raised): {what}")


class Starting:
    """The app as `serve` and `stdio` run it: `announce` is called once its lifespan start-up completed, and a
    start-up or shutdown that raised is kept (`failure`, `shutdown_failure`) for one `mcpfusion: error:` line.
    The server would log the traceback Starlette sends with the failure (whose text may hold a connection
    string): it is not passed on. A shutdown failure is written at once (after a SIGTERM, uvicorn ends the
    process by that signal once it has stopped); a start-up failure is handed to `report` at once, if given
    (in a worker process, which exits then)."""

    def __init__(self, app: Any, announce: Callable[[], None] | None = None, target: str = "the app",
                 report: Callable[[CliError], None] | None = None) -> None:
        self.app = app
        self.announce = announce
        self.target = target
        self.report = report
        self.failure: BaseException | None = None
        self.shutdown_failure: BaseException | None = None

    def __getattr__(self, name: str) -> Any:  # the app's own attributes (`state`, which stdio reads)
        if name == "app":
            raise AttributeError(name)
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return
        failed = None

        async def observed(message: Any) -> None:
            nonlocal failed
            if message["type"] in ("lifespan.startup.failed", "lifespan.shutdown.failed"):
                failed, message = message["type"], {**message, "message": ""}
            await send(message)
            if message["type"] == "lifespan.startup.complete" and self.announce is not None:
                self.announce()

        try:
            await self.app(scope, receive, observed)
        except BaseException as exc:
            if failed == "lifespan.startup.failed":
                self.failure = exc
                if self.report is not None:
                    self.report(_startup_failed(self.target, exc))
            elif failed == "lifespan.shutdown.failed" and _app_raised(exc):
                # (a shutdown cancelled by the server, cut short by a second signal: it says so, not an app fault;
                # a CancelledError the app raised itself is its failure)
                self.shutdown_failure = exc
                status(f"error: {_shutdown_failed(self.target, exc)}")
            if failed and not isinstance(exc, Exception) and _app_raised(exc):  # the app's sys.exit() (or
                # custom BaseException), told as a failure: raised on, it would end the process past the server's
                # handling (stdio's, with the app's status; a task's exception never retrieved, a traceback)
                return
            raise


def _imported(target: str, app_dir: str | None) -> Any:
    """The object "module:attribute" names."""
    module_name, sep, attr = target.partition(":")
    if not module_name or not sep or not attr:
        raise CliError(f'APP must look like "module:attribute" (e.g. app.main:app), not {target!r}')
    _import_path(app_dir)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise CliError(f"cannot import {module_name!r}: {shown(str(exc))}") from None
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:  # (not the app's exit status to pass on: the command never ran)
        raise CliError(f"importing {module_name!r} failed: {exited(exc)}") from None
    except BaseException as exc:  # the app's own code failed: where, in its files, without the import machinery
        raise CliError(f"importing {module_name!r} failed: {described(exc)}") from None  # (a CancelledError too)
    try:
        obj = getattr(module, attr)
    except AttributeError:
        raise CliError(f"module {module_name!r} has no attribute {attr!r}") from None
    except KeyboardInterrupt:
        raise
    except SystemExit as exc:  # (its sys.exit() too: KeyboardInterrupt still interrupts)
        raise CliError(f"building {target} failed: {exited(exc, 'the lookup of ' + repr(attr))}") from None
    except BaseException as exc:  # a module that builds its app on first access (a module __getattr__) failed
        raise CliError(f"building {target} failed: {described(exc)}") from None
    return obj


def _mounted(app: Any) -> list[MCPFusion]:
    """The MCPFusion servers mounted on `app`, in mount order (as `MCPFusion.mount` records them)."""
    state = getattr(app, "state", None)
    every = getattr(state, "mcpfusions", None)
    return [f for f in (every if isinstance(every, list) else [getattr(state, "mcpfusion", None)])
            if isinstance(f, MCPFusion)]


def served(target: str, app_dir: str | None = None) -> tuple[Any, list[MCPFusion], MCPFusion | None]:
    """(ASGI app, the MCPFusion servers it serves in mount order, the one APP names if it is an MCPFusion) for
    "module:attribute". An MCPFusion mounted on an app is served by that app (its overrides, state and
    middleware), else by one it builds."""
    obj = _imported(target, app_dir)
    if isinstance(obj, MCPFusion):
        if obj.app is not None:
            return obj.app, _mounted(obj.app) or [obj], obj
        try:
            return obj.build_app(), [obj], obj
        except KeyboardInterrupt:
            raise
        except SystemExit as exc:  # (a subclass's build_app: not the app's exit status to pass on)
            raise CliError(f"building the app of {target} failed: {exited(exc, 'build_app')}") from None
        except BaseException as exc:
            raise CliError(f"building the app of {target} failed: {described(exc)}") from None
    fusions = _mounted(obj)
    if not fusions:
        raise CliError(f"{target} is not an MCPFusion object nor an app built by MCPFusion (app.state.mcpfusion)")
    return obj, fusions, None


def load(target: str, app_dir: str | None = None, *, server: str | None = None,
         tool: str | None = None) -> tuple[Any, MCPFusion]:
    """(ASGI app, MCPFusion) for "module:attribute": of an app serving several, the one `server` names (its
    name or MCP path), else the one serving `tool`; never a silent pick (a `CliError` lists them)."""
    app, fusions, named = served(target, app_dir)
    if named is not None:
        if server is not None and server not in (named.name, named.settings.path):
            raise CliError(f"{target} is the MCPFusion {named.name!r} (at {named.settings.path}), not "
                           f"--server {server!r}")
        return app, named
    if server is None and len(fusions) == 1:
        return app, fusions[0]
    from .testing import choose_fusion  # (only for an app of several: what the tester chooses by)

    try:
        return app, choose_fusion(fusions, server=server, tool=tool, how="--server NAME")
    except ValueError as exc:
        raise CliError(f"{target}: {exc}") from None


def _unshared_state(fusion: MCPFusion, workers: int) -> list[str]:
    """What `workers` processes of `fusion` would not share: each worker keeps its own copy, so a request
    answered by another worker fails. Empty when the deployment shares it all."""
    settings = fusion.settings
    notices = []
    if not settings.redis_url and settings.session_store is None:
        notices.append(f"each of the {workers} workers keeps its own 2025-11-25 sessions, so another worker "
                       "answers 404 Session not found; set MCPFUSION_REDIS_URL (see docs/deployment.md)")
    if not settings.redis_url:
        notices.extend(_unshared_guards(fusion, workers))
    if settings.signing_key is None:
        notices.append(f"each of the {workers} workers signs cursors and requestState with its own random key, "
                       "so another worker answers INVALID_CURSOR; set MCPFUSION_SIGNING_KEY "
                       "(see docs/deployment.md)")
    return notices


def _unshared_guards(fusion: MCPFusion, workers: int) -> list[str]:
    """The guards whose state `workers` processes without Redis keep apart: spent confirmations (each worker
    refuses the confirmations another issued: the user confirms again) and rate-limit buckets (each worker lets
    the whole limit through). Only for what the app uses, and only while they are the in-memory stores."""
    from .buckets import MemoryBuckets
    from .spent import MemorySpent

    registry = fusion.registry
    actions = list(registry.actions())
    notices = []
    if isinstance(registry.guards.spent, MemorySpent) and any(a.confirm for a in actions):
        notices.append(f"each of the {workers} workers remembers its own spent confirmations, so a worker refuses "
                       "the confirmations another issued and the user is asked again (as many times as a retry "
                       "lands on another worker); set MCPFUSION_REDIS_URL (see docs/deployment.md)")
    limits = sys.modules.get("mcpfusion.ratelimit")  # (not loaded: no RateLimit anywhere)
    if limits is not None and isinstance(registry.guards.buckets, MemoryBuckets) and any(
            isinstance(mw, limits.RateLimit) for a in actions for mw in registry.layers(a)):
        notices.append(f"each of the {workers} workers counts its own rate limits, so a caller gets up to "
                       f"{workers}x each RateLimit; set MCPFUSION_REDIS_URL (see docs/deployment.md)")
    return notices


# -- commands ----------------------------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace, *, reload: bool = False) -> int:
    import uvicorn

    from .server import env_header_timeout, free_port, listen_error, log_config, uvicorn_options

    os.environ.setdefault(collector.ENV, "1")  # a serving process: the collector's serving profile
    app, fusions, _ = served(args.app, args.app_dir)  # fail fast, with a clear message, before uvicorn starts
    if args.header_timeout is None:
        try:
            env_header_timeout()
        except ValueError as exc:
            raise CliError(str(exc)) from None
    if not reload and args.workers > 1 and any(getattr(f.telemetry, "prometheus", False) for f in fusions):
        status(f"warning: /metrics shows the counters of whichever of the {args.workers} workers answers the "
               "scrape; run one worker per container, or export with OTLP (see docs/observability.md)")
    if not reload and args.workers > 1:  # (each said once, however many fusions it is true of)
        for notice in dict.fromkeys(n for f in fusions for n in _unshared_state(f, args.workers)):
            status(f"warning: {notice}")
    try:  # a taken port, an unknown host: one line, before anything is announced
        port = free_port(args.host, args.port)
    except OSError as exc:
        raise CliError(listen_error(args.host, args.port, exc)) from None
    base = f"http://{f'[{args.host}]' if ':' in args.host else args.host}:{port}"
    tools = sum(len(f.registry.tools) for f in fusions)
    banner = (f"serving {', '.join(visible_name(f.name) for f in fusions)} ({tools} tool{'s' * (tools != 1)}) "
              f"from {args.app}"
              f"{' with reload' if reload else ''}\nMCP {', '.join(base + f.settings.path for f in fusions)} | "
              f"REST {base}/api | tool docs {base}/tools | OpenAPI {base}/docs | health {base}/healthz")
    options: dict[str, Any] = {"host": args.host, "port": port, "log_level": args.log_level,
                               "log_config": keep_audit(log_config(args.log_level)),
                               **uvicorn_options(header_timeout=args.header_timeout,
                                                 keep_alive_timeout=args.keep_alive_timeout)}
    if args.graceful_timeout is not None:
        options["timeout_graceful_shutdown"] = args.graceful_timeout
    if args.app_dir:
        options["app_dir"] = args.app_dir
    if not reload:
        options["workers"] = args.workers
    if not reload and args.workers == 1:  # the banner once the app started; a start-up failure is one line
        starting = Starting(app, lambda: _say(banner), args.app)
        options["log_config"] = _without_startup_notice(options["log_config"], starting)
        try:
            uvicorn.run(starting, **options)
        except SystemExit:
            if starting.failure is not None:
                raise _startup_failed(args.app, starting.failure) from None
            raise
        return 0 if starting.shutdown_failure is None else 2
    # Processes of their own (each worker, each reload) import APP again, through `serve_app`: a failure to
    # start it is one masked line there too.
    os.environ[SERVE_TARGET_ENV] = args.app
    target = f"{__name__}:{serve_app.__name__}"
    if reload:
        _say(banner)  # (the reloaded process starts the app, again after each change)
        uvicorn.run(target, factory=True, reload=True, reload_dirs=[os.path.abspath(args.app_dir or os.getcwd())],
                    **options)
        return 0
    with tempfile.TemporaryDirectory(prefix="mcpfusion-serve-") as folder:
        report = WorkerReport(folder)
        report.open(banner)
        uvicorn.run(target, factory=True, **options)
        failure = report.failure()
    if failure:  # uvicorn stopped the workers when one could not start, and returned as if asked to stop
        raise CliError(failure)
    return 0


#: What uvicorn logs after a failed lifespan start-up, besides the failure's own message.
_STARTUP_NOTICE = "Application startup failed. Exiting."


class _SaidOnce:
    """A logging filter dropping uvicorn's `_STARTUP_NOTICE` once `starting` kept the failure: `serve` says
    it in its own line (`_startup_failed`), which is then the only one."""

    def __init__(self, starting: Starting) -> None:
        self.starting = starting

    def filter(self, record: Any) -> bool:
        return self.starting.failure is None or record.getMessage() != _STARTUP_NOTICE


def _without_startup_notice(config: dict[str, Any], starting: Starting) -> dict[str, Any]:
    """The logging configuration of `serve`, its `uvicorn.error` logger filtered by `_SaidOnce`."""
    config.setdefault("filters", {})["mcpfusion_startup"] = {"()": _SaidOnce, "starting": starting}
    logger = config["loggers"].setdefault("uvicorn.error", {"level": "INFO"})
    logger["filters"] = [*logger.get("filters", []), "mcpfusion_startup"]
    return config


def _say(lines: str) -> None:
    for line in lines.splitlines():
        status(line)


SERVE_TARGET_ENV = "MCPFUSION_SERVE_APP"
#: The default of `stdio --server`: what `install --server` writes into the entry's environment (the entry's
#: arguments are the plain `stdio APP --app-dir DIR`).
SERVER_ENV = "MCPFUSION_STDIO_SERVER"
REPORT_ENV = "MCPFUSION_SERVE_REPORT"


class WorkerReport:
    """What the worker processes of `serve --workers` tell it, through files in a folder of its own
    (`REPORT_ENV`): uvicorn stops every worker when one fails to start, and tells the parent nothing of why,
    so the worker writes its error there (the parent says it once, and exits 2); the first worker whose app
    started says the banner."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    @classmethod
    def of_process(cls) -> WorkerReport | None:
        folder = os.environ.get(REPORT_ENV)
        return cls(folder) if folder else None

    def open(self, banner: str) -> None:
        """(In `serve`.) The banner for a worker to say, and the folder named in the environment the workers
        inherit."""
        with open(os.path.join(self.folder, "banner"), "w", encoding="utf-8") as handle:
            handle.write(banner)
        os.environ[REPORT_ENV] = self.folder

    def started(self) -> None:
        """(In a worker.) Its app started: the banner, if no other worker said it."""
        try:
            os.close(os.open(os.path.join(self.folder, "announced"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except OSError:  # another worker did (or the folder is gone: `serve` is stopping)
            return
        with open(os.path.join(self.folder, "banner"), encoding="utf-8") as handle:
            _say(handle.read())

    def failed(self, error: CliError) -> None:
        """(In a worker.) It could not start: `error` for `serve` to say."""
        with open(os.path.join(self.folder, "failed"), "a", encoding="utf-8") as handle:
            handle.write(" ".join(str(error).splitlines()) + "\n")

    def failure(self) -> str:
        """(In `serve`.) The first error a worker wrote, or ""."""
        try:
            with open(os.path.join(self.folder, "failed"), encoding="utf-8") as handle:
                return handle.readline().rstrip("\n")
        except FileNotFoundError:
            return ""


def serve_app() -> Any:
    """The app of a `serve --workers` or `dev` process (an app factory uvicorn calls by import string): the APP
    `serve` was given (`SERVE_TARGET_ENV`; its folder is on the path the parent process passes on) behind
    `Starting`, so that a failure to import or start it is one masked line, as with one worker: told to
    `serve` (`WorkerReport`), or, in `dev`, said at once (the reloader goes on)."""
    from uvicorn.config import STARTUP_FAILURE

    target = os.environ[SERVE_TARGET_ENV]
    report = WorkerReport.of_process()

    def failed(error: CliError) -> None:
        if report is not None:
            report.failed(error)
        else:
            status(f"error: {error}")

    try:
        app, _, _ = served(target)
    except CliError as exc:
        failed(exc)
        sys.exit(STARTUP_FAILURE)  # uvicorn's status for a process that cannot start: the workers stop
    return Starting(app, None if report is None else report.started, target, report=failed)


AUDIT_LOGGER = "mcpfusion.audit"


def keep_audit(config: dict[str, Any]) -> dict[str, Any]:
    """A logging configuration whose audit trail is written whatever `--log-level` says: the audit events
    (INFO records of `mcpfusion.audit`) are a record of who changed what, not diagnostics to quieten."""
    config["loggers"][AUDIT_LOGGER] = {"level": "INFO", "propagate": True}
    return config


def stdio_logging() -> None:
    """Log records on stderr (stdout is the protocol channel), as `serve` writes them: warnings and errors,
    and the audit trail (one JSON line per event), which a warnings-only configuration would drop."""
    import logging

    from .server import LogFormatter

    root = logging.getLogger()
    if not root.handlers:  # (a configuration the process already has is kept)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(LogFormatter())
        root.addHandler(handler)
        root.setLevel(logging.WARNING)
    audit = logging.getLogger(AUDIT_LOGGER)
    if audit.getEffectiveLevel() > logging.INFO:
        audit.setLevel(logging.INFO)


def cmd_stdio(args: argparse.Namespace) -> int:
    from .mcp.stdio import StartupFailed, StdioConfigError, check_header, env_headers, private_stdout, serve_stdio

    stdio_logging()
    try:
        headers = env_headers()
        if args.token:
            check_header("authorization", f"Bearer {args.token}", "--token")
            headers["authorization"] = f"Bearer {args.token}"
    except StdioConfigError as exc:
        raise CliError(str(exc)) from None
    # stdout is the protocol channel from the first byte: what importing the app writes (a print(), a write to
    # descriptor 1, a child process) goes to stderr.
    with private_stdout() as protocol:
        app, fusion = load(args.app, args.app_dir, server=args.server or os.environ.get(SERVER_ENV) or None)
        starting = Starting(app, target=args.app)  # its lifespan's failures as one masked line
        status(f"serving {visible_name(fusion.name)} over stdio (one JSON-RPC message per line; Ctrl-D to stop)")
        try:  # (to the fusion's own MCP path: one of several, or one given a path= of its own)
            code: int = asyncio.run(serve_stdio(starting, path=fusion.settings.path, headers=headers,
                                                stdout=protocol))  # (143 on SIGTERM)
        except StartupFailed as exc:
            raise _startup_failed(args.app, starting.failure or str(exc)) from None
        return code or (2 if starting.shutdown_failure is not None else 0)


def cmd_inspect(args: argparse.Namespace) -> int:
    from .docs.page import visible

    _, fusion = load(args.app, args.app_dir, server=args.server)
    registry = fusion.registry
    if args.json:  # (`\u202e` in a JSON string is the same character: the same JSON, safe on a terminal)
        print(visible(json.dumps(registry.mcp_tools(), indent=2, ensure_ascii=False)))
        return 0
    lines = [f"{visible_name(fusion.name)} {visible_name(fusion.version)}: {len(registry.tools)} tools"]
    for tool in registry.tools.values():
        flags = [tool.exposition] + (["_select"] if tool.select else []) + (["toon"] if tool.toon_description else [])
        lines.append(f"\n== {tool.name} [{', '.join(flags)}] tags={','.join(tool.tags) or '-'}"
                     + (f" source={tool.source}" if tool.source else ""))
        for entry in tool_entries(tool):
            if entry["name"] != tool.name:
                lines.append(f"-- {entry['name']} {json.dumps(entry.get('annotations', {}))}")
            lines.append(entry.get("description", ""))
        lines.append("actions:")
        for action in tool.actions.values():
            hints = [h for h, on in (("readonly", action.readonly), ("destructive", action.destructive),
                                     ("idempotent", action.idempotent), ("open_world", action.open_world)) if on]
            presenters = ",".join(p.name for p in action.presenters) or "-"
            lines.append(f"  {action.qualified_name}({', '.join(action.required)}) [{' '.join(hints) or '-'}] "
                         f"presenters={presenters}")
    print(visible("\n".join(lines)))  # a description's NUL, terminal escape or U+202E shown, not obeyed
    return 0


async def _call(app: Any, fusion: MCPFusion, tool: str, action: str, arguments: dict[str, Any],
                headers: dict[str, str], yes: bool = False, target: str = "the app") -> Any:
    """The call as any transport makes it: the caller authenticated by the server's protected resource, the
    action found among those its scopes allow (a hidden one answers as unknown), the app's middleware run.
    With `yes`, a confirmation the action asks for is given with the token it issued, in this process (its
    signing key is this process's own unless the server configures one)."""
    from .confirm import CONFIRM_PARAM
    from .errors import CONFIRMATION_REQUIRED
    from .testing import ToolTester

    async with _lifespan_of(app, target):
        tester = ToolTester(fusion, app=app)
        response = (await tester.call(tool, action, arguments, headers=headers)).raw
        issued = (getattr(response.view.error, "details", None) or {}).get("confirm_token")
        if yes and response.error_code == CONFIRMATION_REQUIRED and issued:
            response = (await tester.call(tool, action, {**arguments, CONFIRM_PARAM: issued}, headers=headers)).raw
    return response


@asynccontextmanager
async def _lifespan_of(app: Any, target: str) -> AsyncIterator[None]:
    """The app's lifespan (a FastAPI app's `router.lifespan_context`) around an in-process use of it; a
    start-up or shutdown that raised is one `CliError` line, as `serve` says it."""
    lifespan = getattr(getattr(app, "router", None), "lifespan_context", None)
    if lifespan is None:
        yield
        return
    context = lifespan(app)
    try:
        await context.__aenter__()
    except BaseException as exc:
        if not _app_raised(exc):
            raise
        raise _startup_failed(target, exc) from None
    try:
        yield
    except BaseException as exc:
        await context.__aexit__(type(exc), exc, exc.__traceback__)
        raise
    try:
        await context.__aexit__(None, None, None)
    except BaseException as exc:
        if not _app_raised(exc):
            raise
        raise _shutdown_failed(target, exc) from None


def _app_raised(exc: BaseException) -> bool:
    """Whether `exc`, out of the app's lifespan, is the app's own failure (a `sys.exit()`, a custom
    BaseException, a CancelledError it raised), not a Ctrl-C: a KeyboardInterrupt, or the cancellation
    `asyncio.run` makes of it (the task is then being cancelled), still interrupts (exit 130)."""
    if isinstance(exc, KeyboardInterrupt):
        return False
    task = asyncio.current_task() if isinstance(exc, asyncio.CancelledError) else None
    return task is None or not task.cancelling()


def cmd_call(args: argparse.Namespace) -> int:
    from .errors import CONFIRMATION_REQUIRED, UNKNOWN_ACTION, UNKNOWN_TOOL

    try:
        # Read as a request body is (a key given twice refused, a lone surrogate named), not by `json.loads`.
        arguments = parse_json(args.json.encode("utf-8", "surrogatepass")) if args.json else {}
    except InvalidJSON as exc:
        raise CliError(f"--json is not valid JSON: {exc.reason.replace('the body', 'it', 1)}") from None
    if not isinstance(arguments, dict):
        raise CliError("--json must be a JSON object of the action's parameters")
    app, fusion = load(args.app, args.app_dir, server=args.server, tool=args.tool)
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    response = asyncio.run(_call(app, fusion, args.tool, args.action, arguments, headers, args.yes, args.app))
    if response.error_code == CONFIRMATION_REQUIRED:
        status("this action asks for confirmation: run the same command again with --yes to confirm it "
               "(a _confirm token from another process works only when the server has a fixed signing key)")
    if response.error_code in (UNKNOWN_TOOL, UNKNOWN_ACTION):  # (or one the caller's scopes hide)
        print(response.text)
        return 2
    if args.raw:
        print(json.dumps(response.to_mcp(), indent=2, ensure_ascii=False))
    else:
        print("\n\n".join(response.texts))
        for item in response.content:  # images, audio, documents: named, not dumped (--raw has the base64)
            described = item.to_mcp()
            uri = described.get("uri") or described.get("resource", {}).get("uri", "")
            size = f", {len(item.payload()):,} bytes" if item.kind != "resource_link" else ""
            print(f"[{item.kind} {item.media_type}{size}] {uri}".rstrip())
        if response.structured_content is not None:
            print("\nstructuredContent: " + json.dumps(response.structured_content, ensure_ascii=False))
    return 1 if response.is_error else 0


def cmd_docs(args: argparse.Namespace) -> int:
    try:
        from .docs import export_site
    except ImportError:
        raise CliError("the docs generator (mcpfusion.docs) is not available in this installation") from None
    _, fusion = load(args.app, args.app_dir, server=args.server)
    status(f"writing the tool documentation of {visible_name(fusion.name)} to {args.out}")
    try:
        files = export_site(fusion, args.out, base_url=args.base_url, overwrite=args.force)
    except FileExistsError as exc:  # a folder's own files of the site's names
        raise CliError(f"{exc}. Choose another --out folder, or pass --force to overwrite them.") from None
    except OSError as exc:  # not a folder, not writable...
        raise CliError(f"cannot write the site to {args.out}: {exc.strerror or exc}") from None
    except ValueError as exc:  # a --base-url that is no http(s) URL
        raise CliError(str(exc)) from None
    status(f"wrote {len(files)} files; open {os.path.join(args.out, 'index.html')}")
    return 0


def cmd_install(args: argparse.Namespace) -> int:
    from .install import InstallError, install, parse_env, project_notice, redacted

    _, fusion = load(args.app, args.app_dir, server=args.server)  # the APP must load before a client starts it
    app_dir = os.path.abspath(args.app_dir or os.getcwd())
    try:
        env = parse_env(args.env)
        if args.server and not args.url:  # the stdio server the entry starts serves that one too
            env = {**env, SERVER_ENV: args.server}
        path, entry = install(args.client, args.app, name=args.name or fusion.name, app_dir=Path(app_dir),
                              config=Path(args.config) if args.config else None, url=args.url, token=args.token,
                              env=env)
    except InstallError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:  # the config path is a folder, not writable...
        raise CliError(f"cannot write the client configuration: {exc.strerror or exc} ({exc.filename})") from None
    kind = f"HTTP {args.url}" if args.url else "stdio"
    status(f"wrote server {args.name or fusion.name!r} ({kind}) to {path}; restart {args.client} to load it")
    notice = project_notice(args.client, args.token, parse_env(args.env))
    if notice:
        status(f"warning: {notice}")
    print(json.dumps(redacted(entry), indent=2, ensure_ascii=False))  # (the file holds the secrets)
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    from .docs import lock

    _, fusion = load(args.app, args.app_dir, server=args.server)
    current = lock.contract(fusion.registry, fusion)
    path = args.file
    if not args.check:
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(lock.dumps(current))
        except OSError as exc:
            raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
        actions = sum(len(t["actions"]) for t in current["tools"].values())
        status(f"wrote {path}: {len(current['tools'])} tools, {actions} actions ({current['digest']})")
        return 0
    try:
        with open(path, encoding="utf-8") as handle:
            pinned = json.load(handle)
    except FileNotFoundError:
        raise CliError(f"no lockfile at {path}: write it with `{lock.command(args.app, path, args.app_dir)}`") from None
    except ValueError as exc:
        raise CliError(f"{path} is not valid JSON: {exc}") from None
    except OSError as exc:  # a directory, no permission...
        raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
    newer = lock.newer_format(pinned)
    if newer is not None:
        raise CliError(f"{path} was written by a newer mcpfusion (lockfile format {newer}; this one, "
                       f"{__version__}, reads up to {lock.FORMAT}): upgrade mcpfusion to check it, and do not "
                       f"regenerate it with this one (that would drop what the newer format pins)")
    try:
        lock.check_shape(pinned)  # (before resealing, which reads actions that are no object as none)
        pinned = lock.resealed(pinned)  # its digests from its content: an edit that kept them is still a change
        changes = lock.diff(pinned, current)
    except (AttributeError, TypeError, KeyError, ValueError):  # JSON, but not the shape `lock` writes
        raise CliError(f"{path} is not a valid mcpfusion.lock (not the shape `mcpfusion lock` writes): write it "
                       f"again with `{lock.command(args.app, path, args.app_dir)}`") from None
    if not changes and pinned.get("digest") == current["digest"]:
        status(f"{path} matches the served contract ({current['digest']})")
        return 0
    changes = changes or ["the contract changed (digests differ)"]
    print(f"{path} does not match the served contract ({len(changes)} change(s)):")
    print("\n".join(f"  {line}" for line in changes))
    print(f"If the change is intended, regenerate it: {lock.command(args.app, path, args.app_dir)}")
    return 1


# -- parser ------------------------------------------------------------------------------------------

def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="mcpfusion", description="Serve, inspect and call mcpfusion applications.")
    root.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_app(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("app", metavar="APP", help='"module:attribute", e.g. app.main:app')
        p.add_argument("--app-dir", help="folder to import APP from (default: the current folder)")
        if name not in ("serve", "dev"):  # (those serve the whole app, every fusion on it)
            with_server(p, f" (default: {SERVER_ENV})" if name == "stdio" else "")
        return p

    def with_server(p: argparse.ArgumentParser, more: str = "") -> None:
        p.add_argument("--server", metavar="NAME", help="of an app serving several MCPFusion servers, the one to "
                                                        f"use (its name or MCP path){more}")

    for name, help_text in (("serve", "serve MCP, REST and docs over HTTP (uvicorn)"),
                            ("dev", "like serve, restarting on code changes")):
        p = with_app(name, help_text)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=_port, default=8000)
        p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug",
                                                                "trace"])
        p.add_argument("--header-timeout", type=_seconds, default=None, metavar="SECONDS",
                       help="close a connection whose request head is incomplete after this long (default 10, "
                            "or MCPFUSION_HEADER_TIMEOUT)")
        p.add_argument("--keep-alive-timeout", type=_seconds, default=5.0, metavar="SECONDS",
                       help="close a connection idle between requests after this long (default 5)")
        p.add_argument("--graceful-timeout", type=_seconds, default=None, metavar="SECONDS",
                       help="on shutdown, cancel requests still running after this long (default 20: a call "
                            "waiting for the answer of a client that went away never holds the exit)")
        if name == "serve":
            p.add_argument("--workers", type=_workers, default=1,
                           help="worker processes (default 1; each keeps its own /metrics counters)")
    p = with_app("stdio", "serve MCP over stdin/stdout for local clients")
    p.add_argument("--token", help="bearer token sent as the Authorization header (or MCPFUSION_AUTHORIZATION)")
    p = with_app("inspect", "list tools, actions and their (TOON) descriptions")
    p.add_argument("--json", action="store_true", help="print the MCP tools/list entries as JSON")
    p = with_app("call", "call one action in-process and print its result blocks")
    p.add_argument("tool")
    p.add_argument("action")
    p.add_argument("--json", default="{}", help="the action's parameters as a JSON object")
    p.add_argument("--token", help="bearer token (sent as Authorization: Bearer ...)")
    p.add_argument("--raw", action="store_true", help="print the MCP CallToolResult as JSON")
    p.add_argument("--yes", action="store_true",
                   help="confirm an action that asks for the user's confirmation (confirm=True) in this call")
    p = with_app("docs", "export the tool documentation as a static site")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--force", action="store_true",
                   help="overwrite files of the site's names that no docs export wrote (a folder's own index.html)")
    p.add_argument("--base-url", default="http://127.0.0.1:8000",
                   help="server the curl examples, try-it forms and the page's security policy aim at "
                        "(default: %(default)s)")
    from .install import CLIENTS

    p = sub.add_parser("install", help="add the server to an MCP client's configuration",
                       description="Add the server to an MCP client's configuration (stdio by default, "
                                   "HTTP with --url). Other servers in the file are kept.")
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("app", metavar="APP", help='"module:attribute", e.g. app.main:app')
    p.add_argument("--app-dir", help="folder to import APP from (default: the current folder)")
    with_server(p, f" (a stdio entry passes it on in {SERVER_ENV})")
    p.add_argument("--name", help="server name in the client (default: the MCPFusion name)")
    p.add_argument("--token", help="bearer token (stdio: MCPFUSION_AUTHORIZATION in env; HTTP: a header)")
    p.add_argument("--url", help="connect over HTTP to this /mcp URL instead of starting a stdio server")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="stdio server environment")
    p.add_argument("--config", help="the client's configuration file (default: where the client reads it)")
    p = with_app("lock", "write mcpfusion.lock (the tools' contracts), or --check it against the served one")
    p.add_argument("--check", action="store_true", help="exit 1 with a readable diff when the contract drifted")
    p.add_argument("--file", default="mcpfusion.lock", help="the lockfile (default: mcpfusion.lock)")
    return root


COMMANDS = {
    "serve": cmd_serve,
    "dev": lambda args: cmd_serve(args, reload=True),
    "stdio": cmd_stdio,
    "inspect": cmd_inspect,
    "call": cmd_call,
    "docs": cmd_docs,
    "install": cmd_install,
    "lock": cmd_lock,
}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except CliError as exc:
        print(f"mcpfusion: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `mcpfusion inspect APP | head`
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the interpreter's flush at exit
        return 0


if __name__ == "__main__":
    sys.exit(main())
