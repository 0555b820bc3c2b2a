/* The fake pool (fake_pool.h): the pool.h API over per-connection FIFO
 * queues that the simulator drains step by step into the Redis model.
 *
 * State: a request is QUEUED (not run), RUN (Redis ran it, the reply is
 * kept) and leaves the queue at delivery or failure. Redis runs requests
 * of one connection in order; the simulator picks which connection runs
 * next, so connections interleave as they would on the wire. A reply is
 * delivered only after every older request of its connection was. */
#include "tests/support/fake_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FP_MAX_CONNS   8
#define FP_MAX_SCRIPTS 128

struct fp_req {
    struct fp_req *next;
    pool_reply_fn *cb;
    void *arg;
    unsigned script;
    int numkeys, argc;
    char **argv;
    size_t *lens;
    struct pool_wait *w;
    uint64_t sent_ms;
    struct pool_reply *reply; /* set once Redis ran it */
};

struct fp_conn {
    struct fp_req *head, *tail;
    unsigned n, unrun;
};

struct pool_chan {
    char *name;
    size_t len;
    int ns;               /* 0: classic (AUTO on this classic pool), 2: sharded, 3: pattern */
    struct pool_sub *sub; /* NULL once stopped (freed at the next sweep) */
};

/* A pub/sub event on its way: a message, or a subscription's READY (the
 * real pool confirms SUBSCRIBE asynchronously, so READY too comes when
 * the simulator says). */
struct fp_msg {
    char *ch, *msg;
    size_t chlen, mlen;
    enum pool_sub_event ev;
};

struct pool {
    struct sched_loop *loop;
    struct pool_opts opts;
    int ids[FP_MAX_SCRIPTS];           /* script index -> fake_redis id */
    const char *names[FP_MAX_SCRIPTS]; /* script index -> name (borrowed) */
    size_t nscripts;
    unsigned nconns;
    struct fp_conn conns[FP_MAX_CONNS];
    bool started, stopped, up;
    struct pool_chan **chans;
    size_t nchans, capchans;
    unsigned iterating; /* channel callbacks on the stack: no sweep */
    const char *msg_ch; /* the channel of the message being delivered */
    size_t msg_chlen;
    struct fp_msg *msgs;
    size_t nmsgs, capmsgs;
    struct fp_counts counts;
};

static fp_now_fn *fp_now;
static fp_trace_fn *fp_trace;
static struct fake_redis *fp_model;
static struct pool *fp_last;
/* Compiled scripts, by text: the proxy's table is static, so one compile
 * per process serves every simulated run. */
static struct {
    const char *text;
    int id;
} fp_compiled[FP_MAX_SCRIPTS];
static size_t fp_ncompiled;

void fp_configure(fp_now_fn *now, struct fake_redis *redis)
{
    if (redis != fp_model)
        fp_ncompiled = 0;
    fp_now = now;
    fp_model = redis;
}

void fp_set_trace(fp_trace_fn *fn)
{
    fp_trace = fn;
}

struct pool *fp_pool(void)
{
    return fp_last;
}

/* ---- the pool.h API ---------------------------------------------------------- */

void pool_opts_default(struct pool_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 6379;
    o->size = 2;
    o->connect_timeout_ms = 1000;
    o->request_timeout_ms = 3000;
    o->backoff_min_ms = 50;
    o->backoff_max_ms = 2000;
    o->cluster_refresh_ms = 1000;
    o->batch_max = 32;
}

static int script_id(const struct pool_script *s)
{
    size_t i;
    int id;

    for (i = 0; i < fp_ncompiled; i++)
        if (fp_compiled[i].text == s->text)
            return fp_compiled[i].id;
    id = fr_load(fp_model, s->name, s->text);
    if (id >= 0 && fp_ncompiled < FP_MAX_SCRIPTS) {
        fp_compiled[fp_ncompiled].text = s->text;
        fp_compiled[fp_ncompiled++].id = id;
    }
    return id;
}

