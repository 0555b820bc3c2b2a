/* Script batching: requests of batchable scripts that meet on one command
 * connection within a loop iteration go out as one call of the runner
 * script (pool.h, struct pool_script), so Redis pays a script call's fixed
 * cost (EVALSHA lookup, the KEYS and ARGV tables, the reply's conversion)
 * once per batch instead of once per lock operation.
 *
 * DESIGN BLOCK
 *
 * A connection has at most one open batch (struct pool__rconn, bhead...):
 * requests already queued in its FIFO, in order, whose bytes are not yet
 * in its output. Joining formats the request's tail ("numkeys keys args",
 * what a NOSCRIPT retry or a re-send needs anyway) into the request and
 * reserves the batch's bytes in the output, so closing cannot fail.
 * Closing writes the bytes: one request alone as its own EVALSHA, exactly
 * what an unbatched send writes; two or more as
 *
 *     EVALSHA <runner> <all keys> <keys of 1> <keys of 2> ...
 *             <op of 1> <args of 1> <op of 2> <args of 2> ...
 *
 * with the first request's batch set to their number. A batch closes
 * before anything else is written to the connection (rconn.c calls
 * pool__batch_close() first on every path that writes), when it is full
 * (batch_max requests, BATCH_BYTES_MAX bytes) and when the loop flushes
 * the connection (on_flush). So the bytes on the wire keep the FIFO's
 * order, and the FIFO keeps one record per caller as before; only the
 * reply of a batch answers several records (rconn.c, rconn_batch_reply).
 *
 * Semantics: the runner runs each request's script body in turn, each
 * under pcall, so a request's error (WRONGTYPE, OOM) is its own reply and
 * the others still run; what one request wrote stays written, as with
 * separate scripts. Running them in one script only removes the
 * interleaving of other clients' commands between them, which no caller
 * could rely on. Not batched: a cluster pool (keys of one call must share
 * a slot, and a MOVED would move every request of it), a request followed
 * by WAIT (WAIT must follow its own script), a request whose key or
 * argument count is not its script's declared one.
 *
 * Ownership: the open batch's records belong to the FIFO (failing the
 * FIFO fails them; rconn.c then forgets the batch). Closing needs no
 * memory while the reserved room is there; if the output was swapped out
 * meanwhile and growing it fails, the batch's records move to rc->unsent
 * and fail with the connection's recycle (batch_unsend). */
#include <errno.h>
#include <string.h>

#include "common/util.h"
#include "pool/pool-int.h"
#include "pool/resp.h"
#include "sched/loop.h"

/* A batch's keys, ops and arguments stay below this many bytes. */
#define BATCH_BYTES_MAX (16u * 1024u)

/* Header, prefix and numkeys bulk of a call, at most (beyond its tails). */
#define BATCH_FRAME_MAX (16u + POOL__EVALSHA_PRE_SIZE + 16u)

bool pool__batch_fits(const struct pool__rconn *rc, const struct pool__req *req, int numkeys,
                      int argc)
{
    const struct pool *p = rc->pool;
    const struct pool__script *s = &p->scripts[req->script];

    return p->runner != 0 && p->opts.batch_max > 1 && p->kind != POOL__UP_CLUSTER &&
           s->batch_op != 0 && !req->wait && numkeys == (int)s->batch_keys &&
           argc == (int)(s->batch_keys + s->batch_args);
}

int pool__batch_join(struct pool__rconn *rc, struct pool__req *req, int numkeys, int argc,
                     const char *const *argv, const size_t *lens)
{
    const struct pool__script *s = &rc->pool->scripts[req->script];
    char nk[24];
    size_t nklen = pool__resp_u64(nk, (unsigned long long)numkeys);
    size_t nkbulk = pool__resp_bulk_size(nklen);
    size_t keys = pool__resp_args_size(numkeys, argv, lens);
    const size_t *alens = lens ? lens + numkeys : NULL;
    size_t args = pool__resp_args_size(argc - numkeys, argv + numkeys, alens);
    size_t bytes = rc->bbytes + keys + s->op_len + args;
    char *end;
    int err;

    if (rc->bn > 0 && (rc->bn >= rc->pool->opts.batch_max || bytes > BATCH_BYTES_MAX))
        pool__batch_close(rc);
    if (rc->bn == 0)
        bytes = keys + s->op_len + args;
    err = buf_reserve(sched_conn_wbuf(&rc->conn), BATCH_FRAME_MAX + bytes);
    if (err == 0)
        err = pool__req_alloc_tail(req, (unsigned)argc + 1, nkbulk + keys + args);
    if (err < 0)
        return err;
    end = pool__resp_put_bulk_at(req->tail, nk, nklen);
    end = pool__resp_put_args_at(end, numkeys, argv, lens);
    req->args_at = (size_t)(end - req->tail);
    pool__resp_put_args_at(end, argc - numkeys, argv + numkeys, alens);
    req->keys_at = nkbulk;
    if (rc->bn++ == 0)
        rc->bhead = req;
    rc->bbytes = bytes;
    return 0;
}

