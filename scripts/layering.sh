#!/usr/bin/env bash
# The layers of lockproxy, lowest first: common <- sched <- pool <- engine
# <- proxy. A file of one layer includes headers of its own layer and of
# the layers below it only (ARCHITECTURE.md). This checks every
# #include "dir/..." of common/, sched/, pool/ and engine/.
#
# Edges that break the rule today and are being removed are listed, one
# "file header" a line, in scripts/layering-debt.txt: an edge that is not
# listed fails, and so does a listed edge that is gone (take its line
# out), so the list only shrinks.
#
#   scripts/layering.sh [ROOT]    (ROOT: the checkout, default this one's)
set -euo pipefail

ROOT=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DEBT="$ROOT/scripts/layering-debt.txt"
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

debt=$(grep -vE '^[[:space:]]*(#|$)' "$DEBT" 2>/dev/null | sort -u || true)
status=0
new=$(comm -23 "$found" <(printf '%s\n' "$debt" | sed '/^$/d'))
gone=$(comm -13 "$found" <(printf '%s\n' "$debt" | sed '/^$/d'))
if [ -n "$new" ]; then
    echo "layering: these files include a header of a layer above their own:"
    printf '%s\n' "$new" | sed 's/^/  /'
    status=1
fi
if [ -n "$gone" ]; then
    echo "layering: these edges of scripts/layering-debt.txt are gone; take them out:"
    printf '%s\n' "$gone" | sed 's/^/  /'
    status=1
fi
if [ "$status" -eq 0 ]; then
    echo "layering: ok ($(printf '%s\n' "$debt" | sed '/^$/d' | wc -l) edges of debt left)"
fi
exit "$status"
