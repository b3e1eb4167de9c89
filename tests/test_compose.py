"""docker-compose.yml only references things that exist: files, images built from this project, commands,
modules, environment variables the code reads, services, and the load balancer's upstream."""

from __future__ import annotations

import importlib.util
import io
import re
import shlex
import tokenize
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
BUILT = {name: s for name, s in SERVICES.items() if "build" in s}


def string_literals() -> set[str]:
    """Every string literal of the project's code (so an environment variable name is really read)."""
    found: set[str] = set()
    for folder in ("app", "mcpfusion"):
        for path in (ROOT / folder).rglob("*.py"):
            for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
                if token.type == tokenize.STRING:
                    found.add(token.string.strip("\"'"))
    return found


def dockerfile(service: dict) -> Path:
    build = service["build"]
    context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
    return context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")


def instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def command_of(service: dict) -> list[str]:
    if "command" in service:
        command = service["command"]
        return command if isinstance(command, list) else shlex.split(command)
    cmd = [arg for op, arg in instructions(dockerfile(service)) if op == "CMD"][-1]
    return yaml.safe_load(cmd)  # the exec form is a JSON array


def test_services_are_complete():
    assert {"app", "lb", "postgres", "redis"} <= set(SERVICES)
    assert SERVICES["app"]["deploy"]["replicas"] == 3  # issue 6: three replicas, no stickiness
    app = SERVICES["app"]
    assert "redis" in app["depends_on"]
    # Every replica shares the Redis stores and the request-state signing key (any replica continues a round).
    assert app["environment"]["MCPFUSION_REDIS_URL"].startswith("redis://redis:")
    assert app["environment"]["MCPFUSION_SIGNING_KEY"]
    for name, service in SERVICES.items():
        for dependency in service.get("depends_on", []):
            assert dependency in SERVICES, f"{name} depends on unknown service {dependency}"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_build_context_and_dockerfile_sources_exist(name):
    path = dockerfile(BUILT[name])
    assert path.is_file()
    for op, arg in instructions(path):
        if op == "COPY":
            *sources, _ = [a for a in shlex.split(arg) if not a.startswith("--")]
            for source in sources:
                assert (path.parent / source).exists(), f"{path.name} copies missing {source}"
    ignored = (ROOT / ".dockerignore").read_text().split()
    for needed in ("mcpfusion", "app", "routers", "presenters", "models", "pyproject.toml"):
        assert needed not in ignored


def test_bind_mounts_exist():
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in COMPOSE.get("volumes", {}), f"{name} uses undeclared volume {source}"


@pytest.mark.parametrize("name", sorted(BUILT))
def test_commands_exist(name, tmp_path, monkeypatch):
    argv = command_of(BUILT[name])
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    if argv[0] == "mcpfusion":
        assert scripts["mcpfusion"] == "mcpfusion.cli:main"
        from mcpfusion.cli import COMMANDS, load

        assert argv[1] in COMMANDS
        monkeypatch.setenv("MCPFUSION_DB_PATH", str(tmp_path / "compose.sqlite3"))
        monkeypatch.delenv("DATABASE_URL", raising=False)
        _, fusion = load(argv[2])  # "module:attr" resolves to an app built by MCPFusion
        assert set(fusion.registry.tools) == {"billing", "customers"}
    elif argv[:2] == ["python", "-m"]:
        spec = importlib.util.find_spec(argv[2])
        assert spec is not None and Path(spec.origin).is_relative_to(ROOT), argv
        assert 'if __name__ == "__main__":' in Path(spec.origin).read_text()
    else:
        pytest.fail(f"{name}: unexpected command {argv}")


@pytest.mark.parametrize("name", sorted(BUILT))
def test_environment_variables_are_read_by_the_code(name):
    literals = string_literals()
    environment = BUILT[name].get("environment", {})
    names = list(environment) if isinstance(environment, dict) else [e.split("=", 1)[0] for e in environment]
    assert names
    for variable in names:
        assert variable in literals, f"{name} sets {variable}, which no code reads"
    dockerfile_env = [arg for op, arg in instructions(dockerfile(BUILT[name])) if op == "ENV"]
    for assignment in " ".join(dockerfile_env).split():
        variable = assignment.split("=", 1)[0]
        if variable.startswith("MCPFUSION_"):
            assert variable in literals


def test_load_balancer_points_at_the_app_replicas():
    lb = SERVICES["lb"]
    config_mount = next(v for v in lb["volumes"] if v.endswith("nginx.conf:ro"))
    config = (ROOT / config_mount.split(":", 1)[0]).read_text()
    upstreams = re.findall(r"server\s+([\w-]+):(\d+)", config)
    assert upstreams, "no upstream server in the nginx config"
    app_argv = command_of(SERVICES["app"])
    app_port = app_argv[app_argv.index("--port") + 1]
    for host, port in upstreams:
        assert host in BUILT and port == app_port
    assert "proxy_buffering off" in config  # SSE must stream through the balancer
    directives = "\n".join(line.split("#", 1)[0] for line in config.splitlines())
    assert "ip_hash" not in directives and "sticky" not in directives  # round-robin, no sticky sessions


