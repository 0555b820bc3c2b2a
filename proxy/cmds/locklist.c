/* LOCK.LIST [pattern]: who holds what, and who waits for what, through
 * this proxy. One entry per hold a connection has (HELD, or LOST: its
 * lease was lost and UNLOCK will say LOCKLOST) and per waiting command
 * (every lock kind, SEM.ACQUIRE, PSEM.ACQUIRE, LATCH.AWAIT), each a list
 * of field/value pairs:
 *
 *   name, state (held | lost | waiting), kind (lock, read lock, write
 *   lock, fair lock; for a wait, the command), client_id, addr,
 *   client_name, user, owner (the owner field in Redis; "" for a wait
 *   that has none, such as a semaphore's), hold_count (0 for a wait; of
 *   an OWNER shared by several connections, each one's own part),
 *   age_ms (since acquired / since the wait began), ttl_ms (the lease
 *   left by this proxy's clock, -1 for a wait), watchdog (0/1).
 *
 * The pattern is a Redis glob on the name (default *). With auth, only
 * names the caller's user may access are listed (proxy/auth.c), so a user
 * learns nothing of names outside its patterns. Holds of connections that
 * closed under --on-disconnect expire are not listed (nobody holds them
 * here any more; they run out in Redis). Only this proxy's view: other
 * proxies and Redisson clients on the same Redis are not seen. */
#include <stdint.h>
#include <string.h>

#include "common/buf.h"
#include "common/list.h"
#include "engine/hold.h"
#include "proxy/auth.h"
#include "proxy/client.h"
#include "proxy/client_cmd.h"
#include "proxy/cmd.h"
#include "proxy/cmds/lock-int.h"
#include "proxy/cmds/wait_end.h"
#include "proxy/reply.h"
#include "proxy/request.h"
#include "proxy/server.h"
#include "sched/loop.h"

#define LIST_FIELDS 12 /* field/value pairs per entry */

/* One entry, as the reply shows it. */
struct lk_row {
    const char *name;           /* borrowed */
    size_t nlen;                /* name length */
    const char *state;          /* "held", "lost" or "waiting" */
    const char *kind;           /* hold kind or command name */
    const struct px_client *cl; /* borrowed: the connection */
    const char *owner;          /* borrowed: owner field, "" for none */
    size_t olen;                /* owner length */
    uint64_t count;             /* hold count */
    uint64_t age_ms;            /* since held / since the wait began */
    int64_t ttl_ms;             /* lease left, -1 for none */
    bool watchdog;              /* renewed by this proxy */
};

/* The start of an entry of n field/value pairs: a map in RESP3, a flat
 * array in RESP2. */
static void pairs_begin(struct buf *b, int proto, size_t n)
{
    px_reply_map(b, proto, n);
}

static void entry_write(struct buf *b, int proto, const struct lk_row *e)
{
    char addr[PX_CLIENT_ADDR_MAX];
    const struct px_client *cl = e->cl;

    pairs_begin(b, proto, LIST_FIELDS);
    px_reply_cstr(b, "name");
    px_reply_bulk(b, e->name, e->nlen);
    px_reply_cstr(b, "state");
    px_reply_cstr(b, e->state);
    px_reply_cstr(b, "kind");
    px_reply_cstr(b, e->kind);
    px_reply_cstr(b, "client_id");
    px_reply_int(b, (int64_t)cl->id);
    px_reply_cstr(b, "addr");
    px_reply_cstr(b, px_client_addr(cl, false, addr, sizeof(addr)));
    px_reply_cstr(b, "client_name");
    px_reply_cstr(b, px_client_name(cl));
    px_reply_cstr(b, "user");
    px_reply_cstr(b, cl->user ? cl->user->name : PX_AUTH_DEFAULT_USER);
    px_reply_cstr(b, "owner");
    px_reply_bulk(b, e->owner, e->olen);
    px_reply_cstr(b, "hold_count");
    px_reply_int(b, (int64_t)e->count);
    px_reply_cstr(b, "age_ms");
    px_reply_int(b, (int64_t)e->age_ms);
    px_reply_cstr(b, "ttl_ms");
    px_reply_int(b, e->ttl_ms);
    px_reply_cstr(b, "watchdog");
    px_reply_int(b, e->watchdog);
}

