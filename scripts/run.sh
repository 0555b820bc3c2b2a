#!/usr/bin/env bash
# Builds lockproxy (RelWithDebInfo, build/) and runs it with the given
# arguments. Without --upstream it first starts a throw-away redis-server
# (port 6379 if free, else a free port) in a temp dir, points the proxy at
# it, and stops it when the proxy exits. Listens on the proxy's default
# address (127.0.0.1:7379) unless --listen is given. Each set-up step is
# announced on stderr with how long it took (the build with a line every
# 15 s, scripts/progress.sh), and the set-up's total before the proxy starts.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN="$ROOT/build/lockproxy"
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
T0=$SECONDS

echo "run.sh: [1/3] dependencies (scripts/deps.sh)" >&2
"$ROOT/scripts/deps.sh"
t_deps=$((SECONDS - T0))
echo "run.sh: [2/3] building lockproxy into build/ (RelWithDebInfo)" >&2
log=$(mktemp)
t=$SECONDS
# shellcheck disable=SC2317 # run through lp_progress_run
build() {
    cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
        cmake --build "$ROOT/build" -j"$(nproc)" --target lockproxy
}
if ! lp_progress_run "run.sh: build" "$log" build; then
    cat "$log" >&2
    rm -f "$log"
    echo "run.sh: build failed" >&2
    exit 1
fi
rm -f "$log"
t_build=$((SECONDS - t))

need_redis=1
for arg in "$@"; do
    case "$arg" in
    --upstream | --upstream=* | --help | --version) need_redis=0 ;;
    esac
done
if [ "$need_redis" -eq 0 ]; then
    echo "run.sh: set-up done in $((SECONDS - T0)) s (dependencies ${t_deps} s, build" \
        "${t_build} s); starting lockproxy" >&2
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

echo "run.sh: [3/3] starting a throw-away redis-server" >&2
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
echo "run.sh: set-up done in $((SECONDS - T0)) s (dependencies ${t_deps} s, build" \
    "${t_build} s); starting lockproxy" >&2

status=0
"$BIN" --upstream "redis://127.0.0.1:$port" "$@" &
proxy_pid=$!
wait "$proxy_pid" || status=$?
proxy_pid=
exit "$status"
