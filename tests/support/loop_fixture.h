/* Running an event loop in a test: for a time, or until a condition
 * holds. The one loop runner of the sched-, pool- and engine-level tests
 * (library lp_testsupport_sched; it links lp_sched). */
#ifndef LP_TESTS_LOOP_FIXTURE_H
#define LP_TESTS_LOOP_FIXTURE_H

#include <stdbool.h>

#include "sched/loop.h"

typedef bool lf_cond(void *arg);

/* Runs loop for ms milliseconds, iterations waiting at most 5 ms (fails
 * the test on a loop error). */
void lf_run_for(struct sched_loop *loop, int ms);

/* Runs loop until cond(arg) holds (true) or timeout_ms passes (false). */
bool lf_run_until(struct sched_loop *loop, lf_cond *cond, void *arg, int timeout_ms);

#endif
