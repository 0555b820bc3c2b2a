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
# LP_CLUSTER_ONLY (subset of "c1 c3"), LP_CLUSTER_OUT, LP_BENCH_BUILD_DIR;
# LP_CLUSTER_SUMMARY=DIR only prints the summary of results already in DIR.
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

# summary DIR: medians over the runs found in DIR (its key/value outputs),
# and ratios as medians of the per-run ratios (targets compared within the
# same run; clusters compared run i against run i).
summary() {
    python3 - "$1" <<'EOF'
import glob, math, re, statistics, sys
out = sys.argv[1]
files = glob.glob(f"{out}/c*-*-*.kv")
runs = max((int(re.search(r"-(\d+)\.kv$", f).group(1)) for f in files), default=0)
only = [c for c in ("c1", "c3") if glob.glob(f"{out}/{c}-*.kv")]
WLS, TS = ("uncontended", "contended"), ("proxy", "direct")

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

def fig(kv, t, key):
    return float(kv.get(t, {}).get(key, "nan"))

kvs = {(c, wl): [load(f"{out}/{c}-{wl}-{r}.kv") for r in range(1, runs + 1)]
       for c in only for wl in WLS}
rows = {}
for (c, wl), ks in kvs.items():
    for t in TS:
        col = lambda key, scale=1.0: med([fig(k, t, key) * scale for k in ks])
        rows[(c, wl, t)] = {
            "ops": col("ops_per_sec"), "p50": col("p50_us", 1e-3), "p99": col("p99_us", 1e-3),
            "rcpu": col("redis_cpu_us_per_acq"), "rcmd": col("redis_cmds_per_acq"),
            "masters": col("redis_masters"),
            "pcpu": med([fig(k, t, "proxy_cpu_s") / fig(k, t, "acquisitions") * 1e6
                         for k in ks if fig(k, t, "acquisitions") > 0]),
            "other": med([fig(k, t, "other_cpu_s") / fig(k, t, "seconds") * 100 for k in ks]),
            "errors": sum(int(k.get(t, {}).get("errors", "0")) for k in ks),
            "viol": sum(int(k.get(t, {}).get("violations", "0")) for k in ks),
            "n": sum(1 for k in ks if k.get(t, {}).get("ran") == "1"),
        }

def ratio(pairs):
    vals = [a / b for a, b in pairs if b and not math.isnan(a) and not math.isnan(b)]
    if not vals:
        return "n/a"
    return f"x{statistics.median(vals):.2f} [" + ", ".join(f"{v:.2f}" for v in vals) + "]"

print(f"lockproxy Redis Cluster benchmark: medians of {runs} run(s) (results in {out})")
print(f"{'cluster':8} {'workload':12} {'target':7} {'ops/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
      f"{'Redis us/acq':>13} {'cmds/acq':>9} {'proxy us/acq':>13} {'other %':>8} {'err':>4} "
      f"{'viol':>4} runs")
for (c, wl, t), r in rows.items():
    label = f"{c}({int(r['masters']) if r['masters'] == r['masters'] else '?'}m)"
    print(f"{label:8} {wl:12} {t:7} {r['ops']:9.0f} {r['p50']:8.2f} {r['p99']:8.2f} "
          f"{r['rcpu']:13.2f} {r['rcmd']:9.2f} {r['pcpu']:13.2f} {r['other']:8.0f} "
          f"{r['errors']:4d} {r['viol']:4d} {r['n']}/{runs}")
print("Redis us/acq: Redis CPU per acquisition summed over the cluster's masters;"
      " other %: CPU other processes took in the measured phase, % of one core (noise)")
print()
print("proxy/direct, median of the per-run ratios [per run]: ops/s; Redis CPU per acquisition")
for (c, wl), ks in kvs.items():
    ops = ratio([(fig(k, "proxy", "ops_per_sec"), fig(k, "direct", "ops_per_sec")) for k in ks])
    cpu = ratio([(fig(k, "proxy", "redis_cpu_us_per_acq"),
                  fig(k, "direct", "redis_cpu_us_per_acq")) for k in ks])
    print(f"  {c} {wl:12} ops {ops};  Redis CPU/acq {cpu}")
if "c1" in only and "c3" in only:
    print("3 masters / 1 master, run i against run i: ops/s; Redis CPU per acquisition (summed)")
    for wl in WLS:
        for t in TS:
            a, b = kvs[("c1", wl)], kvs[("c3", wl)]
            ops = ratio([(fig(y, t, "ops_per_sec"), fig(x, t, "ops_per_sec"))
                         for x, y in zip(a, b)])
            cpu = ratio([(fig(y, t, "redis_cpu_us_per_acq"), fig(x, t, "redis_cpu_us_per_acq"))
                         for x, y in zip(a, b)])
            print(f"  {wl:12} {t:7} ops {ops};  Redis CPU/acq {cpu}")
EOF
}

if [ -n "${LP_CLUSTER_SUMMARY:-}" ]; then
    summary "$LP_CLUSTER_SUMMARY"
    exit 0
fi

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

summary "$OUT" | tee "$OUT/summary.txt"
if [ "$failures" -gt 0 ]; then
    log "$failures run(s) failed (see $OUT/*.txt)"
    exit 1
fi
