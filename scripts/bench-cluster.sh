#!/usr/bin/env bash
# Redis Cluster benchmark: lockproxy in front of a whole cluster vs
# cluster-aware Redisson-style clients talking to the masters directly, on a
# 1-master and a 3-master cluster (BENCHMARKS.md, "Redis Cluster: 1 master
# vs 3 masters", explains the method and quotes the results).
#
# It builds Release into build-rel/ (LP_BENCH_BUILD_DIR) if the binaries are
# missing, then starts on free loopback ports (stopped on exit):
#   c1  one redis-server --cluster-enabled yes owning every slot
#       (CLUSTER ADDSLOTSRANGE 0 16383: redis-cli --cluster create wants 3);
#   c3  three redis-server --cluster-enabled yes joined by
#       redis-cli --cluster create --cluster-replicas 0 (no replicas: the
#       bench measures the masters' work, not replication);
# and a lockproxy --upstream redis-cluster://<every master> in front of each.
# For each cluster and workload (uncontended: each client its own key, the
# keys spread over the slots; contended: LP_CLUSTER_KEYS hot keys) it runs
# lockproxy-bench --cluster --targets proxy,direct, LP_CLUSTER_RUNS times:
#   proxy   LOCK/UNLOCK through that cluster's lockproxy;
#   direct  Redisson's lock scripts sent by each client to the master of its
#           key's slot (CLUSTER SLOTS read once), waiting with SSUBSCRIBE on
#           the owning shard (the scripts SPUBLISH), as Redisson does on
#           Redis 7 in its default sharded mode.
# Redis CPU and commands per acquisition are INFO deltas summed over every
# master of the cluster. Outputs (text and key/value per run, the machine,
# summary.txt) go to bench/results/cluster-<date>/ (LP_CLUSTER_OUT); the
# summary table (medians over the runs, proxy/direct and 3/1-master ratios)
# is printed at the end.
#
# Usage: scripts/bench-cluster.sh [--quick] [--help]
#   --quick  one run, 1 s measured after 0.3 s warm-up, 200 clients: about a
#            minute once built; a smoke test, not figures to quote.
#
# Settings (environment): LP_CLUSTER_RUNS (3), LP_CLUSTER_DURATION (5),
# LP_CLUSTER_WARMUP (1), LP_CLUSTER_CLIENTS (1000), LP_CLUSTER_KEYS (10),
# LP_CLUSTER_POOL (2, lockproxy --pool-size), LP_CLUSTER_LEASE_MS (30000),
# LP_CLUSTER_ONLY (subset of "c1 c3"), LP_CLUSTER_OUT, LP_BENCH_BUILD_DIR.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
QUICK=0
for arg in "$@"; do
    case $arg in
    --quick) QUICK=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "bench-cluster.sh: unknown argument '$arg' (see --help)" >&2
        exit 2
        ;;
    esac
done
Q_RUNS=3 Q_DURATION=5 Q_WARMUP=1 Q_CLIENTS=1000 Q_LEASE=30000
if [ "$QUICK" = 1 ]; then
    Q_RUNS=1 Q_DURATION=1 Q_WARMUP=0.3 Q_CLIENTS=200 Q_LEASE=5000
fi
RUNS=${LP_CLUSTER_RUNS:-$Q_RUNS}
DURATION=${LP_CLUSTER_DURATION:-$Q_DURATION}
WARMUP=${LP_CLUSTER_WARMUP:-$Q_WARMUP}
CLIENTS=${LP_CLUSTER_CLIENTS:-$Q_CLIENTS}
HOT_KEYS=${LP_CLUSTER_KEYS:-10}
POOL=${LP_CLUSTER_POOL:-2}
LEASE_MS=${LP_CLUSTER_LEASE_MS:-$Q_LEASE}
ONLY=${LP_CLUSTER_ONLY:-c1 c3}
BUILD=${LP_BENCH_BUILD_DIR:-$ROOT/build-rel}
OUT=${LP_CLUSTER_OUT:-$ROOT/bench/results/cluster-$(date -u +%Y%m%d-%H%M%S)}
BENCH=$BUILD/lockproxy-bench
PROXY=$BUILD/lockproxy

log() {
    echo "bench-cluster.sh: $*" >&2
}

tmp=$(mktemp -d)
pids=()
# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ ! -x "$BENCH" ] || [ ! -x "$PROXY" ]; then
    log "building Release into $BUILD"
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLP_BUILD_TESTS=OFF >"$tmp/build.log"
    cmake --build "$BUILD" -j"$(nproc)" --target lockproxy lockproxy-bench >>"$tmp/build.log" 2>&1 ||
        {
            tail -n 30 "$tmp/build.log" >&2
            exit 1
        }
