/* Hashed timing wheel, single level with rounds (Varghese & Lauck scheme 6);
 * the contract is in wheel.h.
 *
 * Design.
 *
 * Ticks. A deadline e (ms) is rounded up to tick ceil(e / tick_ms) and the
 * timer is linked in slot tick & (nslots - 1). A run at now_ms processes
 * the ticks up to now_tick = now_ms / tick_ms and fires the timers with
 * expires <= now_tick * tick_ms, i.e. exactly those whose rounded deadline
 * has been reached. So a timer never fires early, and fires at most
 * tick_ms - 1 ms late (plus the caller's loop latency). "Past" means the
 * same: add(e) with e <= now_ms but inside the current, unfinished tick
 * fires at the next tick boundary, not on a run with the same now_ms.
 *
 * cur_tick is the tick of the last run (of init before the first run). A
 * run processes cur_tick again, so a timer armed with a deadline at or
 * before cur_tick * tick_ms (in the past) goes to the slot of cur_tick and
 * fires on the next run even if the clock has not moved.
 *
 * Slot order. In the slot of cur_tick, the due timers (past deadlines) form
 * a suffix: they are appended, while timers one or more revolutions away
 * that hash to that slot are prepended. A run removes every due timer from
 * that slot. Hence sched_wheel_timeout_ms() learns whether something is due
 * now from the slot's last timer alone (and never reports 0, a busy loop,
 * for a slot that holds only far timers), and a run revisiting the slot
 * walks back from the tail over the due suffix only. The other slots are
 * plain FIFOs and are scanned whole when their tick comes.
 *
 * Occupancy. Bit i of occupied is set iff slots[i] is non-empty; it is kept
 * by insert, by the run's collect step, and by cancel. Cancel does not
 * recompute the slot (for a past deadline it is not a function of expires,
 * and the timer may sit on a run's due list): a timer whose prev == next was
 * the only node of its list, and if that neighbour is a slot head, that slot
 * has just become empty.
 *
 * Idle scans. Most loop iterations have no timer due and the next one is
 * seconds (hundreds of slots) away. Collect only reads the bitmap words of
 * ticks cur_tick .. now_tick; sched_wheel_timeout_ms() starts its search at
 * empty_below, the slot it found last time, instead of at cur_tick + 1.
 * Invariant: the slots of ticks cur_tick + 1 .. empty_below - 1 are empty
 * and empty_below <= cur_tick + nslots. Cancel and collect only empty
 * slots and a run only raises cur_tick, so neither can break it; insert
 * lowers empty_below to the slot's next tick when that comes sooner.
 *
 * Run. Collect, then drain. Collect visits the non-empty slots of ticks
 * cur_tick .. now_tick in tick order (via the bitmap) and moves each due
 * timer to a local due list. Drain pops the due list one timer at a time:
 * unlink, count--, callback. A callback may cancel or re-arm any timer,
 * including one still on the due list (cancel unlinks it from there;
 * re-arm moves it back into a slot). Timers armed during the drain fire on
 * a later run at the earliest, so a callback that re-arms its timer in the
 * past cannot make a run loop forever. If the clock jumped by a revolution
 * or more, collect visits each slot once (ticks now_tick - nslots + 1 ..
 * now_tick) instead of every elapsed tick; timers from different
 * revolutions then fire in slot order, not deadline order. If the clock
 * went backwards, the run only revisits cur_tick with limit now_ms.
 *
 * Re-entrancy limits: callbacks must not call sched_wheel_deinit(), and
 * sched_wheel_timeout_ms() is exact only between runs.
 *
 * Rejected: hierarchical levels (cascading work, and at 4 ms x 4096 slots =
 * 16.4 s every watchdog renewal is within one revolution); lazy cancel
 * (memory kept until the slot comes round, Netty #2541); a min-heap
 * (O(log n) add and cancel, for precision we do not need); exact-ms
 * deadlines (the slot of the current tick would be rescanned by every loop
 * iteration). */
#include "sched/wheel.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/compiler.h"

#define WHEEL_WORD_BITS 64u

static size_t wheel_nwords(size_t nslots)
{
    return (nslots + WHEEL_WORD_BITS - 1) / WHEEL_WORD_BITS;
}

static void wheel_bit_set(struct sched_wheel *w, size_t idx)
{
    w->occupied[idx / WHEEL_WORD_BITS] |= 1ull << (idx % WHEEL_WORD_BITS);
}

static void wheel_bit_clear(struct sched_wheel *w, size_t idx)
{
    w->occupied[idx / WHEEL_WORD_BITS] &= ~(1ull << (idx % WHEEL_WORD_BITS));
}

/* ms / tick_ms, with a shift when tick_ms is a power of two (the usual 4):
 * a 64-bit division would be the most expensive instruction of an add. */
