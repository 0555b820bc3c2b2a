/* SEM permit tracking: which connection took how many permits of which
 * semaphore through this proxy, so that a closing connection's permits go
 * back (Redisson leaks them), and the record of it in Redis (the ledger)
 * that keeps a failover or a restart from making permits out of nothing.
 *
 * Design. One struct sem_name per semaphore this proxy tracks, one struct
 * sem_taker per (connection, semaphore), linked on the connection's claims
 * and, oldest first, on its sem_name. The rule for permits taken and
 * released through one proxy (README, Permits):
 *
 *     available + tracked <= permits set
 *
 * Acquiring n moves n from available to tracked. Releasing n through this
 * proxy adds n to available, so n come off tracked: first the releaser's
 * own, then other takers', oldest first (forgiven: given back for them,
 * and not returned a second time when their connection closes). A close
 * returns what its taker still has. SEM.DRAIN and SEM.ADDPERMITS leave
 * tracked as it is (drained permits are no one's; a negative ADDPERMITS
 * lowers both sides). What the proxy cannot see, it cannot count: a
 * release by a Redisson client or another proxy of permits a client of
 * this proxy took leaves them tracked here (KEEP skips it all).
 *
 * The ledger: Redis replicates asynchronously, so after a failover (or a
 * restart without persistence) the master may lack an acquire the proxy
 * told a client of: that permit is free there, and giving it back would
 * make a permit out of nothing. So every tracked acquire also records, in
 * the same script as the count, the permits per connection in a hash
 * {name}:lp-permits:<proxy uuid>. A release adds back only own permits the
 * master records (the rest is answered LOCKLOST); a return on close gives
 * back the connection's record less its forgiven permits, and clears it.
 * A master may equally lack a release or a return (the record then says
 * more than the proxy): after every topology change the proxy reads the
 * ledger of each semaphore of the moved slots (sem_ledger.lua); a closed
 * connection's record goes back (exactly what was read), an open one's
 * taker turns unsure, as does every taker there, so that its record is
 * settled at its close. Known gaps: a release only takes the permits the
 * proxy counts as the caller's off its record, so a client that releases
 * a permit whose acquire had an unknown outcome gets it given back again
 * at close (the README says not to); and a closed connection's
 * record read while its own return is still queued goes back whole,
 * including permits another connection released for it (forgiven): that
 * needs a release for others, a close and a failover within moments.
 *
 * A release changes the tracking when its reply comes (a release Redis
 * never ran changes nothing): until then its own permits count as
 * releasing, so that a second release in flight does not count them again.
 *
 * States of a taker: it lives while it has permits, forgiven ones, a
 * release in flight, or is unsure (an acquire or a release whose outcome
 * was never learnt, or a failover since: its record, not the proxy, says
 * what goes back on close). A sem_name lives while it has takers and then lingers for
 * SEM_LINGER_MS (at most SEM_LINGER_MAX of them), so that a failover soon
 * after its last taker left still checks its records.
 *
 * Who frees what: this module owns both structures; a taker is freed by
 * taker_maybe_free() or its claim ending, a sem_name by the linger
 * trimming (or at once on -ENOMEM). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/jobs.h"
#include "engine/scripts.h"
#include "engine/sem.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "sched/loop.h"

#define SEM_LINGER_MS  60000u /* a sem_name without takers is kept this long */
#define SEM_LINGER_MAX 4096u  /* and at most this many of them */

/* A semaphore with takers, or lingering after its last one. */
struct sem_name {
    struct hmap_node node;   /* in engine->sem_names, by name */
    struct list takers;      /* struct sem_taker, oldest first */
    struct list linger_node; /* in engine->sem_lingering while takers is empty */
    uint64_t idle_since;     /* monotonic ms its last taker left */
    size_t nlen;             /* name length */
    char name[];             /* owned: the semaphore name */
};

/* The permits one connection took of one semaphore. */
struct sem_taker {
    struct list name_node; /* in sem->takers */
    struct px_claim claim; /* in cl->locks.claims: return the permits on close */
    struct sem_name *sem;  /* borrowed: lingers after its last taker */
    struct lk_engine *eng; /* borrowed */
    struct lk_caller *cl;  /* borrowed: the taking connection (the claim ends first) */
    uint64_t conn;         /* cl->id: its field in the ledger */
    int64_t permits;       /* taken and not released since */
    int64_t forgiven;      /* released for it by other connections */
    int64_t releasing;     /* of permits, in releases of its own still in flight */
    bool unsure;           /* its record may hold more than permits + forgiven */
};

