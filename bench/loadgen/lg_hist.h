/* Latency histogram with log-linear buckets (the HdrHistogram layout):
 * exact below 128 ns, then 128 sub-buckets per power of two, so any
 * recorded value is reported within 1/128 (< 0.8 %). Recording is O(1) and
 * percentiles walk ~4k counters, so millions of samples are never kept or
 * sorted. Values are nanoseconds, clamped to 2^40 (~18 minutes). */
#ifndef LP_BENCH_LOADGEN_LG_HIST_H
#define LP_BENCH_LOADGEN_LG_HIST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LG_HIST_SUB_BITS 7
#define LG_HIST_MAX_BITS 40
#define LG_HIST_BUCKETS  ((LG_HIST_MAX_BITS - LG_HIST_SUB_BITS + 1) << LG_HIST_SUB_BITS)

struct lg_hist {
    uint64_t count;                   /* samples recorded */
    uint64_t sum;                     /* sum of samples, ns */
    uint64_t min;                     /* smallest sample, ns (UINT64_MAX if none) */
    uint64_t max;                     /* largest sample, ns */
    uint64_t bucket[LG_HIST_BUCKETS]; /* samples per bucket */
};

/* Empties the histogram. */
void lg_hist_reset(struct lg_hist *h);

/* Adds one sample of v nanoseconds. */
void lg_hist_record(struct lg_hist *h, uint64_t v);

/* Value at percentile pct (0..100], in ns: the midpoint of the bucket
 * holding the ceil(pct% * count)-th sample, never above max. 0 if empty. */
uint64_t lg_hist_percentile(const struct lg_hist *h, double pct);

/* Mean in ns, 0 if empty. */
double lg_hist_mean(const struct lg_hist *h);

#ifdef __cplusplus
}
#endif

#endif