static uint64_t wheel_floor_tick(const struct sched_wheel *w, uint64_t ms)
{
    if ((w->tick_ms & (w->tick_ms - 1)) == 0)
        return ms >> __builtin_ctzll(w->tick_ms);
    return ms / w->tick_ms;
}

static uint64_t wheel_ceil_tick(const struct sched_wheel *w, uint64_t ms)
{
    uint64_t tick = wheel_floor_tick(w, ms);

    return tick + (tick * w->tick_ms != ms);
}

/* Index of the first non-empty slot among the span slots from `from` on,
 * circularly (span <= nslots), or SIZE_MAX if they are all empty. Reads
 * the words of those slots only: a run whose clock moved by a tick or two
 * looks at one word, not at the whole bitmap up to the next timer. */
static size_t wheel_find_occupied(const struct sched_wheel *w, size_t from, size_t span)
{
    size_t nwords = wheel_nwords(w->nslots), wi = from / WHEEL_WORD_BITS, idx;
    size_t wbits = LP_MIN(w->nslots, (size_t)WHEEL_WORD_BITS); /* slots per word */
    size_t seen = wbits - from % WHEEL_WORD_BITS;              /* slots looked at so far */
    uint64_t word = w->occupied[wi] & (~0ull << (from % WHEEL_WORD_BITS));

    for (;;) {
        if (word) {
            idx = wi * WHEEL_WORD_BITS + (size_t)__builtin_ctzll(word);
            return ((idx - from) & (w->nslots - 1)) < span ? idx : SIZE_MAX;
        }
        if (seen >= span)
            return SIZE_MAX;
        wi = wi + 1 == nwords ? 0 : wi + 1;
        word = w->occupied[wi];
        seen += wbits;
    }
}

/* Called after a list lost its last node: if head is a slot, mark it empty.
 * Compared as integers because head may be a run's local due list. */
static void wheel_list_emptied(struct sched_wheel *w, const struct list *head)
{
    uintptr_t off = (uintptr_t)head - (uintptr_t)w->slots;

    if (off < w->nslots * sizeof(*w->slots))
        wheel_bit_clear(w, off / sizeof(*w->slots));
}

int sched_wheel_init(struct sched_wheel *w, uint64_t now_ms, uint64_t tick_ms, size_t nslots)
{
    size_t n = 1, i;

    if (tick_ms == 0 || nslots == 0 || nslots > SIZE_MAX / 2 / sizeof(*w->slots))
        return -EINVAL;
    while (n < nslots)
        n *= 2;
    w->slots = malloc(n * sizeof(*w->slots));
    if (!w->slots)
        return -ENOMEM;
    w->occupied = calloc(wheel_nwords(n), sizeof(*w->occupied));
    if (!w->occupied)
        goto err_free_slots;
    for (i = 0; i < n; i++)
        list_init(&w->slots[i]);
    w->nslots = n;
    w->tick_ms = tick_ms;
    w->cur_tick = wheel_floor_tick(w, now_ms);
    w->empty_below = w->cur_tick;
    w->count = 0;
    w->late_ms = 0;
    w->late = 0;
    w->late_max_ms = 0;
    w->run_ms = now_ms;
    return 0;

err_free_slots:
    free(w->slots);
    w->slots = NULL;
    return -ENOMEM;
}

void sched_wheel_deinit(struct sched_wheel *w)
{
    size_t idx = w->count ? wheel_find_occupied(w, 0, w->nslots) : SIZE_MAX;
    struct list *node;

    while (idx != SIZE_MAX) {
        while ((node = list_first(&w->slots[idx])))
            list_del_init(node);
        wheel_bit_clear(w, idx);
        idx = wheel_find_occupied(w, idx, w->nslots);
    }
    free(w->slots);
    w->slots = NULL;
    free(w->occupied);
    w->occupied = NULL;
    w->nslots = 0;
    w->count = 0;
}

void sched_wheel_add(struct sched_wheel *w, struct sched_timer *t, uint64_t expires_ms)
{
    uint64_t tick = wheel_ceil_tick(w, expires_ms);
    size_t mask = w->nslots - 1, idx;

    sched_wheel_del(w, t);
    t->expires = expires_ms;
    if (tick < w->cur_tick)
        tick = w->cur_tick;
    idx = (size_t)tick & mask;
    if (tick != w->cur_tick && idx == ((size_t)w->cur_tick & mask))
        list_add_head(&w->slots[idx], &t->node);
    else
        list_add_tail(&w->slots[idx], &t->node);
    wheel_bit_set(w, idx);
    tick = w->cur_tick + ((idx - (size_t)w->cur_tick) & mask); /* the slot's next tick */
    if (tick > w->cur_tick && tick < w->empty_below)
        w->empty_below = tick;
    w->count++;
}

void sched_wheel_del(struct sched_wheel *w, struct sched_timer *t)
{
    struct list *next = t->node.next;
    bool was_last = t->node.prev == next;

    if (!sched_timer_is_pending(t))
        return;
    LP_BUG_ON(w->count == 0);
    list_del_init(&t->node);
    w->count--;
    if (was_last)
        wheel_list_emptied(w, next);
}

