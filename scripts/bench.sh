#!/usr/bin/env bash
# The standard benchmark comparison of lockproxy against clients talking to
# Redis directly and through twemproxy, on this machine (BENCHMARKS.md
# explains the method and quotes the results). It installs what is missing
# (scripts/deps.sh, nutcracker included), builds Release into build-rel/,
# starts a throw-away redis-server, lockproxy and nutcracker (twemproxy) on
# free ports (stopped on exit), and runs, LP_BENCH_RUNS times each:
#   uncontended  --clients closed-loop clients on their own keys, targets
#                proxy, direct, direct-shared and twemproxy;
#   contended    the same clients on LP_BENCH_KEYS hot keys;
#   rwlock       the same clients on LP_BENCH_KEYS read-write locks, each
#                cycle a write lock with probability LP_BENCH_WRITE_PCT %,
#                else a read lock (RLOCK/WLOCK vs Redisson's RReadWriteLock);
#   semaphore    the same clients on LP_BENCH_KEYS semaphores of
#                LP_BENCH_PERMITS permits, one permit per cycle
#                (SEM.ACQUIRE/SEM.RELEASE vs Redisson's RSemaphore);
#   ceiling      pipelining clients through the proxy (TRYLOCK/UNLOCK
#                pairs) and the direct pipelined equivalent, then
#                redis-benchmark -P 64 EVALSHA of the proxy's own acquire
#                script, compared in scripts/s (from INFO commandstats);
#   idle         LP_BENCH_IDLE idle connections to a fresh proxy, for
#                --io uring and --io epoll (RSS added);
#   unix         the uncontended comparison with the clients on the proxy's
#                Unix socket, as a sidecar's clients would be;
# and once the timing-wheel microbenchmarks (BM_Wheel*). Everything (text,
# JSON, key/value, SVG) goes to bench-results/<date>/ (bench-results/latest
# points at it); the summary (headed by the date and commit measured) with
# each target and PASS/MISS (medians over the runs; none with --quick), Redis CPU per acquisition for every target, the proxy's CPU per pair over Redis's (goal: at or below 1), and a noise
# column is printed at the end and kept in summary.txt.
#
# twemproxy: nutcracker with redis: true, one server (the bench's Redis),
# preconnect, server_connections = LP_BENCH_POOL (lockproxy gets the same
# --pool-size); its clients run Redisson's scripts (EVALSHA, routed by the
# first key) and poll while a lock is taken (twemproxy has no pub/sub; see
# lockproxy-bench --help). Without nutcracker the twemproxy rows say n/a.
#
# Usage: scripts/bench.sh [--quick] [--help]
#   --quick  one run of uncontended, contended, rwlock and semaphore, 1 s
#            measured after 0.3 s of warm-up, lease 5 s (so a direct waiter
#            that missed a wake-up drains quickly), at most 5 s of waiting
#            for a quiet machine: under a minute once built. The figures
#            are a smoke test of the set-up, not results to quote: the
#            summary says so and gives no PASS/MISS verdicts ("smoke" in
#            their place).
#
# Settings (environment, over the defaults and --quick): LP_BENCH_RUNS (3),
# LP_BENCH_DURATION (5, measured seconds per target), LP_BENCH_WARMUP (1),
# LP_BENCH_CLIENTS (1000), LP_BENCH_KEYS (10), LP_BENCH_WRITE_PCT (10),
# LP_BENCH_PERMITS (10), LP_BENCH_IDLE (10000), LP_BENCH_PIPE_CLIENTS (50),
# LP_BENCH_PIPELINE (32 pairs = 64 requests per round trip),
# LP_BENCH_RB_REQUESTS (1000000, redis-benchmark -n), LP_BENCH_POOL (2:
# lockproxy --pool-size and twemproxy server_connections),
# LP_BENCH_LEASE_MS (30000, the Redisson scripts' lease), LP_BENCH_IO (auto,
# the proxy's backend for the load runs), LP_BENCH_PIN ("" = no pinning;
# "R:P:B" = taskset CPU lists for redis, the proxies and the load
# generators, e.g. "0:1:1"), LP_BENCH_ONLY (subset of "uncontended
# contended rwlock semaphore ceiling idle micro unix", all by default),
# LP_BENCH_BUILD_DIR, LP_BENCH_OUT; LP_BENCH_SUMMARY=DIR only prints the
# summary of results already in DIR.
# Other processes: every figure here is CPU-bound, so before each step the
# script waits while the machine is more than LP_BENCH_MAX_BUSY % (10)
# busy, at most LP_BENCH_QUIET_WAIT s (30) per step and LP_BENCH_QUIET_BUDGET
# s (120) over the whole run; then it runs anyway. A step that started on a
# quiet machine but where other processes took more than LP_BENCH_MAX_OTHER
# % (15) of one core is repeated (up to LP_BENCH_RETRIES times, 1). A step
# kept with a busy start or busy neighbours is marked noisy: in the noise
# column of every summary row built from it ("noisy k/n": k of its n runs),
# and in noise.txt. Exit status: 0 when everything ran cleanly (whatever
# PASS/MISS and noise say), 1 otherwise.
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
        echo "bench.sh: unknown argument '$arg' (see --help)" >&2
        exit 2
        ;;
    esac
done
# --quick: the defaults below, each still overridden by its LP_BENCH_*.
Q_RUNS=3 Q_DURATION=5 Q_WARMUP=1 Q_ONLY="uncontended contended rwlock semaphore ceiling idle micro unix"
Q_WAIT=30 Q_BUDGET=120 Q_RETRIES=1 Q_LEASE=30000
if [ "$QUICK" = 1 ]; then
    Q_RUNS=1 Q_DURATION=1 Q_WARMUP=0.3 Q_ONLY="uncontended contended rwlock semaphore"
    Q_WAIT=5 Q_BUDGET=5 Q_RETRIES=0 Q_LEASE=5000
