/* SEM.*: Redisson's RSemaphore (spec section 6): a STRING count at the raw
 * name, woken on redisson_sc:{name}.
 *
 * Permits taken through the proxy are tracked per connection (who frees
 * what: the tracking entries are owned by this module, linked on the
 * connection's claims and in the module's table): (connection id, name)
 * -> permits taken and not released by that connection; SEM.RELEASE on the
 * same connection lowers it (never below 0: releasing more than you took
 * is allowed, as in Redisson, but only tracked permits are returned). When
 * the connection closes, its entries are returned with the release script
 * (only if the key still exists, so a deleted semaphore is not re-created)
 * and freed. KEEP on an acquire skips the tracking. */
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
#include "proxy/locks/sem-int.h"
#include "proxy/locks/semaphore.h"
#include "proxy/locks/wait.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- permit tracking ------------------------------------------------------ */

static struct hmap held_map_storage; /* struct sem_held by (connection, name) */
static bool held_map_ready;

static struct hmap *held_map(int which)
{
    (void)which;
    if (!held_map_ready) {
        if (hmap_init(&held_map_storage, 64) < 0)
            return NULL;
        held_map_ready = true;
    }
    return &held_map_storage;
}

static void sem_send_return(struct px_server *srv, const char *name, size_t len, int64_t permits)
{
    px__sem_return(srv, name, len, permits, NULL, PX_JOB_NO_END, false);
}

struct sem_held {
    struct hmap_node node; /* in held_map(0), by (cl_id, name) */
    struct px_claim claim; /* in cl->locks.claims: return the permits on close */
    struct px_server *srv; /* borrowed */
    uint64_t cl_id;        /* the connection that took the permits */
    int64_t permits;       /* taken and not released by that connection */
    size_t nlen;           /* name length */
    char name[];           /* owned: the semaphore name */
};

static uint64_t sem_held_hash(uint64_t cl_id, const char *name, size_t len)
{
    return hash_bytes(name, len) ^ (cl_id * 0x9e3779b97f4a7c15ull);
}

static struct sem_held *sem_held_find(uint64_t cl_id, const char *name, size_t len)
{
    struct hmap *m = held_map(0);
    struct hmap_node *n = m ? hmap_first(m, sem_held_hash(cl_id, name, len)) : NULL;

    for (; n; n = hmap_next(n)) {
        struct sem_held *h = LP_CONTAINER_OF(n, struct sem_held, node);

        if (h->cl_id == cl_id && h->nlen == len && memcmp(h->name, name, len) == 0)
            return h;
    }
    return NULL;
}

static void sem_held_free(struct sem_held *h)
{
    px__sem_stats.sem_tracked -= h->permits;
    hmap_remove(held_map(0), &h->node);
    list_del_init(&h->claim.node);
    free(h);
}

static void sem_held_gone(struct px_claim *o, struct px_client *cl)
{
    struct sem_held *h = LP_CONTAINER_OF(o, struct sem_held, claim);

    (void)cl;
    if (h->permits > 0)
        sem_send_return(h->srv, h->name, h->nlen, h->permits);
    sem_held_free(h);
}

/* cl took n permits of name. On -ENOMEM they are simply not tracked. */
static void sem_held_add(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_held *h = sem_held_find(cl->id, name, len);

    if (!h) {
        h = held_map(0) ? calloc(1, sizeof(*h) + len + 1) : NULL;
        if (!h)
            return;
        h->srv = cl->srv;
        h->cl_id = cl->id;
        h->nlen = len;
        memcpy(h->name, name, len);
        h->claim.gone = sem_held_gone;
        hmap_insert(held_map(0), &h->node, sem_held_hash(cl->id, name, len));
        list_add_tail(&cl->locks.claims, &h->claim.node);
    }
    h->permits += n;
    px__sem_stats.sem_tracked += n;
}

/* cl releases n permits of name: fewer are tracked (never below 0). */
static void sem_held_sub(struct px_client *cl, const char *name, size_t len, int64_t n)
{
    struct sem_held *h = sem_held_find(cl->id, name, len);

    if (!h)
        return;
    if (n >= h->permits)
        return sem_held_free(h);
    h->permits -= n;
    px__sem_stats.sem_tracked -= n;
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

    if (px_args_check_name(req, "name") < 0 || px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_TRYSET, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n),
               NULL, 0, px_call_reply_int);
}

void px__sem_cmd_addpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_args_check_name(req, "name") < 0 ||
        px_args_parse_count(req, 2, "permits", -(int64_t)PX_ARGS_MAX_COUNT, &n) < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_ADD, 2, nb, (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n),
               NULL, 0, px_call_reply_int);
}

/* {1, count} (or {0, 0}: the key was gone) -> the new count. */
static void sem_reply_release(struct px_req *req, const redisReply *r)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[1]->type != REDIS_REPLY_INTEGER)
        return px_wait_reply_upstream(req, -EPROTO);
    px_reply_int(px_req_out(req), r->element[1]->integer);
}

void px__sem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    int64_t n = 1;
    char nbuf[24];

    if (px_args_check_name(req, "name") < 0 ||
        (req->argc > 2 && px_args_parse_count(req, 2, "permits", 1, &n) < 0))
        return px_req_done(req);
    sem_held_sub(req->cl, name->p, name->len, n);
    sem_simple(req, PX__SEM_RELEASE, 2, nbuf,
               (size_t)snprintf(nbuf, sizeof(nbuf), "%lld", (long long)n), "0", 1,
               sem_reply_release);
}

void px__sem_cmd_available(struct px_req *req)
{
    if (px_args_check_name(req, "name") < 0)
        return px_req_done(req);
    sem_simple(req, PX__SEM_AVAILABLE, 1, NULL, 0, NULL, 0, px_call_reply_int);
}

void px__sem_cmd_drain(struct px_req *req)
{
    if (px_args_check_name(req, "name") < 0)
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
        sem_held_add(w->req->cl, name->p, name->len, s->permits);
    px_reply_status(px_req_out(w->req), "OK");
}

/* Permits have no lease (never LATE). A grant for a closed connection goes
 * back. An unknown outcome cannot be told: the count has no owner, and
 * returning permits that were not taken would make permits out of
 * nothing, so the proxy takes the safe side (they stay taken until
 * someone releases them), and counts and logs it. */
static void semop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    static struct px_ratelog rl;
    struct semop *s = semop_of(w);
    const struct px_arg *name = &w->req->argv[1];
    uint64_t quiet;

    if (why == PX_UNDO_GONE && !s->keep)
        sem_send_return(w->srv, name->p, name->len, s->permits);
    if (why != PX_UNDO_UNKNOWN)
        return;
    px__sem_stats.sem_unknown++;
    if (px_ratelog_allow(&rl, sched_loop_now_ms(w->srv->loop), &quiet))
        log_msg(LOG_LVL_WARN,
                "SEM.ACQUIRE of %lld permits of '%.*s': outcome unknown; if Redis applied it, "
                "the permits stay taken until released (%llu similar not logged)",
                (long long)s->permits, (int)LP_MIN(name->len, 200u), name->p,
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
