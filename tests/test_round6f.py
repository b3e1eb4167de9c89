"""Round 6f: a JWKS of keys without a kid, JWT dates that are not numbers, plain JSON data returned by a
resource, the code of a resource its template's function did not find, lifespan failures located in the app's
files (one line from `serve`), and an empty XDG_CONFIG_HOME. Each test fails without its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import mcp.types as mt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import HTTPException
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcpfusion import MCPFusion, ToolError
from mcpfusion.auth import JWKSKeys, JWTVerifier
from mcpfusion.install import default_config_path
from tests.jwks_kit import JWKSEndpoint

ROOT = Path(__file__).resolve().parent.parent
AUDIENCE = "https://api.example.test/mcp"


# -- 1: every key of a JWKS without kids is kept and tried ---------------------------------------------------


def kidless_key() -> tuple[rsa.RSAPrivateKey, dict[str, Any]]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"use": "sig", "alg": "RS256"})
    return key, jwk


def token(key: Any, algorithm: str = "RS256", **claims: Any) -> str:
    values = {"sub": "client-1", "aud": AUDIENCE, "exp": int(time.time()) + 600, **claims}
    return jwt.encode(values, key, algorithm=algorithm)  # (no kid in its header)


async def test_a_token_without_kid_verifies_against_any_kidless_key_of_the_set():
    (first, first_jwk), (second, second_jwk) = kidless_key(), kidless_key()
    stranger, _ = kidless_key()
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(first_jwk, second_jwk)
        verifier = JWTVerifier(jwks_url=endpoint.url, audience=AUDIENCE)
        for key in (first, second):
            assert verifier.verify(token(key))["sub"] == "client-1"
            assert (await verifier.averify(token(key)))["sub"] == "client-1"
        with pytest.raises(HTTPException) as refused:
            await verifier.averify(token(stranger))
        assert refused.value.status_code == 401 and "InvalidSignatureError" in refused.value.detail
        # An expired token signed with the second key is expired (its own refusal), not a wrong signature.
        with pytest.raises(HTTPException) as expired:
            await verifier.averify(token(second, exp=int(time.time()) - 600))
        assert expired.value.detail == "The token has expired."
        assert endpoint.requests == 1


def test_the_kidless_keys_tried_are_bounded():
    jwks = [kidless_key()[1] for _ in range(JWKSKeys.MAX_KIDLESS + 2)]
    with JWKSEndpoint(b"") as endpoint:
        endpoint.serve(*jwks)
        keys = JWKSKeys(endpoint.url, timeout=5)
        assert len(keys.keys(None)) == JWKSKeys.MAX_KIDLESS
        assert keys.key(None).key_id is None


# -- 2: exp, nbf and iat must be JSON numbers --------------------------------------------------------------


SECRET = "round-6f-secret-0123456789abcdef0123456789"


@pytest.mark.parametrize("claims", [
    {"exp": str(int(time.time()) + 10 * 365 * 86400)},  # (made at collection: far ahead)
    {"nbf": str(int(time.time()) - 10)},
    {"iat": str(int(time.time()))},
    {"iat": True},
], ids=["exp-string", "nbf-string", "iat-string", "iat-true"])
def test_a_date_claim_that_is_not_a_number_is_a_401(claims):
    verifier = JWTVerifier(key=SECRET, algorithms=["HS256"], audience=AUDIENCE)
    with pytest.raises(HTTPException) as refused:
        verifier.verify(token(SECRET, "HS256", **claims))
    assert refused.value.status_code == 401
    assert refused.value.detail == f"The token is invalid (its {next(iter(claims))} claim is not a number)."
    assert verifier.verify(token(SECRET, "HS256", exp=time.time() + 600.5, iat=int(time.time())))["sub"]


# -- 3: plain JSON data is JSON text, whatever its keys; the SDK's own objects as they are ------------------


def library() -> Any:
    fusion = MCPFusion("library")

    @fusion.resource_template("library://books/{id}/toc", mime_type="application/json")
    async def toc(id: str) -> dict:
        """A book's table of contents."""
        return {"title": "Dune", "contents": ["Book I: Dune", "Book II: Muad'Dib"]}

    @fusion.resource("library://links", mime_type="application/json")
    def links() -> list:
        """Web links."""
        return [{"uri": "https://example.com/a", "label": "A"}]

    @fusion.resource("library://note", mime_type="application/json")
    def note() -> dict:
        """A note."""
        return {"contents": "hello", "owner": "x"}

    @fusion.resource("library://pair")
    def pair() -> mt.ReadResourceResult:
        """Two contents and a _meta, as the SDK types them."""
        return mt.ReadResourceResult(meta={"origin": "shelf"}, contents=[
            mt.TextResourceContents(uri="library://pair#a", mime_type="text/plain", text="a"),
            mt.BlobResourceContents(uri="library://pair#b", mime_type="image/png", blob="AAAA")])

    @fusion.resource("library://one")
    def one() -> mt.TextResourceContents:
        """One content object."""
        return mt.TextResourceContents(uri="library://one", mime_type="text/csv", text="a,b")

    @fusion.resource("library://blobs")
    def blobs() -> list:
        """A list of content objects."""
        return [mt.BlobResourceContents(uri="library://blobs#1", blob="AAAA")]

    @fusion.resource_template("library://books/{id}", mime_type="application/json")
    async def book(id: str) -> dict:
        """One book, or NOT_FOUND."""
        if id != "b1":
            raise ToolError("NOT_FOUND", f"Book {id!r} was not found.")
        return {"title": "Dune"}

    return fusion.build_app()


