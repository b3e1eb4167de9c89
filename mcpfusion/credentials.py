"""`Credential("PAYMENT_API_KEY")`: a dependency giving a handler a secret it needs.

The value comes from `app.state.credentials` (a mapping the application fills from its settings) or else
from the environment variable of the same name. When it is missing the action answers a self-healing
`MISSING_CREDENTIAL` tool error; the secret itself never appears in any output.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from starlette.requests import Request

from .errors import MISSING_CREDENTIAL, ToolError


class Credential:
    """Use as `key: str = Depends(Credential("PAYMENT_API_KEY"))`."""

    def __init__(self, name: str, *, description: str | None = None, from_env: bool = True) -> None:
        self.name = name
        self.description = description
        self.from_env = from_env

    def lookup(self, request: Request) -> str | None:
        store = getattr(request.app.state, "credentials", None) if request.scope.get("app") else None
        value = store.get(self.name) if isinstance(store, Mapping) else None
        if not value and self.from_env:
            value = os.environ.get(self.name)
        return value or None

    async def __call__(self, request: Request) -> str:
        value = self.lookup(request)
        if value is None:
            raise ToolError(
                MISSING_CREDENTIAL,
                f'This action needs the credential "{self.name}", which is not configured on the server.',
                recovery="Ask the server operator to configure it; meanwhile use the actions that do not need it.",
            )
        return value

    def __repr__(self) -> str:
        return f"Credential({self.name!r})"