static void msg_push(struct pool *p, enum pool_sub_event ev, const char *ch, size_t chlen,
                     const char *msg, size_t mlen)
{
    struct fp_msg *m;

    if (p->nmsgs == p->capmsgs) {
        p->capmsgs = p->capmsgs ? p->capmsgs * 2 : 16;
        p->msgs = realloc(p->msgs, p->capmsgs * sizeof(*p->msgs));
        if (!p->msgs)
            abort();
    }
    m = &p->msgs[p->nmsgs++];
    m->ch = strndup(ch, chlen);
    m->msg = strndup(msg, mlen);
    if (!m->ch || !m->msg)
        abort();
    m->chlen = chlen;
    m->mlen = mlen;
    m->ev = ev;
}

/* The pub/sub of the model: a script's PUBLISH is queued for delivery. */
static void fp_on_publish(void *arg, const char *ch, size_t chlen, const char *msg, size_t mlen)
{
    struct pool *p = arg;

    msg_push(p, POOL_SUB_MESSAGE, ch, chlen, msg, mlen);
    p->counts.published++;
}

int pool_create(struct pool **out, struct sched_loop *loop, const struct pool_opts *opts,
                const struct pool_script *scripts, size_t nscripts)
{
    struct pool *p;
    size_t i;

    if (!fp_model || !fp_now || nscripts > FP_MAX_SCRIPTS || opts->cluster_seeds || opts->sentinels)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->opts = *opts;
    p->nconns = opts->size == 0 ? 1 : opts->size > FP_MAX_CONNS ? FP_MAX_CONNS : opts->size;
    for (i = 0; i < nscripts; i++) {
        p->ids[i] = scripts[i].runner ? -1 : script_id(&scripts[i]);
        p->names[i] = scripts[i].name;
        if (p->ids[i] < 0 && !scripts[i].runner) {
            free(p);
            return -EINVAL;
        }
    }
    p->nscripts = nscripts;
    fp_last = p;
    *out = p;
    return 0;
}

int pool_set_tls(struct pool *p, struct sched_tls_ctx *ctx, const char *server_name)
{
    (void)p;
    (void)server_name;
    return ctx ? -EINVAL : 0;
}

int pool_start(struct pool *p)
{
    p->started = true;
    p->up = true;
    return 0;
}

static void req_free(struct fp_req *q)
{
    int i;

    for (i = 0; i < q->argc; i++)
        free(q->argv[i]);
    free(q->argv);
    free(q->lens);
    fr_reply_free(q->reply);
    free(q);
}

/* Unlinks conn's head request. */
static struct fp_req *conn_pop(struct fp_conn *c)
{
    struct fp_req *q = c->head;

    c->head = q->next;
    if (!c->head)
        c->tail = NULL;
    c->n--;
    if (!q->reply)
        c->unrun--;
    return q;
}

void fp_fail(struct pool *p, unsigned conn, int err)
{
    struct fp_conn *c = &p->conns[conn];

    while (c->head) {
        struct fp_req *q = conn_pop(c);

        p->counts.failed++;
        q->cb(q->arg,
              &(struct pool_result){.err = err, .replicas = q->w ? q->w->replicas : 0, .acks = -1});
        req_free(q);
    }
}

/* Drops stopped channels, unless a channel callback is on the stack. */
static void chans_sweep(struct pool *p)
{
    size_t i, j = 0;

    if (p->iterating)
        return;
    for (i = 0; i < p->nchans; i++) {
        if (p->chans[i]->sub) {
            p->chans[j++] = p->chans[i];
        } else {
            free(p->chans[i]->name);
            free(p->chans[i]);
        }
    }
    p->nchans = j;
}

/* Tells every listener ev (READY, LOST). */
static void chans_tell(struct pool *p, enum pool_sub_event ev)
{
    size_t i;

    p->iterating++;
    for (i = 0; i < p->nchans; i++) {
        struct pool_sub *s = p->chans[i]->sub;

        if (s)
            s->cb(s, ev, NULL, 0);
    }
    p->iterating--;
    chans_sweep(p);
}

static void msgs_clear(struct pool *p)
{
    size_t i;

    for (i = 0; i < p->nmsgs; i++) {
        free(p->msgs[i].ch);
        free(p->msgs[i].msg);
    }
    p->nmsgs = 0;
}

