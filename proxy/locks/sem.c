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
 * skips the tracking.
 *
 * The ledger: Redis replicates asynchronously, so after a failover (or a
 * restart without persistence) the master may not have an acquire the
 * proxy told a client of: that permit is free there, and giving it back
 * (a release, a return on close) would make a permit out of nothing, one
 * more holder than the semaphore allows from then on. So every tracked
 * acquire also records, in the same script, the permits per connection in
 * a hash {name}:lp-permits:<proxy uuid> (px__sem_keys_ledger). A release
 * adds back only own permits the master records (the others are answered
 * LOCKLOST: the holder learns it lost them, and counted in
 * sem_permits_lost); a return gives back what the master records for the
 * connection less what others released for it (forgiven), and clears the
 * record, so resending it is harmless. An acquire whose outcome the proxy
 * never learnt marks its taker unsure: the record, not the proxy, then
 * says what goes back on close. A taker lives while it has permits,
 * forgiven ones or an unsure acquire: until then its record may be in
 * Redis. The hash empties (and Redis deletes it) as permits go back; a
 * proxy that crashes leaves its hash, as it leaves the permits its
 * clients held. */
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
#include "proxy/locks/shape.h"
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
    uint64_t conn;         /* cl->id: its field in the ledger */
    int64_t permits;       /* taken and not released since */
    int64_t forgiven;      /* of those, released by other connections */
    bool unsure;           /* an acquire's outcome was never learnt */
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

/* Takes up to n of t's permits off its tracking (forgive: another
 * connection released them); returns how many. */
static int64_t taker_sub(struct sem_taker *t, int64_t n, bool forgive)
{
    int64_t k = LP_MIN(n, t->permits);

    t->permits -= k;
    px__sem_stats.sem_tracked -= k;
    if (forgive)
        t->forgiven += k;
    if (t->permits == 0 && t->forgiven == 0 && !t->unsure)
        taker_free(t);
    return k;
}

static void taker_gone(struct px_claim *c, struct px_client *cl)
{
    struct sem_taker *t = LP_CONTAINER_OF(c, struct sem_taker, claim);

    (void)cl;
    px__sem_return_taken(t->srv, t->sem->name, t->sem->nlen, t->conn, t->forgiven);
    taker_free(t);
}

/* cl took n permits of name (n 0 and unsure: it may have). On -ENOMEM they
 * are simply not tracked. */
