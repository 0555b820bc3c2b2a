/* Torture suite: checks at the end of a run (see tt_end.c): leftovers in
 * the lock Redis and in the proxies, lost updates in the resource Redis,
 * proxy memory. */
#ifndef LP_TESTS_TORTURE_TT_END_H
#define LP_TESTS_TORTURE_TT_END_H

#include "tt_check.h"
#include "tt_env.h"

/* Runs every end check, waiting up to settle_ms for leftovers to clear;
 * fills r's end-state fields and adds violations. */
void tt_end_checks(struct tt_env *e, struct tt_report *r, int settle_ms);

#endif
