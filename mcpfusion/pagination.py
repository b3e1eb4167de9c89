"""Cursor pagination: a list action answers one page at a time, and the agent (or a REST client) follows
`next_cursor` to the next one.

Declared once, on the action: `@tool.action(paginate=20)` (page size), or `paginate=True` (the size of the
presenter's `limit()`). The action then accepts a `cursor` argument. A handler that can seek (keyset
pagination, stable under concurrent inserts) takes a `Page` parameter and returns `page.keyset(rows, key)`:

    @billing.action(readonly=True, returns=rows, paginate=True)
    async def list_invoices(status: str | None = None, page: Page, store=Depends(get_store)) -> list[dict]:
        rows = await store.invoices(status, after=page.after, limit=page.size + 1)
        return page.keyset(rows, key=lambda r: [r["due_date"].isoformat(), r["number"]])

A handler without a `Page` parameter returns the whole list and the framework slices it (offset
pagination: simple, but not stable when rows are inserted meanwhile).

Cursors are opaque to clients: encrypted and authenticated with a key derived from the server's signing key
(AES-GCM), so a keyset position (the last row's key values, which may be fields the presenter redacts) is never
readable; and bound to the action, the query's filters (its other arguments), the caller (the `cursor_scope`
dependency's value: tenant, principal...) and an expiry. A forged, altered, foreign or expired cursor is a
self-healing error, never a wrong page.
"""

from __future__ import annotations

import binascii
import dataclasses
import functools
import hashlib
import hmac
import inspect
import json
import logging
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from fastapi import params
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import get_dependant
from pydantic import BaseModel
from starlette.requests import Request

from . import ui
from .content import Attached
from .errors import CURSOR_EXPIRED, INTERNAL_ERROR, INVALID_CURSOR, ToolError
from .memo import by_identity
from .presenter import PresenterError
from .response import ToolResponse
from .serializer import JSON_SCALARS, canonical_bytes, json_bytes, jsonable
from .slots import Fields

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

T = TypeVar("T")
CURSOR_PARAM = "cursor"
PAGE_SCOPE_KEY = "mcpfusion.page"
SCOPE_VALUE = "mcpfusion.cursor_scope"  # the cursor scope's value among a paginated action's dependencies
SCOPE_SOLVE = "__mcpfusion_scope_solve__"  # marks the call of `Paging.scope_dependant`, solved on its own
MAX_CURSOR_LENGTH = 8192  # the longest cursor a page is issued with (and accepted back)
CURSOR_SCHEMA: dict[str, Any] = {
    "type": ["string", "null"],  # null (what agents send for "no value") is the first page, as when omitted
    "minLength": 1,
    "maxLength": MAX_CURSOR_LENGTH,
    "description": "The previous page's next_cursor; omit it for the first page.",
}
#: What `tools/list` advertises of it: its type alone. The agent copies a cursor, never builds one, and is told
#: how when it can use it: a page with a next one ends with `Next page: call ... cursor="..."`, and a cursor
#: the server did not issue (whatever its length) gets the self-healing error saying to call without one for
#: the first page. The declared description and bounds (REST, the lockfile) would tell the agent before its
#: first page what that page tells it again (17 o200k tokens per paginated tool).
CURSOR_ADVERTISED: dict[str, Any] = {"type": "string"}


class Paged(list[T], Generic[T]):
    """One page of rows (a list) and the keyset position after its last row (None: it is the last page).
    `position(i)`, when known, is the position after the row at index `i`: where the next page starts when
    only the first rows reach the agent (an egress limit cut the page). Without it such a page is never cut
    (the rows left out could not be resumed): an answer over the limit is `RESPONSE_TOO_LARGE`."""

    def __init__(self, rows: Iterable[T], next_key: Any = None, *,
                 position: Callable[[int], Any] | None = None, given: Sequence[Any] | None = None) -> None:
        super().__init__(rows)
        self.next_key = next_key
        self.position = position
        # Every row the handler read, when some are not on the page (`keyset`'s extra one): a document
        # attached to the page may copy them, and is censored of their redacted values too.
        self.given = given


