#!/usr/bin/env bash
# Redis's cost per lock operation behind lockproxy, side by side with
# twemproxy and direct clients (issue 13's first target), and how well each
# batches: the uncontended lock+unlock loop of lockproxy-bench at each
# client count of LP_BATCH_CLIENTS (100 500 2000) against
#   proxy      this build's lockproxy (--pool-size LP_BATCH_POOL, 2)
#   base       LP_BATCH_BASE, another lockproxy binary (e.g. the commit
#              before a change), when given
#   twemproxy  nutcracker with LP_BATCH_POOL server connections, running
#              Redisson's scripts (see lockproxy-bench --help)
# and at LP_BATCH_DIRECT_CLIENTS (1000) proxy against direct Redisson-style
# clients. The targets take turns within each of LP_BATCH_RUNS rounds, so
# they share the machine's state of the minute; one Redis serves them all.
# The order of the turns rotates from one round (and client count) to the
# next, so no target always runs first (on a Redis just warmed by another,
# or right after one that left the machine busy): at each client count,
# with proxy and twemproxy, one round runs proxy first, the next
# twemproxy first, and so on.
#
# Prints per client count and target the medians over the rounds of: Redis
# CPU per lock+unlock pair (µs; with perf: Redis's task-clock over the
# measured phase per two lock scripts run, EVALSHA calls plus what a
# lockproxy's batch runner calls carried, exact where INFO cpu is sampled
# by the tick on this VM; without: INFO cpu), client commands per Redis read
# (INFO stats total_reads_processed: the batching Redis sees; a runner call
# is one command), requests per
# upstream write (lockproxy INFO: upstream_requests / upstream_batches),
# the proxy's CPU per pair (lockproxy or nutcracker; perf task-clock too),
# pairs/s and p50/p99 acquisition latency; per-round Redis CPU in brackets;
# with perf also Redis's syscalls and context switches per command.
# Outputs stay in LP_BATCH_OUT (default bench-results/batch-<date>).
# Settings: LP_BATCH_RUNS (3), LP_BATCH_DURATION (3 s measured),
# LP_BATCH_WARMUP (1 s), LP_BATCH_CLIENTS, LP_BATCH_DIRECT_CLIENTS (empty:
# skip), LP_BATCH_POOL (2), LP_BENCH_BUILD_DIR (build-rel).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LP_BENCH_BUILD_DIR:-$ROOT/build-rel}
RUNS=${LP_BATCH_RUNS:-3}
DURATION=${LP_BATCH_DURATION:-3}
WARMUP=${LP_BATCH_WARMUP:-1}
CLIENTS=${LP_BATCH_CLIENTS:-100 500 2000}
DIRECT_CLIENTS=${LP_BATCH_DIRECT_CLIENTS-1000}
POOL=${LP_BATCH_POOL:-2}
BASE=${LP_BATCH_BASE:-}
OUT=${LP_BATCH_OUT:-$ROOT/bench-results/batch-$(date +%Y%m%d-%H%M%S)}
NUTCRACKER=$(command -v nutcracker || echo /usr/sbin/nutcracker)
PERF=0
if perf stat -e task-clock,syscalls:sys_enter_read -- true >/dev/null 2>&1; then
    PERF=${LP_BATCH_PERF:-1}
fi

if [ ! -x "$BUILD/lockproxy" ] || [ ! -x "$BUILD/lockproxy-bench" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLP_BUILD_TESTS=OFF >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target lockproxy lockproxy-bench >/dev/null
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # PORT: until something listens there
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "bench-batch.sh: nothing listens on $1" >&2
    return 1
}

RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no \
    >"$OUT/redis.log" 2>&1 &
pids+=($!)
RPID=$!
wait_port "$RP"

# start_proxy NAME BINARY: sets PORT_<NAME>, PID_<NAME>
start_proxy() {
    local name=$1 bin=$2 p
    p=$(free_port)
    "$bin" --listen "127.0.0.1:$p" --upstream "redis://127.0.0.1:$RP" --pool-size "$POOL" \
        --max-clients 10000 --log-level warn >"$OUT/proxy-$name.log" 2>&1 &
    pids+=($!)
    printf -v "PID_$name" '%s' "$!"
    printf -v "PORT_$name" '%s' "$p"
    wait_port "$p"
}
start_proxy NEW "$BUILD/lockproxy"
TARGETS=(proxy)
if [ -n "$BASE" ]; then
    start_proxy BASE "$BASE"
    TARGETS+=(base)
fi
if [ -x "$NUTCRACKER" ]; then
    TP=$(free_port)
    cat >"$TMP/nutcracker.yml" <<EOF
lockbench:
  listen: 127.0.0.1:$TP
  redis: true
  hash: fnv1a_64
  distribution: ketama
  preconnect: true
  server_connections: $POOL
  auto_eject_hosts: false
  backlog: 1024
  servers:
    - 127.0.0.1:$RP:1
