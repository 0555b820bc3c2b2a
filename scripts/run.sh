#!/usr/bin/env bash
# Builds lockproxy (RelWithDebInfo, build/) and runs it with the given
# arguments. Without --upstream it first starts a throw-away redis-server
# (port 6379 if free, else a free port) in a temp dir, points the proxy at
# it, and stops it when the proxy exits. Listens on the proxy's default
# address (127.0.0.1:7379) unless --listen is given.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/build/lockproxy"

"$ROOT/scripts/deps.sh"
log=$(mktemp)
if ! { cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
    cmake --build "$ROOT/build" -j"$(nproc)" --target lockproxy; } >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "run.sh: build failed" >&2
    exit 1
fi
rm -f "$log"

need_redis=1
for arg in "$@"; do
    case "$arg" in
    --upstream | --upstream=* | --help | --version) need_redis=0 ;;
    esac
done
if [ "$need_redis" -eq 0 ]; then
    exec "$BIN" "$@"
fi

# True if something accepts connections on 127.0.0.1:$1.
port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_port() {
    local port=6379 tries=0
    while port_busy "$port"; do
        tries=$((tries + 1))
        if [ "$tries" -gt 50 ]; then
            echo "run.sh: no free port for redis-server" >&2
            return 1
        fi
        port=$((20000 + RANDOM % 40000))
    done
    echo "$port"
}

tmp=$(mktemp -d)
redis_pid=
proxy_pid=
# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    if [ -n "$proxy_pid" ]; then
        kill -TERM "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
    fi
    if [ -n "$redis_pid" ]; then
        kill -TERM "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port=$(pick_port)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$tmp" \
    --daemonize no --logfile "$tmp/redis.log" </dev/null &
redis_pid=$!
for _ in $(seq 100); do
    if [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ]; then
        break
    fi
    if ! kill -0 "$redis_pid" 2>/dev/null; then
        cat "$tmp/redis.log" >&2
        echo "run.sh: redis-server exited" >&2
        exit 1
    fi
    sleep 0.1
done
echo "run.sh: redis-server on 127.0.0.1:$port (data in $tmp, stopped on exit)" >&2

status=0
"$BIN" --upstream "redis://127.0.0.1:$port" "$@" &
proxy_pid=$!
wait "$proxy_pid" || status=$?
proxy_pid=
exit "$status"
