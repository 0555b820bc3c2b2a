/* Torture suite: the fault schedule and the injectors. The schedule is a
 * list of faults with start times and parameters, all drawn from the seed
 * before the run. Injection is sequential and each injector blocks until
 * its fault is healed (Redis restarted, process resumed or restarted), so
 * no fault outlives its window and none leaves the system broken. */
#ifndef LP_TESTS_TORTURE_TT_FAULTS_H
#define LP_TESTS_TORTURE_TT_FAULTS_H

#include "tt.h"
#include "tt_env.h"

#define TT_MAX_PLANNED        1024
#define TT_PARTITION_VARIANTS 4 /* relay: pass, reset, refuse new; kernel (iptables) */

struct tt_planned {
    enum tt_fault_kind kind;
    long long at_ms; /* from the start of the fault phase */
    int param;       /* ms (downtime, stop, sleep) or variant, per kind */
    int target;      /* proxy index for proxy faults, variant selector otherwise */
};

/* Fills out (at most max) for a phase of phase_ms: the short preset puts
 * every selected kind in once (client-reset and slow-reader twice, one of
 * each variant) at even spacing, in a seeded order; long runs repeat shuffled
 * cycles of every kind until the phase ends. Returns the count. */
int tt_faults_plan(const struct tt_config *cfg, struct tt_rng *rng, long long phase_ms,
                   struct tt_planned *out, int max);

/* Injects pl and waits for it to heal; records what happened in *out. */
void tt_fault_inject(struct tt_env *e, const struct tt_planned *pl, struct tt_rng *rng,
                     struct tt_fault *out);

#endif
