#!/usr/bin/env bash
# The low-load hop (issue 13, BENCHMARKS.md "Low-load hop"): one client
# doing sequential acquire/release pairs, through lockproxy and directly to
# Redis, side by side, for each --io backend. Per round and backend:
#   syscalls  the proxy's syscalls, context switches and io_uring_enter /
#             epoll_wait / epoll_ctl / sendto / recvfrom counts, and its CPU
#             time (task-clock), from perf stat on its pid over a window of
#             a 1-client proxy run, divided by the requests it served in
#             that window (INFO total_commands_processed delta); the counts
#             are noise-free, the CPU time is not;
#   latency   lockproxy-bench uncontended --clients 1 --targets proxy,direct:
#             acquire p50 through the proxy and direct, and their ratio
#             (timings drift between runs on a shared machine; the ratio in
#             one run is the figure to compare).
# Uses the build in LP_LL_BUILD (default build/), a throw-away redis-server
# and lockproxy on free ports (stopped on exit). LP_LL_BASE=/path/lockproxy
# adds, in every round, the same rows for that (older) binary first,
# labelled "base", so a change is compared inside one run.
#
# Usage: bench/lowload.sh   (LP_LL_ROUNDS 3, LP_LL_SECONDS 3, LP_LL_IO
#                            "uring epoll", LP_LL_POOL 2, LP_LL_BASE)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${LP_LL_BUILD:-$ROOT/build}
ROUNDS=${LP_LL_ROUNDS:-3}
SECS=${LP_LL_SECONDS:-3}
IOS=${LP_LL_IO:-"uring epoll"}
POOL=${LP_LL_POOL:-2}
PROXIES="new=$BUILD/lockproxy"
[ -z "${LP_LL_BASE:-}" ] || PROXIES="base=$LP_LL_BASE $PROXIES"
BENCH=$BUILD/lockproxy-bench
EVENTS=task-clock,raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_io_uring_enter
EVENTS=$EVENTS,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl
EVENTS=$EVENTS,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom

# shellcheck source=bench/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"

wait_ping() {
    for _ in $(seq 400); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "no PONG on port $1" >&2
    tail -n 3 "$tmp"/*.log >&2
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

# One row: backend $1, build label $2, binary $3.
measure() {
    local io=$1 label=$2 bin=$3 bench_pid reqs b
    proxy_port=$(free_port)
    "$bin" --listen "127.0.0.1:$proxy_port" --upstream "redis://127.0.0.1:$redis_port" \
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
    awk -F, -v r="$ROUND" -v io="$io" -v label="$label" -v reqs="$reqs" -v kv="$tmp/kv.txt" '
        { c[$3] = $1 }
        END {
            while ((getline line < kv) > 0) {
                split(line, f, " ")
                if (f[2] == "p50_us") p[f[1]] = f[3]
            }
            printf "%-6s %-5s %-5s %8.2f %9.2f %9.2f %8.2f %8.2f %8.2f %8.2f %8.2f %9.1f %9.1f %6.2f\n",
                r, io, label, c["task-clock"] * 1000 / reqs, c["raw_syscalls:sys_enter"] / reqs, c["context-switches"] / reqs,
                c["syscalls:sys_enter_io_uring_enter"] / reqs,
                c["syscalls:sys_enter_epoll_wait"] / reqs,
                c["syscalls:sys_enter_epoll_ctl"] / reqs, c["syscalls:sys_enter_sendto"] / reqs,
                c["syscalls:sys_enter_recvfrom"] / reqs, p["proxy"], p["direct"],
                p["proxy"] / p["direct"]
        }' "$tmp/perf.txt"
}

printf '%-6s %-5s %-5s %8s %9s %9s %8s %8s %8s %8s %8s %9s %9s %6s\n' round io build 'cpu us' 'sys/req' 'csw/req' \
    'enter' 'ep_wait' 'ep_ctl' 'sendto' 'recvfrom' 'p50 prx' 'p50 dir' ratio
for round in $(seq "$ROUNDS"); do
    for io in $IOS; do
        for px in $PROXIES; do
            ROUND=$round measure "$io" "${px%%=*}" "${px#*=}"
        done
    done
done
