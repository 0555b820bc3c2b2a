#!/usr/bin/env bash
# scripts/layering.sh (ctest scripts.layering): the tree keeps its layers,
# and the check fails on an include from a lower layer to a higher one
# (planted in a copy).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lp-layering-XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
    echo "FAIL: $*"
    exit 1
}

"$ROOT/scripts/layering.sh" "$ROOT" || fail "the tree breaks its layers (above)"

fresh() {
    rm -rf "$tmp/t"
    mkdir -p "$tmp/t"
    cp -r "$ROOT/common" "$ROOT/sched" "$ROOT/pool" "$ROOT/engine" "$ROOT/scripts" "$tmp/t/"
}

expect_fail() { # what, then the output must name needle
    local what=$1 needle=$2 out
    if out=$("$tmp/t/scripts/layering.sh" "$tmp/t" 2>&1); then
        fail "$what: not refused"
    fi
    grep -qF -- "$needle" <<<"$out" || fail "$what: refused without naming $needle: $out"
    echo "ok: $what refused"
}

fresh
printf '#include "engine/engine.h"\n' >>"$tmp/t/pool/slot.c"
expect_fail "pool/ including engine/" "pool/slot.c engine/engine.h"

fresh
printf '#include "proxy/server.h"\n' >>"$tmp/t/engine/shape.c"
expect_fail "engine/ including proxy/" "engine/shape.c proxy/server.h"

fresh
printf '#  include "pool/pool.h"\n' >>"$tmp/t/sched/wheel.c"
expect_fail "sched/ including pool/" "sched/wheel.c pool/pool.h"

echo "PASS"
