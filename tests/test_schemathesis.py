"""schemathesis (`--checks all`) against the reference service's /openapi.json: the OpenAPI document is true.

A bounded run (deterministic generation, a few examples per operation) on a real uvicorn server, with and
without credentials (the `ignored_auth` check sends calls without them and expects the documented 401)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from tests.service_kit import build, serve

EXAMPLES = 10


# Rules a JSON Schema cannot state, so a schema-valid call may break them (422 VALIDATION_ERROR naming the field):
# create_invoice's due date must fall between today (the issue date) and ten years after it.
DATE_RULES = {"billing_create_invoice"}


def confirmation_config(app, path: Path) -> Path:
    """Actions declared `confirm=True` answer a first, schema-valid call with 428 and a token to send back
    (`_confirm`): the documented two-step protocol, so 428 is an expected status of theirs (and only theirs).
    Actions with a rule relative to today (`DATE_RULES`) may answer 422 to a schema-valid call. A paginated
    action answers 400 to a cursor it never issued (any string is schema-valid; only the server knows its own).
    Strings holding NUL are not generated (see below)."""
    # Text the service stores refuses NUL (Postgres text cannot hold it) with a clear 422 its schemas do not
    # spell out (a pattern would cost every agent tokens): such strings are not generated.
    lines = ["[generation]", "allow-x00 = false", ""]
    for action in app.state.mcpfusion.registry.actions():
        operation = f"{action.tool.name}_{action.name}"
        extra = ['"428"'] if action.confirm else ['"422"'] if operation in DATE_RULES else []
        if action.paginate:
            extra.append('"400"')
        if not extra:
            continue
        # (a readonly action is served by GET too, under its own operation id)
        for operation_id in [operation, f"{operation}_get"] if action.readonly else [operation]:
            lines += ["[[operations]]", f'include-operation-id = "{operation_id}"',
                      'checks.positive_data_acceptance.expected-statuses = '
                      f'["2xx", "3xx", "401", "403", "404", "409", {", ".join(extra)}, "429"]', ""]
    path.write_text("\n".join(lines))
    return path


def test_openapi_contract_holds(tmp_path):
    schemathesis = Path(sys.executable).parent / "schemathesis"
    app = build(tmp_path)
    config = confirmation_config(app, tmp_path / "schemathesis.toml")
    with serve(app) as base:
        operations = sum(len(methods) for methods in httpx.get(f"{base}/openapi.json").json()["paths"].values())
        run = subprocess.run(
            [str(schemathesis), "--config-file", str(config), "run", f"{base}/openapi.json", "--checks", "all",
             "--max-examples", str(EXAMPLES),
             "--generation-deterministic", "--header", "Authorization: Bearer demo-admin", "--workers", "1",
             "--no-color", "--report-dir", str(tmp_path / "report")],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-6000:]  # exit status 0: no check failed on any operation
    assert f"Tested: {operations}" in output, output[-3000:]  # and every documented operation was exercised