class Page(Fields):
    """What a paginated handler receives: how many rows a page holds, and where the previous page stopped
    (`after`: the key of its last row, as `keyset` recorded it; None on the first page). A plain slotted class
    with the dataclass's behaviour (`slots.Fields`: equality, repr, no hash): the decorator would compile its
    methods at import."""

    __slots__ = __match_args__ = _fields = ("size", "after")

    def __init__(self, size: int = 0, after: Any = None) -> None:
        self.size = size
        self.after = after

    def keyset(self, rows: Sequence[T], key: Callable[[T], Any]) -> Paged[T]:
        """The page from `rows` fetched after `after` with a limit of `size + 1` (the extra row only says
        that another page exists). `key(row)` is the row's position in the query's order (JSON values)."""
        page = list(rows[: self.size])
        position = lambda index: jsonable(key(page[index]))  # noqa: E731 (called only after an egress cut)
        more = len(rows) > self.size
        return Paged(page, jsonable(key(page[-1])) if more else None, position=position, given=rows if more else None)


def current_page(request: Request) -> Page:
    """The `Page` of the running call (a dependency: handlers just annotate a parameter with `Page`)."""
    page = request.scope.get(PAGE_SCOPE_KEY)
    return page if isinstance(page, Page) else Page()


_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = str.maketrans("-_", "+/")
_B64_TEXT = re.compile(r"[A-Za-z0-9_-]*")  # what `_b64` writes: the URL-safe alphabet, no padding


_CURSOR_AD = b"mcpfusion cursor"  # what the encryption authenticates besides the body: the token's kind
# The sealed body is padded to a multiple of `_PAD` bytes, at least `_PAD_MIN`: AES-GCM hides a position's
# bytes, not their number, and a keyset position may hold a value the presenter redacts. A position of up to
# about 90 bytes (an email, a name, a date and an id) then leaves no trace in the cursor's length, a longer
# one only its 64-byte step. The body binds its action by a digest, not by name, to keep that padding cheap
# (a cursor is then 251 characters, against about 190 unpadded).
_PAD, _PAD_MIN = 64, 160


def _b64(data: bytes) -> str:
    """URL-safe base64 without padding (binascii directly: `base64`'s wrappers cost more than the encoding)."""
    return binascii.b2a_base64(data, newline=False).translate(_URLSAFE).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """The bytes `_b64` encoded as `text`; ValueError for any other text. Strict: a lenient decoder drops
    characters outside the alphabet and takes padding or `+/`, and the last character's unused bits may vary,
    so an altered cursor would still decode to the bytes of the one issued."""
    if not _B64_TEXT.fullmatch(text):
        raise ValueError("not URL-safe base64")
    data = binascii.a2b_base64(text.translate(_FROM_URLSAFE) + "=" * (-len(text) % 4), strict_mode=True)
    if _b64(data) != text:  # (the unused bits of the last character: one spelling only)
        raise ValueError("not the canonical encoding")
    return data


def fingerprint(value: Any) -> str:
    """A short stable digest of JSON-able `value` (filters, caller scope): cursors carry digests only."""
    # A scope is mostly a string, filters mostly scalars: nothing to convert (jsonable would return the same).
    cls = value.__class__
    if cls is dict and not value:  # no filters (a list's first call, mostly): `{}`'s digest
        return _NO_FILTERS
    plain = cls is str or (cls is dict and all(v.__class__ in JSON_SCALARS for v in value.values()))
    raw = canonical_bytes(value if plain else jsonable(_ordered(value)))
    found = _PRINTS.get(raw)
    if found is None:
        found = _digest(raw)
        if len(raw) <= _PRINTED_MAX:  # a list's usual filters, over and over: digested once
            if len(_PRINTS) >= 4096:
                _PRINTS.clear()
            _PRINTS[raw] = found
    return found


