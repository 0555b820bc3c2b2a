/* SEM.*: Redisson's RSemaphore (spec section 6): a STRING count at the raw
 * name, woken on redisson_sc:{name}.
 *
 * Design: permits taken through the proxy are tracked, so that those of a
 * connection that closes go back (Redisson leaks them). Who frees what:
 * this module owns the tracking, one struct sem_name per semaphore with
 * takers and one struct sem_taker per (connection, semaphore), linked on
 * the connection's claims and, oldest first, on its sem_name.
 *
 * A semaphore has no owner: anyone may release permits, also permits
 * someone else took (as in Redisson). The rule that keeps this safe:
 *
 *     available + tracked <= permits set
 *
 * (tracked: permits that takers of this proxy hold and would return on
 * close). Acquiring n moves n from available to tracked. Releasing n
 * through this proxy adds n to available, so n come off tracked: first the
 * releaser's own, then other takers', oldest first (their permits were
 * given back for them: they are gone, and are not returned a second time
 * when their connection closes). A close returns exactly what its taker
 * still has. So permits in use never exceed the count, whatever the mix of
 * releases by others and disconnects. SEM.DRAIN and SEM.ADDPERMITS leave
 * tracked as it is (drained permits are no one's; a negative ADDPERMITS
 * lowers both sides). What the proxy cannot see, it cannot count: a
 * release by a Redisson client or through another proxy of permits a
 * client of this proxy took still leaves them tracked here. Use KEEP (no
 * tracking) for permits meant to be released elsewhere.
 *
 * A return goes only to a semaphore that still exists (a deleted one is
 * not re-created); it is a retried job (semaphore.c). KEEP on an acquire
 * skips the tracking. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hmap.h"
#include "common/log.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/locks/call.h"
#include "proxy/locks/jobs.h"
#include "proxy/locks/locks.h"
#include "proxy/locks/scripts.h"
#include "proxy/locks/sem-int.h"
#include "proxy/locks/semaphore.h"
#include "proxy/locks/wait.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- permit tracking ------------------------------------------------------ */

static struct hmap names_storage; /* struct sem_name by name */
static bool names_ready;

static struct hmap *names_map(void)
{
    if (!names_ready) {
        if (hmap_init(&names_storage, 64) < 0)
            return NULL;
        names_ready = true;
    }
    return &names_storage;
}

/* A semaphore with takers. */
struct sem_name {
    struct hmap_node node; /* in names_map(), by name */
    struct list takers;    /* struct sem_taker, oldest first */
    size_t nlen;           /* name length */
    char name[];           /* owned: the semaphore name */
};

/* The permits one connection took of one semaphore. */
struct sem_taker {
    struct list name_node; /* in sem->takers */
    struct px_claim claim; /* in cl->locks.claims: return the permits on close */
    struct sem_name *sem;  /* borrowed: freed with its last taker */
    struct px_server *srv; /* borrowed */
    struct px_client *cl;  /* borrowed: the taking connection (the claim ends first) */
    int64_t permits;       /* taken and not released since (> 0) */
};

static struct sem_name *sem_name_find(const char *name, size_t len, bool create)
{
    struct hmap *m = names_map();
    uint64_t hash = hash_bytes(name, len);
    struct hmap_node *n = m ? hmap_first(m, hash) : NULL;
    struct sem_name *sn;

    for (; n; n = hmap_next(n)) {
        sn = LP_CONTAINER_OF(n, struct sem_name, node);
        if (sn->nlen == len && memcmp(sn->name, name, len) == 0)
            return sn;
    }
    if (!create || !m || !(sn = calloc(1, sizeof(*sn) + len + 1)))
        return NULL;
    list_init(&sn->takers);
    sn->nlen = len;
    memcpy(sn->name, name, len);
    hmap_insert(m, &sn->node, hash);
    return sn;
}

static struct sem_taker *taker_find(struct sem_name *sn, const struct px_client *cl)
{
    struct list *n;

    for (n = sn->takers.next; n != &sn->takers; n = n->next) {
        struct sem_taker *t = LP_CONTAINER_OF(n, struct sem_taker, name_node);

        if (t->cl == cl)
            return t;
    }
    return NULL;
}

static void taker_free(struct sem_taker *t)
{
    struct sem_name *sn = t->sem;

    px__sem_stats.sem_tracked -= t->permits;
    list_del_init(&t->name_node);
    list_del_init(&t->claim.node);
    free(t);
    if (list_empty(&sn->takers)) {
        hmap_remove(names_map(), &sn->node);
        free(sn);
    }
}

