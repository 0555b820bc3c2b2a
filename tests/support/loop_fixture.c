/* The tests' loop runner; see loop_fixture.h. */
#include "loop_fixture.h"

#include <stdint.h>

#include "common/clock.h"
#include "harness.h"

void lf_run_for(struct sched_loop *loop, int ms)
{
    uint64_t end = clock_mono_ms() + (uint64_t)ms;

    while (clock_mono_ms() < end)
        ASSERT_OK(sched_loop_run_once(loop, 5));
}

bool lf_run_until(struct sched_loop *loop, lf_cond *cond, void *arg, int timeout_ms)
{
    uint64_t end = clock_mono_ms() + (uint64_t)timeout_ms;

    while (!cond(arg)) {
        if (clock_mono_ms() >= end)
            return false;
        ASSERT_OK(sched_loop_run_once(loop, 5));
    }
    return true;
}
