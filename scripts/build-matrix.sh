#!/usr/bin/env bash
# Builds the whole tree (proxy, benchmarks, tests) as users and CI build
# it: Release and Debug, with gcc and with clang, warnings as errors
# (-DLP_WERROR=ON), each into build-matrix/<compiler>-<type>/. Nothing is
# run; a failure prints the first errors and the log's path.
#
# Usage: scripts/build-matrix.sh [compiler-type ...]   (default: all four,
#   gcc-Release gcc-Debug clang-Release clang-Debug)
# LP_MATRIX_DIR overrides build-matrix/, LP_MATRIX_JOBS the build jobs
# (default nproc). ccache is used when installed. Exit status: 0 all built,
# 1 some failed (named), 77 a compiler is missing (named, said loudly).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DIR=${LP_MATRIX_DIR:-$ROOT/build-matrix}
JOBS=${LP_MATRIX_JOBS:-$(nproc)}
# shellcheck source=scripts/progress.sh
. "$ROOT/scripts/progress.sh"
combos=("$@")
[ "${#combos[@]}" -eq 0 ] && combos=(gcc-Release gcc-Debug clang-Release clang-Debug)
launcher=()
command -v ccache >/dev/null 2>&1 &&
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
failed=()
missing=()
T0=$SECONDS

# shellcheck disable=SC2317 # run through lp_progress_run
configure_and_build() {
    local dir=$1 cc=$2 cxx=$3 type=$4
    CC=$cc CXX=$cxx cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DLP_WERROR=ON \
        "${launcher[@]}" && cmake --build "$dir" -j"$JOBS"
}

for combo in "${combos[@]}"; do
    cc=${combo%%-*}
    type=${combo#*-}
    case $cc in
    gcc) cxx=g++ ;;
    clang) cxx=clang++ ;;
    *)
        echo "build-matrix: unknown compiler in '$combo' (gcc-<type> or clang-<type>)" >&2
        exit 2
        ;;
    esac
    if ! command -v "$cc" >/dev/null || ! command -v "$cxx" >/dev/null; then
        echo "build-matrix: SKIPPED $combo: $cc/$cxx not installed (scripts/deps.sh)"
        missing+=("$combo")
        continue
    fi
    dir=$DIR/$combo
    mkdir -p "$dir"
    t=$SECONDS
    echo "==> $combo into $dir (log: $dir/build.log)"
    if lp_progress_run "build $combo" "$dir/build.log" configure_and_build "$dir" "$cc" "$cxx" \
        "$type"; then
        echo "<== $combo ok in $((SECONDS - t)) s"
    else
        grep -E 'error|warning' "$dir/build.log" | head -30 || true
        echo "<== $combo FAILED in $((SECONDS - t)) s (log: $dir/build.log)"
        failed+=("$combo")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "build-matrix: FAIL (${failed[*]}) after $((SECONDS - T0)) s"
    exit 1
fi
if [ "${#missing[@]}" -gt 0 ]; then
    echo "build-matrix: built the rest, SKIPPED ${missing[*]} after $((SECONDS - T0)) s"
    exit 77
fi
echo "build-matrix: all ${#combos[@]} built after $((SECONDS - T0)) s"