static void sem_name_free(struct lk_engine *eng, struct sem_name *sn)
{
    if (list_is_linked(&sn->linger_node)) {
        list_del_init(&sn->linger_node);
        eng->sem_nlingering--;
    }
    hmap_remove(&eng->sem_names, &sn->node);
    free(sn);
}

/* Frees lingering names past their time, and the oldest beyond the cap. */
static void linger_trim(struct lk_engine *eng, uint64_t now)
{
    struct list *n;

    while ((n = list_first(&eng->sem_lingering)) != NULL) {
        struct sem_name *sn = LP_CONTAINER_OF(n, struct sem_name, linger_node);

        if (eng->sem_nlingering <= SEM_LINGER_MAX && sn->idle_since + SEM_LINGER_MS > now)
            break;
        sem_name_free(eng, sn);
    }
}

static struct sem_name *sem_name_find(struct lk_engine *eng, const char *name, size_t len,
                                      bool create)
{
    struct hmap *m = &eng->sem_names;
    uint64_t hash = hash_bytes(name, len);
    struct hmap_node *n = hmap_first(m, hash);
    struct sem_name *sn;

    for (; n; n = hmap_next(n)) {
        sn = LP_CONTAINER_OF(n, struct sem_name, node);
        if (sn->nlen == len && memcmp(sn->name, name, len) == 0)
            return sn;
    }
    if (!create || !(sn = calloc(1, sizeof(*sn) + len + 1)))
        return NULL;
    list_init(&sn->takers);
    list_init(&sn->linger_node);
    sn->nlen = len;
    memcpy(sn->name, name, len);
    hmap_insert(m, &sn->node, hash);
    return sn;
}

static struct sem_taker *taker_find(struct sem_name *sn, const struct lk_caller *cl)
{
    struct list *n;

    for (n = sn->takers.next; n != &sn->takers; n = n->next) {
        struct sem_taker *t = LP_CONTAINER_OF(n, struct sem_taker, name_node);

        if (t->cl == cl)
            return t;
    }
    return NULL;
}

static struct sem_taker *taker_of(const struct lk_caller *cl, const char *name, size_t len)
{
    struct sem_name *sn = sem_name_find(cl->eng, name, len, false);

    return sn ? taker_find(sn, cl) : NULL;
}

static void taker_free(struct sem_taker *t)
{
    struct sem_name *sn = t->sem;
    struct lk_engine *eng = t->eng;
    uint64_t now = sched_loop_now_ms(t->eng->loop);

    t->eng->sem_stats.sem_tracked -= t->permits;
    list_del_init(&t->name_node);
    list_del_init(&t->claim.node);
    free(t);
    if (list_empty(&sn->takers)) {
        sn->idle_since = now;
        list_add_tail(&eng->sem_lingering, &sn->linger_node);
        eng->sem_nlingering++;
    }
    linger_trim(eng, now);
}

static void taker_maybe_free(struct sem_taker *t)
{
    if (t->permits == 0 && t->forgiven == 0 && t->releasing == 0 && !t->unsure)
        taker_free(t);
}

/* Takes up to n of t's permits off its tracking (forgive: another
 * connection released them); returns how many. */
static int64_t taker_sub(struct sem_taker *t, int64_t n, bool forgive)
{
    int64_t k = LP_MIN(n, t->permits);

    t->permits -= k;
    t->eng->sem_stats.sem_tracked -= k;
    if (forgive)
        t->forgiven += k;
    taker_maybe_free(t);
    return k;
}

static void taker_gone(struct px_claim *c, struct lk_caller *cl)
{
    struct sem_taker *t = LP_CONTAINER_OF(c, struct sem_taker, claim);

    (void)cl;
    px__sem_return_taken(t->eng, t->sem->name, t->sem->nlen, t->conn, t->forgiven, 0);
    taker_free(t);
}

/* cl's taker of name, created if need be; NULL on -ENOMEM. */
static struct sem_taker *taker_get(struct lk_caller *cl, const char *name, size_t len)
{
    struct lk_engine *eng = cl->eng;
    struct sem_name *sn = sem_name_find(eng, name, len, true);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;

