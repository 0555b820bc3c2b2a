/* Torture suite: printing a run's results, as text (with the violations'
 * op records) and as JSON. */
#ifndef LP_TESTS_TORTURE_TT_REPORT_H
#define LP_TESTS_TORTURE_TT_REPORT_H

#include <stdio.h>

#include "tt.h"
#include "tt_check.h"
#include "tt_scenario.h"

void tt_report_header(const struct tt_config *c, FILE *f);

/* Violations that fail the run: all but those of the --report-only checks. */
int tt_report_failing(const struct tt_config *c, const struct tt_report *r);

void tt_report_print(const struct tt_config *c, const struct tt_report *r,
                     const struct tt_fault *faults, int nfaults, const struct tt_scenario_result *s,
                     FILE *f);
void tt_report_json(const struct tt_config *c, const struct tt_report *r,
                    const struct tt_fault *faults, int nfaults, const struct tt_scenario_result *s,
                    long long t0_us, const char *path);

#endif
