/* PSEM.*: Redisson's RPermitExpirableSemaphore (spec section 7): the
 * count at the raw name plus a "{name}:timeout" ZSET that maps each raw
 * 16-byte permit id to its expiry in epoch ms (922337203685477: no lease),
 * woken on redisson_sc:{name}.
 *
 * Permits taken through the proxy are tracked (who frees what: the entries
 * are owned by this module, linked on the connection's claims and in the
 * module's table by (name, permit id) -> the connection that took it);
 * dropped by PSEM.RELEASE from any connection, and at lease end. When the
 * connection closes, its entries are released by id and freed. KEEP on an
 * acquire skips the tracking, as does a leased permit under
 * --on-disconnect expire. */
#include <sys/random.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/hmap.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/jobs.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmds/call.h"
#include "proxy/cmds/sem-int.h"
#include "proxy/cmds/semaphore.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/metrics.h"
#include "proxy/reply.h"
#include "proxy/server.h"
#include "sched/loop.h"

/* ---- permit tracking ------------------------------------------------------ */

static void psem_send_return(struct px_server *srv, const char *name, size_t len,
                             const unsigned char *id, uint64_t until, bool rollback)
{
    px__sem_return(srv->engine, name, len, id, until, rollback);
}

struct psem_held {
    struct hmap_node node;             /* in engine->psem_held, by (name, id) */
    struct px_claim claim;             /* in cl->caller.locks.claims: return the permit on close */
    struct sched_timer lease_end;      /* leased permit: forget it once expired */
    struct px_server *srv;             /* borrowed */
    uint64_t until;                    /* monotonic ms its lease ends, or PX_JOB_NO_END */
    unsigned char id[PX__PSEM_ID_LEN]; /* raw permit id */
    size_t nlen;                       /* name length */
    char name[];                       /* owned: the semaphore name */
};

static uint64_t psem_held_hash(const char *name, size_t len, const unsigned char *id)
{
    return hash_bytes(name, len) ^ hash_bytes(id, PX__PSEM_ID_LEN);
}

static struct psem_held *psem_held_find(struct px_server *srv, const char *name, size_t len,
                                        const unsigned char *id)
{
    struct hmap_node *n = hmap_first(&srv->engine->psem_held, psem_held_hash(name, len, id));

    for (; n; n = hmap_next(n)) {
        struct psem_held *h = LP_CONTAINER_OF(n, struct psem_held, node);

        if (h->nlen == len && memcmp(h->name, name, len) == 0 &&
            memcmp(h->id, id, PX__PSEM_ID_LEN) == 0)
            return h;
    }
    return NULL;
}

static void psem_held_free(struct psem_held *h)
{
    h->srv->engine->sem_stats.psem_tracked--;
    sched_loop_timer_del(h->srv->loop, &h->lease_end);
    hmap_remove(&h->srv->engine->psem_held, &h->node);
    list_del_init(&h->claim.node);
    free(h);
}

static void psem_held_gone(struct px_claim *o, struct lk_caller *cl)
{
    struct psem_held *h = LP_CONTAINER_OF(o, struct psem_held, claim);

    (void)cl;
    psem_send_return(h->srv, h->name, h->nlen, h->id, h->until, false);
    psem_held_free(h);
}

static void psem_held_on_lease_end(struct sched_timer *t)
{
    psem_held_free(LP_CONTAINER_OF(t, struct psem_held, lease_end));
}

/* cl took permit id of name; its lease ends at until (monotonic ms,
 * counted from the acquire's send), or PX_JOB_NO_END. */
static void psem_held_add(struct px_client *cl, const char *name, size_t len,
                          const unsigned char *id, uint64_t until)
{
    uint64_t now = sched_loop_now_ms(cl->srv->loop);
    struct psem_held *h = calloc(1, sizeof(*h) + len + 1);

    if (!h)
        return;
    h->srv = cl->srv;
    memcpy(h->id, id, PX__PSEM_ID_LEN);
    h->nlen = len;
    memcpy(h->name, name, len);
    h->claim.gone = psem_held_gone;
    h->until = until;
    sched_timer_init(&h->lease_end, psem_held_on_lease_end);
    if (until != PX_JOB_NO_END)
        sched_loop_timer_in(cl->srv->loop, &h->lease_end, until > now ? until - now : 0);
    hmap_insert(&cl->srv->engine->psem_held, &h->node, psem_held_hash(name, len, id));
    list_add_tail(&cl->caller.locks.claims, &h->claim.node);
    cl->srv->engine->sem_stats.psem_tracked++;
}

