"""Settings of the reference service, read from the environment (12-factor), overridable in tests."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DB_PATH = ROOT / "var" / "billing.sqlite3"
# Secrets the service may need; each is read from the environment under the same name.
CREDENTIAL_NAMES = ("PAYMENT_API_KEY",)
DEMO_PAYMENT_API_KEY = "demo-payment-key"


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def _list(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def database_url(url: str | None, sqlite_path: str | Path) -> str:
    """The SQLAlchemy async URL: `DATABASE_URL` (postgres:// or sqlite://) or the SQLite file."""
    if not url:
        return f"sqlite+aiosqlite:///{Path(sqlite_path)}"
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix):]
    if url.startswith("sqlite://") and not url.startswith("sqlite+"):
        return "sqlite+aiosqlite://" + url[len("sqlite://"):]
    return url


class Settings(BaseModel):
    """Everything the service reads at start-up. `Settings.from_env()` is what `make run` uses."""

    database_url: str = Field(default_factory=lambda: database_url(None, DEFAULT_DB_PATH))
    seed_demo_data: bool = True
    demo_mode: bool = True  # accept the documented demo tokens (never in production)
    jwt_key: str | None = None  # shared secret (HS*) or PEM public key (RS*/ES*)
    jwt_jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwt_algorithms: list[str] = Field(default_factory=lambda: ["HS256", "RS256", "ES256"])
    tenant_claim: str = "tenant"
    role_claim: str = "role"
    # OAuth (MCP authorization): the resource URL tokens are issued for (their audience; derived from the
    # request when unset), the authorization servers clients get tokens from (RFC 9728 metadata), and their
    # token / authorize endpoints for the OpenAPI OAuth2 flows.
    resource_url: str | None = None
    authorization_servers: list[str] = Field(default_factory=list)
    oauth_token_url: str | None = None
    oauth_authorization_url: str | None = None
    jwks_refetch_floor: float = 10.0  # seconds between JWKS refetches for unknown key ids (a rotated key)
    # Opaque tokens: checked at the authorization server's introspection endpoint (RFC 7662) instead of as JWTs.
    introspection_url: str | None = None
    introspection_client_id: str | None = None
    introspection_client_secret: str | None = None
    credentials: dict[str, str] = Field(default_factory=dict)
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_origins: list[str] = Field(default_factory=list)
    otlp_endpoint: str | None = None  # export traces and metrics over OTLP/HTTP (e.g. the compose collector)
    prometheus: bool = False  # serve /metrics for a Prometheus scraper
    rate_limit: int = 600  # calls per minute per principal, on every action (shared in Redis by replicas)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if env is None else env
        demo = _flag(env.get("MCPFUSION_DEMO"), True)
        credentials = {name: env[name] for name in CREDENTIAL_NAMES if env.get(name)}
        if demo:
            # The demo works out of the box; a real key in the environment still wins.
            credentials.setdefault("PAYMENT_API_KEY", DEMO_PAYMENT_API_KEY)
        values: dict[str, object] = {
            "database_url": database_url(env.get("DATABASE_URL"), env.get("MCPFUSION_DB_PATH") or DEFAULT_DB_PATH),
            "seed_demo_data": _flag(env.get("MCPFUSION_SEED"), True),
            "demo_mode": demo,
            "jwt_key": env.get("MCPFUSION_JWT_KEY") or None,
            "jwt_jwks_url": env.get("MCPFUSION_JWT_JWKS_URL") or None,
            "jwt_issuer": env.get("MCPFUSION_JWT_ISSUER") or None,
            "jwt_audience": env.get("MCPFUSION_JWT_AUDIENCE") or None,
            "resource_url": env.get("MCPFUSION_RESOURCE_URL") or None,
            "authorization_servers": _list(env.get("MCPFUSION_AUTHORIZATION_SERVERS")),
            "oauth_token_url": env.get("MCPFUSION_OAUTH_TOKEN_URL") or None,
            "oauth_authorization_url": env.get("MCPFUSION_OAUTH_AUTHORIZATION_URL") or None,
            "introspection_url": env.get("MCPFUSION_INTROSPECTION_URL") or None,
            "introspection_client_id": env.get("MCPFUSION_INTROSPECTION_CLIENT_ID") or None,
            "introspection_client_secret": env.get("MCPFUSION_INTROSPECTION_CLIENT_SECRET") or None,
            "credentials": credentials,
            "allowed_hosts": _list(env.get("MCPFUSION_ALLOWED_HOSTS")),
            "allowed_origins": _list(env.get("MCPFUSION_ALLOWED_ORIGINS")),
            "otlp_endpoint": env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None,
            "prometheus": _flag(env.get("MCPFUSION_PROMETHEUS"), False),
        }
        if env.get("MCPFUSION_RATE_LIMIT"):
            values["rate_limit"] = _number(env, "MCPFUSION_RATE_LIMIT", int)
        if env.get("MCPFUSION_JWKS_REFETCH_FLOOR"):
            values["jwks_refetch_floor"] = _number(env, "MCPFUSION_JWKS_REFETCH_FLOOR", float)
        if env.get("MCPFUSION_JWT_ALGORITHMS"):
            values["jwt_algorithms"] = _list(env["MCPFUSION_JWT_ALGORITHMS"])
        values.update(overrides)
        return cls.model_validate(values)


def _number(env: Mapping[str, str], name: str, kind: type[int] | type[float]) -> int | float:
    """A numeric setting, or a ValueError that names its variable."""
    try:
        return kind(env[name])
    except ValueError:
        raise ValueError(f"{name}={env[name]!r} is not {'a whole number' if kind is int else 'a number'}") from None

