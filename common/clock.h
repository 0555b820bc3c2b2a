/* Monotonic and wall clocks in the units the project uses: milliseconds
 * for leases and deadlines, nanoseconds for latency measurement. */
#ifndef LP_COMMON_CLOCK_H
#define LP_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline uint64_t clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_mono_ms(void)
{
    return clock_mono_ns() / 1000000u;
}

/* Wall clock in epoch milliseconds (what Redisson puts in ZSET scores). */
static inline uint64_t clock_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#ifdef __cplusplus
}
#endif

#endif
