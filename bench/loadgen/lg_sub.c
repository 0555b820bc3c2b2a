/* Pub/sub registries of the direct targets: a model of Redisson's
 * PublishSubscribe / RedissonLockEntry (spec section 12) on one pub/sub
 * connection.
 *
 * An entry per key holds a reference count (waiters using it), a state
 * (idle, subscribing, subscribed), the clients waiting for the SUBSCRIBE
 * confirmation, a FIFO of clients waiting on the latch, and the latch's
 * spare permits.
 *   join:    refs++; first one in sends SUBSCRIBE; everyone retries the
 *            acquire once the subscription is confirmed (Redisson's
 *            "subscribe, then try again" that closes the unlock-before-
 *            subscribe race);
 *   wait:    take a spare permit and retry at once, or wait for a message
 *            or the holder's PTTL;
 *   message: wake the first latch waiter, or leave a permit (Redisson's
 *            LockPubSub: one message releases one permit); rwlock's "1"
 *            (write unlock) wakes every latch waiter and leaves no permit
 *            (LockPubSub's READ_UNLOCK_MESSAGE: all listeners, and as many
 *            permits as threads waiting); a semaphore's message N gives
 *            min(refs, N) permits, each waking the next latch waiter or
 *            left for later (SemaphorePubSub);
 *   leave:   refs--; the last one out sends UNSUBSCRIBE and does not wait
 *            for the confirmation (Redisson unsubscribes asynchronously).
 * With one registry per client ("direct") every waiter of a key has its own
 * subscription and every release wakes each of them, as N client processes
 * would; with one shared registry ("direct-shared") a key has one
 * subscription and a release wakes one waiter.
 *
 * The channel is the run's chan_prefix + key + "}": redisson_lock__channel,
 * redisson_rwlock or redisson_sc.
 *
 * A new connection sends AUTH (with a password) or PING first and counts
 * as connected once it is answered (s->greeting until then).
 *
 * Replies on a subscribed RESP2 connection are arrays: ["subscribe", ch, n],
 * ["unsubscribe", ch, n], ["message", ch, payload]. A subscribe
 * confirmation always belongs to the entry's current SUBSCRIBE: an entry is
 * only unsubscribed once subscribed, and Redis answers in order. With
 * --cluster the connection goes to the master of its client's key and uses
 * the sharded commands (SSUBSCRIBE, SUNSUBSCRIBE; "ssubscribe", "smessage"
 * replies), as the scripts SPUBLISH (lg_cluster.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_run.h"
#include "common/compiler.h"
#include "common/util.h"

static struct lg_sub_entry *entry_of(struct lg_sub *s, unsigned key)
{
    unsigned i = key - s->entries[0].key;

    return i < s->nentries ? &s->entries[i] : NULL;
}

/* Queues SUBSCRIBE or UNSUBSCRIBE of key's channel. Returns 0, -EPIPE
 * when the connection is gone, or -ENOMEM. */
static int send_sub_cmd(struct lg_sub *s, const char *cmd, unsigned key)
{
    const char *prefix = s->run->chan_prefix;
    char name[128];
    size_t n = lg_run_key_name(s->run, key, name, sizeof(name));
    size_t clen = strlen(prefix) + n + 1;
    struct buf *b = sched_conn_wbuf(&s->conn);
    int rc;

    if (sched_conn_is_closing(&s->conn) || (s->conn.flags & SCHED_CONN_HUNGUP))
        return -EPIPE;
    rc = buf_appendf(b, "*2\r\n$%zu\r\n%s\r\n$%zu\r\n%s%s}\r\n", strlen(cmd), cmd, clen, prefix,
                     name);
    if (rc < 0)
        return rc;
    sched_conn_mark_dirty(&s->conn);
    return 0;
}

/* Wait for pttl ms only: the subscription cannot be used. */
static void wait_without_sub(struct lg_client *c, long long pttl)
{
    c->state = LG_CS_LATCH;
    sched_loop_timer_in(c->run->loop, &c->timer, pttl > 0 ? (uint64_t)pttl : 1);
}

void lg_sub_join(struct lg_client *c, long long pttl)
{
    struct lg_sub *s = c->sub;
    struct lg_sub_entry *e = entry_of(s, c->key);

    LP_BUG_ON(!e || c->sub_ref);
    c->run->cnt.waits++;
    if (e->state == LG_SUB_IDLE) {
        if (send_sub_cmd(s, c->run->cluster ? "SSUBSCRIBE" : "SUBSCRIBE", c->key) < 0) {
            wait_without_sub(c, pttl);
            return;
        }
        c->run->cnt.subscribes++;
        e->state = LG_SUB_SUBSCRIBING;
    }
    e->refs++;
    c->sub_ref = true;
    if (e->state == LG_SUB_SUBSCRIBED) {
        lg_client_retry(c);
        return;
    }
    c->state = LG_CS_SUBWAIT;
    list_add_tail(&e->confirm, &c->node);
}

