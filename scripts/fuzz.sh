#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang, ASan and
# UBSan into build-fuzz/, and runs each for a bounded time, starting from
# the seed corpus in tests/fuzz/corpus/<target>/ (new inputs go to
# build-fuzz/corpus/<target>/, the repository's corpus is not touched).
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory; the
# input that caused it is left in build-fuzz/artifacts/ and printed.
#
# Usage: scripts/fuzz.sh [seconds per target (default 30)] [target...]
# Exit status: 0 no finding; 1 a finding or a build failure; 77 clang or
# libFuzzer is missing (run scripts/deps.sh), said loudly.
# LP_FUZZ_BUILD_DIR overrides the directory.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${LP_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
SECONDS_EACH=${1:-30}
shift || true

say() { echo "fuzz: $*"; }

if ! command -v clang >/dev/null 2>&1; then
    say "SKIPPED: clang is not installed (scripts/deps.sh installs it); nothing was fuzzed"
    exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
    >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" >"$probe/log" 2>&1; then
    cat "$probe/log"
    say "SKIPPED: clang cannot link libFuzzer (libclang-rt-dev missing?); nothing was fuzzed"
    exit 77
fi

mkdir -p "$DIR"
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
# shellcheck disable=SC2317 # run through lp_progress_run
configure_and_build() {
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLP_FUZZ=ON \
        -DLP_BUILD_TESTS=OFF -DLP_BUILD_BENCH=OFF && cmake --build "$DIR" -j"$(nproc)"
}
if ! lp_progress_run "build $DIR" "$DIR/build.log" configure_and_build; then
    grep -E 'error|Error|warning' "$DIR/build.log" | head -50 || true
    tail -n 30 "$DIR/build.log"
    say "FAILED: the fuzz targets do not build"
    exit 1
fi

targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    for f in "$ROOT"/tests/fuzz/fuzz_*.c; do
        targets+=("$(basename "$f" .c)")
    done
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
for t in "${targets[@]}"; do
    corpus=$DIR/corpus/$t
    artifacts=$DIR/artifacts/$t/
    mkdir -p "$corpus" "$artifacts"
    say "$t for ${SECONDS_EACH}s"
    if ! "$DIR/$t" -max_total_time="$SECONDS_EACH" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$artifacts" \
        "$corpus" "$ROOT/tests/fuzz/corpus/$t" >"$DIR/$t.log" 2>&1; then
        tail -n 60 "$DIR/$t.log"
        for a in "$artifacts"*; do
            [ -f "$a" ] && say "$t: input in $a: $(head -c 200 "$a" | od -An -c | head -n 5)"
        done
        failed+=("$t")
        continue
    fi
    grep -E '^(#[0-9]+.*(DONE|pulse)|stat::)' "$DIR/$t.log" | tail -n 8
done
if [ "${#failed[@]}" -gt 0 ]; then
    say "FAILED: ${failed[*]}"
    exit 1
fi
say "ok: ${targets[*]}, ${SECONDS_EACH}s each, no finding"