    if (!sn || t)
        return t;
    t = calloc(1, sizeof(*t));
    if (!t) {
        if (list_empty(&sn->takers) && !list_is_linked(&sn->linger_node))
            sem_name_free(eng, sn);
        return NULL;
    }
    if (list_is_linked(&sn->linger_node)) {
        list_del_init(&sn->linger_node);
        eng->sem_nlingering--;
    }
    t->sem = sn;
    t->eng = cl->eng;
    t->cl = cl;
    t->conn = cl->id;
    t->claim.gone = taker_gone;
    list_add_tail(&sn->takers, &t->name_node);
    list_add_tail(&cl->locks.claims, &t->claim.node);
    return t;
}

void px__sem_track_add(struct lk_caller *cl, const char *name, size_t len, int64_t n, bool unsure)
{
    struct sem_taker *t = taker_get(cl, name, len);

    if (!t)
        return; /* -ENOMEM: simply not tracked */
    t->permits += n;
    t->unsure |= unsure;
    cl->eng->sem_stats.sem_tracked += n;
}

void px__sem_release_begin(struct lk_caller *cl, const char *name, size_t len, int64_t n,
                           struct px__sem_own *o)
{
    struct sem_taker *t = taker_of(cl, name, len);

    memset(o, 0, sizeof(*o));
    if (!t)
        return;
    o->taker = true;
    o->own = LP_MIN(n, t->permits - t->releasing);
    t->releasing += o->own;
}

/* n permits of sn released for its takers other than self, oldest first
 * (forgiven: not returned a second time when they close). */
static void release_for_others(struct sem_name *sn, const struct sem_taker *self, int64_t n)
{
    struct list *it, *next;

    for (it = sn->takers.next; n > 0 && it != &sn->takers; it = next) {
        struct sem_taker *t = LP_CONTAINER_OF(it, struct sem_taker, name_node);
        int64_t k = LP_MIN(n, t->permits - t->releasing);

        next = it->next; /* taker_sub may free t, never another taker */
        if (t == self || k <= 0)
            continue;
        t->eng->sem_stats.sem_released_for_others += (uint64_t)taker_sub(t, k, true);
        n -= k;
    }
}

void px__sem_release_end(struct lk_caller *cl, const char *name, size_t len, int64_t n,
                         const struct px__sem_own *o, enum px__sem_outcome out, long long left)
{
    struct sem_name *sn = sem_name_find(cl->eng, name, len, false);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;

    if (t)
        t->releasing -= LP_MIN(o->own, t->releasing);
    if (out == PX__SEM_NOT_APPLIED) {
        if (t)
            taker_maybe_free(t);
        return;
    }
    if (sn && n > o->own)
        release_for_others(sn, t, n - o->own);
    if (!t)
        return;
    if (out == PX__SEM_MAYBE_APPLIED || left > 0)
        t->unsure = true; /* its record says what goes back on close */
    else if (o->taker)
        t->unsure = false; /* the record is empty: nothing unseen in it */
    taker_sub(t, o->own, false);
}

/* ---- after a topology change: records to settle -------------------------------- */

struct sem_reconcile {
    struct px_job job; /* retried until Redis answers */
    size_t nlen;       /* name length */
    char name[];       /* owned: the semaphore name */
};

static int reconcile_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct sem_reconcile *r = LP_CONTAINER_OF(j, struct sem_reconcile, job);
    struct px__sem_keys k;

    px__sem_keys_ledger(&k, 0, j->eng, r->name, r->nlen);
    return px_script_eval(j->eng, px_route_hint(r->name, r->nlen),
                          px__sem_script(j->eng, PX__SEM_LEDGER), 1, 1, k.argv, k.lens, cb, arg);
}

static struct lk_caller *client_open(struct lk_engine *eng, uint64_t id)
{
    return eng->front.caller_find(eng, id);
}

/* One record {conn, permits} of the new master: an open connection's
 * taker turns unsure (it settles the record at its release or close; a
 * give-back now could race its next acquire), a closed connection's
 * permits go back, exactly those read. */