void lg_sub_leave(struct lg_client *c)
{
    struct lg_sub *s = c->sub;
    struct lg_sub_entry *e = entry_of(s, c->key);

    if (!c->sub_ref)
        return;
    c->sub_ref = false;
    e->refs--;
    if (e->refs > 0 || e->state != LG_SUB_SUBSCRIBED)
        return;
    e->state = LG_SUB_IDLE;
    e->permits = 0;
    if (send_sub_cmd(s, c->run->cluster ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", c->key) == 0)
        c->run->cnt.unsubscribes++;
}

void lg_sub_wait(struct lg_client *c, long long pttl)
{
    struct lg_sub_entry *e = c->sub_ref ? entry_of(c->sub, c->key) : NULL;

    if (!e || e->state != LG_SUB_SUBSCRIBED) {
        wait_without_sub(c, pttl);
        return;
    }
    if (e->permits > 0) {
        e->permits--;
        lg_client_retry(c);
        return;
    }
    c->state = LG_CS_LATCH;
    list_add_tail(&e->latch, &c->node);
    /* PTTL -1 (no expiry) means wait for a message only, as Redisson does. */
    if (pttl >= 0)
        sched_loop_timer_in(c->run->loop, &c->timer, pttl > 0 ? (uint64_t)pttl : 1);
}

void lg_sub_cancel(struct lg_client *c)
{
    if (c->state == LG_CS_LATCH || c->state == LG_CS_SUBWAIT)
        list_del_init(&c->node);
    sched_loop_timer_del(c->run->loop, &c->timer);
}

/* ---- replies ----------------------------------------------------------- */

static void on_confirmed(struct lg_sub *s, struct lg_sub_entry *e)
{
    struct list todo, *n;

    if (e->state != LG_SUB_SUBSCRIBING)
        return;
    e->state = LG_SUB_SUBSCRIBED;
    if (e->refs == 0) {
        e->state = LG_SUB_IDLE;
        if (send_sub_cmd(s, s->run->cluster ? "SUNSUBSCRIBE" : "UNSUBSCRIBE", e->key) == 0)
            s->run->cnt.unsubscribes++;
        return;
    }
    list_init(&todo);
    list_splice_tail_init(&todo, &e->confirm);
    while ((n = list_first(&todo))) {
        struct lg_client *c = list_entry(n, struct lg_client, node);

        list_del_init(n);
        lg_client_retry(c);
    }
}

/* One latch permit: wakes the first latch waiter, or stays for the next
 * one to wait. */
static void release_permit(struct lg_sub_entry *e)
{
    struct list *n = list_first(&e->latch);

    if (n) {
        struct lg_client *c = list_entry(n, struct lg_client, node);

        lg_sub_cancel(c);
        lg_client_retry(c);
    } else if (e->refs > 0) {
        e->permits++;
    }
}

/* rwlock's "1": every latch waiter retries; nobody else gets a permit. */
static void wake_all(struct lg_sub_entry *e)
{
    struct list *n;

    while ((n = list_first(&e->latch))) {
        struct lg_client *c = list_entry(n, struct lg_client, node);

        lg_sub_cancel(c);
        lg_client_retry(c);
    }
}

/* A message with payload msg: an unlock (one permit), a write unlock
 * (rwlock "1": everyone), or a semaphore's new count (that many permits,
 * at most one per waiter using the entry). */
static void on_message(struct lg_sub *s, struct lg_sub_entry *e, const redisReply *msg)
{
    enum lg_workload w = s->run->o->workload;
    int64_t v = 0;
    unsigned k;

    s->run->cnt.messages++;
    if (w == LG_WL_SEMAPHORE) {
        if (msg->type != REDIS_REPLY_STRING || util_parse_i64(msg->str, msg->len, &v) < 0 || v < 0)
            v = 0;
        k = v < (int64_t)e->refs ? (unsigned)v : e->refs;
        while (k-- > 0)
            release_permit(e);
    } else if (w == LG_WL_RWLOCK && msg->type == REDIS_REPLY_STRING && msg->len == 1 &&
               msg->str[0] == '1') {
        wake_all(e);
    } else {
        release_permit(e);
    }
}

/* Key index of a channel name "<chan_prefix><prefix>:<t>:<n>}", or -1. */
static long long channel_key(const struct lg_sub *s, const char *ch, size_t len)
{
    const char *colon;
    int64_t key;
    char name[128];
    size_t n;

    if (len < 2 || ch[len - 1] != '}')
        return -1;
    colon = memrchr(ch, ':', len);
    if (!colon || util_parse_i64(colon + 1, (size_t)(ch + len - 1 - (colon + 1)), &key) < 0 ||
        key < 0 || key > (int64_t)UINT32_MAX)
        return -1;
    n = lg_run_key_name(s->run, (unsigned)key, name, sizeof(name));
    if (len != strlen(s->run->chan_prefix) + n + 1 || memcmp(ch + len - 1 - n, name, n) != 0)
        return -1;
    return key;
}

/* Routes a pub/sub reply to its entry; channels of other keys (or of a
 * previous subscription) are ignored. */
static void on_push(struct lg_sub *s, const redisReply *rep)
{
    const redisReply *kind, *ch;
    const char *kind_name;
    struct lg_sub_entry *e;
    long long key;

    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 3)
        goto bad;
    kind = rep->element[0];
    ch = rep->element[1];
    if (kind->type != REDIS_REPLY_STRING || ch->type != REDIS_REPLY_STRING)
        goto bad;
    kind_name = kind->str;
    key = channel_key(s, ch->str, ch->len);
    e = key >= 0 ? entry_of(s, (unsigned)key) : NULL;
    if (!e)
        return;
    /* --cluster: the sharded kinds (ssubscribe, smessage). */
    if (s->run->cluster && kind->str[0] == 's')
        kind_name++;
    if (strcmp(kind_name, "subscribe") == 0)
        on_confirmed(s, e);
    else if (strcmp(kind_name, "message") == 0)
        on_message(s, e, rep->element[2]);
    return;
bad:
    lg_run_error(s->run, "pub/sub", rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply",
                 rep->type == REDIS_REPLY_ERROR ? rep->len : strlen("unexpected reply"));
}

/* ---- connection callbacks ---------------------------------------------- */

static void on_greet(struct lg_sub *s, const redisReply *rep)
{
    const char *err = lg_greet_error(rep);
    char why[200];

    s->greeting = false;
    if (!err) {
        lg_run_conn_done(s->run, 0);
        return;
    }
    snprintf(why, sizeof(why), "pub/sub connection to %.60s: %s: %.100s", s->run->sub_ep->name,
             s->run->sub_ep->pass[0] ? "AUTH" : "PING", err);
    lg_run_conn_failed(s->run, why);
}

/* The connection is gone: every waiter falls back to its own retries. */
static void sub_die(struct lg_sub *s, const char *why)
{
    struct list *n;

    sched_conn_close(&s->conn, false);
    if (s->run->phase == LG_PH_CLOSE)
        return;
    if (s->greeting) {
        s->greeting = false;
        lg_run_conn_failed(s->run, why);
        return;
    }
    lg_run_error(s->run, "pub/sub connection", why, strlen(why));
    for (unsigned i = 0; i < s->nentries; i++) {
        struct lg_sub_entry *e = &s->entries[i];

        e->state = LG_SUB_IDLE;
        while ((n = list_first(&e->confirm)) || (n = list_first(&e->latch))) {
            struct lg_client *c = list_entry(n, struct lg_client, node);

            lg_sub_cancel(c);
            lg_client_retry(c);
        }
    }
}

static void sub_on_data(struct sched_conn *conn, const char *data, size_t len)
{
    struct lg_sub *s = LP_CONTAINER_OF(conn, struct lg_sub, conn);
    void *rep;

    if (redisReaderFeed(s->rd, data, len) != REDIS_OK) {
        sub_die(s, "reply buffer: out of memory");
        return;
    }
    for (;;) {
        if (redisReaderGetReply(s->rd, &rep) != REDIS_OK) {
            sub_die(s, s->rd->errstr);
            return;
        }
        if (!rep)
            return;
        if (s->greeting)
            on_greet(s, rep);
        else
            on_push(s, rep);
        freeReplyObject(rep);
    }
}

static void sub_on_hangup(struct sched_conn *conn, int err)
{
    struct lg_sub *s = LP_CONTAINER_OF(conn, struct lg_sub, conn);

    (void)err;
    sub_die(s, "closed by peer");
}

static void sub_on_connect(struct sched_conn *conn, int err)
{
    struct lg_sub *s = LP_CONTAINER_OF(conn, struct lg_sub, conn);

    if (err == 0) {
        err = lg_greet_send(conn, s->run->sub_ep);
        s->greeting = err == 0;
        if (err == 0)
            return;
    }
    if (err < 0)
        sched_conn_close(conn, false);
    lg_run_conn_done(s->run, err);
}

static void sub_on_release(struct sched_conn *conn)
{
    struct lg_sub *s = LP_CONTAINER_OF(conn, struct lg_sub, conn);

    lg_run_conn_released(s->run);
}

const struct sched_conn_ops lg_sub_ops = {
    .on_data = sub_on_data,
    .on_hangup = sub_on_hangup,
    .on_connect = sub_on_connect,
    .on_release = sub_on_release,
};

/* ---- set-up ------------------------------------------------------------ */

int lg_sub_init(struct lg_sub *s, struct lg_run *r, unsigned first_key, unsigned nentries)
{
    memset(s, 0, sizeof(*s));
    s->run = r;
    s->nentries = nentries;
    s->entries = calloc(nentries, sizeof(*s->entries));
    s->rd = redisReaderCreate();
    if (!s->entries || !s->rd)
        return -ENOMEM;
    for (unsigned i = 0; i < nentries; i++) {
        s->entries[i].key = first_key + i;
        list_init(&s->entries[i].confirm);
        list_init(&s->entries[i].latch);
    }
    return 0;
}

void lg_sub_deinit(struct lg_sub *s)
{
    redisReaderFree(s->rd);
    s->rd = NULL;
    free(s->entries);
    s->entries = NULL;
}
