/* RESP3 pushes and the lease-lost subscription; see push.h. */
#include "proxy/push.h"

#include <string.h>

#include "proxy/args.h"
#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/reply.h"
#include "sched/loop.h"

#define CHANNEL     PX_PUSH_LEASE_LOST_CHANNEL
#define CHANNEL_LEN (sizeof(CHANNEL) - 1)

static bool is_channel(const struct px_arg *a)
{
    return a->len == CHANNEL_LEN && memcmp(a->p, CHANNEL, CHANNEL_LEN) == 0;
}

/* True when a push written now would land inside a reply: one partly
 * written by the oldest request, or EXEC's array still streaming. */
static bool push_must_wait(const struct px_client *cl)
{
    return cl->exec_unsent > 0 || (cl->mark_req && cl->mark < cl->conn.out.len);
}

void px_push_flush(struct px_client *cl)
{
    struct buf *held = cl->extra ? &cl->extra->pushes : NULL;

    if (!held || buf_size(held) == 0 || cl->closing || push_must_wait(cl))
        return;
    buf_append(sched_conn_wbuf(&cl->conn), buf_head(held), buf_size(held));
    buf_deinit(held);
    sched_conn_mark_dirty(&cl->conn);
}

void px_push_lease_lost(struct px_client *cl, const char *kind, const char *name, size_t nlen)
{
    struct px_client_extra *x = NULL;
    struct buf *out;
    size_t klen = strlen(kind), before;

    if (!cl || cl->closing || !cl->sub_lease_lost || cl->proto != PX_PROTO_RESP3)
        return;
    if (push_must_wait(cl) && !(x = px_client_extra(cl)))
        return; /* no room: the client still gets LOCKLOST on UNLOCK */
    out = x ? &x->pushes : sched_conn_wbuf(&cl->conn);
    before = out->len;
    if (px_reply_push(out, PX_PROTO_RESP3, 3) < 0 || px_reply_cstr(out, "message") < 0 ||
        px_reply_bulk(out, CHANNEL, CHANNEL_LEN) < 0 ||
        buf_appendf(out, "$%zu\r\n%s ", klen + 1 + nlen, kind) < 0 ||
        buf_append(out, name, nlen) < 0 || buf_append(out, "\r\n", 2) < 0) {
        out->len = before; /* no room: the client still gets LOCKLOST on UNLOCK */
        return;
    }
    if (x)
        return;
    if (cl->mark_req && cl->mark == before)
        cl->mark = out->len; /* the oldest request's reply starts after the push */
    sched_conn_mark_dirty(&cl->conn);
}

/* ">3 <kind> <channel or null> <count>", or "*3 ..." in RESP2. */
static void reply_sub(struct buf *b, int proto, const char *kind, bool named, unsigned count)
{
    px_reply_push(b, proto, 3);
    px_reply_cstr(b, kind);
    if (named)
        px_reply_bulk(b, CHANNEL, CHANNEL_LEN);
    else
        px_reply_null(b, proto);
    px_reply_int(b, count);
}

/* SUBSCRIBE lockproxy:lease-lost (RESP3 only; no other channel). */
static void cmd_subscribe(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct buf *b = px_req_out(req);
    int i;

    for (i = 1; i < req->argc; i++) {
        if (!is_channel(&req->argv[i])) {
            px_reply_error(
                b, "ERR lockproxy relays no pub/sub: the only channel is " CHANNEL ", not '%.*s'",
                (int)LP_MIN(req->argv[i].len, 64u), req->argv[i].p);
            return px_req_done(req);
        }
    }
    if (cl->proto != PX_PROTO_RESP3) {
        px_reply_error(b, "ERR SUBSCRIBE " CHANNEL " needs RESP3 (HELLO 3): its messages are "
                          "pushed between the replies of the connection that holds the locks");
        return px_req_done(req);
    }
    cl->sub_lease_lost = true;
    for (i = 1; i < req->argc; i++)
        reply_sub(b, cl->proto, "subscribe", true, 1);
    px_req_done(req);
}

/* UNSUBSCRIBE [channel ...]: one reply per channel named, or per channel
 * subscribed (a null one when none), as in Redis. */
static void cmd_unsubscribe(struct px_req *req)
{
    struct px_client *cl = req->cl;
    struct buf *b = px_req_out(req);
    int i;

    if (req->argc == 1) {
        reply_sub(b, cl->proto, "unsubscribe", cl->sub_lease_lost, 0);
        cl->sub_lease_lost = false;
        return px_req_done(req);
    }
    for (i = 1; i < req->argc; i++) {
        const struct px_arg *a = &req->argv[i];

        if (is_channel(a))
            cl->sub_lease_lost = false;
        px_reply_push(b, cl->proto, 3);
        px_reply_cstr(b, "unsubscribe");
        px_reply_bulk(b, a->p, a->len);
        px_reply_int(b, cl->sub_lease_lost);
    }
    px_req_done(req);
}

static const struct px_cmd push_cmds[] = {
    {"SUBSCRIBE", 2, -1, cmd_subscribe, NULL, 0},
    {"UNSUBSCRIBE", 1, -1, cmd_unsubscribe, NULL, 0},
};
const struct px_cmd_set px_push_cmd_set = {push_cmds, LP_ARRAY_SIZE(push_cmds)};