void fp_down(struct pool *p)
{
    unsigned i;

    if (!p->up)
        return;
    p->up = false;
    for (i = 0; i < p->nconns; i++)
        fp_fail(p, i, -ECONNRESET);
    msgs_clear(p);
    chans_tell(p, POOL_SUB_LOST);
}

void fp_up(struct pool *p, bool restarted)
{
    uint8_t all[POOL_SLOT_BITMAP_SIZE];
    struct pool_topology_event ev;

    if (p->up || p->stopped)
        return;
    p->up = true;
    for (size_t i = 0; i < p->nchans; i++)
        if (p->chans[i]->sub)
            msg_push(p, POOL_SUB_READY, p->chans[i]->name, p->chans[i]->len, "", 0);
    if (!restarted || !p->opts.on_topology)
        return;
    memset(all, 0xff, sizeof(all));
    memset(&ev, 0, sizeof(ev));
    ev.nchanged = POOL_SLOTS;
    ev.slots = all;
    ev.masters = 1;
    ev.slots_served = POOL_SLOTS;
    p->opts.on_topology(p->opts.topology_arg, &ev);
}

bool fp_is_up(const struct pool *p)
{
    return p->up;
}

void pool_stop(struct pool *p)
{
    unsigned i;

    for (i = 0; i < p->nconns; i++)
        fp_fail(p, i, -ECONNRESET);
    if (p->up)
        chans_tell(p, POOL_SUB_LOST);
    p->up = false;
    p->stopped = true;
}

bool pool_is_stopped(const struct pool *p)
{
    return p->stopped;
}

void pool_destroy(struct pool *p)
{
    unsigned i;

    if (!p)
        return;
    for (i = 0; i < p->nconns; i++) {
        while (p->conns[i].head)
            req_free(conn_pop(&p->conns[i]));
    }
    msgs_clear(p);
    free(p->msgs);
    for (i = 0; i < p->nchans; i++) {
        free(p->chans[i]->name);
        free(p->chans[i]);
    }
    free(p->chans);
    if (fp_last == p)
        fp_last = NULL;
    free(p);
}

bool pool_is_ready(const struct pool *p)
{
    return p->up;
}

static int submit(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
                  const char *const *argv, const size_t *lens, struct pool_wait *w,
                  pool_reply_fn *cb, void *arg)
{
    struct fp_conn *c;
    struct fp_req *q;
    int i;

    if (!p->up || p->stopped) {
        p->counts.refused++;
        return -ENOTCONN;
    }
    if (script >= p->nscripts || p->ids[script] < 0 || numkeys > argc)
        return -EINVAL;
    q = calloc(1, sizeof(*q));
    if (!q)
        return -ENOMEM;
    q->argv = calloc((size_t)argc + 1, sizeof(*q->argv));
    q->lens = calloc((size_t)argc + 1, sizeof(*q->lens));
    if (!q->argv || !q->lens)
        abort();
    for (i = 0; i < argc; i++) {
        q->argv[i] = malloc(lens[i] + 1);
        if (!q->argv[i])
            abort();
        memcpy(q->argv[i], argv[i], lens[i]);
        q->argv[i][lens[i]] = '\0';
        q->lens[i] = lens[i];
    }
    q->argc = argc;
    q->numkeys = numkeys;
    q->script = script;
    q->cb = cb;
    q->arg = arg;
    q->w = w;
    q->sent_ms = fp_now();
    c = &p->conns[hint % p->nconns];
    if (c->tail)
        c->tail->next = q;
    else
        c->head = q;
    c->tail = q;
    c->n++;
    c->unrun++;
    p->counts.submitted++;
    if (fp_trace) {
        char what[160];
        size_t off = (size_t)snprintf(what, sizeof(what), "%s", p->names[script]);

        for (i = 0; i < argc && off < sizeof(what); i++)
            off += (size_t)snprintf(what + off, sizeof(what) - off, " %.40s", q->argv[i]);
        fp_trace((unsigned)(hint % p->nconns), what);
    }
    return 0;
}