fi
BUILD=${LP_BENCH_BUILD_DIR:-$ROOT/build-rel}
OUT_BASE=${LP_BENCH_OUT:-$ROOT/bench-results}
RUNS=${LP_BENCH_RUNS:-$Q_RUNS}
DURATION=${LP_BENCH_DURATION:-$Q_DURATION}
WARMUP=${LP_BENCH_WARMUP:-$Q_WARMUP}
CLIENTS=${LP_BENCH_CLIENTS:-1000}
HOT_KEYS=${LP_BENCH_KEYS:-10}
WRITE_PCT=${LP_BENCH_WRITE_PCT:-10}
PERMITS=${LP_BENCH_PERMITS:-10}
IDLE=${LP_BENCH_IDLE:-10000}
PIPE_CLIENTS=${LP_BENCH_PIPE_CLIENTS:-50}
PIPELINE=${LP_BENCH_PIPELINE:-32}
RB_REQUESTS=${LP_BENCH_RB_REQUESTS:-1000000}
POOL=${LP_BENCH_POOL:-2}
LEASE_MS=${LP_BENCH_LEASE_MS:-$Q_LEASE}
IO=${LP_BENCH_IO:-auto}
PIN=${LP_BENCH_PIN:-}
ONLY=${LP_BENCH_ONLY:-$Q_ONLY}
MAX_BUSY=${LP_BENCH_MAX_BUSY:-10}
QUIET_WAIT=${LP_BENCH_QUIET_WAIT:-$Q_WAIT}
QUIET_BUDGET=${LP_BENCH_QUIET_BUDGET:-$Q_BUDGET}
MAX_OTHER=${LP_BENCH_MAX_OTHER:-15}
RETRIES=${LP_BENCH_RETRIES:-$Q_RETRIES}
NUTCRACKER=$(command -v nutcracker || echo /usr/sbin/nutcracker)

BENCH=$BUILD/lockproxy-bench
PROXY=$BUILD/lockproxy
MICRO=$BUILD/lockproxy-microbench
PIN_REDIS='' PIN_PROXY='' PIN_LOAD=''
if [ -n "$PIN" ]; then
    IFS=: read -r PIN_REDIS PIN_PROXY PIN_LOAD <<<"$PIN"
fi

tmp=$(mktemp -d)
redis_pid='' redis_port='' proxy_pid='' proxy_port='' twem_pid='' twem_port=''
TARGETS=proxy,direct,direct-shared
quiet_waited=0
failures=()

log() {
    echo "bench.sh: $*" >&2
}

# shellcheck disable=SC2317 # runs from the EXIT trap
cleanup() {
    local pid
    for pid in "$twem_pid" "$proxy_pid" "$redis_pid"; do
        if [ -n "$pid" ]; then
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wants() {
    [[ " $ONLY " == *" $1 "* ]]
}

# Runs "$@" on the CPUs in $1 (empty: wherever the scheduler likes).
# Replaces the calling shell: start servers as "spawn CPUS cmd... &", so
# that $! is the server's own pid (its RSS and CPU are read from /proc).
spawn() {
    local cpus=$1
    shift
    if [ -n "$cpus" ]; then
        exec taskset -c "$cpus" "$@"
    fi
    exec "$@"
}

# Runs "$@" on the CPUs in $1, in the foreground.
on_cpus() {
    local cpus=$1
    shift
    if [ -n "$cpus" ]; then
        taskset -c "$cpus" "$@"
    else
        "$@"
    fi
}

# ---- build and environment -------------------------------------------------

build() {
    local blog=$tmp/build.log
    "$ROOT/scripts/deps.sh"
    log "building Release into $BUILD"
    if ! { cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLP_BUILD_TESTS=OFF &&
        cmake --build "$BUILD" -j"$(nproc)" --target lockproxy lockproxy-bench \
            lockproxy-microbench; } >"$blog" 2>&1; then
        grep -E 'error|warning' "$blog" | head -40 >&2 || true
        tail -n 20 "$blog" >&2
        log "build failed"
        exit 1
    fi
}

describe_machine() {
    {
        echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
        echo "kernel: $(uname -srm)"
        lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Hypervisor|L2|L3)' || true
        echo "memory: $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
        echo "redis: $(redis-server --version)"
        echo "redis-benchmark: $(redis-benchmark --version 2>/dev/null || echo n/a)"
        echo "twemproxy: $("$NUTCRACKER" --version 2>&1 | head -n 1 || echo n/a)"
        echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo n/a)"
        echo "modified: $(git -C "$ROOT" status --porcelain 2>/dev/null | awk '{print $2}' |
            tr '\n' ' ')"
        echo "settings: runs=$RUNS duration=${DURATION}s warmup=${WARMUP}s clients=$CLIENTS" \
            "keys=$HOT_KEYS write_pct=$WRITE_PCT permits=$PERMITS" \
            "idle=$IDLE pipe_clients=$PIPE_CLIENTS pipeline=$PIPELINE" \
            "rb_requests=$RB_REQUESTS pool=$POOL lease_ms=$LEASE_MS io=$IO pin='${PIN}'" \
            "quick=$QUICK quiet_wait=${QUIET_WAIT}s quiet_budget=${QUIET_BUDGET}s" \
            "retries=$RETRIES"
    } >"$OUT/environment.txt"
    cat "$OUT/environment.txt"
}

# ---- processes -------------------------------------------------------------

