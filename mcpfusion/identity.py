"""Who an authenticated request comes from, as the transports need it (no JWT machinery imported here).

An authentication middleware (`mcpfusion.auth.RequireBearer`) keeps what it verified in
`scope["mcpfusion.auth"]`; MCP sessions are bound to its identity, not to the bytes of a header.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson
from pydantic import BaseModel

AUTH_SCOPE_KEY = "mcpfusion.auth"
#: The claims (or attributes) naming the caller's tenant, in the order they are read (`tenant_of`).
TENANT_NAMES = ("tenant", "tenant_id")
#: The claims (or attributes) naming the caller itself, in the order they are read (`subject_of`): the one
#: reading of "who" for MCP sessions and per-caller state (`identity_of`) and for middleware (`ActionCall`).
SUBJECT_NAMES = ("subject", "sub", "id", "user_id")
#: The claims (or attributes) naming who vouches for the subject, in the order they are read.
ISSUER_NAMES = ("issuer", "iss")
# Compact JSON, ASCII only, for names orjson refuses: a lone surrogate a claim may hold still encodes (to UTF-8,
# a Redis key, an HMAC), and a tuple comes out as an array.
_KEY_JSON = json.JSONEncoder(separators=(",", ":"))


class _Anonymous(Mapping[str, Any]):
    """An empty, immutable claims mapping: no subject, no tenant, no scopes."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "ANONYMOUS"


#: What a `ProtectedResource` keeps in `scope["mcpfusion.auth"]` when its `authenticate` lets a request in
#: without naming a caller (returns None): a caller granted no scope at all, rather than nothing to enforce.
#: Falsy and empty, so `scope.get(AUTH_SCOPE_KEY) or {}` still reads no claims.
ANONYMOUS: Mapping[str, Any] = _Anonymous()

# Whether instances of a class are mappings, per class: `isinstance(x, Mapping)` goes through the ABC's
# Python-level check (~2k instructions), and every call reads its caller a few times. (Its own dict, not
# `memo.by_identity`: this module is a foundation leaf and imports nothing of the package.)
_CLAIMS_CLASSES: dict[type, bool] = {dict: True}
_CLAIMS_CLASSES_SIZE = 256


def is_claims(auth: Any) -> bool:
    """Whether what authenticated a request is a mapping of claims (a verified token's), rather than an object
    whose attributes name the caller."""
    cls = auth.__class__
    known = _CLAIMS_CLASSES.get(cls)
    if known is None:
        if len(_CLAIMS_CLASSES) >= _CLAIMS_CLASSES_SIZE:
            _CLAIMS_CLASSES.clear()
            _CLAIMS_CLASSES[dict] = True
        known = _CLAIMS_CLASSES[cls] = isinstance(auth, Mapping)
    return known


def field_of(auth: Any, names: Sequence[str]) -> str | None:
    """The first of `names` that what authenticated a request holds (a claim, or an attribute of an object),
    as a string; None (and "") count as absent. None for no principal or a plain string."""
    if auth is None or isinstance(auth, str):
        return None
    claims = is_claims(auth)
    for name in names:
        value = auth.get(name) if claims else getattr(auth, name, None)
        if value is not None and value != "":
            return str(value)
    return None


def tenant_of(auth: Any) -> str | None:
    """The tenant of what authenticated a request: its `tenant`, else `tenant_id` (claim or attribute), as a
    string; None when it names none. The one reading of it: sessions, `ActionCall.tenant`, the audit and rate
    limits all agree on who shares a tenant."""
    return field_of(auth, TENANT_NAMES)


def subject_of(auth: Any) -> str | None:
    """The subject what authenticated a request names: the first of `SUBJECT_NAMES` (claim or attribute) as
    a string, and a plain string is its own subject; None when it names none. The one reading of it: MCP
    sessions and per-caller state (`identity_of`) and `ActionCall.principal_id` agree on who calls."""
    if isinstance(auth, str):
        return auth or None
    return field_of(auth, SUBJECT_NAMES)


def identity_of(auth: Any) -> tuple[str, str | None] | None:
    """(digest of issuer + subject + tenant, tenant) of what authenticated a request: a claims mapping or an
    object naming its subject (`subject_of`), its issuer (`ISSUER_NAMES`) and its tenant (`tenant_of`). MCP
    sessions are bound to it, so a refreshed token of the same caller keeps its session. None when `auth`
    names no subject (`unnamed_identity_of` is what a caller without credentials is then bound to)."""
    subject = subject_of(auth)
    if subject is None:
        return None
    tenant = tenant_of(auth)
    who = json.dumps([field_of(auth, ISSUER_NAMES) or "", subject, tenant or ""], separators=(",", ":"))
    return hashlib.sha256(who.encode()).hexdigest()[:32], tenant


_logger = logging.getLogger("mcpfusion")
_WARNED: set[tuple[str, bool]] = set()  # (principal class, unreadable) warned about: once each, not per request
_WARNED_SIZE = 256