int pool_command(struct pool *p, uint64_t hint, int argc, const char *const *argv,
                 const size_t *lens, pool_reply_fn *cb, void *arg)
{
    (void)p, (void)hint, (void)argc, (void)argv, (void)lens, (void)cb, (void)arg;
    return -EINVAL; /* the proxy sends scripts only */
}

int pool_command_slot(struct pool *p, uint64_t hint, int slot, int argc, const char *const *argv,
                      const size_t *lens, pool_reply_fn *cb, void *arg)
{
    (void)slot;
    return pool_command(p, hint, argc, argv, lens, cb, arg);
}

int pool_eval(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
              const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    return submit(p, hint, script, numkeys, argc, argv, lens, NULL, cb, arg);
}

/* No replicas are modelled: WAIT answers 0. */
int pool_eval_wait(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, struct pool_wait *w,
                   pool_reply_fn *cb, void *arg)
{
    return submit(p, hint, script, numkeys, argc, argv, lens, w, cb, arg);
}

const char *pool_slot_owner(const struct pool *p, unsigned slot)
{
    (void)p;
    (void)slot;
    return "127.0.0.1:6379";
}

bool pool_is_cluster(const struct pool *p)
{
    (void)p;
    return false;
}

bool pool_is_sentinel(const struct pool *p)
{
    (void)p;
    return false;
}

bool pool_pubsub_sharded(const struct pool *p)
{
    (void)p;
    return false;
}

bool pool_pubsub_known(const struct pool *p)
{
    (void)p;
    return true;
}

const char *pool_sub_msg_channel(const struct pool *p, size_t *len)
{
    *len = p->msg_chlen;
    return p->msg_ch;
}

int pool_sub_start(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                   pool_sub_fn *cb)
{
    return pool_sub_start_kind(p, s, channel, len, POOL_SUB_AUTO, cb);
}

/* The pool is classic: AUTO and CLASSIC share a namespace. Patterns are
 * kept but, as the model publishes on names only, match exactly. */
int pool_sub_start_kind(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                        enum pool_sub_kind kind, pool_sub_fn *cb)
{
    int ns = kind == POOL_SUB_AUTO || kind == POOL_SUB_CLASSIC ? 0 : (int)kind;
    struct pool_chan *ch;
    size_t i;

    if (kind > POOL_SUB_PATTERN)
        return -EINVAL;
    for (i = 0; i < p->nchans; i++)
        if (p->chans[i]->sub && p->chans[i]->ns == ns && p->chans[i]->len == len &&
            !memcmp(p->chans[i]->name, channel, len))
            return -EEXIST;
    if (p->nchans == p->capchans) {
        p->capchans = p->capchans ? p->capchans * 2 : 16;
        p->chans = realloc(p->chans, p->capchans * sizeof(*p->chans));
        if (!p->chans)
            abort();
    }
    ch = calloc(1, sizeof(*ch));
    if (!ch)
        return -ENOMEM;
    ch->name = strndup(channel, len);
    ch->len = len;
    ch->ns = ns;
    ch->sub = s;
    s->cb = cb;
    s->chan = ch;
    p->chans[p->nchans++] = ch;
    if (p->up) /* confirmed later, when the simulator delivers it */
        msg_push(p, POOL_SUB_READY, channel, len, "", 0);
    return 0;
}

void pool_sub_stop(struct pool *p, struct pool_sub *s)
{
    if (s->chan)
        s->chan->sub = NULL;
    s->chan = NULL;
    chans_sweep(p);
}

void pool_get_stats(const struct pool *p, struct pool_stats *st)
{
    memset(st, 0, sizeof(*st));
    st->conns = p->nconns;
    st->conns_ready = p->up ? p->nconns : 0;
    st->pubsub_ready = p->up;
    st->channels = p->nchans;
    st->requests = p->counts.submitted;
    st->errors = p->counts.failed;
    st->state = p->up ? "up" : "down";
    st->last_error = "";
    st->pubsub_mode = "classic";
    st->nodes = 1;
    st->nodes_ready = p->up;
    st->slots_served = POOL_SLOTS;
    st->master_name = "";
    st->master_addr = "";
    st->sentinel_addr = "";
    for (unsigned i = 0; i < p->nconns; i++)
        st->inflight += p->conns[i].n;
}