port_busy() {
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# A free port below the ephemeral range (a port the kernel may hand out as
# the local end of the bench's own connections cannot be listened on).
free_port() {
    local port low
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    [ "$low" -gt 11000 ] || low=61000
    for _ in $(seq 100); do
        port=$((10000 + RANDOM % (low - 10000)))
        if ! port_busy "$port"; then
            echo "$port"
            return 0
        fi
    done
    log "no free port"
    return 1
}

# Waits until $1 answers PING (redis-cli "${@:3}" ping), or fails if pid
# $2 exits.
wait_ping() {
    local what=$1 pid=$2
    shift 2
    for _ in $(seq 200); do
        if [ "$(redis-cli "$@" ping 2>/dev/null)" = PONG ]; then
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "$what exited during start-up"
            return 1
        fi
        sleep 0.05
    done
    log "$what did not answer PING"
    return 1
}

start_redis() {
    redis_port=$(free_port)
    spawn "$PIN_REDIS" redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$tmp" --daemonize no --logfile "$tmp/redis.log" \
        --unixsocket "$tmp/redis.sock" --unixsocketperm 700 </dev/null &
    redis_pid=$!
    wait_ping redis-server "$redis_pid" -p "$redis_port" || {
        cat "$tmp/redis.log" >&2
        exit 1
    }
}

# Starts a fresh lockproxy with --io $1, on a free TCP port, or on the
# Unix socket $2 if given (upstream: Redis over TCP either way). Returns 1
# if it does not come up (e.g. io_uring blocked), with its log in
# $tmp/proxy-$1.log.
start_proxy() {
    local io=$1 sock=${2:-} maxc=$((IDLE > 10000 ? IDLE + 100 : 10000)) listen ping
    if [ -n "$sock" ]; then
        listen="unix://$sock" ping=(-s "$sock")
    else
        proxy_port=$(free_port)
        listen="127.0.0.1:$proxy_port" ping=(-p "$proxy_port")
    fi
    spawn "$PIN_PROXY" "$PROXY" --listen "$listen" \
        --upstream "redis://127.0.0.1:$redis_port" --io "$io" --max-clients "$maxc" \
        --pool-size "$POOL" --log-level warn </dev/null 2>"$tmp/proxy-$io.log" &
    proxy_pid=$!
    if ! wait_ping lockproxy "$proxy_pid" "${ping[@]}"; then
        stop_proxy
        return 1
    fi
}

stop_proxy() {
    if [ -n "$proxy_pid" ]; then
        kill -TERM "$proxy_pid" 2>/dev/null || true
        wait "$proxy_pid" 2>/dev/null || true
        proxy_pid=
    fi
}

# twemproxy (nutcracker) in front of the same Redis, as its users would
# configure it for a lock workload: one server, Redis protocol, connections
# opened at start (preconnect), POOL server connections like lockproxy's
# pool, no ejection (there is nothing to fail over to), no timeout (a slow
# Redis must not turn into errors mid-measurement), the stats port on a
# free loopback port. Without nutcracker the twemproxy target is left out.
start_twemproxy() {
    if [ ! -x "$NUTCRACKER" ]; then
        log "WARNING: nutcracker not found: no twemproxy target (scripts/deps.sh installs it)"
        return 0
    fi
    twem_port=$(free_port)
    cat >"$tmp/nutcracker.yml" <<EOF
lockbench:
  listen: 127.0.0.1:$twem_port
  redis: true
  hash: fnv1a_64
  distribution: ketama
  preconnect: true
  server_connections: $POOL
  auto_eject_hosts: false
  backlog: 1024
  servers:
    - 127.0.0.1:$redis_port:1
EOF
    spawn "$PIN_PROXY" "$NUTCRACKER" -c "$tmp/nutcracker.yml" -s "$(free_port)" -a 127.0.0.1 \
        -o "$tmp/nutcracker.log" -p "$tmp/nutcracker.pid" </dev/null 2>"$tmp/nutcracker.err" &
    twem_pid=$!
    if ! wait_ping nutcracker "$twem_pid" -p "$twem_port"; then
        tail -n 5 "$tmp/nutcracker.log" "$tmp/nutcracker.err" >&2
        log "WARNING: nutcracker did not start: no twemproxy target"
        twem_pid=''
        return 0
    fi
    TARGETS=proxy,direct,direct-shared,twemproxy
}

rcli() {
    redis-cli -p "$redis_port" "$@"
}

# ---- quiet machine ---------------------------------------------------------

# Busy % of the whole machine over one second (/proc/stat).
machine_busy() {
    local a b
    a=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' \
        /proc/stat)
    sleep 1
    b=$(awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' \
        /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {
        split(a, x, " "); split(b, y, " ");
        t = y[2] - x[2]; printf "%d", (t > 0 ? 100 * (y[1] - x[1]) / t : 0) }'
}

# Before each step $1: waits while the machine is busier than MAX_BUSY %
# (our redis and proxies are idle at that point), at most QUIET_WAIT s for
# this step and QUIET_BUDGET s over the whole run, then runs anyway. Writes
# the busy % it started with to $OUT/$1.busy.
wait_quiet() {
    local busy waited=0 left
    busy=$(machine_busy)
    while [ "$busy" -gt "$MAX_BUSY" ]; do
        left=$((QUIET_BUDGET - quiet_waited))
        if [ "$waited" -ge "$QUIET_WAIT" ] || [ "$left" -le 0 ]; then
            log "machine still ${busy}% busy after ${waited}s (waited ${quiet_waited}s of" \
                "${QUIET_BUDGET}s in all); running anyway, marked noisy"
            echo "$(date -u +%T) $1: started with the machine ${busy}% busy" >>"$OUT/noise.txt"
            break
        fi
        if [ "$waited" -eq 0 ]; then
            log "machine ${busy}% busy (others), waiting for < ${MAX_BUSY}% (at most" \
                "$((left < QUIET_WAIT ? left : QUIET_WAIT))s)"
        fi
        sleep 4
        waited=$((waited + 5))
        quiet_waited=$((quiet_waited + 5))
        busy=$(machine_busy)
    done
    echo "$busy" >"$OUT/$1.busy"
}

# Records whether step $1 is noisy: it started on a busy machine (its
# .busy file) or other processes took more than MAX_OTHER % of a core
# during it ($2). The summary's noise column counts these.
mark_noise() {
    local name=$1 other=${2:-0} busy=0 noisy=0
    [ -e "$OUT/$name.busy" ] && busy=$(cat "$OUT/$name.busy")
    if [ "$busy" -gt "$MAX_BUSY" ] || [ "$other" -gt "$MAX_OTHER" ]; then
        noisy=1
    fi
    echo "noisy=$noisy busy_start=$busy other_pct=$other" >"$OUT/$name.noise"
}

# ---- the steps -------------------------------------------------------------

# The largest share of one core (%) that other processes took during any
# target of the key/value file $1.
noise_pct() {
    [ -e "$1" ] || {
        echo 0
        return 0
    }
    awk '$2 == "seconds" {s[$1] = $3} $2 == "other_cpu_s" {o[$1] = $3}
        END {m = 0; for (t in o) if (s[t] > 0 && o[t] == o[t] + 0 && 100 * o[t] / s[t] > m)
            m = 100 * o[t] / s[t]; printf "%d", m}' "$1"
}

# Whether step $1 must be repeated (attempt $3) for noise $2 (%): only a
# step that started quiet (a busy start predicts a busy repeat) and only
# RETRIES times; if so, its files are set aside as *.noisyN. Keeping a
# noisy one is logged, and the step's noise is recorded (mark_noise).
must_repeat() {
    local name=$1 noise=$2 attempt=$3 ext busy=0
    [ -e "$OUT/$name.busy" ] && busy=$(cat "$OUT/$name.busy")
    if [ "$noise" -le "$MAX_OTHER" ]; then
        mark_noise "$name" "$noise"
        return 1
    fi
    if [ "$attempt" -gt "$RETRIES" ] || [ "$busy" -gt "$MAX_BUSY" ]; then
        echo "$name: kept with other processes at ${noise}% of a core" >>"$OUT/noise.txt"
        mark_noise "$name" "$noise"
        return 1
    fi
    log "$name: other processes took ${noise}% of a core; repeating it"
    echo "$name: attempt $attempt set aside (other processes ${noise}%)" >>"$OUT/noise.txt"
    for ext in txt json kv svg csv; do
        if [ -e "$OUT/$name.$ext" ]; then
            mv "$OUT/$name.$ext" "$OUT/$name.$ext.noisy$attempt"
        fi
    done
}

# lockproxy-bench with the common options; $1 names the output files.
run_loadgen() {
    local name=$1 rc attempt=0 twem=()
    shift
    if [ -n "$twem_pid" ]; then
        twem=(--twemproxy "127.0.0.1:$twem_port" --twemproxy-pid "$twem_pid")
    fi
    while :; do
        attempt=$((attempt + 1))
        wait_quiet "$name"
        rcli flushall >/dev/null
        log "run $name"
        rc=0
        on_cpus "$PIN_LOAD" "$BENCH" --proxy "127.0.0.1:$proxy_port" \
            --redis "127.0.0.1:$redis_port" --proxy-pid "$proxy_pid" "${twem[@]}" \
            --duration "$DURATION" --warmup "$WARMUP" --lease-ms "$LEASE_MS" \
            --json "$OUT/$name.json" --kv "$OUT/$name.kv" "$@" \
            >"$OUT/$name.txt" 2>&1 || rc=$?
        must_repeat "$name" "$(noise_pct "$OUT/$name.kv")" "$attempt" || break
    done
    sed -n '/^== summary/,$p' "$OUT/$name.txt" | grep -v '^JSON\|^SVG' >&2 || true
    if [ "$rc" -ne 0 ]; then
        failures+=("$name (lockproxy-bench exit $rc)")
    fi
}

run_uncontended() {
    run_loadgen "run$1-uncontended" uncontended --clients "$CLIENTS" \
        --targets "$TARGETS" --svg "$OUT/run$1-uncontended.svg"
}

run_contended() {
    run_loadgen "run$1-contended" contended --clients "$CLIENTS" --keys "$HOT_KEYS" \
        --targets "$TARGETS" --svg "$OUT/run$1-contended.svg"
}

run_rwlock() {
    run_loadgen "run$1-rwlock" rwlock --clients "$CLIENTS" --keys "$HOT_KEYS" \
        --write-pct "$WRITE_PCT" --targets "$TARGETS" \
        --svg "$OUT/run$1-rwlock.svg"
}

run_semaphore() {
    run_loadgen "run$1-semaphore" semaphore --clients "$CLIENTS" --keys "$HOT_KEYS" \
        --permits "$PERMITS" --targets "$TARGETS" \
        --svg "$OUT/run$1-semaphore.svg"
}

# The SHA of the script the proxy runs for TRYLOCK, read off MONITOR: the
# very script redis-benchmark must run.
acquire_sha() {
    local mon=$tmp/monitor.txt mpid
    redis-cli -p "$redis_port" monitor >"$mon" 2>/dev/null &
    mpid=$!
    sleep 0.3
    printf 'TRYLOCK bench:probe\r\nUNLOCK bench:probe\r\n' |
        redis-cli -p "$proxy_port" >/dev/null
    sleep 0.3
    kill "$mpid" 2>/dev/null || true
    wait "$mpid" 2>/dev/null || true
    awk '/"EVALSHA"/ && /"bench:probe"/ {gsub(/"/, "", $5); print $5; exit}' "$mon"
}

# Busy CPU seconds of the machine since boot (/proc/stat).
machine_busy_s() {
    awk -v hz="$(getconf CLK_TCK)" '/^cpu / {printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / hz}' \
        /proc/stat
}

# Redis's own CPU seconds (INFO cpu).
redis_cpu_s() {
    rcli info cpu | awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.2f", s}'
}

rcli_evalsha_calls() {
    rcli info commandstats | awk -F'[=:,]' '/^cmdstat_evalsha:/ {print $3}'
}

# One redis-benchmark -P 64 run of the acquire script ($2), measured as
# its own figure (rps), as EVALSHA calls (INFO commandstats) over the wall
# time, and with the CPU of Redis, redis-benchmark and everything else.
redis_benchmark_once() {
    local name=$1 sha=$2 c0 c1 t0 t1 b0 b1 r0 r1 rc=0 TIMEFORMAT='%U %S'
    c0=$(rcli_evalsha_calls) r0=$(redis_cpu_s) b0=$(machine_busy_s) t0=$(date +%s.%N)
    { time on_cpus "$PIN_LOAD" redis-benchmark -h 127.0.0.1 -p "$redis_port" -c 50 -P 64 \
        -n "$RB_REQUESTS" -r 100000 --csv EVALSHA "$sha" 1 'key:__rand_int__' 30000 owner \
        >"$OUT/$name.csv" 2>"$OUT/$name.err"; } 2>"$tmp/rb-time" || rc=$?
    t1=$(date +%s.%N) b1=$(machine_busy_s) r1=$(redis_cpu_s) c1=$(rcli_evalsha_calls)
    awk -F'","' -v c0="${c0:-0}" -v c1="${c1:-0}" -v t0="$t0" -v t1="$t1" -v b0="$b0" \
        -v b1="$b1" -v r0="$r0" -v r1="$r1" -v rb="$(tail -n 1 "$tmp/rb-time")" '
        NR == 2 {gsub(/"/, "", $2); rps = $2; p99 = $7}
        END {
            split(rb, u, " "); s = t1 - t0
            printf "redis-benchmark seconds %.3f\n", s
            printf "redis-benchmark scripts_per_sec %s\n", rps == "" ? "nan" : rps
            printf "redis-benchmark p99_ms %s\n", p99 == "" ? "nan" : p99
            printf "redis-benchmark evalsha_calls %d\n", c1 - c0
            printf "redis-benchmark wall_scripts_per_sec %.1f\n", (c1 - c0) / s
            printf "redis-benchmark redis_cpu_s %.2f\n", r1 - r0
            printf "redis-benchmark bench_cpu_s %.2f\n", u[1] + u[2]
            printf "redis-benchmark other_cpu_s %.2f\n", (b1 - b0) - (r1 - r0) - (u[1] + u[2])
        }' "$OUT/$name.csv" >"$OUT/$name.kv"
    return "$rc"
}

run_redis_benchmark() {
    local name=$1 sha=$2 rc attempt=0
    while :; do
        attempt=$((attempt + 1))
        wait_quiet "$name"
        rcli flushall >/dev/null
        log "run $name (redis-benchmark -P 64 -c 50 -n $RB_REQUESTS)"
        rc=0
        redis_benchmark_once "$name" "$sha" || rc=$?
        must_repeat "$name" "$(noise_pct "$OUT/$name.kv")" "$attempt" || break
    done
    if [ "$rc" -ne 0 ]; then
        failures+=("$name (redis-benchmark exit $rc)")
    fi
    cat "$OUT/$name.kv" >&2
}

run_ceiling() {
    local sha
    sha=$(acquire_sha)
    if [ -z "$sha" ]; then
        failures+=("run$1-ceiling (no EVALSHA seen for TRYLOCK)")
        return 0
    fi
    echo "$sha" >"$OUT/acquire-sha.txt"
    run_loadgen "run$1-ceiling" uncontended --pipeline "$PIPELINE" --clients "$PIPE_CLIENTS" \
        --targets proxy,direct
    run_redis_benchmark "run$1-redis-benchmark" "$sha"
}

# The sidecar set-up: the clients reach the proxy over a Unix socket (the
# proxy still reaches Redis over TCP), against the direct targets over TCP,
# then against direct targets over Redis's own Unix socket.
run_unix() {
    local sock=$tmp/lockproxy.sock
    stop_proxy
    if ! start_proxy "$IO" "$sock"; then
        cat "$tmp/proxy-$IO.log" >&2
        exit 1
    fi
    run_loadgen "run$1-unix" uncontended --clients "$CLIENTS" --proxy "unix:$sock" \
        --targets proxy,direct,direct-shared --svg "$OUT/run$1-unix.svg"
    run_loadgen "run$1-unix-direct" uncontended --clients "$CLIENTS" \
        --redis "unix:$tmp/redis.sock" --targets direct,direct-shared
    stop_proxy
    if ! start_proxy "$IO"; then
        cat "$tmp/proxy-$IO.log" >&2
        exit 1
    fi
}

# Idle memory on a fresh proxy per backend (the load runs' proxy is stopped
# and restarted afterwards, so both start from the same state).
run_idle() {
    local io name rc
    stop_proxy
    for io in uring epoll; do
        name="run$1-idle-$io"
        wait_quiet "$name"
        if ! start_proxy "$io"; then
            log "lockproxy --io $io did not start: $(tail -n 1 "$tmp/proxy-$io.log")"
            echo "idle ok 0" >"$OUT/$name.kv"
            continue
        fi
        sleep 1
        log "run $name ($IDLE idle connections)"
        rc=0
        on_cpus "$PIN_LOAD" "$BENCH" --idle "$IDLE" --proxy "127.0.0.1:$proxy_port" \
            --proxy-pid "$proxy_pid" --json "$OUT/$name.json" --kv "$OUT/$name.kv" \
            >"$OUT/$name.txt" 2>&1 || rc=$?
        grep -E 'added by|problem' "$OUT/$name.txt" >&2 || true
        mark_noise "$name" 0
        [ "$rc" -eq 0 ] || failures+=("$name (lockproxy-bench exit $rc)")
        stop_proxy
    done
    if ! start_proxy "$IO"; then
        cat "$tmp/proxy-$IO.log" >&2
        exit 1
    fi
}

# The wheel benchmarks' per-operation counters (ns_per_op: one schedule or
# one cancel; ns_per_wheel_op: schedule, cancel or expiry in the lock mix),
# medians of 5 repetitions. The counters are rates (seconds per op) in the
# JSON: scaled to ns. The JSON has one key per line.
run_micro() {
    local rc=0
    wait_quiet micro
    log "run microbenchmarks (BM_Wheel*, 5 repetitions)"
    on_cpus "$PIN_LOAD" "$MICRO" --benchmark_filter='BM_Wheel' --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true --benchmark_out="$OUT/micro.json" \
        --benchmark_out_format=json >"$OUT/micro.txt" 2>&1 || rc=$?
    mark_noise micro 0
    [ "$rc" -eq 0 ] || failures+=("microbenchmarks (exit $rc)")
    awk '/"name":/ {name = $2; gsub(/[",]/, "", name)}
        /"(ns_per_op|ns_per_wheel_op)":/ && name ~ /_median$/ {
            key = $1; gsub(/[":]/, "", key); v = $2; gsub(/,/, "", v)
            sub(/_median$/, "", name); printf "micro %s.%s %.2f\n", name, key, v * 1e9
        }' "$OUT/micro.json" >"$OUT/micro.kv" 2>/dev/null || true
    cat "$OUT/micro.kv" >&2
}

# ---- summary ---------------------------------------------------------------

# Median of the blank-separated numbers in $1 ("nan" when there are none).
median_of() {
    tr ' ' '\n' <<<"$1" | awk '$1 != "" && $1 != "nan"' | sort -g | awk '{v[NR] = $1} END {
        if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2];
        else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# Values of an awk expression over the runs' kv files of one step, and
# their median formatted with a printf format, in one awk (the summary has
# some 150 rows): $1 the step (file suffix), $2 the expression over
# k["section key"], $3 the format. Prints "MEDIAN|V1 V2 ...", the median
# "n/a" when no value is a number.
step_values() {
    local step=$1 expr=$2 fmt=$3 files=()
    for f in "$OUT"/run*-"$step".kv; do
        [ -e "$f" ] && files+=("$f")
    done
    if [ "${#files[@]}" -eq 0 ]; then
        echo "n/a|"
        return 0
    fi
    awk -v fmt="$fmt" '
        function emit(v) {
            v = '"$expr"'
            vals[++n] = (v == v + 0 && (v "") !~ /nan|inf/) ? v : "nan"
            delete k
        }
        FNR == 1 && NR > 1 { emit() }
        { k[$1 " " $2] = $3 }
        END {
            emit(); m = 0; out = ""
            for (i = 1; i <= n; i++) {
                out = out vals[i] " "
                if (vals[i] != "nan") s[++m] = vals[i] + 0
            }
            for (i = 2; i <= m; i++)
                for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
            if (m == 0) med = "n/a"
            else med = sprintf(fmt, (m % 2) ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2)
            print med "|" out
        }' "${files[@]}" 2>/dev/null || echo "n/a|"
}

# The noise column for rows built from steps "$@" (micro: the file
# micro.noise), into NOISE: "noisy k/n" when k of the n runs had a noisy
# step among them (mark_noise), empty when none did or nothing was
# recorded. Cached per set of steps (not in a subshell: call it directly).
declare -A NOISE_CACHE=()
NOISE=''
noise_of() {
    local r s f n=0 k=0 any bad
    if [ -n "${NOISE_CACHE[$*]+set}" ]; then
        NOISE=${NOISE_CACHE[$*]}
        return 0
    fi
    for r in $(seq "$RUNS"); do
        any=0 bad=0
        for s in "$@"; do
            f="$OUT/run$r-$s.noise"
            [ "$s" = micro ] && f="$OUT/micro.noise"
            [ -e "$f" ] || continue
            any=1
            grep -q '^noisy=1' "$f" && bad=1
        done
        n=$((n + any))
        k=$((k + bad))
        [ "$s" = micro ] && break
    done
    NOISE=''
    if [ "$k" -gt 0 ]; then
        NOISE="noisy $k/$n"
    fi
    NOISE_CACHE[$*]=$NOISE
}

# $2 formatted with the printf format $1, or "n/a".
fmt_num() {
    awk -v f="$1" -v v="$2" 'BEGIN {if (v == "nan" || v == "") print "n/a"; else printf f, v}'
}

# One summary line: label, value, op, goal, verdict, noise, runs.
row_line() {
    printf "%-46s %12s %-4s %-8s %-5s %-10s runs: %s\n" "$@"
}

# A line with a goal: $1 label, $2 median (a number or "nan"), $3
# comparison (">=", "<=" or "<"), $4 goal, $5 printf format, $6 the
# per-run values, $7 noise. A quick run's 1-second figures judge nothing:
# "smoke" stands where PASS or MISS would.
verdict_line() {
    local what=$1 med=$2 op=$3 goal=$4 fmt=$5 runs=$6 noise=${7:-} verdict
    verdict=$(awk -v m="$med" -v op="$op" -v g="$goal" -v quick="$QUICK" 'BEGIN {
        if (quick == 1) { print "smoke"; exit }
        if (m == "nan") { print "n/a"; exit }
        ok = (op == ">=") ? (m + 0 >= g + 0) : (op == "<") ? (m + 0 < g + 0) : (m + 0 <= g + 0);
        print ok ? "PASS" : "MISS" }')
    row_line "$what" "$(fmt_num "$fmt" "$med")" "$op" "$goal" "$verdict" "$noise" "$runs"
}

# $1 label, $2 step, $3 expression, $4 op, $5 goal, $6 printf format.
target_row() {
    local r
    r=$(step_values "$2" "$3" "%.17g")
    noise_of "$2"
    verdict_line "$1" "$(sed 's/n\/a/nan/' <<<"${r%%|*}")" "$4" "$5" "$6" "${r#*|}" "$NOISE"
}

# A figure shown for context (no goal): $1 label, $2 step, $3 expression,
# $4 printf format.
info_row() {
    local r
    r=$(step_values "$2" "$3" "$4")
    noise_of "$2"
    row_line "$1" "${r%%|*}" "" "" "" "$NOISE" "${r#*|}"
}

# Per run, figure $2 of step $1 over figure $4 of step $3 (two files of
# the same run; the figures are "section key").
paired_ratios() {
    local r a b
    for r in $(seq "$RUNS"); do
        a="$OUT/run$r-$1.kv" b="$OUT/run$r-$3.kv"
        if [ ! -e "$a" ] || [ ! -e "$b" ]; then
            continue
        fi
        awk -v ka="$2" -v kb="$4" 'FNR == NR {x[$1 " " $2] = $3; next} {y[$1 " " $2] = $3}
            END {p = x[ka]; q = y[kb]; print (q > 0 && p == p + 0) ? p / q : "nan"}' "$a" "$b"
    done
}

# A summary line for a paired ratio: $1 label, $2 op, $3 goal ("" for
# context only), $4 format, then the paired_ratios arguments.
paired_row() {
    local label=$1 op=$2 goal=$3 fmt=$4 vals noise
    shift 4
    vals=$(paired_ratios "$@" | tr '\n' ' ')
    noise_of "$1" "$3"
    noise=$NOISE
    if [ -n "$goal" ]; then
        verdict_line "$label" "$(median_of "$vals")" "$op" "$goal" "$fmt" "$vals" "$noise"
    else
        row_line "$label" "$(fmt_num "$fmt" "$(median_of "$vals")")" "" "" "" "$noise" "$vals"
    fi
}

# The targets of the load steps, in table order.
ALL_TARGETS="proxy direct direct-shared twemproxy"

# Redis CPU per acquisition, the headline cost figure, for every target of
# step $1 (what one lock operation costs the Redis thread all share).
redis_cpu_rows() {
    local t
    for t in $ALL_TARGETS; do
        info_row "  $t Redis CPU us/acquisition" "$1" "k[\"$t redis_cpu_us_per_acq\"]" "%.1f"
    done
}

# CPU microseconds per acquire+release pair, by process, for step $1 and
# the targets $2 (default: all): where the time goes ("proxy" is lockproxy
# or nutcracker).
cpu_rows() {
    local t p
    for t in ${2:-$ALL_TARGETS}; do
        for p in redis proxy bench other; do
            if [ "$p" = proxy ] && [ "$t" != proxy ] && [ "$t" != twemproxy ]; then
                continue
            fi
            info_row "  $t run: $p CPU us/pair" "$1" \
                "1e6 * k[\"$t ${p}_cpu_s\"] / k[\"$t acquisitions\"]" "%.1f"
        done
    done
}

# Throughput, p99 and Redis commands per acquisition of every target of
# step $1 ($2: its label, $3: what a throughput unit is).
target_rows() {
    local step=$1 label=$2 unit=$3 t
    for t in $ALL_TARGETS; do
        info_row "  $t $unit" "$step" "k[\"$t ops_per_sec\"]" "%.0f"
    done
    for t in $ALL_TARGETS; do
        info_row "  $t p99 ms" "$step" "k[\"$t p99_us\"] / 1000" "%.2f"
    done
    for t in $ALL_TARGETS; do
        info_row "  $t Redis cmds/acquisition" "$step" "k[\"$t redis_cmds_per_acq\"]" "%.2f"
    done
}

# The rows of a synchronizer step ($1: rwlock or semaphore; $2 its label;
# LP_BENCH_WRITE_PCT and LP_BENCH_PERMITS are in environment.txt):
# throughput ratios, Redis CPU and commands per acquisition, p99, CPU per
# pair. For context only: these steps have no goal.
sync_rows() {
    local step=$1 label=$2 t
    local ops='k["proxy ops_per_sec"]'
    for t in direct direct-shared twemproxy; do
        info_row "$label ops/s, proxy/$t" "$step" "$ops / k[\"$t ops_per_sec\"]" "%.2fx"
    done
    for t in direct direct-shared twemproxy; do
        info_row "$label p99, proxy/$t" "$step" "k[\"proxy p99_us\"] / k[\"$t p99_us\"]" "%.2fx"
    done
    redis_cpu_rows "$step"
    target_rows "$step" "$label" ops/s
    cpu_rows "$step"
}

summary_rows() {
    local u=uncontended c=contended t
    local ops='k["proxy ops_per_sec"]'
    row_line target median op goal "" noise "per run"
    if wants uncontended; then
        target_row "uncontended ops/s, proxy/direct" $u "$ops / k[\"direct ops_per_sec\"]" \
            ">=" 1.5 "%.2fx"
        target_row "uncontended ops/s, proxy/direct-shared" $u \
            "$ops / k[\"direct-shared ops_per_sec\"]" ">=" 1.5 "%.2fx"
        target_row "uncontended p99, proxy/direct" $u \
            'k["proxy p99_us"] / k["direct p99_us"]' "<=" 1 "%.2fx"
        target_row "uncontended p99, proxy/direct-shared" $u \
            'k["proxy p99_us"] / k["direct-shared p99_us"]' "<=" 1 "%.2fx"
        info_row "uncontended ops/s, proxy/twemproxy" $u "$ops / k[\"twemproxy ops_per_sec\"]" \
            "%.2fx"
        info_row "uncontended p99, proxy/twemproxy" $u \
            'k["proxy p99_us"] / k["twemproxy p99_us"]' "%.2fx"
        # The proxy's own cost per pair against Redis's behind it (issue 23:
        # at or below it is the goal), and against Redis's serving the same
        # clients directly (the same client socket work).
        target_row "uncontended CPU/pair, proxy/Redis behind it" $u \
            'k["proxy proxy_cpu_s"] / k["proxy redis_cpu_s"]' "<=" 1 "%.2fx"
        info_row "  CPU/pair, proxy / Redis serving direct" $u \
            '(k["proxy proxy_cpu_s"] / k["proxy acquisitions"]) / (k["direct redis_cpu_s"] / k["direct acquisitions"])' \
            "%.2fx"
        redis_cpu_rows $u
        target_rows $u uncontended ops/s
        info_row "  Redis CPU per pair, direct / proxy run" $u \
            '(k["direct redis_cpu_s"] / k["direct acquisitions"]) / (k["proxy redis_cpu_s"] / k["proxy acquisitions"])' \
            "%.2fx"
        cpu_rows $u
    fi
    if wants contended; then
        target_row "contended hand-offs/s, proxy/direct" $c "$ops / k[\"direct ops_per_sec\"]" \
            ">=" 3 "%.2fx"
        target_row "contended hand-offs/s, proxy/direct-shared" $c \
            "$ops / k[\"direct-shared ops_per_sec\"]" ">=" 3 "%.2fx"
        info_row "contended hand-offs/s, proxy/twemproxy" $c \
            "$ops / k[\"twemproxy ops_per_sec\"]" "%.2fx"
        target_row "contended Redis cmds/acquisition, proxy" $c \
            'k["proxy redis_cmds_per_acq"]' "<=" 3 "%.2f"
        redis_cpu_rows $c
        target_rows $c contended hand-offs/s
        for t in $ALL_TARGETS; do
            info_row "  $t Jain index" $c "k[\"$t jain\"]" "%.3f"
        done
        cpu_rows $c
    fi
    if wants rwlock; then
        sync_rows rwlock rwlock
        for t in $ALL_TARGETS; do
            info_row "  $t writes, % of grants" rwlock \
                "100 * k[\"$t writes\"] / k[\"$t acquisitions\"]" "%.1f"
        done
    fi
    if wants semaphore; then
        sync_rows semaphore semaphore
    fi
    if wants idle; then
        target_row "idle $IDLE conns, RSS added MiB, io_uring" idle-uring \
            'k["idle ok"] == 1 ? k["idle rss_added_kib"] / 1024 : "nan"' "<=" 20 "%.2f"
        target_row "idle $IDLE conns, RSS added MiB, epoll" idle-epoll \
            'k["idle ok"] == 1 ? k["idle rss_added_kib"] / 1024 : "nan"' "<=" 20 "%.2f"
    fi
    if wants micro && [ -e "$OUT/micro.kv" ]; then
        noise_of micro
        while read -r _ b v; do
            verdict_line "wheel ${b/BM_Wheel/}" "$v" "<" 50 "%.1f ns" \
                "(median of 5 repetitions)" "$NOISE"
        done <"$OUT/micro.kv"
    fi
    if wants ceiling; then
        paired_row "ceiling scripts/s, proxy/redis-benchmark -P64" ">=" 0.85 "%.3f" \
            ceiling "proxy scripts_per_sec" redis-benchmark "redis-benchmark scripts_per_sec"
        info_row "  proxy scripts/s (pipelined)" ceiling 'k["proxy scripts_per_sec"]' "%.0f"
        info_row "  direct scripts/s (same pipelining)" ceiling \
            'k["direct scripts_per_sec"]' "%.0f"
        info_row "  proxy/direct at the same pipelining" ceiling \
            'k["proxy scripts_per_sec"] / k["direct scripts_per_sec"]' "%.2fx"
        info_row "  Redis calls per pair, proxy (scripts incl.)" ceiling \
            'k["proxy redis_calls_per_acq"]' "%.1f"
        info_row "  Redis calls per pair, direct (scripts incl.)" ceiling \
            'k["direct redis_calls_per_acq"]' "%.1f"
        info_row "  redis-benchmark scripts/s" redis-benchmark \
            'k["redis-benchmark scripts_per_sec"]' "%.0f"
        info_row "  proxy run: Redis CPU, % of one core" ceiling \
            '100 * k["proxy redis_cpu_s"] / k["proxy seconds"]' "%.0f"
        info_row "  redis-benchmark run: Redis CPU, % of one core" redis-benchmark \
            '100 * k["redis-benchmark redis_cpu_s"] / k["redis-benchmark seconds"]' "%.0f"
        info_row "  proxy run: Redis us/script" ceiling \
            '1e6 * k["proxy redis_cpu_s"] / (k["proxy scripts_per_sec"] * k["proxy seconds"])' \
            "%.2f"
        info_row "  redis-benchmark run: Redis us/script" redis-benchmark \
            '1e6 * k["redis-benchmark redis_cpu_s"] / k["redis-benchmark evalsha_calls"]' "%.2f"
    fi
    if wants unix; then
        info_row "sidecar: proxy via Unix socket, ops/s" unix "$ops" "%.0f"
        paired_row "  proxy (unix) / direct (TCP)" "" "" "%.2fx" \
            unix "proxy ops_per_sec" unix "direct ops_per_sec"
        paired_row "  proxy (unix) / direct-shared (TCP)" "" "" "%.2fx" \
            unix "proxy ops_per_sec" unix "direct-shared ops_per_sec"
        paired_row "  proxy (unix) / direct (unix)" "" "" "%.2fx" \
            unix "proxy ops_per_sec" unix-direct "direct ops_per_sec"
        paired_row "  proxy (unix) / direct-shared (unix)" "" "" "%.2fx" \
            unix "proxy ops_per_sec" unix-direct "direct-shared ops_per_sec"
        paired_row "  p99, proxy (unix) / direct (TCP)" "" "" "%.2fx" \
            unix "proxy p99_us" unix "direct p99_us"
        info_row "  direct (unix) ops/s" unix-direct 'k["direct ops_per_sec"]' "%.0f"
        # Issue 23's goal over the sidecar's transport: the proxy's CPU per
        # pair at or below Redis's behind it (BENCHMARKS.md, Proxy CPU per
        # lock+unlock pair, Over a Unix socket).
        target_row "sidecar (unix) CPU/pair, proxy/Redis behind it" unix \
            'k["proxy proxy_cpu_s"] / k["proxy redis_cpu_s"]' "<=" 1 "%.2fx"
        cpu_rows unix "proxy direct direct-shared"
    fi
}

write_summary() {
    {
        echo "lockproxy benchmark summary: medians of the runs listed (results in $OUT)"
        { grep -E '^(date|commit|modified):' "$OUT/environment.txt" 2>/dev/null || true; } |
            tr '\n' ' ' | sed 's/ $/\n/'
        if [ "$QUICK" = 1 ]; then
            echo "SMOKE TEST (--quick): one 1-second run of each comparison; it checks that the" \
                "set-up works, its figures are not results (no PASS/MISS; do not quote)"
        fi
        summary_rows
        if compgen -G "$OUT/*.noise" >/dev/null && grep -qs '^noisy=1' "$OUT"/*.noise; then
            echo "noise: rows marked noisy come from steps that started on a machine more than" \
                "${MAX_BUSY}% busy or where other processes took more than ${MAX_OTHER}% of a" \
                "core (see noise.txt): compare them with care"
        fi
        if [ "${#failures[@]}" -gt 0 ]; then
            printf 'FAILED: %s\n' "${failures[@]}"
        fi
    } | tee "$OUT/summary.txt"
}

# ---- main ------------------------------------------------------------------

# LP_BENCH_SUMMARY=DIR prints the summary of the results already in DIR
# (e.g. several result directories' run*-* files merged and renumbered).
if [ -n "${LP_BENCH_SUMMARY:-}" ]; then
    OUT=$LP_BENCH_SUMMARY
    RUNS=$(find "$OUT" -maxdepth 1 -name 'run*-*.kv' | sed 's|.*/run\([0-9]*\)-.*|\1|' |
        sort -n | tail -n 1)
    if [ -z "$RUNS" ]; then
        log "no run*-*.kv files in $OUT"
        exit 1
    fi
    if compgen -G "$OUT/run*-unix.kv" >/dev/null; then
        ONLY="$ONLY unix"
    fi
    if grep -qs 'quick=1' "$OUT/environment.txt"; then
        QUICK=1 # a smoke test's results stay one
    fi
    write_summary
    exit 0
fi
build
OUT=$OUT_BASE/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
ln -sfn "$(basename "$OUT")" "$OUT_BASE/latest"
describe_machine
start_redis
if ! start_proxy "$IO"; then
    cat "$tmp/proxy-$IO.log" >&2
    exit 1
fi
start_twemproxy
twem_desc=n/a
if [ -n "$twem_pid" ]; then
    twem_desc="127.0.0.1:$twem_port (pid $twem_pid)"
fi
log "redis-server 127.0.0.1:$redis_port (pid $redis_pid), lockproxy 127.0.0.1:$proxy_port" \
    "(pid $proxy_pid, --io $IO), twemproxy $twem_desc; results in $OUT"
for run in $(seq "$RUNS"); do
    log "---- run $run of $RUNS"
    if wants uncontended; then run_uncontended "$run"; fi
    if wants contended; then run_contended "$run"; fi
    if wants rwlock; then run_rwlock "$run"; fi
    if wants semaphore; then run_semaphore "$run"; fi
    if wants ceiling; then run_ceiling "$run"; fi
    if wants idle; then run_idle "$run"; fi
    if wants unix; then run_unix "$run"; fi
done
if wants micro; then run_micro; fi
write_summary
[ "${#failures[@]}" -eq 0 ]