/* Takes up to n of t's permits off its tracking; returns how many. */
static int64_t taker_sub(struct sem_taker *t, int64_t n)
{
    int64_t k = LP_MIN(n, t->permits);

    t->permits -= k;
    px__sem_stats.sem_tracked -= k;
    if (t->permits == 0)
        taker_free(t);
    return k;
}

static void taker_gone(struct px_claim *c, struct px_client *cl)
{
    struct sem_taker *t = LP_CONTAINER_OF(c, struct sem_taker, claim);

    (void)cl;
    px__sem_return(t->srv, t->sem->name, t->sem->nlen, t->permits, NULL, PX_JOB_NO_END, false);
    taker_free(t);
}

/* cl took n permits of name. On -ENOMEM they are simply not tracked. */
static void sem_track_add(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_name *sn = sem_name_find(name, len, true);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;

    if (sn && !t && (t = calloc(1, sizeof(*t)))) {
        t->sem = sn;
        t->srv = cl->srv;
        t->cl = cl;
        t->claim.gone = taker_gone;
        list_add_tail(&sn->takers, &t->name_node);
        list_add_tail(&cl->locks.claims, &t->claim.node);
    }
    if (!t) {
        if (sn && list_empty(&sn->takers)) {
            hmap_remove(names_map(), &sn->node);
            free(sn);
        }
        return;
    }
    t->permits += n;
    px__sem_stats.sem_tracked += n;
}

/* cl releases n permits of name: n come off the tracking, cl's own first,
 * then other takers', oldest first (see the design block). */
static void sem_track_release(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_name *sn = sem_name_find(name, len, false);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;

    int64_t k;

    if (t)
        n -= taker_sub(t, n);
    while (n > 0 && (sn = sem_name_find(name, len, false)) != NULL) {
        t = LP_CONTAINER_OF(sn->takers.next, struct sem_taker, name_node);
        k = taker_sub(t, n);
        px__sem_stats.sem_released_for_others += (uint64_t)k;
        n -= k;
    }
}

static void sem_send_return(struct px_server *srv, const char *name, size_t len, int64_t permits)
{
    px__sem_return(srv, name, len, permits, NULL, PX_JOB_NO_END, false);
}

/* ---- SEM.TRYSETPERMITS / ADDPERMITS / RELEASE / AVAILABLE / DRAIN ---------- */

/* Runs a SEM script with keys {name, chan} (or {name} when nkeys is 1) and
 * at most two arguments. */
static void sem_simple(struct px_req *req, enum px__sem_script s, int nkeys, const char *a1,
                       size_t l1, const char *a2, size_t l2, px_call_reply_fn *fmt)
{
    struct px__sem_keys k;
    int nk = px__sem_keys_fill(&k, req->argv[1].p, req->argv[1].len, false);
    int argc;

    if (nkeys == 1)
        nk = 1;
    argc = nk;
    if (a1)
        px__sem_keys_arg(&k, argc++, a1, l1);
    if (a2)
        px__sem_keys_arg(&k, argc++, a2, l2);
    px_call_script(req, px_route_hint(req->argv[1].p, req->argv[1].len), px__sem_script(s), nk,
                   argc, k.argv, k.lens, fmt);
}

void px__sem_cmd_trysetpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_TRYSET, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n),
               NULL, 0, px_call_reply_int);
}

void px__sem_cmd_addpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        px_args_parse_count(req, 2, "permits", -(int64_t)PX_ARGS_MAX_COUNT, &n) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_ADD, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n),
               NULL, 0, px_call_reply_int);
}

/* {1, count} (or {0, 0}: the key was gone) -> the new count. */
static void sem_reply_release(struct px_req *req, const redisReply *r)
{
    long long status, count;

    if (!px__sem_pair_reply(r, &status, &count))
        return px_wait_reply_upstream(req, -EPROTO);
    px_reply_int(px_req_out(req), count);
}

void px__sem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    int64_t n = 1;
    char nbuf[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        (req->argc > 2 && px_args_parse_count(req, 2, "permits", 1, &n) < 0))
        return px_req_done(req);
    sem_track_release(req->cl, name->p, name->len, n);
    sem_simple(req, PX__SEM_RELEASE, 2, nbuf,
               (size_t)snprintf(nbuf, sizeof(nbuf), "%lld", (long long)n), "0", 1,
               sem_reply_release);
}

void px__sem_cmd_available(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_AVAILABLE, 1, NULL, 0, NULL, 0, px_call_reply_int);
}

void px__sem_cmd_drain(struct px_req *req)
{
    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_DRAIN, 1, NULL, 0, NULL, 0, px_call_reply_int);
}

/* ---- SEM.ACQUIRE / SEM.TRYACQUIRE ---------------------------------------- */

