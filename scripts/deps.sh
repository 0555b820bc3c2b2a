#!/usr/bin/env bash
# Installs what lockproxy needs to build and test on Debian 12: the
# toolchain, the libraries (hiredis, liburing, jemalloc, OpenSSL, Google
# Benchmark), openssl (the command, to make certificates by hand),
# redis-server for the integration tests, iproute2 (`ip`: the keepalive
# test puts a client in a network namespace of its own), clang with its
# runtime (libFuzzer, sanitizers) for the fuzz targets, and nutcracker
# (twemproxy), the proxy the benchmarks compare with, the client
# libraries' tests' runtimes (python3-redis; Go with Debian's redigo, for
# clients/go, built offline; Node.js and npm when no node is installed),
# netcat-openbsd (`nc`, which README's inline-command example uses;
# tests/docs/run_readme.py runs it), and iptables (kernel partitions in
# tests/integration/test_netdrop.c, skipped without it). Idempotent and quiet:
# it only runs apt-get (update + install) when a package is missing, with
# sudo only when not root. When another apt-get or dpkg holds the package
# lock (a fresh VM running unattended-upgrades does), it says so and waits
# for it, up to LP_DEPS_LOCK_TIMEOUT seconds (default 600), instead of
# failing at once. It never starts or stops the system redis
# service; Debian's nutcracker service stays down too (it needs
# /etc/nutcracker/nutcracker.yml, which the package does not ship), and the
# bench runs its own nutcracker. liblua5.1-0-dev is test-only: the lock
# engine simulator (tests/sim) runs the proxy's Lua scripts in it.
set -euo pipefail

PACKAGES=(build-essential cmake pkg-config libhiredis-dev liburing-dev libjemalloc-dev libssl-dev
    libbenchmark-dev redis-server redis-tools iproute2 clang libclang-rt-dev nutcracker openssl
    python3-redis netcat-openbsd golang-go golang-github-gomodule-redigo-dev liblua5.1-0-dev
    iptables)
# Node.js for the ioredis and node-redis tests (tests/clients/): Debian's,
# unless a node and npm are already installed (e.g. a newer Node.js).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(nodejs npm)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps.sh: missing ${missing[*]} and no apt-get (Debian 12 expected)" >&2
    exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
    sudo=(sudo)
fi

echo "deps.sh: installing ${missing[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
LOCK_TIMEOUT=${LP_DEPS_LOCK_TIMEOUT:-600}
lock_deadline=$((SECONDS + LOCK_TIMEOUT))

# Runs apt-get "$@" quietly. While another package manager holds the dpkg
# or the lists lock, apt-get waits for the dpkg lock itself
# (DPkg::Lock::Timeout) and this loop retries what it does not wait for
# (apt-get update's lists lock), saying who holds it, every 30 s, until
# the deadline. Returns apt-get's status, its output in $log.
apt() {
    local next_say=$SECONDS left
    while :; do
        left=$((lock_deadline - SECONDS))
        [ "$left" -gt 0 ] || left=1
        if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o "DPkg::Lock::Timeout=$left" \
            "$@" </dev/null >"$log" 2>&1; then
            return 0
        fi
        if ! grep -qE 'Could not get lock|Unable to (acquire|lock)|is another process using it' \
            "$log"; then
            return 1
        fi
        if [ "$SECONDS" -ge "$lock_deadline" ]; then
            echo "deps.sh: gave up after ${LOCK_TIMEOUT} s waiting for the package lock" \
                "(LP_DEPS_LOCK_TIMEOUT):" >&2
            return 1
        fi
        if [ "$SECONDS" -ge "$next_say" ]; then
            echo "deps.sh: another apt-get or dpkg holds the package lock; waiting" \
                "(up to $((lock_deadline - SECONDS)) s more): $(grep -m1 -E 'lock' "$log")"
            next_say=$((SECONDS + 30))
        fi
        sleep 2
    done
}

if ! apt update -qq || ! apt install -y -qq --no-install-recommends "${missing[@]}"; then
    cat "$log" >&2
    echo "deps.sh: apt-get failed" >&2
    exit 1
fi
echo "deps.sh: installed ${missing[*]}"
