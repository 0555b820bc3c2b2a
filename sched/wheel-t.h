/* Hashed timing wheel type (embedded by the event loop and by benchmarks). */
#ifndef LP_SCHED_WHEEL_T_H
#define LP_SCHED_WHEEL_T_H

#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "sched/timer-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct sched_wheel {
    struct list *slots;   /* owned: nslots FIFO lists of struct sched_timer */
    uint64_t *occupied;   /* owned: bitmap, one bit per slot, set while non-empty */
    size_t nslots;        /* power of two */
    uint64_t tick_ms;     /* slot width in ms */
    uint64_t cur_tick;    /* next tick to process (now_ms / tick_ms) */
    uint64_t empty_below; /* the slots of ticks cur_tick + 1 .. empty_below - 1 are empty */
    size_t count;         /* pending timers */
    uint64_t late_ms;     /* expiries later than this are counted in late, 0: none are */
    uint64_t late;        /* expiries that ran more than late_ms after their deadline */
    uint64_t late_max_ms; /* the latest expiry seen, ms after its deadline */
    uint64_t run_ms;      /* now_ms of the last sched_wheel_run */
};

#ifdef __cplusplus
}
#endif

#endif
