"""Request params checked against the SDK's typed request models (`mcp_types`), so that a wrong type is
-32602 naming the field, never an exception deeper down.

A client sends the same envelope (`_meta`: protocol version, client info and capabilities) with every
request, and a `tools/call` differs from the last one mostly by its `arguments`, which the SDK types as
`dict[str, Any] | None`: any JSON object passes, whatever it holds (the action validates it afterwards).
So the verdict of a `tools/call` depends only on its params without `arguments`: the params that passed are
remembered by their JSON bytes (a bounded set), and a request whose other params were seen passing costs one
encode and one lookup instead of building the SDK's five models again. Anything else (a new envelope, a
progress token, input responses, a failure) is validated in full.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from . import jsonrpc
from .jsonrpc import McpError

ACCEPTED_SIZE = 1024  # params (without arguments) remembered as valid, per process
MAX_KEY_BYTES = 4096  # larger params are validated every time rather than kept

_VALIDATORS: dict[tuple[str, str], tuple[Any, bool]] = {}
_ACCEPTED: dict[tuple[str, str, bytes], None] = {}
_FREE_ARGUMENTS = dict[str, Any] | None


def _free_arguments(model: type[BaseModel]) -> bool:
    """Whether any object is valid as the `arguments` of `model`'s params (and nothing checks across fields):
    then the verdict does not depend on what `arguments` holds."""
    params = model.model_fields.get("params")
    inner = params.annotation if params is not None else None
    if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
        return False
    arguments = inner.model_fields.get("arguments")
    if arguments is None or arguments.alias not in (None, "arguments") or arguments.annotation != _FREE_ARGUMENTS:
        return False
    decorators = [m.__pydantic_decorators__ for m in (model, inner)]
    return not any(d.model_validators or d.field_validators or d.root_validators for d in decorators)


def _request_validator(method: str, version: str) -> tuple[Any, bool]:
    """(the pydantic-core validator of the SDK's request model of `method` in `version`, or None when the
    SDK does not know the pair; whether its verdicts may be remembered without `arguments`), once per pair.
    `mcp_types.methods` is imported on the first request: its typed models of every revision take longer to
    import than the rest of `mcp_types`, and a process serving no MCP request never needs them."""
    key = (method, version)
    try:
        return _VALIDATORS[key]
    except KeyError:
        pass
    from mcp_types.methods import CLIENT_REQUESTS
    from mcp_types.version import KNOWN_PROTOCOL_VERSIONS

    model = CLIENT_REQUESTS.get(key) if version in KNOWN_PROTOCOL_VERSIONS else None
    found = _VALIDATORS[key] = (None, False) if model is None else (model.__pydantic_validator__,
                                                                  _free_arguments(model))
    return found


def envelope_key(params: dict[str, Any]) -> bytes | None:
    """`params` without its `arguments` object, as JSON: what a request's verdicts depend on when any
    arguments object passes (None: nothing to remember by). NaN and infinities are written as such, so
    that they never share a key with `null`."""
    arguments = params.get("arguments")
    if arguments is not None:
        if arguments.__class__ is not dict:
            return None
        for name in arguments:  # (a loop: cheaper than all() on the few keys of a call)
            if name.__class__ is not str:
                return None
    if "arguments" in params:
        rest = {**params}  # (a copy less its arguments, in order: no comprehension's call)
        del rest["arguments"]
    else:
        rest = params
    # orjson first (~4x faster); it writes NaN and infinities as null, so a key holding null is written by
    # pydantic instead, as is what orjson refuses (integers past 64 bits, deep nesting).
    try:
        encoded = orjson.dumps(rest)
    except orjson.JSONEncodeError:
        encoded = b"null"
    if b"null" in encoded:
        try:
            encoded = to_json(rest, inf_nan_mode="constants")
        except (PydanticSerializationError, ValueError, RecursionError):
            return None
    return encoded if len(encoded) <= MAX_KEY_BYTES else None


def check_params(method: str, version: str, params: dict[str, Any] | None, envelope: bytes | None = None) -> None:
    """Validate `params` (parsed JSON) against the SDK's typed request model of `method` in `version`;
    methods and versions the SDK does not know are left to their handler. The same check as
    `mcp_types.methods.validate_client_request`, calling the model's validator directly (its wrappers cost
    as much as the validation). `envelope`: `envelope_key(params)`, when the caller already has it."""
    meta = params.get("_meta") if params is not None else None
    if meta.__class__ is dict and "progressToken" in meta and not jsonrpc.is_valid_id(meta["progressToken"]):
        # (the typed models read it laxly: true passed as the integer 1, and went back to the client as true)
        token = meta["progressToken"]
        problem = f"is too long (a string of at most {jsonrpc.MAX_ID_LENGTH} characters, or a 64-bit integer)" \
            if jsonrpc.is_overlong_id(token) \
            else "must be a string or an integer"
        raise McpError(jsonrpc.INVALID_PARAMS, f"Invalid params for {method}: _meta.progressToken {problem}")
    found = _VALIDATORS.get((method, version))  # (the function only the first time: a call less per request)
    validator, remembered = found if found is not None else _request_validator(method, version)
    if validator is None:
        return
    if remembered and params is not None and envelope is None:
        envelope = envelope_key(params)
    key = (method, version, envelope) if remembered and envelope is not None else None
    if key is not None and key in _ACCEPTED:
        return
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": 0, "method": method}
    if params is not None:
        frame["params"] = params
    try:
        validator.validate_python(frame, by_name=False)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'][1:]) or 'params'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)[:5]
        )
        raise McpError(jsonrpc.INVALID_PARAMS, f"Invalid params for {method}: {problems}") from None
    if key is not None:
        if len(_ACCEPTED) >= ACCEPTED_SIZE:
            _ACCEPTED.clear()  # a burst of new envelopes: start again rather than track ages
        _ACCEPTED[key] = None
