#!/usr/bin/env bash
# Proxy CPU per lock+unlock pair next to Redis's (issue 23 item 5,
# BENCHMARKS.md "Proxy CPU per pair"). Per round, backend and client count,
# a fresh lockproxy and one lockproxy-bench run of `uncontended --targets
# proxy,direct`; from its --kv output:
#   proxy us   the proxy's CPU per pair (/proc/PID/stat utime + stime)
#   sys %      its kernel share (stime)
#   R/px us    Redis's CPU per pair behind the proxy (INFO cpu)
#   px/R/px    proxy us / R/px us (at or below 1: the goal of issue 23)
#   R/dir us   Redis's CPU per pair serving the same clients directly
#              (Redisson's scripts): the same client socket work
#   px/Rdir    proxy us / R/dir us
#   kpairs/s   throughput, proxy and direct
# LP_CP_HOP "tcp unix" is the client hop: clients reach the proxy (and
# Redis, for the direct target) over loopback TCP or over a Unix domain
# socket (lockproxy --listen unix:///PATH, redis-server --unixsocket).
# LP_CP_UPSTREAM "tcp" (or "unix", or both) is the proxy's own hop to
# Redis: --upstream redis://127.0.0.1:PORT or unix:///PATH (a sidecar
# beside a local Redis; not the common case, report it apart).
# LP_CP_RATE=N runs open loop at N pairs/s instead (--rate): the CPU per
# pair at a rate the machine sustains, without the queueing of a saturated
# closed loop (which, past TCP's 40 ms delayed-ACK timeout, adds ACKs).
# CPU times are tick-sampled (HZ) and the machine may be shared: compare
# the ratio inside one row, over several rounds.
# Uses the build in LP_CP_BUILD (default build/), a throw-away redis-server
# and lockproxy on free ports (stopped on exit). LP_CP_BASE=/path/lockproxy
# adds the same row for that (older) binary first, labelled "base".
# At the end, per row: the medians over the rounds of proxy us, R/px us
# and px/R/px, the per-round px/R/px, and whether the median meets the
# goal (px/R/px at or below 1).
#
# Usage: bench/cpupair.sh   (LP_CP_ROUNDS 3, LP_CP_SECONDS 3,
#                            LP_CP_IO "uring epoll", LP_CP_CLIENTS "1000 100",
#                            LP_CP_HOP "tcp unix", LP_CP_UPSTREAM tcp,
#                            LP_CP_POOL 2, LP_CP_BASE)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${LP_CP_BUILD:-$ROOT/build}
ROUNDS=${LP_CP_ROUNDS:-3}
SECS=${LP_CP_SECONDS:-3}
IOS=${LP_CP_IO:-"uring epoll"}
CLIENTS=${LP_CP_CLIENTS:-"1000 100"}
HOPS=${LP_CP_HOP:-"tcp unix"}
UPSTREAMS=${LP_CP_UPSTREAM:-tcp}
RATE=()
[ -z "${LP_CP_RATE:-}" ] || RATE=(--rate "$LP_CP_RATE")
POOL=${LP_CP_POOL:-2}
PROXIES="new=$BUILD/lockproxy"
[ -z "${LP_CP_BASE:-}" ] || PROXIES="base=$LP_CP_BASE $PROXIES"
BENCH=$BUILD/lockproxy-bench

# shellcheck source=bench/procs.sh
. "$(dirname "${BASH_SOURCE[0]}")/procs.sh"

