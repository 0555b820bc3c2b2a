# shellcheck shell=bash
# Progress for long quiet steps, sourced by run.sh, test.sh,
# compat-hiredis1.sh and fuzz.sh (tests/scripts/progress.sh tests it).
#
# lp_progress_run WHAT LOG CMD...: runs CMD with its output in LOG and, on
# stderr, a line every LP_PROGRESS_INTERVAL seconds (default 15) while it
# runs, "  WHAT: 45 s, [ 63%] Building C object proxy/..." (the last
# percentage line of a cmake build, when the log has one), then
# "  WHAT: done in 52 s" or "  WHAT: FAILED after 52 s". Returns CMD's
# status. So a build that takes minutes on a busy machine shows that it
# moves, and where it is, without its full log on the terminal.
lp_progress_run() {
    local what=$1 log=$2 interval=${LP_PROGRESS_INTERVAL:-15} t0=$SECONDS next pid rc=0 last
    shift 2
    "$@" >"$log" 2>&1 &
    pid=$!
    next=$((t0 + interval))
    while kill -0 "$pid" 2>/dev/null; do
        sleep 0.2
        if [ "$SECONDS" -ge "$next" ] && kill -0 "$pid" 2>/dev/null; then
            last=$(grep -E '^\[ *[0-9]+%\]' "$log" 2>/dev/null | tail -n 1 | cut -c1-100)
            echo "  $what: $((SECONDS - t0)) s${last:+, $last}" >&2
            next=$((SECONDS + interval))
        fi
    done
    wait "$pid" || rc=$?
    if [ "$rc" -eq 0 ]; then
        echo "  $what: done in $((SECONDS - t0)) s" >&2
    else
        echo "  $what: FAILED after $((SECONDS - t0)) s (log: $log)" >&2
    fi
    return "$rc"
}
