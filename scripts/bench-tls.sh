#!/usr/bin/env bash
# What TLS costs the proxy: the uncontended lock+unlock loop of
# lockproxy-bench (LP_TLS_CLIENTS clients, 200 by default) through one
# proxy four ways, side by side in the same run (the configurations take
# turns, LP_TLS_RUNS rounds):
#   plain        clients over TCP, upstream redis://
#   tls-clients  clients over TLS (a tls:// listener of the same proxy)
#   tls-upstream clients over TCP, upstream rediss:// (a second proxy)
#   tls-both     clients over TLS, upstream rediss://
# and, when LP_TLS_BASE names another lockproxy binary (e.g. one built from
# the commit before TLS), that binary with plain clients and upstream, to
# show that plain connections do not pay for TLS. One redis-server serves
# both a TCP and a TLS port. Certificates: a throw-away CA and a server
# certificate for 127.0.0.1 made with the openssl command.
#
# Prints one line per configuration: medians over the rounds of lock+unlock
# pairs/s, proxy CPU per pair (µs, from /proc/PID/stat), Redis CPU per pair
# and p50/p99 acquisition latency, and keeps the bench outputs in
# LP_TLS_OUT (default bench-results/tls-<date>). Settings: LP_TLS_RUNS (3),
# LP_TLS_DURATION (5 s measured), LP_TLS_WARMUP (1 s), LP_TLS_CLIENTS (200),
# LP_TLS_IO (auto), LP_BENCH_BUILD_DIR (build-rel).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${LP_BENCH_BUILD_DIR:-$ROOT/build-rel}
RUNS=${LP_TLS_RUNS:-3}
DURATION=${LP_TLS_DURATION:-5}
WARMUP=${LP_TLS_WARMUP:-1}
CLIENTS=${LP_TLS_CLIENTS:-200}
IO=${LP_TLS_IO:-auto}
BASE=${LP_TLS_BASE:-}
OUT=${LP_TLS_OUT:-$ROOT/bench-results/tls-$(date +%Y%m%d-%H%M%S)}

"$ROOT/scripts/deps.sh"
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

# Certificates: CA, and a server certificate for 127.0.0.1 and localhost.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=lockproxy-bench-ca -keyout "$TMP/ca.key" -out "$TMP/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$TMP/server.key" -out "$TMP/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$TMP/san.ext"
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" \
    -CAcreateserial -days 2 -extfile "$TMP/san.ext" -out "$TMP/server.pem" 2>/dev/null

wait_port() { # PORT: until something listens there
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.05
    done
    echo "bench-tls.sh: nothing listens on $1" >&2
    return 1
}

RP=$(free_port)
RT=$(free_port)
redis-server --port "$RP" --tls-port "$RT" --bind 127.0.0.1 --save "" --appendonly no \
    --tls-cert-file "$TMP/server.pem" --tls-key-file "$TMP/server.key" \
    --tls-ca-cert-file "$TMP/ca.pem" --tls-auth-clients no >"$OUT/redis.log" 2>&1 &
pids+=($!)
wait_port "$RP"

TLS_FLAGS=(--tls-cert-file "$TMP/server.pem" --tls-key-file "$TMP/server.key"
    --tls-auth-clients no --upstream-tls-ca-cert-file "$TMP/ca.pem" --io "$IO")
# start_proxy NAME BINARY UPSTREAM [extra...]: sets PORT_<NAME>, TLSPORT_<NAME>, PID_<NAME>
start_proxy() {
    local name=$1 bin=$2 up=$3 p t
    shift 3
    p=$(free_port)
    t=$(free_port)
    "$bin" --listen "127.0.0.1:$p" --listen "tls://127.0.0.1:$t" --upstream "$up" \
        "$@" >"$OUT/proxy-$name.log" 2>&1 &
    pids+=($!)
    printf -v "PID_$name" '%s' "$!"
    printf -v "PORT_$name" '%s' "$p"
    printf -v "TLSPORT_$name" '%s' "$t"
    wait_port "$p"
}
start_proxy A "$BUILD/lockproxy" "redis://127.0.0.1:$RP" "${TLS_FLAGS[@]}"
start_proxy B "$BUILD/lockproxy" "rediss://127.0.0.1:$RT" "${TLS_FLAGS[@]}"
CONFIGS=(plain tls-clients tls-upstream tls-both)
if [ -n "$BASE" ]; then
    p=$(free_port)
    "$BASE" --listen "127.0.0.1:$p" --upstream "redis://127.0.0.1:$RP" --io "$IO" \
        >"$OUT/proxy-base.log" 2>&1 &
    pids+=($!)
    PID_BASE=$!
    PORT_BASE=$p
    wait_port "$p"
    CONFIGS+=(base-plain)
fi

run_one() { # CONFIG ROUND
    local cfg=$1 round=$2 args=()
    case $cfg in
    plain) args=(--proxy "127.0.0.1:$PORT_A" --proxy-pid "$PID_A") ;;
    tls-clients) args=(--proxy "127.0.0.1:$TLSPORT_A" --proxy-pid "$PID_A"
        --tls-ca-cert-file "$TMP/ca.pem") ;;
    tls-upstream) args=(--proxy "127.0.0.1:$PORT_B" --proxy-pid "$PID_B") ;;
    tls-both) args=(--proxy "127.0.0.1:$TLSPORT_B" --proxy-pid "$PID_B"
        --tls-ca-cert-file "$TMP/ca.pem") ;;
    base-plain) args=(--proxy "127.0.0.1:$PORT_BASE" --proxy-pid "$PID_BASE") ;;
    esac
    "$BUILD/lockproxy-bench" uncontended --targets proxy --clients "$CLIENTS" \
        --duration "$DURATION" --warmup "$WARMUP" --redis "127.0.0.1:$RP" --io "$IO" \
        --kv "$OUT/$cfg-$round.kv" "${args[@]}" >"$OUT/$cfg-$round.txt" 2>&1
}

for round in $(seq 1 "$RUNS"); do
    for cfg in "${CONFIGS[@]}"; do
        echo "round $round: $cfg"
        run_one "$cfg" "$round"
    done
done

# Medians over the rounds, from the key/value outputs.
{
    printf '%-13s %12s %16s %16s %9s %9s\n' config pairs/s "proxy us/pair" "redis us/pair" \
        "p50 ms" "p99 ms"
    for cfg in "${CONFIGS[@]}"; do
        python3 - "$OUT" "$cfg" "$RUNS" <<'EOF'
import statistics, sys
out, cfg, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = []
for r in range(1, runs + 1):
    kv = {}
    for line in open(f"{out}/{cfg}-{r}.kv"):
        parts = line.split()
        if len(parts) == 3 and parts[0] == "proxy":
            kv[parts[1]] = parts[2]
    acq = float(kv["acquisitions"])
    rows.append((float(kv["ops_per_sec"]), float(kv["proxy_cpu_s"]) / acq * 1e6,
                 float(kv["redis_cpu_s"]) / acq * 1e6, float(kv["p50_us"]) / 1000,
                 float(kv["p99_us"]) / 1000))
med = [statistics.median(col) for col in zip(*rows)]
each = ",".join(f"{r[1]:.1f}" for r in rows)
print(f"{cfg:<13} {med[0]:12.0f} {med[1]:10.1f} [{each}] {med[2]:9.1f} {med[3]:9.2f} {med[4]:9.2f}")
EOF
    done
} | tee "$OUT/summary.txt"