EOF
    "$NUTCRACKER" -c "$TMP/nutcracker.yml" -s "$(free_port)" -a 127.0.0.1 \
        -o "$OUT/nutcracker.log" >/dev/null 2>&1 &
    pids+=($!)
    TPID=$!
    wait_port "$TP"
    TARGETS+=(twemproxy)
fi

evalsha_calls() {
    redis-cli -p "$RP" info commandstats | tr -d '\r' | awk -F'[=:,]' '/^cmdstat_evalsha:/ {print $3}'
}

# Script runs in lockproxy's INFO beyond its EVALSHA calls: the requests
# its batch runner calls carried, less those calls (--script-batch).
batched_extra() { # PORT
    redis-cli -p "$1" info upstream | tr -d '\r' | awk -F: '/^upstream_script_batches:/ {c = $2}
        /^upstream_batched_scripts:/ {b = $2} END {print b - c}'
}

# perf_window NAME PID [PORT]: after the warm-up, exact CPU time (task-clock,
# not the VM's tick-sampled rusage that INFO cpu reports), context switches
# and syscalls of Redis and of the target's process PID over the measured
# phase, with the lock scripts Redis ran meanwhile: its EVALSHA calls, plus
# for a lockproxy (PORT) the scripts its batch runner calls carried.
perf_window() {
    local name=$1 pid=$2 port=${3:-} c0 c1 b0=0 b1=0 ev
    trap - EXIT # a background copy of this shell must not stop the servers
    ev=task-clock,context-switches,syscalls:sys_enter_read,syscalls:sys_enter_write
    ev=$ev,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_io_uring_enter
    ev=$ev,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_writev
    sleep "$(echo "$WARMUP + 0.3" | bc)"
    c0=$(evalsha_calls)
    if [ -n "$port" ]; then b0=$(batched_extra "$port"); fi
    if [ -n "$pid" ]; then
        perf stat -x, -e "$ev" -p "$pid" -o "$OUT/$name.perf-target" -- \
            sleep "$(echo "$DURATION - 0.6" | bc)" 2>/dev/null &
    fi
    perf stat -x, -e "$ev" -p "$RPID" -o "$OUT/$name.perf-redis" -- \
        sleep "$(echo "$DURATION - 0.6" | bc)" 2>/dev/null
    wait
    c1=$(evalsha_calls)
    if [ -n "$port" ]; then b1=$(batched_extra "$port"); fi
    echo "x perf_evalsha $((c1 - c0 + b1 - b0))" >"$OUT/$name.perf-calls"
}

upstream_counts() { # PORT: "requests writes calls batched" from lockproxy's INFO
    redis-cli -p "$1" info | tr -d '\r' |
        awk -F: '/^upstream_requests:/ {r = $2} /^upstream_batches:/ {b = $2}
            /^upstream_script_batches:/ {c = $2} /^upstream_batched_scripts:/ {s = $2}
            END {print r, b, c + 0, s + 0}'
}

run_one() { # TARGET CLIENTS ROUND
    local tgt=$1 n=$2 round=$3 name="$1-$2-$3" args=() port='' tpid='' before after
    case $tgt in
    proxy) args=(--targets proxy --proxy "127.0.0.1:$PORT_NEW" --proxy-pid "$PID_NEW")
        port=$PORT_NEW tpid=$PID_NEW ;;
    base) args=(--targets proxy --proxy "127.0.0.1:$PORT_BASE" --proxy-pid "$PID_BASE")
        port=$PORT_BASE tpid=$PID_BASE ;;
    twemproxy) args=(--targets twemproxy --twemproxy "127.0.0.1:$TP" --twemproxy-pid "$TPID")
        tpid=$TPID ;;
    direct) args=(--targets direct) ;;
    esac
    redis-cli -p "$RP" flushall >/dev/null
    [ -z "$port" ] || before=$(upstream_counts "$port")
    local pw=''
    if [ "$PERF" = 1 ]; then
        perf_window "$name" "$tpid" "$port" &
        pw=$!
    fi
    "$BUILD/lockproxy-bench" uncontended --clients "$n" --duration "$DURATION" \
        --warmup "$WARMUP" --redis "127.0.0.1:$RP" --kv "$OUT/$name.kv" "${args[@]}" \
        >"$OUT/$name.txt" 2>&1 || echo "bench-batch.sh: $name failed (see $OUT/$name.txt)" >&2
    [ -z "$pw" ] || wait "$pw"
    if [ -n "$port" ]; then
        after=$(upstream_counts "$port")
        echo "$before $after" | awk '{ b = $6 - $2; c = $7 - $3; printf "x req_per_write %.2f\n",
            (b > 0 ? ($5 - $1) / b : 0); printf "x scripts_per_call %.2f\n", (c > 0 ? ($8 - $4) / c : 0) }' \
            >>"$OUT/$name.kv"
    fi
}

