#!/usr/bin/env bash
# The layers of lockproxy, lowest first: common <- sched <- pool <- engine
# <- proxy. A file of one layer includes headers of its own layer and of
# the layers below it only (ARCHITECTURE.md). This checks every
# #include "dir/..." of common/, sched/, pool/ and engine/; there are no
# exceptions (the engine's last proxy/ includes went with issue 19: give
# the engine a seam, engine->front, instead), and no engine code names a
# front-end type (px_req, px_client, px_server). scripts/link_layers.sh checks
# the same at link level. No product file includes hiredis: the product
# reads replies into its own type (pool/reply.h).
#
#   scripts/layering.sh [ROOT]    (ROOT: the checkout, default this one's)
set -euo pipefail

ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
cd "$ROOT"

found=$(mktemp)
trap 'rm -f "$found"' EXIT
# One pass of awk over every file: "file header" for each include of a
# higher layer.
# shellcheck disable=SC2016 # awk's own $0, not the shell's
find common sched pool engine -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z |
    xargs -0 awk '
        BEGIN { rank["common"] = 0; rank["sched"] = 1; rank["pool"] = 2; rank["engine"] = 3
                rank["proxy"] = 4 }
        /^[ \t]*#[ \t]*include[ \t]+"[a-z_]+\/[^"]+"/ {
            inc = $0
            sub(/^[^"]*"/, "", inc)
            sub(/".*$/, "", inc)
            mine = FILENAME
            sub(/\/.*$/, "", mine)
            dir = inc
            sub(/\/.*$/, "", dir)
            # dirs that are no layer (hiredis/ in quotes) are not ours to check
            if ((dir in rank) && rank[dir] > rank[mine])
                print FILENAME " " inc
        }' | sort -u >"$found"

status=0
if [ -s "$found" ]; then
    echo "layering: these files include a header of a layer above their own:"
    sed 's/^/  /' "$found"
    status=1
fi
# The engine names no front-end type outside comments, not even as an
# opaque pointer: its seams (engine.h) are its own types, and what the
# front end hands it travels as void * (px_wait_op.front).
# shellcheck disable=SC2016 # awk's own variables
proxy_types=$(find engine -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z |
    xargs -0 awk '
        FNR == 1 { incomment = 0 }
        {
            line = $0; out = ""
            while (length(line) > 0) {
                if (incomment) {
                    p = index(line, "*/")
                    if (!p) { line = ""; break }
                    line = substr(line, p + 2); incomment = 0
                    continue
                }
                p = index(line, "/*"); q = index(line, "//")
                if (q && (!p || q < p)) { out = out substr(line, 1, q - 1); break }
                if (!p) { out = out line; break }
                out = out substr(line, 1, p - 1); line = substr(line, p + 2); incomment = 1
            }
            if (out ~ /(^|[^A-Za-z0-9_])(px_req|px_client|px_server)([^A-Za-z0-9_]|$)/)
                print FILENAME ":" FNR ": " out
        }')
if [ -n "$proxy_types" ]; then
    echo "layering: these engine lines name a front-end type (px_req, px_client, px_server):"
    printf '%s\n' "$proxy_types" | sed 's/^/  /'
    status=1
fi
# hiredis serves the tests and the benchmarks only.
hiredis=$(grep -rlE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]hiredis/' \
    common sched pool engine proxy --include='*.c' --include='*.h' | sort || true)
if [ -n "$hiredis" ]; then
    echo "layering: these product files include hiredis (use pool/reply.h):"
    printf '%s\n' "$hiredis" | sed 's/^/  /'
    status=1
fi
[ "$status" -eq 0 ] && echo "layering: ok"
exit "$status"
