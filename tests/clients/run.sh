#!/usr/bin/env bash
# Runs one real Redis client library's test against lockproxy, as a ctest
# case (tests/CMakeLists.txt): `run.sh redis-py|ioredis|node-redis`, or the
# tests of one of lockproxy's own client libraries (clients/):
# `run.sh lib-python|lib-go|lib-node-ioredis|lib-node-redis`.
#
# It starts a throw-away redis-server and two lockproxy instances on free
# loopback ports: one without auth, listening on plain TCP, on a Unix
# socket (LP_UNIX, the sidecar's transport) and on a tls://
# listener (a CA, a server certificate for 127.0.0.1 and a client
# certificate are made here with the openssl command; client certificates
# are optional there, and verified when sent), and one with --requirepass. Then it runs the
# client's script (redis_py.py, ioredis.js, node_redis.js beside this file)
# with their addresses in LP_* variables, and stops everything on exit.
#
# The node libraries come from npm, installed by npm-install.sh into a
# cache under the build directory (LP_CLIENTS_CACHE). Exit status 77
# (SKIPPED in ctest) when the client cannot run here, saying why: no
# python3-redis (scripts/deps.sh installs it), Node.js missing or too old,
# or the npm registry unreachable.
set -euo pipefail

client=${1:?usage: run.sh redis-py|redis-py-lock|ioredis|node-redis|lib-python|lib-go|lib-node-ioredis|lib-node-redis}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROXY=${LP_PROXY_BIN:?LP_PROXY_BIN must name the lockproxy binary}
CACHE=${LP_CLIENTS_CACHE:-$(dirname "$PROXY")/clients-cache}

skip() {
    echo "SKIP: $*"
    exit 77
}

command -v redis-server >/dev/null || skip "redis-server is not installed (scripts/deps.sh)"
command -v openssl >/dev/null || skip "the openssl command is not installed (scripts/deps.sh)"
command -v python3 >/dev/null || skip "python3 is not installed (scripts/deps.sh)"

debian_python() {
    # Debian's python3-redis is for Debian's python3, which another python3
    # on the PATH (pyenv, a venv) may hide.
    local candidate
    for candidate in /usr/bin/python3 python3; do
        if "$candidate" -c 'import redis' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    skip "python3-redis is not installed (scripts/deps.sh installs it)" >&2
}

case $client in
lib-python)
    py=$(debian_python) || exit $?
    run=("$py" "$HERE/../../clients/python/tests/test_lockproxy.py")
    ;;
lib-go)
    command -v go >/dev/null || skip "Go is not installed (scripts/deps.sh installs golang-go)"
    [ -d /usr/share/gocode/src/github.com/gomodule/redigo ] ||
        skip "redigo is not installed (scripts/deps.sh installs golang-github-gomodule-redigo-dev)"
    run=("$HERE/../../clients/go/test.sh" "$CACHE/go")
    ;;
lib-node-ioredis | lib-node-redis)
    modules=$("$HERE/npm-install.sh" "$CACHE") || exit $?
    export NODE_PATH=$modules
    run=(node --test "$HERE/../../clients/node/test/${client#lib-node-}.test.js")
    ;;
redis-py)
    py=$(debian_python) || exit $?
    run=("$py" "$HERE/redis_py.py")
    ;;
redis-py-lock)
    py=$(debian_python) || exit $?
    run=("$py" "$HERE/redis_py_lock.py")
    ;;
ioredis | node-redis)
    modules=$("$HERE/npm-install.sh" "$CACHE") || exit $?
    export NODE_PATH=$modules
    run=(node "$HERE/${client/-/_}.js")
    ;;
*)
    echo "run.sh: unknown client '$client'" >&2
    exit 2
    ;;
esac

tmp=$(mktemp -d "${TMPDIR:-/tmp}/lp-clients-XXXXXX")
pids=()
cleanup() {
    local rc=$?
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
        for log in "$tmp"/*.log; do
            echo "----- tail of $log -----"
            tail -n 30 "$log"
        done
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits up to 15 s for "PING" to answer on port (args: port [redis-cli options]).
wait_ping() {
    local port=$1
    shift
    for _ in $(seq 150); do
        if redis-cli -p "$port" "$@" PING 2>/dev/null | grep -q PONG; then
            return 0
        fi
        sleep 0.1
    done
    echo "run.sh: nothing answers PING on port $port" >&2
    return 1
}

# Throw-away certificates: a CA, and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj "/CN=lockproxy client-test CA" -keyout "$tmp/ca.key" -out "$tmp/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=localhost" \
    -keyout "$tmp/server.key" -out "$tmp/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tmp/san.ext"
openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" \
    -CAcreateserial -days 2 -extfile "$tmp/san.ext" -out "$tmp/server.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=client" \
    -keyout "$tmp/client.key" -out "$tmp/client.csr" 2>/dev/null
openssl x509 -req -in "$tmp/client.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" \
    -CAcreateserial -days 2 -out "$tmp/client.crt" 2>/dev/null

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$tmp" >"$tmp/redis.log" 2>&1 &
pids+=($!)
wait_ping "$redis_port"

proxy_pids=()
port=$(free_port)
tls_port=$(free_port)
"$PROXY" --listen "127.0.0.1:$port" --listen "tls://127.0.0.1:$tls_port" \
    --listen "unix://$tmp/lp.sock" --unixsocketperm 660 \
    --tls-cert-file "$tmp/server.crt" --tls-key-file "$tmp/server.key" \
    --tls-ca-cert-file "$tmp/ca.crt" --tls-auth-clients optional \
    --upstream "redis://127.0.0.1:$redis_port" --lock-watchdog-timeout 900 \
    >"$tmp/proxy.log" 2>&1 &
pids+=($!)
proxy_pids+=($!)
auth_port=$(free_port)
"$PROXY" --listen "127.0.0.1:$auth_port" --requirepass s3cret \
    --upstream "redis://127.0.0.1:$redis_port" >"$tmp/proxy-auth.log" 2>&1 &
pids+=($!)
proxy_pids+=($!)
wait_ping "$port"
wait_ping "$auth_port"

export LP_PORT=$port LP_TLS_PORT=$tls_port LP_AUTH_PORT=$auth_port LP_PASSWORD=s3cret
export LP_UNIX=$tmp/lp.sock
export LP_CA=$tmp/ca.crt LP_REDIS_PORT=$redis_port
export LP_CLIENT_CERT=$tmp/client.crt LP_CLIENT_KEY=$tmp/client.key
"${run[@]}"

# The proxies must still be up, stop cleanly, and (sanitizer builds) have
# reported nothing.
for pid in "${proxy_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || {
        echo "run.sh: a proxy died during the test" >&2
        exit 1
    }
    kill -TERM "$pid"
done
status=0
for pid in "${proxy_pids[@]}"; do
    wait "$pid" || status=$?
done
if [ "$status" -ne 0 ] || grep -qE 'Sanitizer|runtime error:' "$tmp"/proxy*.log; then
    echo "run.sh: a proxy exited with status $status or logged a sanitizer report" >&2
    exit 1
fi