# The targets $3... rotated left by $1 modulo their number, into ROTATED.
rotate() {
    local k=$1 i
    shift
    ROTATED=()
    for i in $(seq 0 $(($# - 1))); do
        ROTATED+=("${@:$(((i + k) % $# + 1)):1}")
    done
}

for round in $(seq 1 "$RUNS"); do
    turn=$((round - 1)) # each client count's order moves on by one every round
    for n in $CLIENTS; do
        rotate "$turn" "${TARGETS[@]}"
        turn=$((turn + 1))
        for tgt in "${ROTATED[@]}"; do
            echo "round $round: $tgt, $n clients" >&2
            run_one "$tgt" "$n" "$round"
        done
    done
    if [ -n "$DIRECT_CLIENTS" ]; then
        rotate "$((round - 1))" proxy direct
        for tgt in "${ROTATED[@]}"; do
            echo "round $round: $tgt, $DIRECT_CLIENTS clients" >&2
            run_one "$tgt" "$DIRECT_CLIENTS" "$round"
        done
    fi
done

{
    echo "date: $(date -u +%FT%TZ) commit: $(git -C "$ROOT" rev-parse --short HEAD)" \
        "runs: $RUNS x ${DURATION}s pool: $POOL base: ${BASE:-none}"
    printf '%-7s %-10s %-24s %9s %9s %9s %9s %8s %8s\n' clients target \
        "redis us/pair [runs]" cmds/read req/write "proxy us" pairs/s "p50 ms" "p99 ms"
    python3 - "$OUT" "$RUNS" "$CLIENTS" "${TARGETS[*]}" "$DIRECT_CLIENTS" "$PERF" <<'EOF'
import statistics, sys, os
out, runs, clients, targets, dclients, perf = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split(), sys.argv[5], sys.argv[6] == "1"
def perf_file(path):
    ev = {}
    if os.path.exists(path):
        for line in open(path):
            f = line.strip().split(",")
            if len(f) >= 3 and f[0] and f[0][0].isdigit():
                ev[f[2]] = float(f[0])
    return ev
def kv_file(path):
    kv = {}
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 3:
                kv[parts[1]] = parts[2]
    return kv
nan = float("nan")
sets = [(n, t) for n in clients for t in targets]
if dclients:
    sets += [(dclients, "proxy"), (dclients, "direct")]
for n, tgt in sets:
    rows = []
    for r in range(1, runs + 1):
        base = f"{out}/{tgt}-{n}-{r}"
        kv = kv_file(base + ".kv")
        try:
            cpu, rpc = float(kv["redis_cpu_us_per_acq"]), float(kv["redis_cmds_per_read"])
            tcpu = float(kv.get("proxy_cpu_s", "nan")) / float(kv["acquisitions"]) * 1e6
            row = [cpu, rpc, float(kv.get("req_per_write", "nan")), tcpu, float(kv["ops_per_sec"]),
                   float(kv["p50_us"]) / 1000, float(kv["p99_us"]) / 1000,
                   float(kv.get("scripts_per_call", "nan"))]
        except (KeyError, ValueError, ZeroDivisionError):
            continue
        if perf:
            calls = float(kv_file(base + ".perf-calls").get("perf_evalsha", "0"))
            rd, tg = perf_file(base + ".perf-redis"), perf_file(base + ".perf-target")
            if calls > 0 and "task-clock" in rd:
                pairs = calls / 2
                row[0] = rd["task-clock"] * 1000 / pairs
                if "task-clock" in tg:
                    row[3] = tg["task-clock"] * 1000 / pairs
                sys_r = sum(v for k, v in rd.items() if k.startswith("syscalls:"))
                row.append(sys_r / calls)
                row.append(rd.get("context-switches", nan) / calls)
        rows.append(row)
    if not rows:
        continue
    med = [statistics.median(c) for c in zip(*rows)]
    each = "[" + ",".join(f"{x[0]:.1f}" for x in rows) + "]"
    fmt = lambda v, p=1: "-" if v != v else f"{v:.{p}f}"
    extra = f"  redis syscalls/script {fmt(med[8], 2)} cs/script {fmt(med[9], 2)}" if len(med) > 9 else ""
    if med[7] == med[7] and med[7] > 0:
        extra += f"  scripts/batch call {med[7]:.1f}"
    print(f"{n:<7} {tgt:<10} {med[0]:5.2f} {each:<18} {med[1]:9.1f} {fmt(med[2]):>9} {fmt(med[3]):>9} {med[4]:9.0f} {med[5]:8.2f} {med[6]:8.2f}{extra}")
EOF
} | tee "$OUT/summary.txt"