static uint64_t wheel_expires(const struct list *node)
{
    return list_entry(node, struct sched_timer, node)->expires;
}

/* Moves the timers of one slot with expires <= limit to the tail of due, in
 * order. For the slot of cur_tick visited again (suffix), only the suffix
 * of due timers is walked, so far timers there are not rescanned by every
 * run of the tick. */
static void wheel_collect_slot(struct sched_wheel *w, size_t idx, uint64_t limit, bool suffix,
                               struct list *due)
{
    struct list *head = &w->slots[idx], *pos = head->next, *next;

    if (suffix) {
        pos = head;
        while (pos->prev != head && wheel_expires(pos->prev) <= limit)
            pos = pos->prev;
    }
    for (; pos != head; pos = next) {
        next = pos->next;
        if (wheel_expires(pos) > limit)
            continue;
        list_del_init(pos);
        list_add_tail(due, pos);
    }
    if (list_empty(head))
        wheel_bit_clear(w, idx);
}

/* Collects the non-empty slots of ticks first..last (last - first <
 * nslots) in tick order, skipping empty ones with the bitmap. */
static void wheel_collect(struct sched_wheel *w, uint64_t first, uint64_t last, uint64_t limit,
                          struct list *due)
{
    size_t mask = w->nslots - 1, idx, next;
    uint64_t tick = first;

    for (;;) {
        idx = (size_t)tick & mask;
        next = wheel_find_occupied(w, idx, (size_t)(last - tick) + 1);
        if (next == SIZE_MAX)
            return;
        tick += (next - idx) & mask;
        if (tick > last)
            return;
        wheel_collect_slot(w, next, limit, tick == w->cur_tick, due);
        if (tick == last)
            return;
        tick++;
    }
}

/* A timer runs at now_ms: how late (a stalled loop shows here). Counted
 * from its deadline, or from the previous run when it was already due
 * then (armed in the past: due at once, not late). */
static void wheel_note_lateness(struct sched_wheel *w, const struct sched_timer *t, uint64_t now_ms)
{
    uint64_t from = LP_MAX(t->expires, w->run_ms);
    uint64_t late = now_ms > from ? now_ms - from : 0;

    if (late > w->late_max_ms)
        w->late_max_ms = late;
    if (w->late_ms > 0 && late > w->late_ms)
        w->late++;
}

static size_t wheel_drain(struct sched_wheel *w, struct list *due, uint64_t now_ms)
{
    struct list *node;
    struct sched_timer *t;
    size_t fired = 0;

    while ((node = list_first(due))) {
        t = list_entry(node, struct sched_timer, node);
        list_del_init(node);
        w->count--;
        wheel_note_lateness(w, t, now_ms);
        t->cb(t);
        fired++;
    }
    return fired;
}

size_t sched_wheel_run(struct sched_wheel *w, uint64_t now_ms)
{
    uint64_t now_tick = wheel_floor_tick(w, now_ms), first = w->cur_tick;
    size_t cur = (size_t)first & (w->nslots - 1), fired;
    struct list due;

    /* The usual iteration: still in the same tick, and its slot is empty. */
    if (now_tick == first &&
        !(w->occupied[cur / WHEEL_WORD_BITS] & (1ull << (cur % WHEEL_WORD_BITS)))) {
        w->run_ms = now_ms;
        return 0;
    }
    if (now_tick < first)
        now_tick = first;
    else if (now_tick - first >= w->nslots)
        first = now_tick - w->nslots + 1;
    list_init(&due);
    if (w->count)
        wheel_collect(w, first, now_tick, LP_MIN(now_tick * w->tick_ms, now_ms), &due);
    w->cur_tick = now_tick;
    fired = wheel_drain(w, &due, now_ms);
    w->run_ms = now_ms;
    return fired;
}

int64_t sched_wheel_timeout_ms(struct sched_wheel *w, uint64_t now_ms)
{
    size_t mask = w->nslots - 1, cur = (size_t)w->cur_tick & mask, next, dist;
    uint64_t from = LP_MAX(w->cur_tick + 1, w->empty_below);
    const struct list *head;
    uint64_t due_ms;

    if (w->count == 0)
        return -1;
    head = &w->slots[cur];
    if (!list_empty(head) &&
        list_entry(head->prev, struct sched_timer, node)->expires <= w->cur_tick * w->tick_ms)
        return 0;
    next = wheel_find_occupied(w, (size_t)from & mask, w->nslots);
    if (next == SIZE_MAX)
        return 0; /* all pending timers are on a running drain's due list */
    dist = (next - cur) & mask;
    w->empty_below = w->cur_tick + (dist ? dist : w->nslots);
    due_ms = w->empty_below * w->tick_ms;
    return due_ms > now_ms ? (int64_t)(due_ms - now_ms) : 0;
}
