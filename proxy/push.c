/* RESP3 pushes and the lease-lost subscription; see push.h. */
#include "proxy/push.h"

#include <errno.h>
#include <string.h>

#include "proxy/client.h"
#include "proxy/reply.h"
#include "sched/loop.h"

#define CHANNEL     PX_PUSH_LEASE_LOST_CHANNEL
#define CHANNEL_LEN (sizeof(CHANNEL) - 1)

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

int px_push_emit(struct px_client *cl, const char *data, size_t len)
{
    struct px_client_extra *x = NULL;
    struct buf *out;
    size_t before;

    if (cl->closing)
        return 0;
    if (push_must_wait(cl) && !(x = px_client_extra(cl)))
        return -ENOMEM;
    out = x ? &x->pushes : sched_conn_wbuf(&cl->conn);
    before = out->len;
    if (buf_append(out, data, len) < 0) {
        out->len = before;
        return -ENOMEM;
    }
    if (x)
        return 0;
    if (cl->mark_req && cl->mark == before)
        cl->mark = out->len; /* the oldest request's reply starts after the push */
    sched_conn_mark_dirty(&cl->conn);
    return 0;
}
