#!/usr/bin/env bash
# scripts/progress.sh's lp_progress_run, which run.sh, test.sh,
# compat-hiredis1.sh and fuzz.sh use for their quiet builds (ctest
# scripts.progress): while a command runs it prints a line every
# LP_PROGRESS_INTERVAL seconds with the time so far and the log's last
# cmake percentage line, then the total; it keeps the output in the log
# and returns the command's status.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lp-progress-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*"
    echo "---- progress lines ----"
    cat "$tmp/err"
    exit 1
}

# shellcheck disable=SC2317 # run through lp_progress_run
slow_build() {
    echo "-- Configuring done"
    echo "[ 10%] Building C object proxy/CMakeFiles/lp_proxy.dir/opts.c.o"
    sleep 3.5
    echo "[100%] Built target lockproxy"
}
# shellcheck disable=SC2317 # run through lp_progress_run
broken_build() {
    sleep 2.5
    echo "error: it broke"
    return 3
}

LP_PROGRESS_INTERVAL=1 lp_progress_run demo "$tmp/log" slow_build 2>"$tmp/err" ||
    fail "a command that succeeded was reported failed"
# Ticks run late on a loaded machine (seen: 1 s, 3 s, 4 s), and one after
# the last echo quotes "[100%]": at least 2 lines with a percentage, at
# least one of them quoting the line the command printed first.
n=$(grep -cE '^  demo: [0-9]+ s, \[ *[0-9]+%\] ' "$tmp/err" || true)
[ "$n" -ge 2 ] || fail "want at least 2 progress lines in 3.5 s at 1 s intervals, got $n"
grep -qE '^  demo: [0-9]+ s, \[ 10%\] Building C object proxy/' "$tmp/err" ||
    fail "no progress line quotes the log's percentage line"
grep -qE '^  demo: done in [3-9] s$' "$tmp/err" || fail "no total at the end"
grep -q 'Built target lockproxy' "$tmp/log" || fail "the command's output is not in the log"
# Every stderr line is one of lp_progress_run's own ("  demo: ..."). A
# progress line may quote the log's last percentage line, "[100%] Built
# target lockproxy" included when a tick falls between that echo and the
# command's exit (seen under load), so the check is per line, not a grep
# for the text anywhere.
grep -qv '^  demo: ' "$tmp/err" && fail "the command's output reached the terminal"
echo "ok: $n progress lines and a total for a 3.5 s command"

rc=0
LP_PROGRESS_INTERVAL=1 lp_progress_run broken "$tmp/log2" broken_build 2>"$tmp/err" || rc=$?
[ "$rc" -eq 3 ] || fail "want the command's status 3, got $rc"
grep -qE "^  broken: FAILED after [1-9] s \(log: $tmp/log2\)$" "$tmp/err" || fail "no failure line"
grep -qE '^  broken: [0-9]+ s$' "$tmp/err" || fail "no progress line without a percentage"
echo "ok: a failing command's status and a FAILED line naming its log"
