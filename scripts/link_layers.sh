#!/usr/bin/env bash
# The layers at link level: no library uses a symbol that only a library
# of a higher layer defines (ARCHITECTURE.md). scripts/layering.sh checks
# the includes; this catches a call through a hand-written prototype or a
# function pointer's initialiser, which no include shows.
#
#   scripts/link_layers.sh LIB...   (the static libraries, lowest layer first:
#                                    liblp_common.a liblp_sched.a liblp_pool.a
#                                    liblp_engine.a liblp_proxy.a)
set -euo pipefail

[ "$#" -ge 2 ] || { echo "usage: $0 LIB... (lowest layer first)" >&2; exit 2; }
libs=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for i in "${!libs[@]}"; do
    nm --defined-only "${libs[$i]}" | awk 'NF == 3 && $2 ~ /[TDBRC]/ { print $3 }' | sort -u \
        >"$tmp/def.$i"
    nm --undefined-only "${libs[$i]}" | awk '{ print $NF }' | sort -u >"$tmp/und.$i"
done
status=0
for i in "${!libs[@]}"; do
    for ((j = i + 1; j < ${#libs[@]}; j++)); do
        up=$(comm -12 "$tmp/und.$i" "$tmp/def.$j")
        if [ -n "$up" ]; then
            echo "link_layers: $(basename "${libs[$i]}") uses symbols of $(basename "${libs[$j]}"):"
            printf '%s\n' "$up" | sed 's/^/  /'
            status=1
        fi
    done
done
[ "$status" -eq 0 ] && echo "link_layers: ok (${#libs[@]} libraries)"
exit "$status"
