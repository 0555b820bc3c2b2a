/* Shared per-channel subscriptions and wake-ups; see waitset.h. */
#include "engine/waitset.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "pool/pool.h"
#include "sched/loop.h"

static void member_on_wake(struct sched_waiter *sw)
{
    struct px_waitset_member *m = LP_CONTAINER_OF(sw, struct px_waitset_member, sleep);

    m->took_permit = true;
    m->retry(m);
}

void px_waitset_member_init(struct px_waitset_member *m, px_waitset_fn *retry)
{
    list_init(&m->node);
    sched_waiter_init(&m->sleep, member_on_wake);
    m->retry = retry;
    m->exclusive = false;
}

/* Subscription confirmed: every member re-checks (one whose attempt is in
 * flight notes it and retries when the reply is in: wait.c). */
static void set_on_ready(struct px_waitset *set)
{
    struct list *n, *t;

    set->ready = true;
    list_for_each_safe(n, t, &set->members)
    {
        struct px_waitset_member *m = LP_CONTAINER_OF(n, struct px_waitset_member, node);

        sched_sem_cancel(&set->sem, &m->sleep);
        m->retry(m);
    }
}

/* "1": a read-write lock became free (a write unlock, or a forced one).
 * Redisson wakes every waiter; here every sleeping reader goes, but of the
 * exclusive members (writers) only the longest-joined one, since only one
 * writer can win and each doomed attempt is a script. A writer that loses
 * sleeps on, and whoever won publishes again on release; the periodic
 * re-poll covers a lost message. */
static void set_wake_readers_and_a_writer(struct px_waitset *set)
{
    struct list *n, *t;
    bool writer = false;

    set->sem.permits = 0;
    list_for_each_safe(n, t, &set->members)
    {
        struct px_waitset_member *m = LP_CONTAINER_OF(n, struct px_waitset_member, node);

        if (!sched_waiter_is_queued(&m->sleep) || (m->exclusive && writer))
            continue;
        writer = writer || m->exclusive;
        sched_sem_cancel(&set->sem, &m->sleep);
        m->retry(m);
    }
}

static void set_on_sub(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct px_waitset *set = LP_CONTAINER_OF(s, struct px_waitset, sub);

    set->events++;
    switch (ev) {
    case POOL_SUB_READY:
        set_on_ready(set);
        break;
    case POOL_SUB_MESSAGE:
        set->eng->stats.wakeups++;
        if (len == 1 && msg[0] == '1')
            set_wake_readers_and_a_writer(set);
        else
            sched_sem_release(&set->sem, 1);
        break;
    case POOL_SUB_LOST:
        set->ready = false;
        break;
    }
}

void px_waitset_deliver(struct px_waitset *set, const char *msg, size_t len)
{
    if (set->sub.cb) /* set by pool_sub_start(), even when it failed */
        set->sub.cb(&set->sub, POOL_SUB_MESSAGE, msg, len);
}

/* PX_WAKE_COUNT messages: "N" wakes min(N, members); the permits that
 * find nobody asleep stay for members whose retry is in flight. */
static void set_on_sub_count(struct pool_sub *s, enum pool_sub_event ev, const char *msg,
                             size_t len)
{
    struct px_waitset *set = LP_CONTAINER_OF(s, struct px_waitset, sub);
    int64_t n;

    if (ev != POOL_SUB_MESSAGE)
        return set_on_sub(s, ev, msg, len);
    set->events++;
    set->eng->stats.wakeups++;
    if (util_parse_i64(msg, len, &n) < 0)
        n = 1;
    if (n > 0)
        sched_sem_release(&set->sem, (size_t)LP_MIN((uint64_t)n, (uint64_t)set->nmembers));
}

/* PX_WAKE_ALL messages: one wake-up for every member, asleep or not. */
static void set_on_sub_all(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct px_waitset *set = LP_CONTAINER_OF(s, struct px_waitset, sub);

    if (ev != POOL_SUB_MESSAGE)
        return set_on_sub(s, ev, msg, len);
    set->events++;
    set->eng->stats.wakeups++;
    sched_sem_release(&set->sem, set->nmembers);
}

static void set_free(struct px_waitset *set)
{
    struct lk_engine *eng = set->eng;

    sched_loop_timer_del(eng->loop, &set->linger);
    if (set->subscribed)
        eng->front.sub_unlisten(&set->lsn);
    if (set->dual)
        eng->front.sub_unlisten(&set->classic);
    hmap_remove(&eng->locks, &set->node);
    free(set);
}

static void set_on_linger(struct sched_timer *t)
{
    struct px_waitset *set = LP_CONTAINER_OF(t, struct px_waitset, linger);

    if (set->nmembers == 0)
        set_free(set);
}

static struct px_waitset *set_find(struct lk_engine *eng, const char *ch, size_t len, uint64_t hash)
{
    struct hmap_node *n;

    for (n = hmap_first(&eng->locks, hash); n; n = hmap_next(n)) {
        struct px_waitset *set = LP_CONTAINER_OF(n, struct px_waitset, node);

        if (set->chlen == len && memcmp(set->channel, ch, len) == 0)
            return set;
    }
    return NULL;
}

/* The hub's events, to the mode's handler. */
static void set_on_lsn(struct px_sub_lsn *l, enum pool_sub_event ev, const char *chan, size_t clen,
                       const char *msg, size_t len)
{
    struct px_waitset *set = LP_CONTAINER_OF(l, struct px_waitset, lsn);

    (void)chan;
    (void)clen;
    set->sub.cb(&set->sub, ev, msg, len);
}

