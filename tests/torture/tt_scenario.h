/* Torture suite: the timed scenarios (see tt_scenario.c): fair-fifo,
 * late-grant (the silent overlap the outside fault test found),
 * lease-lost-told (the positive control of LOCKLOST), and with
 * --partitions partition-unlock and partition-relock (issue 18 items 1
 * and 2). */
#ifndef LP_TESTS_TORTURE_TT_SCENARIO_H
#define LP_TESTS_TORTURE_TT_SCENARIO_H

#include "tt_check.h"
#include "tt_env.h"

struct tt_scenario_result {
    bool ran;              /* needs two proxies */
    int late_silent;       /* silent overlaps in late-grant (the bug: > 0) */
    int told_silent;       /* silent overlaps in lease-lost-told */
    long long told_lost;   /* told-lost overlaps in lease-lost-told (>= 1 expected) */
    long long fifo_pairs;  /* pairs the FIFO rule checked in fair-fifo (6 expected) */
    int fifo_inversions;   /* and found out of order (0 expected) */
    bool partitions;       /* the partition scenarios ran (--partitions) */
    long long part_untold; /* untold overlaps in partition-unlock and partition-relock (0) */
};

/* Runs every scenario (two proxies needed; a no-op with one), appending
 * the faults it injects to faults[*nfaults..]. */
void tt_scenarios_run(struct tt_env *e, struct tt_fault *faults, int *nfaults);

/* After the checker ran: each scenario's outcome, and a violation for any
 * expectation not met. */
void tt_scenarios_expect(const struct tt_env *e, struct tt_report *r,
                         struct tt_scenario_result *out);

#endif