fi
mkdir -p "$OUT"

port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A free port p below the ephemeral range with p + 10000 (the cluster bus)
# free too.
free_port() {
    local port low
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 21000 ] || low=50000
    for _ in $(seq 100); do
        port=$((10000 + RANDOM % (low - 20000)))
        if ! port_busy "$port" && ! port_busy $((port + 10000)); then
            echo "$port"
            return 0
        fi
    done
    log "no free port"
    return 1
}

wait_ping() { # PORT
    for _ in $(seq 200); do
        [ "$(redis-cli -p "$1" ping 2>/dev/null)" = PONG ] && return 0
        sleep 0.05
    done
    log "nothing answers PING on $1"
    return 1
}

# Waits until every port in $@ says cluster_state:ok and sees every slot.
wait_cluster_ok() {
    local p ok
    for _ in $(seq 300); do
        ok=1
        for p in "$@"; do
            redis-cli -p "$p" cluster info 2>/dev/null | grep -q '^cluster_state:ok' || ok=0
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.1
    done
    log "cluster on $* did not reach cluster_state:ok"
    return 1
}

# start_cluster NAME N: N masters; sets PORTS_<NAME> (space separated).
start_cluster() {
    local name=$1 n=$2 p ports=() addrs=()
    for _ in $(seq 1 "$n"); do
        p=$(free_port)
        mkdir -p "$tmp/$name-$p"
        redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
            --cluster-config-file nodes.conf --cluster-node-timeout 5000 --save '' \
            --appendonly no --dir "$tmp/$name-$p" --daemonize no \
            --logfile "$tmp/$name-$p/redis.log" </dev/null &
        pids+=($!)
        wait_ping "$p"
        ports+=("$p")
        addrs+=("127.0.0.1:$p")
    done
    if [ "$n" = 1 ]; then
        redis-cli -p "${ports[0]}" cluster addslotsrange 0 16383 >/dev/null
    else
        redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
            >"$tmp/$name-create.log" 2>&1 || {
            cat "$tmp/$name-create.log" >&2
            exit 1
        }
    fi
    wait_cluster_ok "${ports[@]}"
    printf -v "PORTS_$name" '%s' "${ports[*]}"
}

# start_proxy NAME: a lockproxy in front of cluster NAME; sets
# PPORT_<NAME> and PPID_<NAME>.
start_proxy() {
    local name=$1 portsvar="PORTS_$1" p seeds=''
    for p in ${!portsvar}; do
        seeds+="${seeds:+,}127.0.0.1:$p"
    done
    p=$(free_port)
    "$PROXY" --listen "127.0.0.1:$p" --upstream "redis-cluster://$seeds" \
        --pool-size "$POOL" --max-clients 10000 --log-level warn \
        </dev/null 2>"$OUT/proxy-$name.log" &
    pids+=($!)
    printf -v "PPID_$name" '%s' "$!"
    printf -v "PPORT_$name" '%s' "$p"
    wait_ping "$p"
}

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "kernel: $(uname -srm)"
    echo "nproc: $(nproc)"
    lscpu | grep -E '^(Model name|Hypervisor)' || true
    echo "redis: $(redis-server --version)"
    echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo n/a)"
    echo "settings: runs=$RUNS duration=${DURATION}s warmup=${WARMUP}s clients=$CLIENTS" \
        "keys=$HOT_KEYS pool=$POOL lease_ms=$LEASE_MS quick=$QUICK"
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/environment.txt"

failures=0
for c in $ONLY; do
    case $c in
    c1) start_cluster c1 1 ;;
    c3) start_cluster c3 3 ;;
    *)
        log "unknown cluster '$c' in LP_CLUSTER_ONLY (c1, c3)"
        exit 2
        ;;
    esac
    start_proxy "$c"
    ports_var="PORTS_$c" pport_var="PPORT_$c" ppid_var="PPID_$c"
    seed=$(echo "${!ports_var}" | cut -d' ' -f1)
    log "$c: masters ${!ports_var}, lockproxy 127.0.0.1:${!pport_var} (pid ${!ppid_var})"
    for wl in uncontended contended; do
        for run in $(seq 1 "$RUNS"); do
            base="$OUT/$c-$wl-$run"
            log "$c $wl run $run/$RUNS"
            if ! "$BENCH" "$wl" --cluster --redis "127.0.0.1:$seed" \
                --proxy "127.0.0.1:${!pport_var}" --proxy-pid "${!ppid_var}" \
                --targets proxy,direct --clients "$CLIENTS" --keys "$HOT_KEYS" \
                --duration "$DURATION" --warmup "$WARMUP" --lease-ms "$LEASE_MS" \
                --kv "$base.kv" --json "$base.json" >"$base.txt" 2>&1; then
                log "$c $wl run $run failed: $(grep -m1 -iE 'error|violation|stuck' "$base.txt" || tail -n 1 "$base.txt")"
                failures=$((failures + 1))
            fi
        done
    done