static void reconcile_record(struct lk_engine *eng, const struct sem_reconcile *r,
                             const struct pool_reply *conn, const struct pool_reply *val)
{
    char buf[24];
    unsigned long long id;
    long long n;
    struct lk_caller *cl;

    if (conn->type != POOL_REPLY_STRING || val->type != POOL_REPLY_STRING || conn->len == 0 ||
        conn->len >= sizeof(buf) || val->len == 0 || val->len >= sizeof(buf))
        return;
    memcpy(buf, conn->str, conn->len);
    buf[conn->len] = '\0';
    id = strtoull(buf, NULL, 10);
    memcpy(buf, val->str, val->len);
    buf[val->len] = '\0';
    n = strtoll(buf, NULL, 10);
    if (n <= 0)
        return;
    cl = client_open(eng, id);
    if (cl)
        px__sem_track_add(cl, r->name, r->nlen, 0, true);
    else
        px__sem_return_taken(eng, r->name, r->nlen, id, 0, n);
}

static void reconcile_done(struct px_job *j, const struct pool_reply *r)
{
    struct sem_reconcile *s = LP_CONTAINER_OF(j, struct sem_reconcile, job);
    size_t i;

    if (r->type == POOL_REPLY_ARRAY && r->elements % 2 == 0) {
        for (i = 0; i < r->elements; i += 2)
            reconcile_record(j->eng, s, r->element[i], r->element[i + 1]);
    } else {
        log_msg(LOG_LVL_WARN, "reading the permit records of '%.*s' failed: %.*s",
                (int)LP_MIN(s->nlen, 200u), s->name,
                r->type == POOL_REPLY_ERROR ? (int)LP_MIN(r->len, 200u) : 14,
                r->type == POOL_REPLY_ERROR ? r->str : "not a map");
    }
    free(s);
}

static void reconcile_dropped(struct px_job *j, enum px_job_drop why)
{
    (void)why;
    free(LP_CONTAINER_OF(j, struct sem_reconcile, job));
}

static const struct px_job_ops reconcile_ops = {
    .what = "check of a semaphore's permit records after a topology change",
    .group = PX_JOB_RELEASE,
    .idempotent = true, /* a read */
    .ready = NULL,
    .send = reconcile_send,
    .done = reconcile_done,
    .dropped = reconcile_dropped,
};

static void reconcile_submit(struct lk_engine *eng, const struct sem_name *sn)
{
    struct sem_reconcile *r = calloc(1, sizeof(*r) + sn->nlen + 1);

    if (!r) {
        log_msg(LOG_LVL_WARN, "cannot check the permit records of '%.*s': out of memory",
                (int)LP_MIN(sn->nlen, 200u), sn->name);
        return;
    }
    r->nlen = sn->nlen;
    memcpy(r->name, sn->name, sn->nlen);
    px_job_init(&r->job, eng, &reconcile_ops);
    px_job_submit(&r->job, sched_loop_now_ms(eng->loop) + PX__SEM_RETURN_WINDOW_MS);
}

void px_sem_on_topology(struct lk_engine *eng, const struct pool_topology_event *ev)
{
    struct hmap *m = &eng->sem_names;
    unsigned checked = 0;
    size_t i;

    linger_trim(eng, sched_loop_now_ms(eng->loop));
    for (i = 0; i < m->nbuckets; i++) {
        struct hmap_node *n;

        for (n = m->buckets[i]; n; n = n->next) {
            struct sem_name *sn = LP_CONTAINER_OF(n, struct sem_name, node);
            struct list *it;

            if (!pool_slot_bitmap_has(ev->slots, pool_slot(sn->name, sn->nlen)))
                continue;
            for (it = sn->takers.next; it != &sn->takers; it = it->next)
                LP_CONTAINER_OF(it, struct sem_taker, name_node)->unsure = true;
            reconcile_submit(eng, sn);
            checked++;
        }
    }
    if (checked)
        log_msg(LOG_LVL_INFO, "checking the permit records of %u semaphores after the change",
                checked);
}

int px_sem_track_init(struct lk_engine *eng)
{
    list_init(&eng->sem_lingering);
    eng->sem_nlingering = 0;
    return hmap_init(&eng->sem_names, 64);
}

void px_sem_track_deinit(struct lk_engine *eng)
{
    struct list *n;

    /* Names with takers stay with connections still open at exit (the
     * process ends; their memory goes with it). */
    while ((n = list_first(&eng->sem_lingering)) != NULL)
        sem_name_free(eng, LP_CONTAINER_OF(n, struct sem_name, linger_node));
    if (eng->sem_names.count == 0)
        hmap_deinit(&eng->sem_names);
}