async def test_plain_json_data_is_sent_as_json_text_and_the_sdk_client_reads_it():
    app = library()
    http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1")
    async with Client(streamable_http_client("http://127.0.0.1/mcp", http_client=http)) as client:
        for uri, data in (("library://books/b1/toc", {"title": "Dune", "contents": ["Book I: Dune",
                                                                                   "Book II: Muad'Dib"]}),
                          ("library://links", [{"uri": "https://example.com/a", "label": "A"}]),
                          ("library://note", {"contents": "hello", "owner": "x"})):
            (content,) = (await client.read_resource(uri)).contents
            assert (str(content.uri), content.mime_type, json.loads(content.text)) == (uri, "application/json", data)
        pair = await client.read_resource("library://pair")
        assert [(str(c.uri), c.mime_type) for c in pair.contents] == [("library://pair#a", "text/plain"),
                                                                      ("library://pair#b", "image/png")]
        assert pair.contents[0].text == "a" and pair.contents[1].blob == "AAAA"
        assert (pair.meta or {}).get("origin") == "shelf"
        (one,) = (await client.read_resource("library://one")).contents
        assert (one.mime_type, one.text) == ("text/csv", "a,b")
        (blob,) = (await client.read_resource("library://blobs")).contents
        assert (str(blob.uri), blob.blob) == ("library://blobs#1", "AAAA")


# -- 4: a template's NOT_FOUND is -32002 on 2025-11-25, as an unknown URI is ----------------------------------


VERSION = "2025-11-25"
MODERN = "2026-07-28"
JSON_ONLY = {"accept": "application/json", "content-type": "application/json"}


def rpc(method: str, params: dict[str, Any], id: int = 2) -> dict[str, Any]:  # noqa: A002
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