def unnamed_identity_of(auth: Any) -> tuple[str, str | None] | None:
    """(digest, tenant) of a principal that names no subject (`subject_of`), for a request that carries no
    Authorization header either: what per-caller state is bound to rather than to "nobody in this tenant",
    which every caller of the tenant would share. None for no principal or an empty one (`ANONYMOUS`: a request
    let in without naming anyone binds nothing, as without authentication).

    The digest covers the principal's class and every field it holds (its claims, dataclass fields, pydantic
    fields (`exclude=True` ones too), extras and private attributes, `__dict__` or `__slots__`; sets sorted),
    so callers whose principals differ in any field are told apart, and callers whose principals are equal in
    every field share their state: a warning (once per class) says so, and naming the subject
    (`SUBJECT_NAMES`) is the fix. A principal holding a field that cannot be read as data (an object other than
    a dataclass or a pydantic model, a pydantic field not set, a cycle) fails closed: it is bound to a
    value drawn afresh for each request, so its sessions and `requestState` are refused, never shared."""
    if auth is None or isinstance(auth, str) or (is_claims(auth) and not auth):
        return None
    cls = type(auth)
    name = f"{cls.__module__}.{cls.__qualname__}"
    try:
        fields = orjson.dumps([name, _fields_of(auth)], default=_plain,
                              option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except Exception:  # noqa: BLE001 - whatever failed, the caller is unknown: bound to no one else
        _warn(name, True, "has fields that cannot be read as data: MCP sessions and per-caller state are "
                          "refused (bound to a new value on every request)")
        return "unreadable:" + secrets.token_hex(16), tenant_of(auth)
    _warn(name, False, "is bound, for MCP sessions and per-caller state, to a digest of all its fields, so callers "
                       "whose principals are equal share them")
    return "fields:" + hashlib.sha256(b"principal|" + fields).hexdigest()[:32], tenant_of(auth)


def _fields_of(auth: Any) -> Any:
    """The fields of a principal as orjson encodes them (a dataclass as it is; `_plain` for the others)."""
    if is_claims(auth):
        return dict(auth)
    if dataclasses.is_dataclass(auth) or callable(getattr(auth, "model_dump", None)):
        return auth
    found = getattr(auth, "__dict__", None)
    fields = dict(found) if isinstance(found, dict) else {}
    for klass in type(auth).__mro__:  # (slotted classes keep theirs there)
        slots = klass.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(auth, slot):
                fields[slot] = getattr(auth, slot)
    return fields if fields or found is not None else auth  # (a plain value: a number, a list)


def _plain(value: Any) -> Any:
    """What orjson cannot encode of a principal, made plain: sets sorted, pydantic models as every field they
    hold; anything else is refused (its `repr` may hold an address, which another caller's object may reuse)."""
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    if isinstance(value, BaseModel):
        return _model_fields(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # (a model of another kind: what it says it holds)
        return dump()  # (its sets and dates then made plain as any others)
    raise TypeError(type(value).__name__)


def _model_fields(model: BaseModel) -> dict[str, Any]:
    """Every field a pydantic model holds, read by attribute: not `model_dump()`, which leaves out the fields
    marked `exclude=True` (an API key's id kept out of logs) and private attributes, so two callers differing
    only there would share their state. A field that is not set (`model_construct`) fails closed."""
    cls = type(model)
    return {"model": f"{cls.__module__}.{cls.__qualname__}",
            "fields": {name: getattr(model, name) for name in cls.model_fields},
            "extra": model.__pydantic_extra__, "private": model.__pydantic_private__}


def _warn(name: str, unreadable: bool, how: str) -> None:
    """Say once per principal class how a principal naming no subject is bound."""
    if (name, unreadable) in _WARNED:
        return
    if len(_WARNED) >= _WARNED_SIZE:
        _WARNED.clear()
    _WARNED.add((name, unreadable))
    _logger.warning("The principal %s names no subject (%s) and the request has no Authorization header: it %s. "
                    "Give the principal a subject.", name, ", ".join(SUBJECT_NAMES), how)


def caller_key_of(*parts: str | None) -> str:
    """One key for the caller named by `parts` (issuer, tenant, principal: what per-caller state is keyed by),
    as a JSON array: distinct parts never share a key, whatever characters the names hold (a `/` in a tenant
    or a subject, a quote), and None (no tenant) is not "" nor "null"."""
    try:
        return orjson.dumps(parts).decode()  # (the hot path: a key per rate-limited call)
    except orjson.JSONEncodeError:  # a lone surrogate: escaped. JSON reads one way, so no two inputs share a key
        return _KEY_JSON.encode(parts)


def credential_digest(authorization: str, key: bytes | None = None) -> str:
    """A digest of the credentials an Authorization header carries, whatever the spelling of its scheme
    (case-insensitive, RFC 9110 section 11.1) and the whitespace around them: `Bearer x`, `bearer  x` and
    `BEARER x` are one caller. What per-caller state is keyed by when the caller names no subject.

    With `key` (the server's signing key) it is an HMAC: what is logged (the audit's principal) or stored
    under it cannot be brute-forced back to a weak password or API key without the key, and replicas sharing
    `MCPFUSION_SIGNING_KEY` agree on it."""
    scheme, _, credentials = authorization.strip().replace("\t", " ").partition(" ")
    canonical = f"{scheme.lower()} {credentials.strip()}".encode()
    if key is None:
        return hashlib.sha256(canonical).hexdigest()[:32]
    return hmac.new(key, b"credential|" + canonical, hashlib.sha256).hexdigest()[:32]


__all__ = ["ANONYMOUS", "AUTH_SCOPE_KEY", "ISSUER_NAMES", "SUBJECT_NAMES", "TENANT_NAMES", "caller_key_of",
           "credential_digest", "field_of", "identity_of", "is_claims", "subject_of", "tenant_of",
           "unnamed_identity_of"]
