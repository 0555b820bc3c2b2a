/* Monotonic and wall clocks in the units the project uses: milliseconds
 * for leases and deadlines, nanoseconds for latency measurement.
 *
 * Test seam: the deterministic simulator (tests/sim) sets clock_fake to
 * drive every clock of the process (the loop's, the lock engine's) from
 * its own time. NULL in the product: one predictable branch per read. */
#ifndef LP_COMMON_CLOCK_H
#define LP_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A fake time source: mono_ns() for the monotonic clock, wall_ms() for
 * the wall clock. Only tests set it, before the loop is created. */
struct clock_fake {
    uint64_t (*mono_ns)(void);
    uint64_t (*wall_ms)(void);
};
extern const struct clock_fake *clock_fake;

static inline uint64_t clock_mono_ns(void)
{
    struct timespec ts;

    if (clock_fake)
        return clock_fake->mono_ns();
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

    if (clock_fake)
        return clock_fake->wall_ms();
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

#ifdef __cplusplus
}
#endif

#endif