async def test_a_template_that_finds_nothing_answers_the_missing_resource_code_of_each_wire():
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=library()), base_url="http://127.0.0.1") as c:
        r = await c.post("/mcp", headers=JSON_ONLY, json=rpc("initialize", {
            "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}, 1))
        headers = {**JSON_ONLY, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        await c.post("/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        missing = "library://books/b9"
        for method in ("resources/read", "resources/subscribe"):
            error = (await c.post("/mcp", headers=headers, json=rpc(method, {"uri": missing}))).json()["error"]
            assert error == {"code": -32002, "message": "Book 'b9' was not found.",
                             "data": {"code": "NOT_FOUND", "uri": missing}}, method
            unknown = (await c.post("/mcp", headers=headers, json=rpc(method, {"uri": "library://nope"}))).json()
            assert unknown["error"]["code"] == -32002
        found = (await c.post("/mcp", headers=headers, json=rpc("resources/read", {"uri": "library://books/b1"})))
        assert json.loads(found.json()["result"]["contents"][0]["text"]) == {"title": "Dune"}
        # 2026-07-28 keeps -32602 for both.
        params = {"uri": missing, "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN,
                                            "io.modelcontextprotocol/clientCapabilities": {}}}
        r = await c.post("/mcp", json=rpc("resources/read", params), headers={
            **JSON_ONLY, "mcp-protocol-version": MODERN, "mcp-method": "resources/read", "mcp-name": missing})
        assert r.json()["error"]["code"] == -32602


# -- 5: lifespan failures say where in the app's files; `serve` says it once ----------------------------------


BAD_START = '''from contextlib import asynccontextmanager
from fastapi import FastAPI
from mcpfusion import MCPFusion

@asynccontextmanager
async def life(app):
    raise ConnectionError("postgresql://app:hunter2@db/billing refused")
    yield

fusion = MCPFusion("x")
app = FastAPI(lifespan=life)
fusion.mount(app)
'''

BAD_STOP = BAD_START.replace('''    raise ConnectionError("postgresql://app:hunter2@db/billing refused")
    yield''', '''    yield
    raise RuntimeError("flush failed")''')


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mcpfusion.cli", *args], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=60)


def test_lifespan_failures_name_the_line_of_the_app_that_raised(tmp_path):
    (tmp_path / "badstart.py").write_text(BAD_START)
    (tmp_path / "badstop.py").write_text(BAD_STOP)
    done = cli(tmp_path, "call", "badstart:app", "t", "a", "--json", "{}")
    assert done.returncode == 2
    # (the one error line; a warning the start-up logged before it, such as a missing signing key, may precede it)
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert errors == ["mcpfusion: error: starting badstart:app failed (its lifespan start-up raised): "
                      "ConnectionError: postgresql://app:***@db/billing refused (at badstart.py:7)"], done.stderr
    done = cli(tmp_path, "call", "badstop:app", "x", "nothing", "--json", "{}")
    assert "stopping badstop:app failed (its lifespan shutdown raised): RuntimeError: flush failed " \
           "(at badstop.py:8)" in done.stderr, done.stderr


def test_serve_says_a_failed_start_up_in_one_error_line(tmp_path):
    (tmp_path / "badstart.py").write_text(BAD_START)
    done = cli(tmp_path, "serve", "badstart:app", "--host", "127.0.0.1", "--port", "0")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "ERROR" in line or "error" in line]
    assert errors == ["mcpfusion: error: starting badstart:app failed (its lifespan start-up raised): "
                      "ConnectionError: postgresql://app:***@db/billing refused (at badstart.py:7)"], done.stderr


# -- 6: an empty or relative XDG_CONFIG_HOME is ignored -----------------------------------------------------


@pytest.mark.parametrize("value", ["", "relative/config"])
def test_an_empty_or_relative_xdg_config_home_means_dot_config(tmp_path, value):
    home = tmp_path / "home"
    found = default_config_path("claude-desktop", home=home, platform="linux", environ={"XDG_CONFIG_HOME": value})
    assert found == home / ".config" / "Claude" / "claude_desktop_config.json"
    absolute = tmp_path / "xdg"
    assert default_config_path("claude-desktop", home=home, platform="linux",
                               environ={"XDG_CONFIG_HOME": str(absolute)}) == absolute / "Claude" / \
        "claude_desktop_config.json"
    windows = default_config_path("claude-desktop", home=home, platform="win32", environ={"APPDATA": ""})
    assert windows == home / "AppData" / "Roaming" / "Claude" / "claude_desktop_config.json"


def test_install_with_an_empty_xdg_config_home_writes_under_home(tmp_path):
    (tmp_path / "first.py").write_text("from mcpfusion import MCPFusion\nfusion = MCPFusion('first')\n"
                                       "app = fusion.build_app()\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": ""}
    done = subprocess.run([sys.executable, "-m", "mcpfusion.cli", "install", "claude-desktop", "first:app"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "home" / ".config" / "Claude" / "claude_desktop_config.json").is_file()
    assert not (tmp_path / "Claude").exists()
