#!/usr/bin/env bash
# The CI test run: installs dependencies, builds lockproxy (RelWithDebInfo)
# into build/ and runs every unit and integration test, then the torture
# suite's short run (faults injected, both io backends, the negative
# control; see RELIABILITY.md), then builds again with AddressSanitizer +
# UndefinedBehaviorSanitizer into build-asan/ (no benchmarks) and runs the
# tests and the torture suite there, then builds and tests against
# hiredis 1.x (scripts/compat-hiredis1.sh, build-hiredis1/) and runs each
# fuzz target for a bounded time (scripts/fuzz.sh, build-fuzz/). Exits
# non-zero if any step fails and prints a one-line summary at the end; a
# step that could not run here (no download, no clang) is SKIPPED, named in
# that line. LP_BUILD_DIR / LP_ASAN_BUILD_DIR override the build
# directories, LP_CTEST_JOBS the test parallelism, LP_FUZZ_SECONDS the time
# each fuzz target runs (default 30). Progress: each step is announced
# with its number, and ends with its time and the time so far; the builds,
# whose output goes to a log, print a line every 15 s (what they compile;
# LP_PROGRESS_INTERVAL, scripts/progress.sh); the summary has the total.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
JOBS=$(nproc)
CTEST_JOBS=${LP_CTEST_JOBS:-2}
BUILD=${LP_BUILD_DIR:-build}
ASAN_BUILD=${LP_ASAN_BUILD_DIR:-build-asan}
T0=$SECONDS
failed=()
skipped=()
results=()

STEPS=(deps build tests torture asan-build asan-tests asan-torture compat-hiredis1 fuzz)
nstep=0

# Runs "$@" as a named step, recording its result and duration. Exit
# status 77 means the step could not run here (it says why): SKIPPED, named
# in the summary, not a failure.
step() {
    local name=$1 t=$SECONDS rc=0 verdict
    shift
    nstep=$((nstep + 1))
    echo "==> [$nstep/${#STEPS[@]}] $name ($((SECONDS - T0)) s so far)"
    "$@" || rc=$?
    if [ "$rc" -eq 0 ]; then
        verdict=ok
        results+=("$name ok ($((SECONDS - t))s)")
    elif [ "$rc" -eq 77 ]; then
        verdict=SKIPPED
        results+=("$name SKIPPED ($((SECONDS - t))s)")
        skipped+=("$name")
    else
        verdict=FAILED
        results+=("$name FAILED ($((SECONDS - t))s)")
        failed+=("$name")
    fi
    echo "<== $name $verdict in $((SECONDS - t)) s ($((SECONDS - T0)) s so far)"
    return 0
}

# shellcheck disable=SC2317 # called through step
build() {
    local dir=$1
    shift
    mkdir -p "$dir"
    # shellcheck disable=SC2317 # run through lp_progress_run
    configure_and_build() {
        cmake -S "$ROOT" -B "$dir" "$@" && cmake --build "$dir" -j"$JOBS"
    }
    echo "  building into $dir/ (log: $dir/build.log)"
    if ! lp_progress_run "build $dir" "$dir/build.log" configure_and_build "$@"; then
        grep -E 'error|Error|warning' "$dir/build.log" | head -50 || true
        tail -n 30 "$dir/build.log"
        return 1
    fi
}

# shellcheck disable=SC2317 # called through step
run_tests() {
    ctest --test-dir "$1" --output-on-failure -j"$CTEST_JOBS" -LE torture
}

# The torture runs are timed and CPU-heavy: one at a time.
# shellcheck disable=SC2317 # called through step
run_torture() {
    ctest --test-dir "$1" --output-on-failure -L torture
}

step deps scripts/deps.sh
if [ "${#failed[@]}" -eq 0 ]; then
    step build build "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
if [ "${#failed[@]}" -eq 0 ]; then
    step tests run_tests "$BUILD"
    step torture run_torture "$BUILD"
fi
# The sanitizer pass runs even when the plain tests failed: its reports
# often explain the failure.
if [[ ! " ${failed[*]} " =~ " deps " ]]; then
    step asan-build build "$ASAN_BUILD" -DCMAKE_BUILD_TYPE=Debug -DLP_SANITIZE=ON \
        -DLP_BUILD_BENCH=OFF
    if [[ ! " ${failed[*]} " =~ " asan-build " ]]; then
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
        step asan-tests run_tests "$ASAN_BUILD"
        step asan-torture run_torture "$ASAN_BUILD"
    fi
fi

# Builds against hiredis 1.x (Debian 13) as well, and fuzzes the request
# parser and the reply path for a bounded time: each in its own build dir.
if [[ ! " ${failed[*]} " =~ " deps " ]]; then
    step compat-hiredis1 scripts/compat-hiredis1.sh
    step fuzz scripts/fuzz.sh "${LP_FUZZ_SECONDS:-30}"
fi

echo
printf '  %s\n' "${results[@]}"
if [ "${#failed[@]}" -eq 0 ] && [ "${#skipped[@]}" -gt 0 ]; then
    echo "test.sh: PASS, but SKIPPED: ${skipped[*]} (see above why) after $((SECONDS - T0))s"
    exit 0
fi
if [ "${#failed[@]}" -eq 0 ]; then
    echo "test.sh: PASS (all steps ok in $((SECONDS - T0))s)"
    exit 0
fi
echo "test.sh: FAIL (${failed[*]}) after $((SECONDS - T0))s"
exit 1
