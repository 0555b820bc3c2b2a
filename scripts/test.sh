#!/usr/bin/env bash
# The CI test run (README's test command; .ci/run calls it). Two modes:
#
#   scripts/test.sh          the default (CI), about 15 minutes on 2 cores:
#     deps; build (RelWithDebInfo, warnings as errors) into build/; every
#     unit, integration, client-library, docs and scripts test; the torture
#     suite's short runs (both io backends with partitions, the negative
#     control, the checker self-test); an AddressSanitizer + UBSan build of
#     the proxy, the unit tests and the safety-critical integration tests
#     (LP_ASAN_TESTS: safety, untold holders, hostile input, protocol,
#     owners, semaphore reaping, wake-ups, partitions) into build-asan/,
#     run there; and each
#     libFuzzer target for LP_FUZZ_SECONDS (default 10 s; build-fuzz/).
#   scripts/test.sh --full   (or LP_TEST_FULL=1) everything, ~35 minutes:
#     the above, plus the tests labelled `long` (cases named long_*:
#     counting runs over many failovers), the Cluster and Sentinel torture runs, the whole
#     suite and torture suite under the sanitizers, the build and tests
#     against hiredis 1.x (scripts/compat-hiredis1.sh, build-hiredis1/),
#     and 30 s per fuzz target.
#
# Exits non-zero if any step fails and prints a one-line summary at the
# end; a step that could not run here (no download, no clang) is SKIPPED,
# named in that line. LP_BUILD_DIR / LP_ASAN_BUILD_DIR override the build
# directories, LP_CTEST_JOBS / LP_ASAN_CTEST_JOBS the test parallelism
# (4 and 2). Progress: each step is
# announced with its number, and ends with its time and the time so far;
# the builds, whose output goes to a log, print a line every 15 s (what
# they compile; LP_PROGRESS_INTERVAL, scripts/progress.sh); the summary has
# the total.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
JOBS=$(nproc)
# Most test cases mostly wait (timers, leases, failovers: a subset of 75
# integration cases used 68 s of CPU in 304 s at -j2), so 4 run at a time
# on 2 cores (172 s for the same subset); CPU-bound cases (benchmarks, the
# Go client's build, README blocks) count as 2 (PROCESSORS in
# tests/CMakeLists.txt). The sanitizer pass stays at 2: ASan's proxy is
# several times slower and its cases more timing-bound.
CTEST_JOBS=${LP_CTEST_JOBS:-4}
ASAN_CTEST_JOBS=${LP_ASAN_CTEST_JOBS:-2}
BUILD=${LP_BUILD_DIR:-build}
ASAN_BUILD=${LP_ASAN_BUILD_DIR:-build-asan}
T0=$SECONDS
FULL=${LP_TEST_FULL:-0}
for arg in "$@"; do
    case $arg in
    --full) FULL=1 ;;
    -h | --help)
        sed -n '2,26p' "$0"
        exit 0
        ;;
    *)
        echo "test.sh: unknown argument '$arg' (--full, --help)" >&2
        exit 2
        ;;
    esac
done
# The sanitizer pass of the default mode: these integration tests (and
# every unit test), each a ctest name's area.
ASAN_TESTS=${LP_ASAN_TESTS:-safety untold badinput protocol owners semreap wakeups partition}
FUZZ_SECONDS=${LP_FUZZ_SECONDS:-10}
if [ "$FULL" = 1 ]; then
    FUZZ_SECONDS=${LP_FUZZ_SECONDS:-30}
    echo "test.sh: full mode"
else
    echo "test.sh: default mode (scripts/test.sh --full runs everything, ~35 min)"
fi
failed=()
skipped=()
results=()

if [ "$FULL" = 1 ]; then
    STEPS=(deps build tests torture asan-build asan-tests asan-torture compat-hiredis1 fuzz)
else
    STEPS=(deps build tests torture asan-build asan-tests fuzz)
