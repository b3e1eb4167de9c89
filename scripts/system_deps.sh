#!/usr/bin/env bash
# Idempotent: installs the Debian packages the tests drive (chromium, redis-server, wrk, postgresql, poppler-utils)
# when absent.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# pdftoppm renders the reference service's invoice PDFs to page images (tests/browser).
command -v pdftoppm >/dev/null 2>&1 || need+=(poppler-utils)
# Postgres for tests/test_service_postgres.py (Debian keeps its binaries off PATH, in /usr/lib/postgresql/N/bin).
command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
