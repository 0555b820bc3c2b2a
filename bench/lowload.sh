#!/usr/bin/env bash
# The low-load hop (issue 13, BENCHMARKS.md "Low-load hop"): one client
# doing sequential acquire/release pairs, through lockproxy and directly to
# Redis, side by side, for each --io backend. Per round and backend:
#   syscalls  the proxy's syscalls, context switches and io_uring_enter /
#             epoll_wait / epoll_ctl / sendto / recvfrom counts (perf stat
#             on its pid) over a window of a 1-client proxy run, divided by
#             the requests it served in that window (INFO
#             total_commands_processed delta): noise-free;
#   latency   lockproxy-bench uncontended --clients 1 --targets proxy,direct:
#             acquire p50 through the proxy and direct, and their ratio
#             (timings drift between runs on a shared machine; the ratio in
#             one run is the figure to compare).
# Uses the build in LP_LL_BUILD (default build/), a throw-away redis-server
# and lockproxy on free ports (stopped on exit).
#
# Usage: bench/lowload.sh   (LP_LL_ROUNDS 3, LP_LL_SECONDS 3, LP_LL_IO
#                            "uring epoll", LP_LL_POOL 2)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${LP_LL_BUILD:-$ROOT/build}
ROUNDS=${LP_LL_ROUNDS:-3}
SECS=${LP_LL_SECONDS:-3}
IOS=${LP_LL_IO:-"uring epoll"}
POOL=${LP_LL_POOL:-2}
PROXY=$BUILD/lockproxy
BENCH=$BUILD/lockproxy-bench
EVENTS=raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_io_uring_enter
EVENTS=$EVENTS,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl
EVENTS=$EVENTS,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom

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

free_port() {
    local port
    for _ in $(seq 100); do
        port=$((20000 + RANDOM % 20000))
        if ! ss -Htln "sport = :$port" | grep -q .; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

wait_ping() {
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "no PONG on port $1" >&2
    return 1
}

served() {
    redis-cli -p "$1" info | awk -F: '/^total_commands_processed:/ {print $2 + 0}'
}

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --logfile "$tmp/redis.log" </dev/null &
redis_pid=$!
wait_ping "$redis_port"

printf '%-6s %-5s %9s %9s %8s %8s %8s %8s %8s %9s %9s %6s\n' round io 'sys/req' 'csw/req' \
    'enter' 'ep_wait' 'ep_ctl' 'sendto' 'recvfrom' 'p50 prx' 'p50 dir' ratio
for round in $(seq "$ROUNDS"); do
    for io in $IOS; do
        proxy_port=$(free_port)
        "$PROXY" --listen "127.0.0.1:$proxy_port" --upstream "redis://127.0.0.1:$redis_port" \
            --io "$io" --pool-size "$POOL" --log-level warn </dev/null 2>"$tmp/proxy.log" &
        proxy_pid=$!
        wait_ping "$proxy_port"
        b=("$BENCH" uncontended --clients 1 --proxy "127.0.0.1:$proxy_port"
            --redis "127.0.0.1:$redis_port" --warmup 0.5)
        # Syscalls: a window in the middle of a proxy-only run.
        "${b[@]}" --targets proxy --duration $((SECS + 2)) >"$tmp/sys.out" 2>&1 &
        bench_pid=$!
        sleep 1.5
        # The request counts are read inside the perf window (perf takes a
        # while to attach).
        perf stat -x, -e "$EVENTS" -p "$proxy_pid" -o "$tmp/perf.txt" -- \
            bash -c "$(declare -f served); served $proxy_port >$tmp/n0; sleep $SECS;
                     served $proxy_port >$tmp/n1"
        wait "$bench_pid"
        reqs=$(($(cat "$tmp/n1") - $(cat "$tmp/n0")))
        # Latency: proxy then direct in one run.
        "${b[@]}" --targets proxy,direct --duration "$SECS" --kv "$tmp/kv.txt" >"$tmp/lat.out" 2>&1
        kill -TERM "$proxy_pid"
        wait "$proxy_pid" || true
        proxy_pid=
        awk -F, -v r="$round" -v io="$io" -v reqs="$reqs" -v kv="$tmp/kv.txt" '
            { c[$3] = $1 }
            END {
                while ((getline line < kv) > 0) {
                    split(line, f, " ")
                    if (f[2] == "p50_us") p[f[1]] = f[3]
                }
                printf "%-6s %-5s %9.2f %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %9.1f %9.1f %6.2f\n",
                    r, io, c["raw_syscalls:sys_enter"] / reqs, c["context-switches"] / reqs,
                    c["syscalls:sys_enter_io_uring_enter"] / reqs,
                    c["syscalls:sys_enter_epoll_wait"] / reqs,
                    c["syscalls:sys_enter_epoll_ctl"] / reqs, c["syscalls:sys_enter_sendto"] / reqs,
                    c["syscalls:sys_enter_recvfrom"] / reqs, p["proxy"], p["direct"],
                    p["proxy"] / p["direct"]
            }' "$tmp/perf.txt"
    done
done
