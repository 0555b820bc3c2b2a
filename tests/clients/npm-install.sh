#!/usr/bin/env bash
# Installs the node client libraries the client tests use (node-redis and
# ioredis, pinned) from npm into CACHE/node<major>/ unless already there,
# and prints the node_modules directory. Versions by Node.js major: Node
# 20+ gets the current ones (redis 6.3.1, ioredis 6.0.0, both need Node
# 20), Node 18-19 (Debian 12's nodejs) the last that support it (redis
# 5.9.0, ioredis 5.9.3). Exit status 77, saying why, when Node.js or npm is
# missing, too old, or the registry cannot be reached.
set -euo pipefail

CACHE=${1:?usage: npm-install.sh CACHE_DIR}

skip() {
    echo "SKIP: $*" >&2
    exit 77
}

command -v node >/dev/null || skip "Node.js is not installed (scripts/deps.sh installs nodejs)"
command -v npm >/dev/null || skip "npm is not installed (scripts/deps.sh installs npm)"
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -ge 20 ]; then
    pkgs=(redis@6.3.1 ioredis@6.0.0)
elif [ "$major" -ge 18 ]; then
    pkgs=(redis@5.9.0 ioredis@5.9.3)
else
    skip "Node.js $(node --version) is too old: node-redis 5 needs Node.js 18 or newer"
fi

dir=$CACHE/node$major
stamp=$dir/installed-$(IFS=_ && echo "${pkgs[*]}")
if [ ! -e "$stamp" ]; then
    mkdir -p "$dir"
    [ -e "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
    if ! (cd "$dir" && timeout 300 npm install --no-audit --no-fund --loglevel=error \
        "${pkgs[@]}") >"$dir/npm.log" 2>&1; then
        cat "$dir/npm.log" >&2
        skip "npm install ${pkgs[*]} failed (is the npm registry reachable?)"
    fi
    touch "$stamp"
fi
echo "$dir/node_modules"