/* ---- permit ids ---- */

static void hex_encode(const unsigned char *id, char *out)
{
    static const char digits[] = "0123456789abcdef";
    unsigned i;

    for (i = 0; i < PX__PSEM_ID_LEN; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * PX__PSEM_ID_LEN] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static int hex_decode(const struct px_arg *a, unsigned char *id)
{
    unsigned i;

    if (a->len != 2 * PX__PSEM_ID_LEN)
        return -EINVAL;
    for (i = 0; i < PX__PSEM_ID_LEN; i++) {
        int hi = hex_digit(a->p[2 * i]), lo = hex_digit(a->p[2 * i + 1]);

        if (hi < 0 || lo < 0)
            return -EINVAL;
        id[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static void psem_now(char *buf, size_t cap, size_t *len)
{
    *len = (size_t)snprintf(buf, cap, "%llu", (unsigned long long)clock_wall_ms());
}

/* ---- PSEM.ACQUIRE / PSEM.TRYACQUIRE ------------------------------------------ */

/* An acquire in progress (req->op). */
struct psemop {
    struct px_wait_op wait;            /* the engine's part */
    int64_t lease_ms;                  /* LEASE, or -1 */
    bool keep;                         /* KEEP: not returned on disconnect */
    unsigned char id[PX__PSEM_ID_LEN]; /* the permit id this request asks for */
};

static struct psemop *psemop_of(const struct px_wait_op *w)
{
    return LP_CONTAINER_OF(w, struct psemop, wait);
}

static size_t psemop_channel(const struct px_wait_op *w, char *out, size_t cap)
{
    return px__sem_channel(px_wait_req(w)->argv[1].p, px_wait_req(w)->argv[1].len, out, cap);
}

static int psemop_send(struct px_wait_op *w)
{
    struct psemop *p = psemop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];
    uint64_t now = clock_wall_ms();
    struct px__sem_keys k;
    char nowb[24], exp[24];
    int nk = px__sem_keys_fill(&k, name->p, name->len, true);

    px__sem_keys_arg(&k, nk, nowb,
                     (size_t)snprintf(nowb, sizeof(nowb), "%llu", (unsigned long long)now));
    if (p->lease_ms < 0)
        px__sem_keys_arg(&k, nk + 1, PX__PSEM_SENTINEL, strlen(PX__PSEM_SENTINEL));
    else
        px__sem_keys_arg(&k, nk + 1, exp,
                         (size_t)snprintf(exp, sizeof(exp), "%llu",
                                          (unsigned long long)(now + (uint64_t)p->lease_ms)));
    px__sem_keys_arg(&k, nk + 2, (const char *)p->id, PX__PSEM_ID_LEN);
    px__sem_keys_arg(&k, nk + 3, PX__PSEM_SENTINEL, strlen(PX__PSEM_SENTINEL));
    return px_wait_eval(w, px_route_hint(name->p, name->len),
                        px__sem_script(w->eng, PX__PSEM_ACQUIRE), nk, nk + 4, k.argv, k.lens);
}

/* When the permit asked for by the attempt in flight runs out: its lease,
 * counted from the send, or never. */
static uint64_t psemop_until(const struct psemop *p)
{
    return p->lease_ms < 0 ? PX_JOB_NO_END : p->wait.sent_ms + (uint64_t)p->lease_ms;
}

/* Whether a permit of p is returned when its connection closes. */
static bool psem_returnable(const struct psemop *p)
{
    return !p->keep && (p->lease_ms < 0 || p->wait.eng->cfg.on_disc == PX_DISCONNECT_RELEASE);
}

static enum px_wait_res psemop_reply(struct px_wait_op *w, const struct pool_reply *r,
                                     uint64_t *repoll)
{
    long long status, next;
    uint64_t now = clock_wall_ms();

    if (!px__sem_pair_reply(r, &status, &next)) {
        px_wait_reply_upstream(px_wait_req(w), -EPROTO);
        return PX_WAIT_FINISHED;
    }
    if (status < 0) {
        px__sem_reply_notinit(px_wait_req(w));
        return PX_WAIT_FINISHED;
    }
    if (status == 1) {
        w->eng->sem_stats.psem_acquired++;
        return PX_WAIT_GRANTED;
    }
    /* A leased permit frees up at its expiry: nobody publishes then. */
    if (next > 0)
        *repoll = (uint64_t)next > now ? (uint64_t)next - now + 1 : 1;
    if (*repoll > PX_WAIT_RECHECK_MS)
        *repoll = PX_WAIT_RECHECK_MS;
    return PX_WAIT_CONTENDED;
}

static void psemop_granted(struct px_wait_op *w)
{
    struct psemop *p = psemop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];
    char hex[2 * PX__PSEM_ID_LEN + 1];

    if (psem_returnable(p))
        psem_held_add(px_wait_req(w)->cl, name->p, name->len, p->id, psemop_until(p));
    hex_encode(p->id, hex);
    px_reply_bulk(px_req_out(px_wait_req(w)), hex, 2 * PX__PSEM_ID_LEN);
}

/* The permit id is unique, so releasing it by id undoes exactly this
 * acquisition, whether it was applied (late, gone, or maybe: unknown) or
 * not (Redis answers "unknown id"). A retry asks with a new id. */
static void psemop_undo(struct px_wait_op *w, enum px_undo_why why)
{
    struct psemop *p = psemop_of(w);
    const struct px_arg *name = &px_wait_req(w)->argv[1];

    if (why == PX_UNDO_GONE && !psem_returnable(p))
        return; /* KEEP, or a leased permit under --on-disconnect expire */
    psem_send_return(px_server_of(w->eng), name->p, name->len, p->id, psemop_until(p),
                     why != PX_UNDO_GONE);
    if (why == PX_UNDO_LATE && getrandom(p->id, PX__PSEM_ID_LEN, 0) != (ssize_t)PX__PSEM_ID_LEN)
        p->id[0] ^= 0x5a; /* never reuse the id given back */
}

static void psemop_destroy(struct px_wait_op *w)
{
    free(psemop_of(w));
}

static const struct px_wait_kind psemop_kind = {
    .name = "permit",
    .wake = PX_WAKE_COUNT,
    .stat = PX_WAIT_STAT_PSEM,
    .channel = psemop_channel,
    .queue_behind = NULL,
    .send = psemop_send,
    .attempt_done = NULL,
    .reply = psemop_reply,
    .granted = psemop_granted,
    .undo = psemop_undo,
    .give_up = NULL,
    .destroy = psemop_destroy,
};

static void psem_acquire_start(struct px_req *req, bool wait_ok)
{
    struct px__sem_acquire_args a;
    struct psemop *p;

    if (px__sem_parse_acquire(req, false, wait_ok, true, &a) < 0)
        return px_req_done(req);
    p = calloc(1, sizeof(*p));
    if (!p || getrandom(p->id, PX__PSEM_ID_LEN, 0) != (ssize_t)PX__PSEM_ID_LEN) {
        free(p);
        px_reply_error(px_req_out(req), "ERR cannot create a permit id");
        return px_req_done(req);
    }
    p->lease_ms = a.lease_ms;
    p->keep = a.keep;
    px_cmd_wait_init(&p->wait, &psemop_kind, req, wait_ok ? a.wait_ms : 0);
    if (a.lease_ms > 0) /* a permit with too little of its lease left is refused */
        p->wait.lease_ms = (uint64_t)a.lease_ms;
    px_cmd_wait_start(&p->wait);
}

void px__psem_cmd_acquire(struct px_req *req)
{
    psem_acquire_start(req, true);
}

void px__psem_cmd_tryacquire(struct px_req *req)
{
    psem_acquire_start(req, false);
}

/* ---- PSEM.TRYSETPERMITS / RELEASE / AVAILABLE ---- */

void px__psem_cmd_trysetpermits(struct px_req *req)
{
    int64_t n;
    char nb[24];

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0 ||
        px_args_parse_count(req, 2, "permits", 0, &n) < 0)
        return px_req_done(req);
    px__sem_simple(req, PX__PSEM_TRYSET, true, 0, nb,
                   (size_t)snprintf(nb, sizeof(nb), "%lld", (long long)n), NULL, 0,
                   px_call_reply_int);
}

static void psem_reply_release(struct px_req *req, const struct pool_reply *r)
{
    if (r->type != POOL_REPLY_INTEGER)
        return px_wait_reply_upstream(req, -EPROTO);
    if (r->integer >= 0) {
        px_reply_int(px_req_out(req), r->integer);
        return;
    }
    px_reply_error(
        px_req_out(req), "NOPERMIT permit '%.*s' of '%.*s' was already released or does not exist",
        (int)req->argv[2].len, req->argv[2].p, (int)LP_MIN(req->argv[1].len, 200u), req->argv[1].p);
}

/* A release in flight (px_call_script_own's arg). */
struct psem_rel {
    unsigned char id[PX__PSEM_ID_LEN]; /* the permit id */
    uint64_t until;                    /* tracked: its lease end (monotonic), or PX_JOB_NO_END */
    bool tracked;                      /* this proxy granted it and tracked it to a connection */
};

/* A PSEM.RELEASE that could not be sent, or whose reply was lost, is the
 * proxy's to carry out (issue 22): released by id, so resending is
 * harmless (a permit goes back at most once), a retried job until Redis
 * answers or the permit's lease has ended anyway. A permit this proxy
 * tracked is answered as the release will end (:1, or :0 when its lease
 * had ended: the next user reclaims it); any other id (KEEP, another
 * proxy's) +INHAND: sent again for a minute, its outcome not known. */
static void psem_release_in_hand(struct px_req *req, const struct psem_rel *x)
{
    const struct px_arg *name = &req->argv[1];
    struct px_server *srv = req->cl->srv;
    uint64_t now = sched_loop_now_ms(srv->loop);

    srv->engine->stats.unlocks_in_hand++;
    if (!x->tracked) {
        psem_send_return(srv, name->p, name->len, x->id, now + PX__SEM_RETURN_WINDOW_MS, false);
        px_reply_status(px_req_out(req), "INHAND");
        return;
    }
    psem_send_return(srv, name->p, name->len, x->id, x->until, false);
    px_reply_int(px_req_out(req), x->until == PX_JOB_NO_END || now < x->until);
}

static void psem_release_done(struct px_req *req, void *arg, const struct pool_reply *r, int err)
{
    struct psem_rel *x = arg;

    if (r && r->type != POOL_REPLY_ERROR)
        psem_reply_release(req, r);
    else if (!r && err != -ENOMEM)
        psem_release_in_hand(req, x);
    free(x);
}

void px__psem_cmd_release(struct px_req *req)
{
    const struct px_arg *name = &req->argv[1];
    struct px__sem_keys k;
    struct psem_rel *x;
    struct psem_held *h;
    char now[24];
    size_t nlen;
    int nk;

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    if (!(x = calloc(1, sizeof(*x)))) {
        px_reply_error(px_req_out(req), "ERR out of memory");
        return px_req_done(req);
    }
    if (hex_decode(&req->argv[2], x->id) < 0) {
        free(x);
        px_args_reply_bad(req, "permit id", "32 hex characters", &req->argv[2]);
        return px_req_done(req);
    }
    h = psem_held_find(req->cl->srv, name->p, name->len, x->id);
    if (h) {
        x->tracked = true;
        x->until = h->until;
        psem_held_free(h);
    }
    psem_now(now, sizeof(now), &nlen);
    nk = px__sem_keys_fill(&k, name->p, name->len, true);
    px__sem_keys_arg(&k, nk, (const char *)x->id, PX__PSEM_ID_LEN);
    px__sem_keys_arg(&k, nk + 1, now, nlen);
    px_call_script_own(req, px_route_hint(name->p, name->len),
                       px__sem_script(req->cl->srv->engine, PX__PSEM_RELEASE), nk, nk + 2, k.argv,
                       k.lens, psem_release_done, x);
}

void px__psem_cmd_available(struct px_req *req)
{
    char now[24];
    size_t nlen;

    if (px_name_check(req, "name", PX_NAME_PREFIXED) < 0)
        return px_req_done(req);
    psem_now(now, sizeof(now), &nlen);
    px__sem_simple(req, PX__PSEM_AVAILABLE, true, 0, now, nlen, NULL, 0, px_call_reply_int);
}