/* What LOCK.LIST selects: names matching pat that the caller may see. */
struct list_filter {
    const struct px_client *caller; /* borrowed */
    const char *pat;                /* borrowed: glob */
    size_t plen;                    /* its length */
    bool acl;                       /* auth is on: the caller's patterns apply */
};

static bool filter_wants(const struct list_filter *f, const char *name, size_t nlen)
{
    if (!px_glob_match(f->pat, f->plen, name, nlen))
        return false;
    return !f->acl || (f->caller->user && px_user_may_access(f->caller->user, name, nlen));
}

/* Appends h's entry for cl, whose part of it is part, if f wants it;
 * returns 1 if it did. */
static size_t hold_row(const struct list_filter *f, const struct px_client *cl,
                       const struct px_hold *h, uint64_t part, uint64_t now, struct buf *b)
{
    struct lk_row e = {h->key,
                       h->nlen,
                       h->state == PX_HOLD_LOST ? "lost" : "held",
                       h->kind ? h->kind->name : "lock",
                       cl,
                       h->owner,
                       h->olen,
                       part,
                       now - h->held_ms,
                       -1,
                       h->watchdog};

    if (!filter_wants(f, h->key, h->nlen))
        return 0;
    if (h->state == PX_HOLD_HELD)
        e.ttl_ms = h->expires_ms > now ? (int64_t)(h->expires_ms - now) : 0;
    else
        e.watchdog = false;
    entry_write(b, f->caller->proto, &e);
    return 1;
}

/* Appends cl's holds, and its parts of holds it shares with other
 * connections of one OWNER, that f wants; returns how many. */
static size_t list_holds(const struct list_filter *f, const struct px_client *cl, uint64_t now,
                         struct buf *b)
{
    const struct list *n;
    size_t count = 0;

    for (n = cl->caller.locks.holds.next; n != &cl->caller.locks.holds; n = n->next) {
        const struct px_hold *h = list_entry(n, struct px_hold, client_node);

        count += hold_row(f, cl, h, h->state == PX_HOLD_HELD ? h->cl_count : 0, now, b);
    }
    for (n = cl->caller.locks.shares.next; n != &cl->caller.locks.shares; n = n->next) {
        const struct px_hold_share *sh = list_entry(n, struct px_hold_share, client_node);

        count += hold_row(f, cl, sh->h, sh->count, now, b);
    }
    return count;
}

/* Appends cl's waiting commands that f wants; returns how many. */
static size_t list_waits(const struct list_filter *f, const struct px_client *cl, uint64_t now,
                         struct buf *b)
{
    const struct list *n;
    size_t count = 0;

    for (n = cl->caller.locks.waits.next; n != &cl->caller.locks.waits; n = n->next) {
        const struct px_wait_op *w = list_entry(n, struct px_wait_op, client_node);
        const struct px_req *req = px_wait_req(w);
        struct lk_row e = {req->argv[1].p,
                           req->argv[1].len,
                           "waiting",
                           req->cmd ? req->cmd->name : "?",
                           cl,
                           "",
                           0,
                           0,
                           now - w->start_ms,
                           -1,
                           false};

        if (req->argc < 2 || !filter_wants(f, e.name, e.nlen))
            continue;
        if (w->kind == &px__lock_wait_kind) {
            const struct px__lockop *op = LP_CONTAINER_OF(w, struct px__lockop, wait);

            e.owner = op->acq.owner;
            e.olen = op->acq.olen;
        }
        entry_write(b, f->caller->proto, &e);
        count++;
    }
    return count;
}

void px__lock_cmd_list(struct px_req *req)
{
    struct px_client *caller = req->cl;
    struct px_server *srv = caller->srv;
    uint64_t now = sched_loop_now_ms(srv->loop);
    struct list_filter f = {caller, "*", 1, px_auth_required(srv->opts.auth)};
    struct buf items;
    size_t count = 0;
    struct list *n;

    if (req->argc == 2) {
        f.pat = req->argv[1].p;
        f.plen = req->argv[1].len;
    }
    buf_init(&items);
    for (n = srv->clients.next; n != &srv->clients; n = n->next) {
        const struct px_client *cl = list_entry(n, struct px_client, client_node);

        count += list_holds(&f, cl, now, &items);
        count += list_waits(&f, cl, now, &items);
    }
    px_reply_array(px_req_out(req), count);
    buf_append(px_req_out(req), items.data ? items.data : "", buf_size(&items));
    buf_deinit(&items);
    px_req_done(req);
}