def test_observability_profile_wires_the_collector_to_the_trace_viewer():
    collector, viewer = SERVICES["otel-collector"], SERVICES["jaeger"]
    assert collector["profiles"] == viewer["profiles"] == ["observability"]
    assert all("profiles" not in SERVICES[name] for name in ("app", "lb", "postgres", "redis"))
    config_path = next(v for v in collector["volumes"] if "otel-collector.yaml" in v).split(":", 1)[0]
    config = yaml.safe_load((ROOT / config_path).read_text())
    http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
    assert http.endswith(":4318")
    pipelines = config["service"]["pipelines"]
    assert set(pipelines) == {"traces", "metrics"}
    for pipeline in pipelines.values():
        assert pipeline["receivers"] == ["otlp"]
        for exporter in pipeline["exporters"]:
            assert exporter in config["exporters"]
    jaeger = config["exporters"][pipelines["traces"]["exporters"][0]]["endpoint"]
    assert jaeger.split(":")[0] == "jaeger" and viewer["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    # The app sends to the collector's OTLP/HTTP port when the profile's endpoint is set.
    app_env = SERVICES["app"]["environment"]
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in app_env and app_env["OTEL_SERVICE_NAME"] == "mcpfusion-billing"


def test_auth_profile_runs_the_tests_authorization_server_for_the_app():
    oauth = SERVICES["oauth"]
    assert oauth["profiles"] == ["auth"] and "profiles" not in SERVICES["app"]
    assert oauth["image"].startswith("node:22")
    # The same provider script and pinned oidc-provider as tests/oauth_server.py (scripts/oauth_provider.sh).
    pinned = re.search(r'PROVIDER_PKG="([^"]+)"', (ROOT / "scripts" / "oauth_provider.sh").read_text()).group(1)
    script = " ".join(command_of(oauth))
    assert f"npm install --no-audit --no-fund --loglevel=error {pinned} && exec node provider.mjs" in script
    mounts = {v.split(":")[1]: v.split(":")[0] for v in oauth["volumes"]}
    assert mounts[f"{oauth['working_dir']}/provider.mjs"] == "./deploy/oauth/provider.mjs"
    assert mounts[f"{oauth['working_dir']}/clients.json"] == "./deploy/oauth/clients.json"
    env, app_env = oauth["environment"], SERVICES["app"]["environment"]
    port = env["OAUTH_PORT"]
    assert f"{port}:{port}" in oauth["ports"] and env["OAUTH_HOST"] == "0.0.0.0"
    # The app trusts its keys (fetched inside the network) and its issuer; its metadata names it; the MCP
    # resource (the tokens' audience) is the one the server issues tokens for.
    assert app_env["MCPFUSION_JWT_JWKS_URL"] == f"http://oauth:{port}/jwks"
    assert app_env["MCPFUSION_JWT_ISSUER"] == env["OAUTH_ISSUER"] == f"http://localhost:{port}"
    assert app_env["MCPFUSION_AUTHORIZATION_SERVERS"] == env["OAUTH_ISSUER"]
    assert app_env["MCPFUSION_OAUTH_TOKEN_URL"] == f"{env['OAUTH_ISSUER']}/token"
    lb_port = SERVICES["lb"]["ports"][0].split(":")[0]
    assert app_env["MCPFUSION_RESOURCE_URL"] == env["OAUTH_RESOURCES"] == f"http://localhost:{lb_port}/mcp"
    assert "MCPFUSION_JWT_AUDIENCE" not in app_env  # the audience is the resource URL


async def test_the_app_on_the_compose_environment_names_the_auth_profiles_server(tmp_path):
    import httpx

    from app.main import create_app
    from app.settings import Settings, database_url

    # As compose would set it, but for values interpolated from the caller's shell (unset here).
    env = {k: str(v) for k, v in SERVICES["app"]["environment"].items() if "${" not in str(v)}
    settings = Settings.from_env(env, database_url=database_url(None, tmp_path / "compose.sqlite3"))
    app = create_app(settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost:8000") as client:
        denied = await client.post("/mcp", json={})
        metadata = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert denied.status_code == 401
    assert 'resource_metadata="http://localhost:8000/.well-known/oauth-protected-resource/mcp"' in \
        denied.headers["www-authenticate"]
    assert metadata["resource"] == SERVICES["oauth"]["environment"]["OAUTH_RESOURCES"]
    assert metadata["authorization_servers"] == [SERVICES["oauth"]["environment"]["OAUTH_ISSUER"]]
    assert app.state.jwt_verifier.audience == metadata["resource"]
