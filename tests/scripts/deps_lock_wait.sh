#!/usr/bin/env bash
# scripts/deps.sh waits for the package lock instead of failing at once
# (ctest scripts.deps_lock_wait). It runs the real deps.sh with apt-get and
# dpkg-query replaced on the PATH (no package is installed or changed): the
# stand-in dpkg-query reports every package missing, the stand-in apt-get
# answers as Debian 12's does while another process holds the lock
# ("E: Could not get lock ... It is held by process N (unattended-upgr)",
# exit 100) for its first calls. Checked: deps.sh says it waits and who
# holds the lock, passes DPkg::Lock::Timeout, and succeeds once the lock is
# free; it gives up after LP_DEPS_LOCK_TIMEOUT with a message; an apt-get
# failure that is not the lock fails at once.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lp-deps-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"

cat >"$tmp/bin/dpkg-query" <<'EOF'
#!/bin/sh
exit 1
EOF
# apt-get: fails as a held lock makes it fail while $tmp/locked_calls > 0
# (counting down), with "other" fails differently; logs its arguments.
cat >"$tmp/bin/apt-get" <<EOF
#!/bin/sh
echo "\$*" >>"$tmp/calls"
if [ -e "$tmp/other" ]; then
    echo "E: Unable to locate package nonesuch" >&2
    exit 100
fi
n=\$(cat "$tmp/locked_calls")
if [ "\$n" -gt 0 ]; then
    echo \$((n - 1)) >"$tmp/locked_calls"
    echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (unattended-upgr)" >&2
    echo "E: Unable to lock directory /var/lib/apt/lists/" >&2
    exit 100
fi
exit 0
EOF
chmod +x "$tmp/bin/dpkg-query" "$tmp/bin/apt-get"

fail() {
    echo "FAIL: $*"
    echo "---- deps.sh output ----"
    cat "$tmp/out"
    exit 1
}

run_deps() {
    : >"$tmp/calls"
    local t=$SECONDS rc=0
    PATH="$tmp/bin:$PATH" LP_DEPS_LOCK_TIMEOUT=$1 timeout 120 "$ROOT/scripts/deps.sh" \
        >"$tmp/out" 2>&1 || rc=$?
    elapsed=$((SECONDS - t))
    return "$rc"
}

# 1. The lock is held for two attempts, then free: deps.sh waits, says so, succeeds.
echo 2 >"$tmp/locked_calls"
run_deps 60 || fail "deps.sh failed while the lock was only held for a while"
grep -q 'holds the package lock; waiting' "$tmp/out" || fail "no message that it waits"
grep -q 'held by process 4242 (unattended-upgr)' "$tmp/out" || fail "the holder is not named"
grep -q 'DPkg::Lock::Timeout=' "$tmp/calls" || fail "apt-get got no DPkg::Lock::Timeout"
grep -q 'install' "$tmp/calls" || fail "deps.sh never got to apt-get install"
echo "ok: waited ${elapsed} s for a held lock, then installed"

# 2. The lock stays held: deps.sh gives up after LP_DEPS_LOCK_TIMEOUT, saying why.
echo 1000000 >"$tmp/locked_calls"
if run_deps 3; then
    fail "deps.sh succeeded while the lock was held"
fi
grep -q 'gave up after 3 s waiting for the package lock' "$tmp/out" || fail "no give-up message"
if [ "$elapsed" -lt 3 ] || [ "$elapsed" -gt 30 ]; then
    fail "gave up after ${elapsed} s, not about 3"
fi
echo "ok: gave up after ${elapsed} s (LP_DEPS_LOCK_TIMEOUT=3)"

# 3. Another failure is not waited for.
touch "$tmp/other"
if run_deps 60; then
    fail "deps.sh succeeded although apt-get failed"
fi
grep -q 'Unable to locate package nonesuch' "$tmp/out" || fail "apt-get's error is not shown"
[ "$elapsed" -le 10 ] || fail "waited ${elapsed} s on a failure that is not the lock"
echo "ok: another apt-get failure fails at once (${elapsed} s)"
