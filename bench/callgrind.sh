#!/usr/bin/env bash
# User-space instructions per request of lockproxy, counted by callgrind:
# repeatable where timings on a shared 2-core VM are not (issue 13's
# third target). A throw-away redis-server and the proxy under
# `valgrind --tool=callgrind` run twice, one client sending LP_CG_PAIRS_1
# (200) then LP_CG_PAIRS_2 (2200) sequential `TRYLOCK k` / `UNLOCK k` pairs
# (redis-cli, one request in flight); instructions per request are
#   (Ir of run 2 - Ir of run 1) / (2 x (LP_CG_PAIRS_2 - LP_CG_PAIRS_1))
# so start-up, connection set-up and shutdown cancel out. Prints that
# figure and the top functions (inclusive of nothing: self cost) of run 2
# per request, and keeps the callgrind outputs in LP_CG_OUT (default
# bench-results/callgrind-<date>).
# Settings: LP_CG_BUILD_DIR (build: a RelWithDebInfo build has the symbols),
# LP_CG_PROXY_ARGS (more lockproxy flags, e.g. "--passthrough off"), LP_CG_IO (epoll: valgrind does not follow io_uring's shared rings as
# faithfully; uring to count that backend: each run then ends with a
# callgrind_control dump, as valgrind holds SIGTERM back for minutes while
# the loop waits in io_uring_enter), LP_CG_TOP (15).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LP_CG_BUILD_DIR:-$ROOT/build}
N1=${LP_CG_PAIRS_1:-200}
N2=${LP_CG_PAIRS_2:-2200}
IO=${LP_CG_IO:-epoll}
TOP=${LP_CG_TOP:-15}
OUT=${LP_CG_OUT:-$ROOT/bench-results/callgrind-$(date +%Y%m%d-%H%M%S)}

command -v valgrind >/dev/null || {
    echo "callgrind.sh: valgrind is not installed (apt-get install valgrind)" >&2
    exit 1
}
if [ ! -x "$BUILD/lockproxy" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLP_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target lockproxy >/dev/null
fi
mkdir -p "$OUT"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_ping() { # PORT
    for _ in $(seq 1 600); do
        if [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ]; then return 0; fi
        sleep 0.1
    done
    echo "callgrind.sh: nothing answers on $1" >&2
    return 1
}

RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no >"$OUT/redis.log" 2>&1 &
pids+=($!)
wait_ping "$RP"

# run N: the proxy under callgrind, N pairs, then SIGTERM; prints total Ir.
run() {
    local n=$1 pp pid f="$OUT/callgrind.out.$1"
    pp=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$f" "$BUILD/lockproxy" \
        --listen "127.0.0.1:$pp" --upstream "redis://127.0.0.1:$RP" --io "$IO" \
        --log-level warn ${LP_CG_PROXY_ARGS:-} >"$OUT/proxy-$n.log" 2>&1 &
    pid=$!
    wait_ping "$pp"
    for _ in $(seq 1 "$n"); do printf 'TRYLOCK k\nUNLOCK k\n'; done |
        redis-cli -p "$pp" >"$OUT/replies-$n.txt"
    if [ "$IO" = uring ]; then
        # valgrind holds SIGTERM back while the loop waits in io_uring_enter
        # (minutes): dump the counts instead, woken by one PING (the same in
        # both runs, so it cancels), then kill.
        callgrind_control -d "$pid" >/dev/null 2>&1
        redis-cli -p "$pp" ping >/dev/null
        for _ in $(seq 1 100); do [ -s "$f.1" ] && break; sleep 0.2; done
        sleep 0.5
        kill -KILL "$pid"
        wait "$pid" 2>/dev/null || true
        mv "$f.1" "$f"
    else
        kill -TERM "$pid"
        wait "$pid" || true
    fi
    awk '/^totals:/ {print $2}' "$f"
}

I1=$(run "$N1")
I2=$(run "$N2")
REQS=$((2 * (N2 - N1)))
{
    echo "date: $(date -u +%FT%TZ) commit: $(git -C "$ROOT" rev-parse --short HEAD) io: $IO"
    echo "instructions: $I1 ($N1 pairs), $I2 ($N2 pairs)"
    awk -v a="$I1" -v b="$I2" -v r="$REQS" \
        'BEGIN {printf "instructions per request: %.0f\n", (b - a) / r}'
    echo "top functions of the $N2-pair run (self instructions, whole run):"
    callgrind_annotate --threshold=99 "$OUT/callgrind.out.$N2" 2>/dev/null |
        awk '/^-+$/ {n++; next} n >= 3 && NF' | head -n "$TOP"
} | tee "$OUT/summary.txt"