done

# Summary: medians over the runs, from the key/value outputs.
python3 - "$OUT" "$RUNS" "$ONLY" <<'EOF' | tee "$OUT/summary.txt"
import math, statistics, sys
out, runs, only = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def load(path):
    kv = {}
    try:
        for line in open(path):
            p = line.split()
            if len(p) == 3:
                kv.setdefault(p[0], {})[p[1]] = p[2]
    except OSError:
        pass
    return kv

def med(vals):
    vals = [v for v in vals if not math.isnan(v)]
    return statistics.median(vals) if vals else float("nan")

rows = {}
for c in only:
    for wl in ("uncontended", "contended"):
        kvs = [load(f"{out}/{c}-{wl}-{r}.kv") for r in range(1, runs + 1)]
        for t in ("proxy", "direct"):
            def col(key, scale=1.0):
                return med([float(k.get(t, {}).get(key, "nan")) * scale for k in kvs])
            acq = col("acquisitions")
            pcpu = col("proxy_cpu_s")
            rows[(c, wl, t)] = {
                "ops": col("ops_per_sec"), "p50": col("p50_us", 1e-3), "p99": col("p99_us", 1e-3),
                "rcpu": col("redis_cpu_us_per_acq"), "rcmd": col("redis_cmds_per_acq"),
                "masters": col("redis_masters"),
                "pcpu": pcpu / acq * 1e6 if acq and acq == acq else float("nan"),
                "other": col("other_cpu_s") / col("seconds") * 100,
                "errors": sum(int(k.get(t, {}).get("errors", "0")) for k in kvs),
                "viol": sum(int(k.get(t, {}).get("violations", "0")) for k in kvs),
                "n": sum(1 for k in kvs if k.get(t, {}).get("ran") == "1"),
            }

print(f"lockproxy Redis Cluster benchmark: medians of {runs} run(s) (results in {out})")
print(f"{'cluster':8} {'workload':12} {'target':7} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
      f"{'Redis us/acq':>13} {'cmds/acq':>9} {'proxy us/acq':>13} {'other %':>8} {'err':>4} "
      f"{'viol':>4} runs")
for (c, wl, t), r in rows.items():
    label = f"{c}({int(r['masters']) if r['masters'] == r['masters'] else '?'}m)"
    print(f"{label:8} {wl:12} {t:7} {r['ops']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} "
          f"{r['rcpu']:13.2f} {r['rcmd']:9.2f} {r['pcpu']:13.2f} {r['other']:8.0f} {r['errors']:4d} "
          f"{r['viol']:4d} "
          f"{r['n']}/{runs}")
print("other %: CPU taken by other processes during the measured phase, % of one core (noise)")
print()
print("ratios: proxy/direct on each cluster (ops/s, Redis CPU per acquisition summed over masters)")
for c in only:
    for wl in ("uncontended", "contended"):
        p, d = rows.get((c, wl, "proxy")), rows.get((c, wl, "direct"))
        if p and d and d["ops"] and d["rcpu"]:
            print(f"  {c} {wl:12} ops x{p['ops'] / d['ops']:.2f}   Redis CPU/acq x{p['rcpu'] / d['rcpu']:.2f}")
if "c1" in only and "c3" in only:
    print("ratios: 3 masters / 1 master for each target (ops/s, Redis CPU per acquisition summed)")
    for wl in ("uncontended", "contended"):
        for t in ("proxy", "direct"):
            a, b = rows[("c1", wl, t)], rows[("c3", wl, t)]
            if a["ops"] and a["rcpu"]:
                print(f"  {wl:12} {t:7} ops x{b['ops'] / a['ops']:.2f}   Redis CPU/acq x{b['rcpu'] / a['rcpu']:.2f}")
EOF
if [ "$failures" -gt 0 ]; then
    log "$failures run(s) failed (see $OUT/*.txt)"
    exit 1
fi