size_t pool_get_node_stats(const struct pool *p, struct pool_node_stats *out, size_t max)
{
    if (max > 0) {
        memset(out, 0, sizeof(*out));
        out->addr = "127.0.0.1:6379";
        out->id = "";
        out->state = p->up ? "up" : "down";
        out->role = "master";
        out->health = "";
        out->slots = POOL_SLOTS;
        out->conns = p->nconns;
        out->conns_ready = p->up ? p->nconns : 0;
        out->pubsub_ready = p->up;
    }
    return 1;
}

/* ---- the simulator's controls ----------------------------------------------- */

unsigned fp_nconns(const struct pool *p)
{
    return p->nconns;
}

unsigned fp_queued(const struct pool *p, unsigned conn)
{
    return p->conns[conn].n;
}

unsigned fp_unexecuted(const struct pool *p, unsigned conn)
{
    return p->conns[conn].unrun;
}

bool fp_oldest(const struct pool *p, unsigned conn, uint64_t *sent_ms)
{
    if (!p->conns[conn].head)
        return false;
    *sent_ms = p->conns[conn].head->sent_ms;
    return true;
}

bool fp_execute(struct pool *p, unsigned conn)
{
    struct fp_conn *c = &p->conns[conn];
    struct fp_req *q;

    for (q = c->head; q && q->reply; q = q->next)
        ;
    if (!q)
        return false;
    fr_set_publish(fp_model, fp_on_publish, p);

    q->reply = fr_eval(fp_model, p->ids[q->script], fp_now(), q->numkeys, q->argc,
                       (const char *const *)q->argv, q->lens);
    c->unrun--;
    p->counts.executed++;
    return true;
}

bool fp_deliver(struct pool *p, unsigned conn)
{
    struct fp_conn *c = &p->conns[conn];
    struct fp_req *q = c->head;

    if (!q || !q->reply)
        return false;
    q = conn_pop(c);
    p->counts.delivered++;
    /* No replicas in the model: a WAIT counts none. */
    q->cb(q->arg,
          &(struct pool_result){.reply = q->reply,
                                .replicas = q->w ? q->w->replicas : 0,
                                .acks = q->w && q->reply->type != POOL_REPLY_ERROR ? 0 : -1});
    req_free(q);
    return true;
}

size_t fp_msgs(const struct pool *p)
{
    return p->nmsgs;
}

bool fp_deliver_msg(struct pool *p, size_t i)
{
    struct fp_msg m;
    size_t k;

    if (i >= p->nmsgs)
        return false;
    m = p->msgs[i];
    memmove(&p->msgs[i], &p->msgs[i + 1], (p->nmsgs - i - 1) * sizeof(m));
    p->nmsgs--;
    p->iterating++;
    p->msg_ch = m.ch;
    p->msg_chlen = m.chlen;
    for (k = 0; p->up && k < p->nchans; k++) {
        struct pool_sub *s = p->chans[k]->sub;

        if (s && p->chans[k]->len == m.chlen && memcmp(p->chans[k]->name, m.ch, m.chlen) == 0)
            s->cb(s, m.ev, m.ev == POOL_SUB_MESSAGE ? m.msg : NULL, m.mlen);
    }
    p->iterating--;
    p->msg_ch = NULL;
    p->msg_chlen = 0;
    chans_sweep(p);
    free(m.ch);
    free(m.msg);
    return true;
}

void fp_counts(const struct pool *p, struct fp_counts *out)
{
    *out = p->counts;
}

size_t fp_describe_next(const struct pool *p, unsigned conn, char *buf, size_t n)
{
    const struct fp_req *q;
    size_t off = 0;
    int i;

    for (q = p->conns[conn].head; q && q->reply; q = q->next)
        ;
    buf[0] = '\0';
    if (!q)
        return 0;
    off += (size_t)snprintf(buf, n, "%s", p->names[q->script] ? p->names[q->script] : "?");
    for (i = 0; i < q->argc && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, " %.40s", q->argv[i]);
    return off < n ? off : n - 1;
}