/* An acquire in progress (req->op). */
struct semop {
    struct px_wait_op wait; /* the engine's part */
    int64_t permits;        /* how many to take */
    bool keep;              /* KEEP: not returned on disconnect */
};

static struct semop *semop_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct semop, wait);
}

static size_t semop_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    return px__sem_channel(w->req->argv[1].p, w->req->argv[1].len, out, cap);
}

static int semop_send(struct px_wait_op *w)
{
    struct semop *s = semop_of(w);
    const struct px_arg *name = &w->req->argv[1];
    char n[24];
    const char *argv[2] = {name->p, n};
    size_t lens[2] = {name->len, 0};

    lens[1] = (size_t)snprintf(n, sizeof(n), "%lld", (long long)s->permits);
    return px_wait_eval(w, px_route_hint(name->p, name->len), px__sem_script(PX__SEM_ACQUIRE), 1, 2,
                        argv, lens);
}

static enum px_wait_res semop_reply(struct px_wait_op *w, const redisReply *r, uint64_t *repoll)
{
    long long status, value;

    (void)repoll;
    if (!px__sem_pair_reply(r, &status, &value)) {
        px_wait_reply_upstream(w->req, -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (status < 0) {
        px__sem_reply_notinit(w->req);
        return PX_WAIT_FINISHED;
    }
    if (status == 1)
        px__sem_stats.sem_acquired += (uint64_t)semop_of(w)->permits;
    return status == 1 ? PX_WAIT_GRANTED : PX_WAIT_CONTENDED;
}

static void semop_granted(struct px_wait_op *w)
{
    struct semop *s = semop_of(w);
    const struct px_arg *name = &w->req->argv[1];

    if (!s->keep)
        sem_track_add(w->req->cl, name->p, name->len, s->permits);
    px_reply_status(px_req_out(w->req), "OK");
}

/* Permits have no lease (never LATE). A grant for a closed connection goes
 * back. An unknown outcome cannot be told: the count has no owner, and
 * returning permits that were not taken would make permits out of
 * nothing, so the proxy takes the safe side (they stay taken until
 * someone releases them), and counts and logs it. A grant fewer replicas
 * than --sync-replicas acknowledged is the same case: the master that
 * applied it may be replaced by a replica that never saw it (a demoted
 * master even cuts its WAIT short), and a return landing there would add
 * permits nobody took (the Sentinel torture run saw 7 of 3). */
static void semop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    static struct px_ratelog rl;
    struct semop *s = semop_of(w);
    const struct px_arg *name = &w->req->argv[1];
    uint64_t quiet;

    if (why == PX_UNDO_GONE && !s->keep)
        sem_send_return(w->srv, name->p, name->len, s->permits);
    if (why != PX_UNDO_UNKNOWN && why != PX_UNDO_UNREPLICATED)
        return;
    px__sem_stats.sem_unknown++;
    if (px_ratelog_allow(&rl, sched_loop_now_ms(w->srv->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "SEM.ACQUIRE of %lld permits of '%.*s': %s; if Redis applied it, the permits "
                "stay taken until released (%llu similar not logged)",
                (long long)s->permits, (int)LP_MIN(name->len, 200u), name->p,
                why == PX_UNDO_UNKNOWN ? "outcome unknown" : "not replicated, refused",
                (unsigned long long)quiet);
}

static void semop_destroy(struct px_wait_op *w)
{
    free(semop_of(w));
}

static const struct px_wait_kind semop_kind = {
    .name = "semaphore",
    .wake = PX_WAKE_COUNT,
    .stat = PX_WAIT_STAT_SEM,
    .channel = semop_channel,
    .queue_behind = NULL,
    .send = semop_send,
    .attempt_done = NULL,
    .reply = semop_reply,
    .granted = semop_granted,
    .undo = semop_undo,
    .give_up = NULL,
    .destroy = semop_destroy,
};

static void sem_acquire_start(struct px_req *req, bool wait_ok)
{
    struct px__sem_acquire_args a;
    struct semop *s;

    if (px__sem_parse_acquire(req, true, wait_ok, false, &a) < 0)
        return px_req_done(req);
    s = calloc(1, sizeof(*s));
    if (!s) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    s->permits = a.permits;
    s->keep = a.keep;
    px_wait_init(&s->wait, &semop_kind, req, wait_ok ? a.wait_ms : 0);
    px_wait_start(&s->wait);
}

void px__sem_cmd_acquire(struct px_req *req)
{
    sem_acquire_start(req, true);
}

void px__sem_cmd_tryacquire(struct px_req *req)
{
    sem_acquire_start(req, false);
}