fi
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
    local dir=$1 targets=$2
    shift 2
    mkdir -p "$dir"
    # shellcheck disable=SC2317 # run through lp_progress_run
    configure_and_build() {
        # shellcheck disable=SC2086 # targets: words
        cmake -S "$ROOT" -B "$dir" -DLP_WERROR=ON "$@" &&
            cmake --build "$dir" -j"$JOBS" ${targets:+--target $targets}
    }
    echo "  building into $dir/${targets:+ (the sanitizer subset)} (log: $dir/build.log)"
    if ! lp_progress_run "build $dir" "$dir/build.log" configure_and_build "$@"; then
        grep -E 'error|Error|warning' "$dir/build.log" | head -50 || true
        tail -n 30 "$dir/build.log"
        return 1
    fi
}

# shellcheck disable=SC2317 # called through step
# Tests labelled `long` (counting runs over many failovers and the like)
# run only in --full mode; torture has its own step.
run_tests() {
    local exclude='torture|long' jobs=$CTEST_JOBS
    [ "$FULL" = 1 ] && exclude='torture'
    [ "$1" = "$ASAN_BUILD" ] && jobs=$ASAN_CTEST_JOBS
    ctest --test-dir "$1" --output-on-failure -j"$jobs" -LE "$exclude" "${@:2}"
}

# The torture runs are timed and CPU-heavy: one at a time. The default
# mode leaves out the Cluster and Sentinel runs (a minute each).
# shellcheck disable=SC2317 # called through step
run_torture() {
    if [ "$FULL" = 1 ]; then
        ctest --test-dir "$1" --output-on-failure -L torture
    else
        ctest --test-dir "$1" --output-on-failure -L torture -E '^torture\.(cluster|sentinel)$'
    fi
}

# The build targets and the ctest regex of the default sanitizer pass.
asan_subset() {
    local f area targets="lockproxy" regex="^unit\\."
    for f in tests/unit/*/test_*.c; do
        area=$(basename "$(dirname "$f")")
        targets+=" unit_${area}_$(basename "$f" .c)"
    done
    for area in $ASAN_TESTS; do
        targets+=" integration_${area}_test_${area}"
        regex+="|^integration\\.${area}\\."
    done
    printf '%s\n%s\n' "$targets" "$regex"
}

step deps scripts/deps.sh
if [ "${#failed[@]}" -eq 0 ]; then
    step build build "$BUILD" "" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
if [ "${#failed[@]}" -eq 0 ]; then
    step tests run_tests "$BUILD"
    step torture run_torture "$BUILD"
fi
# The sanitizer pass runs even when the plain tests failed: its reports
# often explain the failure.
if [[ ! " ${failed[*]} " =~ " deps " ]]; then
    asan_targets=""
    asan_regex=""
    if [ "$FULL" != 1 ]; then
        { read -r asan_targets && read -r asan_regex; } < <(asan_subset)
    fi
    step asan-build build "$ASAN_BUILD" "$asan_targets" -DCMAKE_BUILD_TYPE=Debug \
        -DLP_SANITIZE=ON -DLP_BUILD_BENCH=OFF
    if [[ ! " ${failed[*]} " =~ " asan-build " ]]; then
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}
        export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
        if [ "$FULL" = 1 ]; then
            step asan-tests run_tests "$ASAN_BUILD"
            step asan-torture run_torture "$ASAN_BUILD"
        else
            step asan-tests run_tests "$ASAN_BUILD" -R "$asan_regex"
        fi
    fi
fi

# Fuzzes the request parser and the reply path for a bounded time, and
# (full) builds and tests against hiredis 1.x (Debian 13): each in its own
# build dir.
if [[ ! " ${failed[*]} " =~ " deps " ]]; then
    if [ "$FULL" = 1 ]; then
        step compat-hiredis1 scripts/compat-hiredis1.sh
    fi
    step fuzz scripts/fuzz.sh "$FUZZ_SECONDS"
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