/* batch_write() without the clean-up of a failure. */
static int batch_write_all(struct buf *b, struct pool *p, struct pool__req *head, unsigned n,
                           bool eval)
{
    const struct pool__script *run = &p->scripts[p->runner - 1];
    struct pool__req *req;
    size_t keys = 0, bulks = 0, bytes = 0, at;
    char nk[24];
    size_t nklen;
    unsigned i;
    int err;

    for (i = 0, req = head; i < n; i++, req = list_entry(req->node.next, struct pool__req, node)) {
        const struct pool__script *s = &p->scripts[req->script];

        keys += s->batch_keys;
        bulks += s->batch_keys + 1 + s->batch_args;
        bytes += req->tail_len - req->keys_at + s->op_len;
    }
    nklen = pool__resp_u64(nk, (unsigned long long)keys);
    at = BATCH_FRAME_MAX + bytes + (eval ? run->text_len + 32 : 0);
    err = buf_reserve(b, at);
    if (err < 0)
        return err;
    err = pool__resp_array(b, 3 + bulks);
    if (err == 0 && eval)
        err = pool__resp_bulk(b, "EVAL", 4);
    if (err == 0)
        err = eval ? pool__resp_bulk(b, run->text, run->text_len)
                   : buf_append(b, run->evalsha, run->evalsha_len);
    if (err == 0)
        err = pool__resp_bulk(b, nk, nklen);
    for (i = 0, req = head; err == 0 && i < n;
         i++, req = list_entry(req->node.next, struct pool__req, node))
        err = buf_append(b, req->tail + req->keys_at, req->args_at - req->keys_at);
    for (i = 0, req = head; err == 0 && i < n;
         i++, req = list_entry(req->node.next, struct pool__req, node)) {
        const struct pool__script *s = &p->scripts[req->script];

        err = buf_append(b, s->op, s->op_len);
        if (err == 0)
            err = buf_append(b, req->tail + req->args_at, req->tail_len - req->args_at);
    }
    return err;
}

/* Writes n requests from head on (FIFO order) as one runner call into b;
 * eval: as EVAL with the runner's text (the NOSCRIPT retry). Returns 0, or
 * -ENOMEM with b as it was. */
static int batch_write(struct buf *b, struct pool *p, struct pool__req *head, unsigned n, bool eval)
{
    size_t mark = b->len;
    int err = batch_write_all(b, p, head, n, eval);

    if (err < 0)
        b->len = mark;
    return err;
}

/* A lone request: its own EVALSHA, the bytes an unbatched send writes. */
static int batch_write_one(struct buf *b, const struct pool *p, const struct pool__req *req)
{
    const struct pool__script *s = &p->scripts[req->script];
    size_t mark = b->len;
    int err = pool__resp_array(b, (size_t)req->ntail + 2);

    if (err == 0)
        err = buf_append(b, s->evalsha, s->evalsha_len);
    if (err == 0)
        err = buf_append(b, req->tail, req->tail_len);
    if (err < 0)
        b->len = mark;
    return err;
}

/* The batch could not be written (no memory: the output was handed to the
 * kernel and swapped since the join reserved room). Its requests leave the
 * FIFO unsent, so the FIFO still matches what went out, and wait on
 * rc->unsent for the connection's recycle, which fails them from its timer
 * (never inside the call that closed the batch, an owner's submit maybe). */
static void batch_unsend(struct pool__rconn *rc)
{
    struct list *n = &rc->bhead->node, *next;
    unsigned i;

    for (i = 0; i < rc->bn; i++, n = next) {
        next = n->next;
        if (list_entry(n, struct pool__req, node) == rc->sample)
            rc->sample = NULL;
        list_del_init(n);
        list_add_tail(&rc->unsent, n);
    }
    pool__rconn_recycle_later(rc);
}

void pool__batch_close(struct pool__rconn *rc)
{
    struct pool *p = rc->pool;
    struct pool__req *head = rc->bhead;
    struct buf *b = sched_conn_wbuf(&rc->conn);
    int err;

    if (rc->bn == 0)
        return;
    if (rc->bn == 1) {
        err = batch_write_one(b, p, head);
    } else {
        head->batch = rc->bn;
        err = batch_write(b, p, head, rc->bn, false);
        if (err == 0) {
            p->script_batches++;
            p->batched += rc->bn;
        }
    }
    if (err < 0) {
        head->batch = 0;
        batch_unsend(rc);
    }
    pool__batch_forget(rc);
}

void pool__batch_forget(struct pool__rconn *rc)
{
    rc->bhead = NULL;
    rc->bn = 0;
    rc->bbytes = 0;
}

int pool__batch_resend(struct pool__rconn *rc, struct pool__req *head)
{
    return batch_write(sched_conn_wbuf(&rc->conn), rc->pool, head, head->batch, true);
}

void pool__batch_op_init(struct pool__script *s, unsigned op, unsigned keys, unsigned args)
{
    char num[12];
    size_t n = pool__resp_u64(num, op);

    s->batch_op = op;
    s->batch_keys = keys;
    s->batch_args = args;
    s->op_len = (size_t)(pool__resp_put_bulk_at(s->op, num, n) - s->op);
}