# wait_ping -p PORT | -s PATH
wait_ping() {
    for _ in $(seq 400); do
        [ "$(redis-cli "$1" "$2" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    echo "no PONG on $2" >&2
    tail -n 3 "$tmp"/*.log >&2
    return 1
}

redis_port=$(free_port)
redis_sock=$tmp/redis.sock
redis-server --port "$redis_port" --bind 127.0.0.1 --unixsocket "$redis_sock" \
    --unixsocketperm 700 --save '' --appendonly no \
    --maxclients 10000 --logfile "$tmp/redis.log" </dev/null &
redis_pid=$!
wait_ping -p "$redis_port"

# One row: backend $1, clients $2, build label $3, binary $4, client hop $5
# (tcp, unix), upstream hop $6 (tcp, unix).
measure() {
    local io=$1 n=$2 label=$3 bin=$4 hop=$5 up=$6
    local listen proxy_ep redis_ep upstream ping
    if [ "$hop" = unix ]; then
        listen="unix://$tmp/proxy.sock" proxy_ep="unix:$tmp/proxy.sock" redis_ep="unix:$redis_sock"
        ping=(-s "$tmp/proxy.sock")
    else
        proxy_port=$(free_port)
        listen="127.0.0.1:$proxy_port" proxy_ep="127.0.0.1:$proxy_port"
        redis_ep="127.0.0.1:$redis_port" ping=(-p "$proxy_port")
    fi
    upstream="redis://127.0.0.1:$redis_port"
    [ "$up" = tcp ] || upstream="unix://$redis_sock"
    "$bin" --listen "$listen" --upstream "$upstream" \
        --io "$io" --pool-size "$POOL" --log-level warn </dev/null 2>"$tmp/proxy.log" &
    proxy_pid=$!
    wait_ping "${ping[@]}"
    "$BENCH" uncontended --clients "$n" --proxy "$proxy_ep" \
        --redis "$redis_ep" --proxy-pid "$proxy_pid" --warmup 0.5 \
        --targets proxy,direct --duration "$SECS" "${RATE[@]}" --kv "$tmp/kv.txt" >"$tmp/run.out" 2>&1 || {
        echo "lockproxy-bench failed:" >&2
        tail -n 5 "$tmp/run.out" >&2
    }
    kill -TERM "$proxy_pid"
    wait "$proxy_pid" || true
    proxy_pid=
    awk -v r="$ROUND" -v io="$io" -v n="$n" -v label="$label" -v hop="$hop" -v up="$up" '
        { v[$1 " " $2] = $3 }
        END {
            pus = v["proxy proxy_cpu_us_per_acq"]; rd = v["direct redis_cpu_us_per_acq"]
            sys = v["proxy proxy_cpu_s"] > 0 ? 100 * v["proxy proxy_sys_s"] / v["proxy proxy_cpu_s"] : 0
            rp = v["proxy redis_cpu_us_per_acq"]
            printf "%-5s %-5s %5s %-4s %-4s %-5s %8.1f %5.0f %7.1f %7.2f %8.1f %8.2f %9.1f %9.1f\n",
                r, io, n, hop, up, label, pus, sys, rp, (rp > 0 ? pus / rp : 0), rd,
                (rd > 0 ? pus / rd : 0), v["proxy ops_per_sec"] / 1000, v["direct ops_per_sec"] / 1000
        }' "$tmp/kv.txt" | tee -a "$tmp/rows.txt"
}

# The medians of the rows in $tmp/rows.txt, one line per io, cli, hop, up
# and build, in the order they first ran.
summary() {
    echo "# medians of $ROUNDS round(s); goal: px/R/px at or below 1"
    printf '%-5s %5s %-4s %-4s %-5s %8s %7s %7s %-4s %s\n' io cli hop up build \
        'proxy us' 'R/px us' 'px/R/px' goal 'per-round px/R/px'
    awk '
        function median(list,    a, n, i, j, t) {
            n = split(list, a, " ")
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
                    t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
                }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        {
            k = $2 " " $3 " " $4 " " $5 " " $6
            if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
            pus[k] = pus[k] " " $7; rp[k] = rp[k] " " $9; ratio[k] = ratio[k] " " $10
        }
        END {
            for (i = 1; i <= nk; i++) {
                k = order[i]; split(k, f, " "); m = median(ratio[k])
                printf "%-5s %5s %-4s %-4s %-5s %8.1f %7.1f %7.2f %-4s [%s ]\n", f[1], f[2], f[3], f[4],
                    f[5], median(pus[k]), median(rp[k]), m, (m <= 1 ? "met" : "MISS"), ratio[k]
            }
        }' "$tmp/rows.txt"
}

echo "# $(date -u +%FT%TZ) $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?');${LP_CP_RATE:+ rate $LP_CP_RATE pairs/s;} load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-5s %-5s %5s %-4s %-4s %-5s %8s %5s %7s %7s %8s %8s %9s %9s\n' round io cli hop up build \
    'proxy us' 'sys %' 'R/px us' 'px/R/px' 'R/dir us' 'px/Rdir' 'kpairs px' 'kpairs dir'
for round in $(seq "$ROUNDS"); do
    for io in $IOS; do
        for n in $CLIENTS; do
            for up in $UPSTREAMS; do
                for hop in $HOPS; do
                    for px in $PROXIES; do
                        ROUND=$round measure "$io" "$n" "${px%%=*}" "${px#*=}" "$hop" "$up"
                    done
                done
            done
        done
    done
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
summary