def _ordered(value: Any) -> Any:
    """`value` with every set as a list in a canonical order (sorted by JSON): a set's own order is its hash
    order, which differs between processes (PYTHONHASHSEED), so another replica would refuse the cursor."""
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True)  # (python mode: its sets are still sets)
    if isinstance(value, dict):
        return {k: _ordered(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_ordered(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(_ordered(v)) for v in value), key=canonical_bytes)
    return value


def checked_ttl(ttl: Any) -> float:
    """`ttl` (seconds) when it is a positive finite number: a cursor of any other would be born expired
    (or never expire)."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf:
        raise ValueError(f"cursor_ttl must be a positive number of seconds, not {ttl!r}")
    return float(ttl)


_PRINTS: dict[bytes, str] = {}  # small values' digests, by their canonical JSON
_PRINTED_MAX = 256


def _digest(raw: bytes) -> str:
    return _b64(hashlib.blake2b(raw, digest_size=12).digest())


_NO_FILTERS = _digest(canonical_bytes({}))  # `fingerprint({})`


def authorization_scope(request: Request) -> str:
    """The default cursor scope: the caller's Authorization header (give `cursor_scope=` to bind cursors to
    a tenant or principal instead, so they survive token refreshes)."""
    return request.headers.get("authorization", "")


class Paging:
    """Issues and checks the cursors of one server."""

    def __init__(
        self,
        key: bytes | str | None = None,
        *,
        ttl: float = 3600.0,
        scope: Callable[..., Any] = authorization_scope,
    ) -> None:
        secret = os.urandom(32) if key is None else key.encode() if isinstance(key, str) else bytes(key)
        # A key of its own, derived from the server's: a cursor can never pass for another signed token.
        self.key = hmac.new(secret, b"mcpfusion cursor v3", hashlib.sha256).digest()
        self._sealer: Any = None
        self.ttl = checked_ttl(ttl)
        self.scope = scope
        self._scope_dependant: Dependant | None = None
        self.with_scope: Callable[[Dependant], Dependant] = by_identity(self._merged)  # `_merged`, once per dependant
        self._prints: dict[str, str] = {}  # scope strings' fingerprints: the same few callers, call after call

    def _aead(self) -> AESGCM:
        # Made on first use: the cipher's module is only imported by a server that pages.
        if self._sealer is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._sealer = AESGCM(self.key)
        return self._sealer  # type: ignore[no-any-return]

    def _open(self, sealed: bytes) -> bytes:
        """The body of a sealed cursor; ValueError when it was not sealed by this key or was altered."""
        from cryptography.exceptions import InvalidTag

        try:
            return self._aead().decrypt(sealed[:12], sealed[12:], _CURSOR_AD)
        except InvalidTag:
            raise ValueError("not sealed by this server") from None

    def issue(self, action: str, scope: str, filters: str, position: Any, *, now: float | None = None) -> str:
        # The expiry to the millisecond: a whole second would cut every ttl by up to one (a short one to nothing).
        body = {"a": _action_print(action), "s": scope, "f": filters, "k": position,
                "e": round((now or time.time()) + self.ttl, 3)}
        raw = json_bytes(body)
        # At least `_PAD_MIN` bytes, then whole steps of `_PAD` (JSON allows trailing blanks: read as it is).
        raw += b" " * (_PAD_MIN - len(raw) if len(raw) <= _PAD_MIN else -(len(raw) - _PAD_MIN) % _PAD)
        nonce = os.urandom(12)
        cursor = _b64(nonce + (self._sealer or self._aead()).encrypt(nonce, raw, _CURSOR_AD))
        if len(cursor) > MAX_CURSOR_LENGTH:  # never issue a cursor the next call would refuse
            raise ToolError(INTERNAL_ERROR, f"{action} cannot page on: the position of its next page (its keyset "
                            "key) is too large to carry in a cursor.",
                            recovery="Narrow the query with filters so that one page holds every row, or report "
                                     "it (the action pages by a key too long for a cursor).")
        return cursor

    def read(self, cursor: str, action: str, scope: str, filters: str, *, restart: ToolError) -> Any:
        """The position `cursor` carries, or the self-healing error saying why it cannot be used."""
        try:
            body = _loads(self._open(_unb64(cursor)))
        except (ValueError, TypeError):
            raise _refused(restart, INVALID_CURSOR, "The cursor is not valid: it was not issued by this server "
                                                    "or it was altered.") from None
        if body.get("a") != _action_print(action):
            raise _refused(restart, INVALID_CURSOR, f"The cursor belongs to another action, not {action}.")
        if body.get("s") != scope:
            raise _refused(restart, INVALID_CURSOR, "The cursor was issued to another caller.")
        if body.get("f") != filters:
            raise _refused(restart, INVALID_CURSOR, "The cursor belongs to a query with other filters: send the "
                                                    "same arguments as the call that returned it.")
        expiry = body.get("e")
        if expiry.__class__ not in (int, float) or expiry < time.time():
            raise _refused(restart, CURSOR_EXPIRED, "The cursor has expired.")
        return body.get("k")

    def scope_dependant(self) -> Dependant:
        """The `scope` dependency as a FastAPI `Dependant` (solved per call like the action's own)."""
        if self._scope_dependant is None:
            parameter = inspect.Parameter("scope", inspect.Parameter.KEYWORD_ONLY, default=params.Depends(self.scope))

            async def collect(**values: Any) -> dict[str, Any]:
                return values

            collect.__signature__ = inspect.Signature([parameter])  # type: ignore[attr-defined]
            setattr(collect, SCOPE_SOLVE, True)  # (its solve's values are shared with the action's: `resolve`)
            self._scope_dependant = get_dependant(path="", call=collect)
        return self._scope_dependant

    def _merged(self, dependant: Dependant) -> Dependant:
        """`dependant` (a paginated action's dependencies) with the `scope` dependency as one more of them,
        its value under `SCOPE_VALUE`: one resolution per call, and a dependency both need (the caller, the
        tenant) solved once, as FastAPI shares it within a request. `with_scope` makes it once per dependant."""
        scope = dataclasses.replace(self.scope_dependant().dependencies[0], name=SCOPE_VALUE)
        return dataclasses.replace(dependant, dependencies=[*dependant.dependencies, scope])

    def scope_print(self, value: Any) -> str:
        """`fingerprint(value)` of a cursor scope's value, remembered for strings (bounded)."""
        if value.__class__ is not str:
            return fingerprint(value)
        found = self._prints.get(value)
        if found is None:
            if len(self._prints) >= 4096:
                self._prints.clear()
            found = self._prints[value] = fingerprint(value)
        return found


def _pageable(data: Any) -> bool:
    """Whether an `attach(...)`'s data is what `PageCall.take` pages: rows, or a response made of them."""
    return isinstance(data, (list, tuple, ToolResponse))


@functools.lru_cache(maxsize=1024)  # (the registered actions' names: a few, every page of every call)
def _action_print(action: str) -> str:
    """What a cursor carries of its action's name: 48 bits of its digest (the cursor is sealed, so this only
    tells one action's cursors from another's)."""
    return fingerprint(action)[:8]


def _loads(payload: bytes) -> dict[str, Any]:
    body = json.loads(payload)
    if not isinstance(body, dict):
        raise ValueError("not an object")
    return body


def _refused(restart: ToolError, code: str, message: str) -> ToolError:
    return ToolError(code, message, recovery=restart.recovery, available_actions=restart.available_actions)


class PageCall:
    """One call of a paginated action: its `Page`, and what its cursors are bound to (a plain slotted class:
    a dataclass would compile its generated methods at every process's start)."""

    __slots__ = ("paging", "action", "how", "filters", "page", "scope", "position", "sources", "given")

    def __init__(self, paging: Paging, action: str, how: str, filters: str, page: Page, scope: str = "") -> None:
        self.paging = paging
        self.action = action  # qualified name, e.g. billing.list_invoices
        self.how = how  # how the agent calls it, e.g. "billing with action list_invoices"
        self.filters = filters
        self.page = page
        self.scope = scope
        self.position: Callable[[int], Any] | None = None  # the position after a row of the page, by index
        self.sources: list[int] | None = None  # the page's index of each row presented (None: all of them)
        self.given: Sequence[Any] | None = None  # every row an `attach`ed list had, when `take` cut a page of it

    def restart(self) -> ToolError:
        return ToolError(INVALID_CURSOR, "", recovery=f"Call {self.how} again without cursor to start from the "
                         "first page.", available_actions=[self.action])

    def open(self, cursor: str | None, scope: str, size: int) -> None:
        """Check `cursor` (None on the first page) and fill the page the handler will see."""
        self.scope = scope
        self.page.size = size
        if cursor is not None:
            self.page.after = self.paging.read(cursor, self.action, scope, self.filters, restart=self.restart())

    def take(self, result: Any) -> tuple[Any, Any]:
        """(the rows of this page, the position after them or None): a handler's `Paged` as it is, a whole
        list sliced at the page (offset pagination), a response the handler made of either (`toon_success`,
        `success_structured`...) paged as they are, None untouched (nothing found), anything else a
        PresenterError (no rows: a declaration mistake). An `attach(rows, ...)` is paged
        as its rows (its content kept), and `given` keeps them all: a document built from every row is
        censored of the redacted values of those left off the page too (a `Paged`'s `given`: the extra row
        `keyset` dropped)."""
        if isinstance(result, Attached):
            if not _pageable(result.data):  # (one object and its document: no rows to page)
                return result, None
            rows, next_key = self.take(result.data)
            if rows is result.data:  # a response paged in place
                return result, next_key
            if not isinstance(result.data, Paged):
                self.given = result.data
            return Attached(rows, result.content, result.data_block), next_key
        if isinstance(result, ToolResponse):
            return self._take_response(result)
        if isinstance(result, Paged):
            self.position = result.position
            self.given = getattr(result, "given", None)  # (a subclass may not call our __init__)
            return list(result), result.next_key
        if not isinstance(result, (list, tuple)):
            if result is not None:
                # A declaration mistake: an answer with no rows to page would go out with no `items` nor cursor.
                raise PresenterError(f"{self.action} pages its answer (paginate=) but its handler returned "
                                     f"{type(result).__name__}, not its rows: return a list (or page.keyset(...))")
            return result, None
        offset = self.page.after if isinstance(self.page.after, int) else 0
        end = offset + self.page.size
        self.position = lambda index: offset + index + 1
        return list(result[offset:end]), end if len(result) > end else None

    def _take_response(self, response: ToolResponse) -> tuple[ToolResponse, Any]:
        """A response the handler made of its rows, paged in place as those rows would be: its data block
        (and structuredContent) written again of the page's rows in its own encoding (TOON, JSON). Its data
        is the `Paged` of `page.keyset` when the handler gave one (`toon_success` keeps it), so the next page
        starts after it; an answer of no list (an error, one object) is not paged."""
        data = response.view.data
        if response.is_error or not isinstance(data, list):
            return response, None
        rows, next_key = self.take(data)
        response.reshape(rows)
        return response, next_key

    def finish(self, response: Any, next_key: Any) -> None:
        """Tell the reader of `response` where the next page is: a notice for the agent, `next_cursor` in
        structuredContent (null on the last page) and in the view REST answers from."""
        if response.is_error or not isinstance(response.view.data, list):
            return
        cursor = None if next_key is None else self.paging.issue(self.action, self.scope, self.filters, next_key)
        structured = response.structured_content
        if not response.texts:
            # `attach(..., data_block=False)` left the data out: said on the view, as the notice below is a text
            # block (REST answers the content alone, an egress limit counts structuredContent).
            response.view.data_left_out = True
        if structured is not None or not response.view.data_left_out:
            response.structured_content = {**(structured if isinstance(structured, dict) else
                                              {"items": response.view.data}), "next_cursor": cursor}
        response.view.next_cursor = cursor
        if self.position is not None:
            self.sources = response.view.sources
            response.view.resume = self.resume
        if cursor is not None:
            notice = ui.summary(
                f"{len(response.view.data)} shown; more results exist. Next page: call {self.how} with the same "
                f'arguments and cursor="{cursor}".'
            )
            response.texts.insert(1, notice.render())  # first of the UI blocks, as a truncation notice is
            response.view.ui_blocks.insert(0, notice)

    def resume(self, shown: int) -> str:
        """The cursor of the page after the first `shown` rows presented of this one (an egress limit sent only
        those): after the handler's row the last of them came from (the presenter may have left rows out)."""
        assert self.position is not None
        last = shown - 1 if self.sources is None else self.sources[shown - 1]
        return self.paging.issue(self.action, self.scope, self.filters, self.position(last))


logger = logging.getLogger("mcpfusion")

PROCESS_KEY_WARNING = (
    "MCPFUSION_SIGNING_KEY is not set: server %r signs its cursors and confirmation tokens (_confirm) with a random "
    "key of this process, so after a restart (or on another replica) every cursor and token issued before is "
    "refused as not valid. Set MCPFUSION_SIGNING_KEY (signing_key=) to a secret that outlives the process.")


def warning_of_a_process_key(inner: Callable[[Any], Any], name: str) -> Callable[[Any], Any]:
    """The app's lifespan `inner`, logging `PROCESS_KEY_WARNING` once at start-up: the server `name` signs with
    a key made for this process (no `signing_key`), which a restart silently replaces."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        logger.warning(PROCESS_KEY_WARNING, name)
        async with inner(app) as state:
            yield state

    return lifespan
