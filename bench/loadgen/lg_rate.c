/* Open loop (--rate N): a fixed arrival rate instead of "next cycle when
 * the last one ends", so the latency percentiles are not hidden by
 * coordinated omission (a slow reply no longer delays the requests that
 * would have measured it).
 *
 * Schedule. Each of the C clients gets one cycle per slot of length
 * C / N seconds (N cycles per second in all); client i's slot k starts at
 * T0 + (k + i / C) * slot, so the clients are staggered evenly. A cycle's
 * latency is measured from its slot's start (c->t0_ns = c->slot_ns), not
 * from the send, as wrk2 does. A client has one request in flight (one
 * lock client per connection), so when a cycle overruns its slot the next
 * one starts as soon as it ends, already late, and the lateness is in its
 * latency; the achieved rate then falls short of N, and the report says so.
 *
 * Clients waiting for their slot (state LG_CS_SCHED) sit in a binary
 * min-heap by slot start (r->sched; c->heap_idx is the position, UINT_MAX
 * when out). The end-of-iteration hook starts every due client: each
 * iteration of a busy loop, so to the microsecond; an idle loop is woken by
 * a wheel timer for the head, up to its 1 ms tick late. How late the bench
 * itself sends a cycle that waited for its slot is recorded in res->lag
 * (measured phase), so it can be told apart from the service's latency; a
 * cycle that was already late when its predecessor ended is the target's
 * backlog, not the bench's lateness, and is not recorded there.
 *
 * Drain: clients waiting for a slot go idle at once (their next cycle would
 * start after the measurement). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "bench/loadgen/lg_run.h"
#include "common/clock.h"
#include "common/compiler.h"

static bool before(const struct lg_client *a, const struct lg_client *b)
{
    return a->slot_ns < b->slot_ns;
}

static void heap_set(struct lg_run *r, unsigned i, struct lg_client *c)
{
    r->sched[i] = c;
    c->heap_idx = i;
}

static void sift_up(struct lg_run *r, unsigned i)
{
    struct lg_client *c = r->sched[i];

    while (i > 0 && before(c, r->sched[(i - 1) / 2])) {
        heap_set(r, i, r->sched[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(r, i, c);
}

static void sift_down(struct lg_run *r, unsigned i)
{
    struct lg_client *c = r->sched[i];

    for (;;) {
        unsigned l = 2 * i + 1, m = l;

        if (l >= r->nsched)
            break;
        if (l + 1 < r->nsched && before(r->sched[l + 1], r->sched[l]))
            m = l + 1;
        if (!before(r->sched[m], c))
            break;
        heap_set(r, i, r->sched[m]);
        i = m;
    }
    heap_set(r, i, c);
}

/* Removes the entry at i. */
static void heap_remove(struct lg_run *r, unsigned i)
{
    struct lg_client *c = r->sched[i], *last = r->sched[--r->nsched];

    c->heap_idx = UINT_MAX;
    if (i == r->nsched)
        return;
    heap_set(r, i, last);
    sift_down(r, i);
    sift_up(r, last->heap_idx);
}

void lg_rate_timer_cb(struct sched_timer *t)
{
    lg_rate_run(LP_CONTAINER_OF(t, struct lg_run, rate_timer));
}

int lg_rate_init(struct lg_run *r)
{
    if (r->o->rate <= 0)
        return 0;
    r->sched = calloc(r->nclients, sizeof(*r->sched));
    if (!r->sched)
        return -ENOMEM;
    r->slot_ns = (uint64_t)((double)r->nclients / r->o->rate * 1e9);
    if (r->slot_ns == 0)
        r->slot_ns = 1;
    for (unsigned i = 0; i < r->nclients; i++)
        r->clients[i].heap_idx = UINT_MAX;
    return 0;
}

void lg_rate_deinit(struct lg_run *r)
{
    free(r->sched);
    r->sched = NULL;
    r->nsched = 0;
}

void lg_rate_begin(struct lg_run *r)
{
    r->rate_t0_ns = clock_mono_ns();
    for (unsigned i = 0; i < r->nclients; i++) {
        /* One slot back: lg_rate_schedule() moves to the next slot. */
        r->clients[i].slot_ns =
            r->rate_t0_ns + (uint64_t)((double)r->slot_ns * i / r->nclients) - r->slot_ns;
    }
}

void lg_rate_schedule(struct lg_client *c)
{
    struct lg_run *r = c->run;

    c->slot_ns += r->slot_ns;
    c->slot_waited = c->slot_ns > clock_mono_ns();
    c->state = LG_CS_SCHED;
    heap_set(r, r->nsched++, c);
    sift_up(r, c->heap_idx);
}

void lg_rate_run(struct lg_run *r)
{
    uint64_t now = clock_mono_ns();

    while (r->nsched > 0 && r->sched[0]->slot_ns <= now) {
        struct lg_client *c = r->sched[0];

        heap_remove(r, 0);
        if (r->phase == LG_PH_MEASURE && c->slot_waited)
            lg_hist_record(r->res->lag, now - c->slot_ns);
        c->t0_ns = c->slot_ns;
        lg_client_begin_cycle(c);
    }
    if (r->nsched > 0)
        sched_loop_timer_add(r->loop, &r->rate_timer, (r->sched[0]->slot_ns + 999999u) / 1000000u);
    else
        sched_loop_timer_del(r->loop, &r->rate_timer);
}

void lg_rate_cancel(struct lg_client *c)
{
    if (c->heap_idx != UINT_MAX && c->run->sched)
        heap_remove(c->run, c->heap_idx);
}

void lg_rate_drain(struct lg_run *r)
{
    sched_loop_timer_del(r->loop, &r->rate_timer);
    while (r->nsched > 0) {
        struct lg_client *c = r->sched[r->nsched - 1];

        heap_remove(r, r->nsched - 1);
        c->state = LG_CS_IDLE;
        lg_run_client_idle(c);
    }
}
