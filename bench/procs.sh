# Sourced by the bench scripts that start their own Redis and proxy
# (cpupair.sh, lowload.sh): a temporary directory ($tmp), a cleanup on exit
# that stops $proxy_pid and $redis_pid and removes it, and free_port.
# shellcheck shell=bash

tmp=$(mktemp -d)
redis_pid= proxy_pid=
cleanup() {
    for p in $proxy_pid $redis_pid; do
        kill -TERM "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT

# A TCP port nothing listens on, below the ephemeral range.
free_port() {
    local port
    for _ in $(seq 100); do
        port=$((20000 + RANDOM % 12000))
        if ! ss -Htln "sport = :$port" | grep -q .; then
            echo "$port"
            return 0
        fi
    done
    return 1
}