/* The classic twin of a sharded set: its messages, and a re-check when it
 * is (re)confirmed (a classic publisher's release may have been missed). */
static void set_on_classic(struct px_sub_lsn *l, enum pool_sub_event ev, const char *chan,
                           size_t clen, const char *msg, size_t len)
{
    struct px_waitset *set = LP_CONTAINER_OF(l, struct px_waitset, classic);

    (void)chan;
    (void)clen;
    if (ev != POOL_SUB_LOST)
        set->sub.cb(&set->sub, ev, msg, len);
}

/* True when the set should hear classic publishers as well (subs.h). */
static bool set_wants_classic(const struct lk_engine *eng)
{
    return pool_is_cluster(eng->pool) && eng->cfg.cluster_pubsub == POOL_PUBSUB_AUTO &&
           pool_pubsub_sharded(eng->pool);
}

static struct px_waitset *set_create(struct lk_engine *eng, const char *ch, size_t len,
                                     uint64_t hash, pool_sub_fn *cb)
{
    struct px_waitset *set = calloc(1, sizeof(*set) + len + 1);
    int rc;

    if (!set)
        return NULL;
    set->eng = eng;
    set->gen = ++eng->set_next_gen;
    set->chlen = len;
    memcpy(set->channel, ch, len);
    list_init(&set->members);
    sched_sem_init(&set->sem, 0, 0);
    sched_timer_init(&set->linger, set_on_linger);
    hmap_insert(&eng->locks, &set->node, hash);
    set->sub.cb = cb;
    rc = eng->front.sub_listen(eng, &set->lsn, set->channel, len, POOL_SUB_AUTO, set_on_lsn);
    set->subscribed = rc >= 0;
    set->ready = rc == 1;
    if (rc < 0)
        log_msg(LOG_LVL_WARN, "cannot subscribe to %s; waiters poll at lease expiry", ch);
    if (set->subscribed && set_wants_classic(eng))
        set->dual = eng->front.sub_listen(eng, &set->classic, set->channel, len, POOL_SUB_CLASSIC,
                                          set_on_classic) >= 0;
    return set;
}

static pool_sub_fn *const set_mode_cb[3] = {set_on_sub, set_on_sub_count, set_on_sub_all};

struct px_waitset *px_waitset_join(struct lk_engine *eng, const char *channel, size_t chlen,
                                   struct px_waitset_member *m, enum px_wake_mode mode)
{
    uint64_t hash = hash_bytes(channel, chlen);
    struct px_waitset *set = set_find(eng, channel, chlen, hash);

    if (!set)
        set = set_create(eng, channel, chlen, hash, set_mode_cb[mode]);
    if (!set)
        return NULL;
    sched_loop_timer_del(eng->loop, &set->linger);
    list_add_tail(&set->members, &m->node);
    set->nmembers++;
    set->sem.max_permits = set->nmembers;
    eng->nwaiters++;
    return set;
}

void px_waitset_leave(struct px_waitset *set, struct px_waitset_member *m)
{
    struct lk_engine *eng = set->eng;

    sched_sem_cancel(&set->sem, &m->sleep);
    list_del_init(&m->node);
    set->nmembers--;
    eng->nwaiters--;
    set->sem.max_permits = set->nmembers;
    if (set->sem.permits > set->nmembers)
        set->sem.permits = set->nmembers;
    if (set->nmembers == 0)
        sched_loop_timer_in(eng->loop, &set->linger, eng->cfg.linger_ms);
}

struct px_waitset *px_waitset_find(struct lk_engine *eng, const char *channel, size_t chlen)
{
    if (eng->locks.count == 0)
        return NULL;
    return set_find(eng, channel, chlen, hash_bytes(channel, chlen));
}

void px_waitset_snap(struct lk_engine *eng, const char *channel, size_t chlen,
                     struct px_wait_snap *snap)
{
    struct px_waitset *set = px_waitset_find(eng, channel, chlen);

    snap->gen = set && set->ready ? set->gen : 0;
    snap->events = set ? set->events : 0;
}

bool px_waitset_unchanged(const struct px_waitset *set, const struct px_wait_snap *snap)
{
    return snap->gen != 0 && set->gen == snap->gen && set->events == snap->events && set->ready;
}

bool px_waitset_sleep(struct px_waitset *set, struct px_waitset_member *m)
{
    bool took = sched_sem_wait(&set->sem, &m->sleep) == 1;

    m->took_permit = m->took_permit || took;
    return took;
}

void px_waitset_leave_passing_on(struct px_waitset *set, struct px_waitset_member *m, bool used)
{
    bool pass = m->took_permit && !used;

    m->took_permit = false;
    px_waitset_leave(set, m);
    if (pass && set->nmembers > 0)
        sched_sem_release(&set->sem, 1);
}

void px_waitset_unqueue(struct px_waitset *set, struct px_waitset_member *m)
{
    sched_sem_cancel(&set->sem, &m->sleep);
}

bool px_waitset_is_queued(const struct px_waitset_member *m)
{
    return sched_waiter_is_queued(&m->sleep);
}

int px_waitset_init(struct lk_engine *eng)
{
    return hmap_init(&eng->locks, 256);
}

void px_waitset_deinit(struct lk_engine *eng)
{
    size_t i;

    for (i = 0; i < eng->locks.nbuckets; i++) {
        while (eng->locks.buckets[i])
            set_free(LP_CONTAINER_OF(eng->locks.buckets[i], struct px_waitset, node));
    }
    hmap_deinit(&eng->locks);
}