static void sem_track_add(struct px_client *cl, const char *name, size_t len, int64_t n,
                          bool unsure)
{
    struct sem_name *sn = sem_name_find(name, len, true);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;

    if (sn && !t && (t = calloc(1, sizeof(*t)))) {
        t->sem = sn;
        t->srv = cl->srv;
        t->cl = cl;
        t->conn = cl->id;
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
    t->unsure |= unsure;
    px__sem_stats.sem_tracked += n;
}

/* What a release by one connection tells the release script about its
 * own record (sem_release.lua). */
struct sem_own {
    bool taker;    /* the connection has a record of this semaphore */
    int64_t own;   /* of the n released, permits it took as the proxy counts */
    int64_t maybe; /* more that may be its own (an unsure acquire) */
};

/* cl releases n permits of name: n come off the tracking, cl's own first,
 * then other takers', oldest first (see the design block). Fills *o. */
static void sem_track_release(struct px_client *cl, const char *name, size_t len, int64_t n,
                              struct sem_own *o)
{
    struct sem_name *sn = sem_name_find(name, len, false);
    struct sem_taker *t = sn ? taker_find(sn, cl) : NULL;
    int64_t k;

    memset(o, 0, sizeof(*o));
    if (t) {
        o->taker = true;
        o->maybe = t->unsure ? n - LP_MIN(n, t->permits) : 0;
        o->own = taker_sub(t, n, false);
        n -= o->own;
    }
    while (n > 0 && (sn = sem_name_find(name, len, false)) != NULL) {
        struct list *it;

        t = NULL;
        for (it = sn->takers.next; it != &sn->takers; it = it->next) {
            t = LP_CONTAINER_OF(it, struct sem_taker, name_node);
            if (t->permits > 0)
                break;
            t = NULL;
        }
        if (!t)
            break;
        k = taker_sub(t, n, true);
        px__sem_stats.sem_released_for_others += (uint64_t)k;
        n -= k;
    }
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

/* {1, count, lost, left} (or {0, 0, 0, 0}: the key was gone) -> the new
 * count, or LOCKLOST when own permits were lost (see the design block).
 * A record left for the connection makes its taker unsure, so that it goes
 * back on close. */
static void sem_reply_release(struct px_req *req, const redisReply *r)
{
    static struct px_ratelog rl;
    const struct px_arg *name = &req->argv[1];
    long long v[4];
    uint64_t quiet;
    size_t n;

    if (!px_shape_ints(r, 4, 4, v, &n))
        return px_wait_reply_upstream(req, -EPROTO);
    if (v[3] > 0 && !req->cl->closing)
        sem_track_add(req->cl, name->p, name->len, 0, true);
    if (v[2] <= 0) {
        px_reply_int(px_req_out(req), v[1]);
        return;
    }
    px__sem_stats.sem_lost += (uint64_t)v[2];
    if (px_ratelog_allow(&rl, sched_loop_now_ms(req->cl->srv->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "%lld permits of '%.*s' connection %llu held were not recorded by Redis (a "
                "failover or a restart lost them); told at its SEM.RELEASE (%llu similar not "
                "logged)",
                v[2], (int)LP_MIN(name->len, 200u), name->p, (unsigned long long)req->cl->id,
                (unsigned long long)quiet);
    px_reply_error(px_req_out(req),
                   "LOCKLOST %lld permit(s) this connection held of '%.*s' were lost: Redis no "
                   "longer records them (a failover to a replica that missed them, or a restart "
                   "without persistence), so they were free already and were not added again; "
                   "the count is %lld",
                   v[2], (int)LP_MIN(name->len, 200u), name->p, v[1]);
}

void px__sem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    struct px__sem_keys k;
    struct sem_own o;
    int64_t n = 1;
    char nb[24], conn[24], own[24], maybe[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        (req->argc > 2 && px_args_parse_count(req, 2, "permits", 1, &n) < 0))
        return px_req_done(req);
    sem_track_release(req->cl, name->p, name->len, n, &o);
    px__sem_keys_fill(&k, name->p, name->len, false);
    px__sem_keys_arg(&k, 3, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n));
    px__sem_keys_arg(&k, 4, "0", 1);
    if (o.taker) {
        px__sem_keys_ledger(&k, 2, req->cl->srv, name->p, name->len);
        px__sem_keys_arg(
            &k, 5, conn,
            (size_t)snprintf(conn, sizeof(conn), "%llu", (unsigned long long)req->cl->id));
        px__sem_keys_arg(&k, 6, own, (size_t)snprintf(own, sizeof(own), "%lld", (long long)o.own));
        px__sem_keys_arg(&k, 7, maybe,
                         (size_t)snprintf(maybe, sizeof(maybe), "%lld", (long long)o.maybe));
    } else {
        k.argv[2] = k.argv[3]; /* no record: keys name, chan; ARGV n, only-if-exists */
        k.lens[2] = k.lens[3];
        k.argv[3] = k.argv[4];
        k.lens[3] = k.lens[4];
    }
    px_call_script(req, px_route_hint(name->p, name->len), px__sem_script(PX__SEM_RELEASE),
                   o.taker ? 3 : 2, o.taker ? 8 : 4, k.argv, k.lens, sem_reply_release);
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
    uint64_t conn;          /* the taking connection's id (its ledger field) */
    bool keep;              /* KEEP: not returned on disconnect, not in the ledger */
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
    struct px__sem_keys k;
    char n[24], conn[24];
    size_t nlen = (size_t)snprintf(n, sizeof(n), "%lld", (long long)s->permits);
    uint64_t hint = px_route_hint(name->p, name->len);

    px__sem_keys_arg(&k, 0, name->p, name->len);
    if (s->keep) {
        px__sem_keys_arg(&k, 1, n, nlen);
        return px_wait_eval(w, hint, px__sem_script(PX__SEM_ACQUIRE), 1, 2, k.argv, k.lens);
    }
    px__sem_keys_ledger(&k, 1, w->srv, name->p, name->len);
    px__sem_keys_arg(&k, 2, n, nlen);
    px__sem_keys_arg(&k, 3, conn,
                     (size_t)snprintf(conn, sizeof(conn), "%llu", (unsigned long long)s->conn));
    return px_wait_eval(w, hint, px__sem_script(PX__SEM_ACQUIRE), 2, 4, k.argv, k.lens);
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
        sem_track_add(w->req->cl, name->p, name->len, s->permits, false);
    px_reply_status(px_req_out(w->req), "OK");
}

/* Permits have no lease (never LATE). A grant for a closed connection goes
 * back (what the ledger records for it). An unknown outcome, or a grant
 * fewer replicas than --sync-replicas acknowledged, is not given back at
 * once (the count has no owner: the master that applied it may be
 * replaced by a replica that never saw it, and a blind return would add
 * permits nobody took; the Sentinel torture run saw 7 of 3): the taker
 * turns unsure, and what the ledger of the master then records goes back
 * when the connection closes, or with its next SEM.RELEASE. Counted and
 * logged. */
static void semop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    static struct px_ratelog rl;
    struct semop *s = semop_of(w);
    const struct px_arg *name = &w->req->argv[1];
    uint64_t quiet;

    if (why == PX_UNDO_GONE && !s->keep)
        px__sem_return_taken(w->srv, name->p, name->len, s->conn, 0);
    if (why != PX_UNDO_UNKNOWN && why != PX_UNDO_UNREPLICATED)
        return;
    px__sem_stats.sem_unknown++;
    if (!s->keep && w->req->cl->closing)
        px__sem_return_taken(w->srv, name->p, name->len, s->conn, 0);
    else if (!s->keep)
        sem_track_add(w->req->cl, name->p, name->len, 0, true);
    if (px_ratelog_allow(&rl, sched_loop_now_ms(w->srv->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "SEM.ACQUIRE of %lld permits of '%.*s': %s; if Redis applied it, the permits "
                "stay taken until released or (not KEEP) the connection closes (%llu similar "
                "not logged)",
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
    s->conn = req->cl->id;
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
