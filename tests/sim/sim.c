/* lp_sim: a deterministic simulator of the proxy's lock engine.
 *
 * One process, no network, no real time. The proxy's real server object
 * (px_server_create: loop, command table, lock engine) runs on the epoll
 * loop, but its clock is the simulator's (common/clock.h's seam) and its
 * pool is tests/support/fake_pool.c, whose "Redis" is a keyspace model
 * running the proxy's real Lua scripts (fake_redis.c). Clients are
 * socketpairs handed to px_client_accept(): the proxy's whole command path
 * (parser, dispatch, LOCK/TRYLOCK/UNLOCK, wait, holds, watchdog, pushes).
 *
 * A seed drives everything: which client sends what, which upstream
 * connection Redis serves next, when replies and pub/sub messages are
 * delivered, how far time jumps, and the faults: a connection reset or
 * timeout (executed or not), the upstream down for a while, a Redis
 * restart (keyspace lost), a failover (keyspace rolled back to a lagging
 * replica copy), pauses (time runs while nothing is served), client
 * disconnects. After every step the checker compares what each client was
 * told with the model (check_*; see tests/sim/README.md for the rules).
 * On a violation it prints the seed and the trace; --seed N replays it.
 *
 * Design choices: one command in flight per client (the checker's belief
 * model stays exact); a client's belief about a LEASE hold ends at its
 * own send time + lease (the proxy's promise is measured from its later
 * send to Redis, so the client's view is the conservative one). */
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/jobs.h"
#include "proxy/client.h"
#include "proxy/opts.h"
#include "proxy/server.h"
#include "sched/loop.h"
#include "tests/support/fake_pool.h"
#include "tests/support/fake_redis.h"

#define NCLIENTS            3
#define NNAMES              2
#define WATCHDOG_MS         3000
#define UPSTREAM_TIMEOUT_MS 1000
#define TRACE_LINES         512
#define TRACE_LEN           160

static const char *const names[NNAMES] = {"a", "b"};

/* ---- time and randomness ------------------------------------------------------ */

static uint64_t now_ns;

static uint64_t fake_mono_ns(void)
{
    return now_ns;
}

static uint64_t fake_wall_ms(void)
{
    return 1700000000000ull + now_ns / 1000000u;
}

static const struct clock_fake sim_clock = {fake_mono_ns, fake_wall_ms};

static uint64_t now_ms(void)
{
    return now_ns / 1000000u;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned below(unsigned n)
{
    return n ? (unsigned)(rnd() % n) : 0;
}

static bool chance(unsigned percent)
{
    return below(100) < percent;
}

/* ---- trace -------------------------------------------------------------------- */

static char trace[TRACE_LINES][TRACE_LEN];
static unsigned ntrace;
static bool verbose;
static bool no_faults; /* --no-faults: replies, delays and time only */

static void tr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tr(const char *fmt, ...)
{
    char *line = trace[ntrace++ % TRACE_LINES];
    va_list ap;
    int n = snprintf(line, TRACE_LEN, "%8llu ", (unsigned long long)now_ms());

    va_start(ap, fmt);
    vsnprintf(line + n, TRACE_LEN - (size_t)n, fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "%s\n", line);
}

/* ---- RESP3 replies, as much as the checker needs ------------------------------- */

struct val {
    char type;        /* '+', '-', ':', '$', '_', '*', '%', '>', ... */
    long long i;      /* ':' */
    char s[128];      /* '+', '-', '$': the text (truncated) */
    char push[3][64]; /* '>': its first three elements */
};

/* Parses one value at p (n bytes): bytes used, 0 when incomplete, -1 bad. */
static long parse_val(const char *p, size_t n, struct val *v, int depth)
{
    const char *nl = memchr(p, '\n', n);
    long used, k, cnt;
    size_t hdr;

    if (!nl)
        return 0;
    hdr = (size_t)(nl - p) + 1;
    if (depth == 0)
        memset(v, 0, sizeof(*v));
    switch (p[0]) {
    case '+':
    case '-':
        if (depth == 0)
            snprintf(v->s, sizeof(v->s), "%.*s", (int)(hdr - 3), p + 1);
        if (depth == 0)
            v->type = p[0];
        return (long)hdr;
    case ':':
    case '_':
    case ',':
    case '#':
        if (depth == 0) {
            v->type = p[0];
            v->i = strtoll(p + 1, NULL, 10);
        }
        return (long)hdr;
    case '$':
    case '=':
    case '!':
        cnt = strtol(p + 1, NULL, 10);
        if (cnt < 0) {
            if (depth == 0)
                v->type = '_';
            return (long)hdr;
        }
        if (n < hdr + (size_t)cnt + 2)
            return 0;
        if (depth == 0) {
            v->type = '$';
            snprintf(v->s, sizeof(v->s), "%.*s", (int)cnt, p + hdr);
        }
        return (long)(hdr + (size_t)cnt + 2);
    case '*':
    case '%':
    case '>':
    case '~':
        cnt = strtol(p + 1, NULL, 10);
        if (p[0] == '%')
            cnt *= 2;
        if (depth == 0)
            v->type = p[0];
        used = (long)hdr;
        for (k = 0; k < cnt; k++) {
            struct val sub;
            long u = parse_val(p + used, n - (size_t)used, &sub, 0);

            if (u <= 0)
                return u;
            if (depth == 0 && p[0] == '>' && k < 3)
                snprintf(v->push[k], sizeof(v->push[k]), "%.63s", sub.s);
            used += u;
        }
        return used;
    default:
        return -1;
    }
}

/* ---- the simulated world ------------------------------------------------------- */

enum op { OP_NONE, OP_HELLO, OP_SUB, OP_LOCK, OP_TRYLOCK, OP_UNLOCK };

static const char *const op_names[] = {"-", "HELLO", "SUBSCRIBE", "LOCK", "TRYLOCK", "UNLOCK"};

/* What a client believes about one name. */
struct belief {
    int count;              /* holds it was told it has (OK minus UNLOCK answers) */
    bool told_lost;         /* told (push) that the hold was lost; UNLOCK must say so */
    bool model_lost;        /* the checker saw the hold gone from Redis (a legit loss) */
    bool dirty;             /* an acquire's outcome was unknown: counts may differ */
    uint64_t lease_end;     /* a LEASE hold: its end by the client's clock, else 0 */
    uint64_t since_ms;      /* when the current hold began (first OK) */
    unsigned epoch;         /* data-loss epoch (restarts, failovers) at that time */
    unsigned last_epoch;    /* the same at its last OK */
    int ended_count;        /* a LEASE hold ran out (by the client's clock) at this count */
    uint64_t lease_end_max; /* the latest its lease can end for the proxy: OK's arrival + lease
                               (a LOCK's grant may come from a retry sent after the LOCK) */
    uint64_t ended_max;     /* lease_end_max of the hold that ran out */
    uint64_t ended_end;     /* lease_end of the hold that ran out */
    bool ended_told;        /* its end was pushed (the proxy took it as over) */
    unsigned lease_ms;      /* a LEASE hold's lease (the last OK's), else 0 */
};

struct client {
    bool alive;
    int fd;
    uint64_t id;
    char owner[64];
    enum op op; /* the command in flight, OP_NONE when idle */
    unsigned name;
    unsigned lease;
    uint64_t sent_ms;
    unsigned sent_epoch;
    uint64_t sent_upsets; /* world upsets (resets, outages) at the send */
    bool sent_up;         /* the upstream was up and settled at the send */
    uint64_t seen_out;    /* the proxy's bytes_out to it when last read */
    char in[16384];
    size_t inlen;
    struct belief b[NNAMES];
};

struct world {
    struct px_server *srv;
    struct pool *pool;
    struct fake_redis *redis; /* borrowed: process-wide */
    struct fr_db *replica;    /* owned: the lagging replica's copy */
    struct client cl[NCLIENTS];
    unsigned epoch;         /* restarts + failovers so far */
    uint64_t upsets;        /* upstream resets, timeouts and outages so far */
    uint64_t up_since;      /* when the upstream last came back */
    bool poked;             /* something the proxy sees happened since the loop last ran */
    uint64_t down_until;    /* upstream down until this time (0: up) */
    bool pending_restarted; /* the upstream comes back with a new run_id */
    uint64_t seed;
    unsigned step;
    char failure[256]; /* the first violation, "" while none */
    /* counters for the report */
    uint64_t oks, unlocks, lostreplies, pushes, nils, errors;
};

static struct fake_redis *g_redis;
static uint64_t tot_steps, tot_execs;
static uint64_t found[16];
static const char *found_what[16];
static unsigned nfound_kinds;

static void violation(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct world *w, const char *fmt, ...)
{
    va_list ap;

    if (w->failure[0])
        return;
    va_start(ap, fmt);
    vsnprintf(w->failure, sizeof(w->failure), fmt, ap);
    va_end(ap);
    tr("VIOLATION: %s", w->failure);
}

/* One loop iteration: takes client input, runs due timers and hooks,
 * flushes replies (those written by pool callbacks since included). */
static void run_loop(struct world *w)
{
    sched_loop_run_once(w->srv->loop, 0);
    w->poked = false;
}

static void client_send(struct world *w, struct client *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void client_send(struct world *w, struct client *c, const char *fmt, ...)
{
    char words[8][64], buf[512];
    char line[256];
    va_list ap;
    int nw = 0, n;
    char *save = NULL, *tok;
    size_t off = 0;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    for (tok = strtok_r(line, " ", &save); tok && nw < 8; tok = strtok_r(NULL, " ", &save))
        snprintf(words[nw++], sizeof(words[0]), "%s", tok);
    n = snprintf(buf, sizeof(buf), "*%d\r\n", nw);
    off = (size_t)n;
    for (int i = 0; i < nw; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "$%zu\r\n%s\r\n", strlen(words[i]),
                                words[i]);
    if (write(c->fd, buf, off) != (ssize_t)off) {
        fprintf(stderr, "lp_sim: write to the proxy failed: %s\n", strerror(errno));
        exit(2);
    }
    c->sent_ms = now_ms();
    w->poked = true;
    c->sent_epoch = w->epoch;
    c->sent_upsets = w->upsets;
    c->sent_up = fp_is_up(w->pool) && now_ms() - w->up_since >= UPSTREAM_TIMEOUT_MS;
}

static void client_connect(struct world *w, unsigned i)
{
    struct client *c = &w->cl[i];
    int sv[2];

    memset(c, 0, sizeof(*c));
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
        perror("socketpair");
        exit(2);
    }
    c->id = w->srv->next_client_id + 1;
    if (px_client_accept(w->srv, sv[1], NULL) < 0) {
        fprintf(stderr, "lp_sim: px_client_accept failed\n");
        exit(2);
    }
    c->fd = sv[0];
    c->alive = true;
    snprintf(c->owner, sizeof(c->owner), "%s:%llu", w->srv->uuid, (unsigned long long)c->id);
    c->op = OP_HELLO;
    client_send(w, c, "HELLO 3");
    tr("c%u connects (id %llu)", i, (unsigned long long)c->id);
}

static void client_disconnect(struct world *w, unsigned i)
{
    struct client *c = &w->cl[i];

    tr("c%u disconnects (op %s in flight)", i, op_names[c->op]);
    w->poked = true;
    close(c->fd);
    c->alive = false;
}

/* ---- the checker: replies ----------------------------------------------------- */

static bool lease_over(const struct belief *b)
{
    return b->lease_end != 0 && now_ms() >= b->lease_end;
}

/* A LEASE hold is the holder's until its lease ends, no longer: the
 * belief ends there (the proxy may still push its loss, once; a re-entry
 * sent around that moment may still find it in Redis). */
static void end_lease(struct belief *b)
{
    if (b->count == 0 || !lease_over(b))
        return;
    b->ended_count = b->count;
    b->ended_max = b->lease_end_max;
    b->ended_end = b->lease_end;
    b->count = 0;
    b->lease_end = 0;
    b->model_lost = false;
}

static void on_granted(struct world *w, unsigned i, struct client *c, struct belief *b)
{
    long long cnt = 0;
    bool have = fr_hget_int(w->redis, now_ms(), names[c->name], c->owner, &cnt);

    end_lease(b);
    if (b->count == 0 && b->ended_count > 0) {
        if (!b->ended_told && have && cnt == b->ended_count + 1 && c->sent_ms < b->ended_max + 10) {
            /* Sent before the proxy's own lease end (its grant's send is
             * later than the client's LOCK), and no push of its end yet:
             * a re-entry of the hold it still had. */
            b->count = b->ended_count;
        } else if (have && cnt > 1 && w->epoch == c->sent_epoch && !px_jobs_busy(w->srv->engine) &&
                   (b->ended_told || c->sent_ms >= b->ended_max + 10)) {
            /* A fresh hold: the proxy tells count 1 and settles the stale
             * count of the ended hold away (hold.c, hold_told_count). */
            violation(w,
                      "c%u: a fresh %s '%s' after its LEASE hold ended re-entered the stale "
                      "grant (Redis counts %lld; one UNLOCK will not release it)",
                      i, op_names[c->op], names[c->name], cnt);
            return;
        }
    }
    b->ended_told = false;
    b->ended_count = 0;
    if (b->count == 0) {
        b->since_ms = c->sent_ms;
        b->epoch = c->sent_epoch;
        b->model_lost = false;
        b->told_lost = false;
    }
    b->count++;
    b->last_epoch = c->sent_epoch;
    b->lease_end = c->lease ? c->sent_ms + c->lease : 0;
    b->lease_end_max = c->lease ? now_ms() + c->lease : 0;
    b->lease_ms = c->lease;
    w->oks++;
    tr("c%u told OK for %s (count %d; Redis: %s %lld, pttl %lld)", i, names[c->name], b->count,
       have ? "field" : "no field", cnt, fr_pttl(w->redis, now_ms(), names[c->name]));
    if (w->epoch != c->sent_epoch)
        return; /* Redis lost data meanwhile: the README's window */
    if (!have)
        violation(w, "c%u told OK for '%s', which Redis does not hold for it", i, names[c->name]);
    else if (cnt != b->count && !b->dirty && !(cnt > b->count && px_jobs_busy(w->srv->engine)))
        violation(w, "c%u told OK for '%s' (its count %d) but Redis counts %lld", i, names[c->name],
                  b->count, cnt);
}

static void on_unlock_reply(struct world *w, unsigned i, struct client *c, const struct val *v)
{
    struct belief *b = &c->b[c->name];
    bool lost = b->model_lost || b->told_lost;
    /* Its LEASE ran out meanwhile (by the client's clock): any answer
     * goes (LOCKLOST is conservative when Redis released it in time). */
    bool ended = b->count == 0 && b->ended_count > 0;
    /* The README's window: a hold lost with Redis's data (restart,
     * failover) is found by the check the proxy runs once Redis is back;
     * an UNLOCK carried out in hand before that (Redis unreachable) cannot
     * know. Only a loss by expiry, or an UNLOCK sent when Redis had been
     * back for an upstream timeout (time for that check to go round; an
     * approximation) and served undisturbed, must answer LOCKLOST. */
    bool window = b->model_lost && !b->told_lost && b->epoch != w->epoch &&
                  (c->sent_upsets != w->upsets || !c->sent_up);

    if (ended) {
        tr("c%u UNLOCK %s -> %c%s%lld (its LEASE ended meanwhile)", i, names[c->name], v->type,
           v->s, v->type == ':' ? v->i : 0);
        /* :0 to an UNLOCK sent within the lease, with no push of its end
         * before it: Redisson's "still held", the lease set again from the
         * unlock (the proxy's hold was HELD: a hold it had ended would
         * have been pushed first, on the same connection). */
        if (v->type == ':' && v->i == 0 && !b->ended_told && b->ended_count > 1 &&
            c->sent_ms < b->ended_end) {
            b->count = b->ended_count - 1;
            b->ended_count = 0;
            b->lease_end = c->sent_ms + b->lease_ms;
            b->lease_end_max = now_ms() + b->lease_ms;
            w->unlocks++;
            return;
        }
        /* Over, unless :0 (a push of its end may follow) or an UPSTREAM
         * error (not released: its tombstone may still answer LOCKLOST). */
        if ((v->type == ':' && v->i == 1) ||
            (v->type == '-' &&
             (strncmp(v->s, "LOCKLOST", 8) == 0 || strncmp(v->s, "NOTOWNER", 8) == 0)))
            memset(b, 0, sizeof(*b));
        return;
    }
    if (v->type == ':') {
        w->unlocks++;
        tr("c%u UNLOCK %s -> :%lld (count %d%s)", i, names[c->name], v->i, b->count,
           lost ? (window ? ", hold lost, in the restart/failover window" : ", hold lost") : "");
        if (lost && !lease_over(b) && !window)
            violation(w,
                      "c%u told UNLOCK '%s' :%lld although its hold had been lost (untold "
                      "holder)",
                      i, names[c->name], v->i);
        b->count = v->i == 1 ? 0 : b->count - 1;
        if (b->count < 0)
            b->count = 0;
        /* (After a failover, an earlier :0 may have been lost with the
         * replica's lag: Redis answers with one count more.) */
        if (v->i == 0 && b->count == 0 && !lease_over(b) && w->epoch == b->last_epoch)
            violation(w, "c%u UNLOCK '%s' answered :0 (still held) but it held once", i,
                      names[c->name]);
        if (v->i == 0 && b->lease_ms) {
            /* Redisson's unlock sets the lease again on what is left. */
            b->lease_end = c->sent_ms + b->lease_ms;
            b->lease_end_max = now_ms() + b->lease_ms;
        }
        if (v->i == 1 && b->count != 0)
            b->count = 0;
        return;
    }
    if (v->type == '-' && strncmp(v->s, "LOCKLOST", 8) == 0) {
        w->lostreplies++;
        tr("c%u UNLOCK %s -> LOCKLOST", i, names[c->name]);
        if (!lost && !lease_over(b) && !b->dirty && w->epoch == b->epoch &&
            !fr_expired_since(w->redis, names[c->name], b->since_ms))
            violation(w, "c%u UNLOCK '%s' answered LOCKLOST but Redis still had its hold", i,
                      names[c->name]);
        memset(b, 0, sizeof(*b));
        return;
    }
    if (v->type == '-' && strncmp(v->s, "NOTOWNER", 8) == 0) {
        tr("c%u UNLOCK %s -> NOTOWNER", i, names[c->name]);
        if (b->count > 0 && !lease_over(b) && !b->dirty)
            violation(w, "c%u UNLOCK '%s' answered NOTOWNER though it was told it holds (%s)", i,
                      names[c->name], lost ? "lost, so LOCKLOST expected" : "held");
        memset(b, 0, sizeof(*b));
        return;
    }
    /* UPSTREAM and the like: nothing was released; the client still has
     * what it had (and will UNLOCK again). */
    w->errors++;
    tr("c%u UNLOCK %s -> %c%s", i, names[c->name], v->type, v->s);
}

static void on_lock_reply(struct world *w, unsigned i, struct client *c, const struct val *v)
{
    struct belief *b = &c->b[c->name];

    end_lease(b);
    if (v->type == '+' && strcmp(v->s, "OK") == 0) {
        on_granted(w, i, c, b);
        return;
    }
    if (v->type == '_') {
        w->nils++;
        tr("c%u %s %s -> nil", i, op_names[c->op], names[c->name]);
        return;
    }
    if (v->type == '-' && strncmp(v->s, "LOCKLOST", 8) == 0) {
        w->lostreplies++;
        tr("c%u %s %s -> LOCKLOST", i, op_names[c->op], names[c->name]);
        if (b->count == 0 && !b->told_lost && b->ended_count == 0)
            violation(w, "c%u %s '%s' answered LOCKLOST without a hold to lose", i, op_names[c->op],
                      names[c->name]);
        memset(b, 0, sizeof(*b));
        return;
    }
    /* UPSTREAM errors: the outcome is unknown to the client; a hold it
     * already had stays, and Redis's count may now differ (a re-entry may
     * have applied and will be rolled back). */
    w->errors++;
    tr("c%u %s %s -> %c%s", i, op_names[c->op], names[c->name], v->type, v->s);
    if (strstr(v->s, "outcome unknown"))
        b->dirty = true; /* the next hold may meet this attempt's grant */
}

static void on_push(struct world *w, unsigned i, struct client *c, const struct val *v)
{
    unsigned k;

    if (strcmp(v->push[0], "message") != 0) {
        if (c->op == OP_SUB && strcmp(v->push[0], "subscribe") == 0)
            c->op = OP_NONE;
        return;
    }
    w->pushes++;
    tr("c%u push: %s", i, v->push[2]);
    for (k = 0; k < NNAMES; k++) {
        struct belief *b = &c->b[k];

        if (strncmp(v->push[2], "LOCK ", 5) != 0 || strcmp(v->push[2] + 5, names[k]) != 0)
            continue;
        end_lease(b);
        if (b->count == 0 && b->ended_count > 0) {
            b->ended_told = true; /* the end of its LEASE, told */
            return;
        }
        if (b->told_lost)
            violation(w, "c%u told twice that its hold of '%s' was lost", i, names[k]);
        else if (b->count == 0 && !(c->op == OP_UNLOCK && c->name == k))
            violation(w, "c%u told its hold of '%s' was lost, but it holds nothing", i, names[k]);
        b->told_lost = true;
        return;
    }
    violation(w, "c%u: a push naming no lock it could hold: '%s'", i, v->push[2]);
}

static void on_reply(struct world *w, unsigned i, struct client *c, const struct val *v)
{
    enum op op = c->op;

    if (v->type == '>') {
        on_push(w, i, c, v);
        return;
    }
    switch (op) {
    case OP_HELLO:
        c->op = OP_SUB;
        client_send(w, c, "SUBSCRIBE lockproxy:lease-lost");
        break;
    case OP_LOCK:
    case OP_TRYLOCK:
        on_lock_reply(w, i, c, v);
        break;
    case OP_UNLOCK:
        on_unlock_reply(w, i, c, v);
        break;
    default:
        violation(w, "c%u got a reply (%c%s) with no command in flight", i, v->type, v->s);
    }
    if (op != OP_HELLO)
        c->op = OP_NONE;
}

/* The proxy's side of client c, NULL once the proxy let it go. */
static const struct px_client *proxy_side(const struct world *w, const struct client *c)
{
    const struct list *n;

    for (n = w->srv->clients.next; n != &w->srv->clients; n = n->next) {
        const struct px_client *cl = LP_CONTAINER_OF(n, const struct px_client, client_node);

        if (cl->id == c->id)
            return cl;
    }
    return NULL;
}

static void read_replies(struct world *w)
{
    unsigned i;

    for (i = 0; i < NCLIENTS; i++) {
        struct client *c = &w->cl[i];
        const struct px_client *cl;
        ssize_t n;
        long used;

        if (!c->alive)
            continue;
        /* A read costs a system call: only when the proxy sent it bytes
         * (or closed it). */
        cl = proxy_side(w, c);
        if (cl && cl->conn.bytes_out == c->seen_out)
            continue;
        if (cl)
            c->seen_out = cl->conn.bytes_out;
        for (;;) {
            n = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
            if (n <= 0)
                break;
            c->inlen += (size_t)n;
        }
        if (n == 0) {
            tr("c%u closed by the proxy", i);
            close(c->fd);
            c->alive = false;
            continue;
        }
        while (c->inlen > 0) {
            struct val v;

            used = parse_val(c->in, c->inlen, &v, 0);
            if (used == 0)
                break;
            if (used < 0) {
                violation(w, "c%u: unparsable reply", i);
                c->inlen = 0;
                break;
            }
            memmove(c->in, c->in + used, c->inlen - (size_t)used);
            c->inlen -= (size_t)used;
            on_reply(w, i, c, &v);
        }
    }
}

/* ---- the checker: each step against the model --------------------------------- */

static void check_holds(struct world *w)
{
    unsigned i, k, believers[NNAMES] = {0};

    for (i = 0; i < NCLIENTS; i++) {
        struct client *c = &w->cl[i];

        for (k = 0; c->alive && k < NNAMES; k++) {
            struct belief *b = &c->b[k];
            long long cnt = 0;
            bool have;

            end_lease(b);
            if (b->count == 0 || b->told_lost || b->model_lost || lease_over(b))
                continue;
            if (c->op != OP_NONE && c->op != OP_SUB && c->name == k)
                continue; /* its own command on the name is in flight */
            have = fr_hget_int(w->redis, now_ms(), names[k], c->owner, &cnt);
            /* A release Redis did not answer is carried out by the proxy
             * (jobs.c retries it): Redis may count more until it lands. */
            if (have &&
                (cnt == b->count || b->dirty || (cnt > b->count && px_jobs_busy(w->srv->engine))))
                continue;
            if (have && cnt != b->count && w->epoch != b->last_epoch) {
                /* Only re-entries (or unlocks answered :0) went with the
                 * failover: the lock is still the holder's (Redis's UNLOCK
                 * answers say how much is left), so counts may differ but
                 * nothing was lost. An acknowledged unlock lost so is
                 * asynchronous replication's window (--sync-replicas). */
                tr("c%u: re-entries or unlocks of its hold of '%s' rolled back by a failover", i,
                   names[k]);
                b->dirty = true;
                continue;
            }
            if (have) {
                violation(w, "c%u believes %d holds of '%s', Redis counts %lld", i, b->count,
                          names[k], cnt);
                continue;
            }
            if (w->epoch != b->epoch) {
                tr("c%u: its hold of '%s' is gone with a restart or failover", i, names[k]);
                b->model_lost = true;
            } else if (fr_expired_since(w->redis, names[k], b->since_ms)) {
                tr("c%u: its hold of '%s' expired in Redis", i, names[k]);
                b->model_lost = true;
            } else if (b->dirty) {
                b->model_lost = true;
            } else {
                violation(w,
                          "c%u believes it holds '%s', but Redis dropped it (not by expiry "
                          "or data loss)",
                          i, names[k]);
            }
        }
    }
    /* Who believes it holds, its loss neither told nor seen: the checks
     * above flag any way there to be two (a hold dropped by a script), so
     * this restates the mutual exclusion they protect. */
    for (i = 0; i < NCLIENTS; i++) {
        for (k = 0; w->cl[i].alive && k < NNAMES; k++) {
            const struct belief *b = &w->cl[i].b[k];

            const struct client *c = &w->cl[i];
            bool busy = c->op != OP_NONE && c->op != OP_SUB && c->name == k;

            believers[k] +=
                b->count > 0 && !b->told_lost && !b->model_lost && !lease_over(b) && !busy;
        }
    }
    for (k = 0; k < NNAMES; k++)
        if (believers[k] > 1)
            violation(w, "%u clients believe they hold '%s' at once", believers[k], names[k]);
}

/* ---- steps ---------------------------------------------------------------------- */

static void client_act(struct world *w, unsigned i)
{
    struct client *c = &w->cl[i];
    unsigned k = below(NNAMES);
    struct belief *b = &c->b[k];

    if (!c->alive) {
        if (chance(30))
            client_connect(w, i);
        return;
    }
    if (c->op != OP_NONE) {
        if (chance(3))
            client_disconnect(w, i);
        return;
    }
    if (chance(2)) {
        client_disconnect(w, i);
        return;
    }
    c->name = k;
    if (b->count > 0 && (b->told_lost || chance(60))) {
        c->op = OP_UNLOCK;
        tr("c%u UNLOCK %s", i, names[k]);
        client_send(w, c, "UNLOCK %s", names[k]);
        return;
    }
    /* A re-entry keeps the hold's mode (a LEASE re-entry of a watchdog
     * hold, or the reverse, changes the lease of the whole hold: not
     * modelled by the beliefs). */
    if (b->count > 0)
        c->lease = b->lease_end ? 200 + below(3000) : 0;
    else
        c->lease = chance(40) ? 200 + below(3000) : 0;
    if (chance(50)) {
        c->op = OP_TRYLOCK;
        tr("c%u TRYLOCK %s lease %u", i, names[k], c->lease);
        if (c->lease)
            client_send(w, c, "TRYLOCK %s LEASE %u", names[k], c->lease);
        else
            client_send(w, c, "TRYLOCK %s", names[k]);
    } else {
        unsigned wait = below(2000);

        c->op = OP_LOCK;
        tr("c%u LOCK %s lease %u wait %u", i, names[k], c->lease, wait);
        if (c->lease)
            client_send(w, c, "LOCK %s LEASE %u WAIT %u", names[k], c->lease, wait);
        else
            client_send(w, c, "LOCK %s WAIT %u", names[k], wait);
    }
}

static void advance(struct world *w, uint64_t ms)
{
    unsigned k;
    uint64_t sent;

    now_ns += ms * 1000000u;
    w->poked = true;
    /* The real pool's request timeout: the oldest reply waited too long,
     * the connection is recycled, every request on it fails. */
    for (k = 0; k < fp_nconns(w->pool); k++) {
        if (fp_oldest(w->pool, k, &sent) && now_ms() - sent >= UPSTREAM_TIMEOUT_MS) {
            tr("upstream conn %u times out (%u requests)", k, fp_queued(w->pool, k));
            w->upsets++;
            fp_fail(w->pool, k, -ETIMEDOUT);
        }
    }
    if (w->down_until && now_ms() >= w->down_until) {
        w->down_until = 0;
        tr("upstream back up%s", w->pending_restarted ? " (new run_id)" : "");
        fp_up(w->pool, w->pending_restarted);
        w->up_since = now_ms();
        w->pending_restarted = false;
    }
}

static void go_down(struct world *w, uint64_t ms, bool restarted)
{
    w->upsets++;
    fp_down(w->pool);
    w->down_until = now_ms() + ms;
    w->pending_restarted = w->pending_restarted || restarted;
}

static void fault(struct world *w)
{
    unsigned r = below(100);
    unsigned k = below(fp_nconns(w->pool));

    if (!fp_is_up(w->pool))
        return;
    if (r < 35) {
        tr("upstream conn %u reset (%u requests, %u not run)", k, fp_queued(w->pool, k),
           fp_unexecuted(w->pool, k));
        w->upsets++;
        fp_fail(w->pool, k, -ECONNRESET);
    } else if (r < 60) {
        uint64_t ms = 10 + below(4000);

        tr("upstream down for %llu ms", (unsigned long long)ms);
        go_down(w, ms, false);
    } else if (r < 75) {
        tr("Redis restarts: keyspace lost");
        fr_flush(w->redis);
        w->epoch++;
        go_down(w, 5 + below(500), true);
    } else if (r < 90) {
        tr("failover to the replica (its copy lags)");
        fr_set_db(w->redis, w->replica);
        w->replica = fr_db_copy(fr_db(w->redis));
        w->epoch++;
        go_down(w, 5 + below(500), true);
    } else {
        tr("replica catches up");
        fr_db_free(w->replica);
        w->replica = fr_db_copy(fr_db(w->redis));
    }
}

/* Redis serves one request, or a reply comes back, or a pub/sub event. */
static void upstream_act(struct world *w)
{
    unsigned n = fp_nconns(w->pool), k = below(n), r = below(100);
    size_t msgs = fp_msgs(w->pool);

    if (r < 45) {
        char what[120];

        if (fp_describe_next(w->pool, k, what, sizeof(what)) > 0 && fp_execute(w->pool, k)) {
            tot_execs++;
            tr("Redis runs on conn %u: %s", k, what);
        }
    } else if (r < 85) {
        if (fp_deliver(w->pool, k)) {
            tr("reply delivered on conn %u", k);
            w->poked = true;
        }
    } else if (msgs > 0) {
        tr("pub/sub event delivered");
        w->poked = true;
        fp_deliver_msg(w->pool, below((unsigned)msgs));
    }
}

static void step(struct world *w)
{
    unsigned r = below(1000);

    if (r < 300)
        client_act(w, below(NCLIENTS));
    else if (r < 850)
        upstream_act(w);
    else if (r < 975 || no_faults)
        advance(w, chance(80) ? 1 + below(50) : 100 + below(no_faults ? 200 : WATCHDOG_MS));
    else
        fault(w), w->poked = true;
    if (w->poked) {
        run_loop(w);
        read_replies(w);
    }
    check_holds(w);
    tot_steps++;
}

/* Everything settles: the upstream up, every request served, messages
 * delivered, every client gone, time past every lease. Then the keyspace
 * must hold nothing of the proxy's. */
static void settle_serve(struct world *w)
{
    unsigned k;

    for (k = 0; k < fp_nconns(w->pool); k++) {
        while (fp_execute(w->pool, k))
            ;
        while (fp_deliver(w->pool, k))
            ;
    }
    while (fp_deliver_msg(w->pool, 0))
        ;
    run_loop(w);
}

static bool settle_quiet(const struct world *w)
{
    unsigned k;

    for (k = 0; k < fp_nconns(w->pool); k++)
        if (fp_queued(w->pool, k) > 0)
            return false;
    return fp_msgs(w->pool) == 0 && !px_jobs_busy(w->srv->engine) && w->srv->nclients == 0 &&
           fp_is_up(w->pool);
}

static void settle(struct world *w)
{
    unsigned i, round, quiet;
    size_t nkeys;

    for (i = 0; i < NCLIENTS; i++)
        if (w->cl[i].alive)
            client_disconnect(w, i);
    /* Serve everything, 50 ms at a time, until nothing is queued, due or
     * connected; then past every lease (the longest: a watchdog lease,
     * or a LEASE of up to 3.2 s) and serve what that brings. */
    for (round = 0, quiet = 0; round < 400 && quiet < 3; round++) {
        advance(w, 50);
        settle_serve(w);
        quiet = settle_quiet(w) ? quiet + 1 : 0;
    }
    advance(w, WATCHDOG_MS + 4000);
    for (round = 0; round < 5; round++) {
        settle_serve(w);
        advance(w, 50);
    }
    nkeys = fr_db_size(w->redis, now_ms());
    if (nkeys > 0) {
        violation(w, "%zu key(s) left in Redis after every client went and every lease ended",
                  nkeys);
        fr_dump(w->redis, now_ms());
    }
}

static void world_start(struct world *w, uint64_t seed)
{
    struct px_opts o;
    unsigned i;

    memset(w, 0, sizeof(*w));
    w->seed = seed;
    w->redis = g_redis;
    rng_state = seed * 0x2545f4914f6cdd1dull + 1;
    now_ns = 1000000000000ull;
    ntrace = 0;
    fr_flush(g_redis);
    fr_forget_expiries(g_redis);
    w->replica = fr_db_copy(fr_db(g_redis));
    px_opts_default(&o);
    o.nlisten = 0;
    o.io = SCHED_IO_EPOLL;
    o.watchdog_ms = WATCHDOG_MS;
    o.upstream_timeout_ms = UPSTREAM_TIMEOUT_MS;
    o.pool_size = 2;
    o.log_level = LOG_LVL_ERROR;
    o.max_clients = 64;
    if (px_server_create(&w->srv, &o) < 0) {
        fprintf(stderr, "lp_sim: px_server_create failed\n");
        exit(2);
    }
    /* A fixed owner prefix: the same seed gives the same keys. */
    snprintf(w->srv->uuid, sizeof(w->srv->uuid), "00000000-0000-4000-8000-%012llx",
             (unsigned long long)(seed & 0xffffffffffffull));
    w->pool = fp_pool();
    for (i = 0; i < NCLIENTS; i++)
        client_connect(w, i);
}

static void world_stop(struct world *w)
{
    unsigned i;

    px_client_close_all(w->srv);
    for (i = 0; i < 10; i++)
        sched_loop_run_once(w->srv->loop, 0);
    pool_stop(w->pool);
    px_server_destroy(w->srv);
    fr_db_free(w->replica);
}

static void trace_submit(unsigned conn, const char *what)
{
    tr("proxy sends on conn %u: %s", conn, what);
}

static void note_finding(const char *what)
{
    unsigned i;

    for (i = 0; i < nfound_kinds; i++) {
        if (strcmp(found_what[i], what) == 0) {
            found[i]++;
            return;
        }
    }
    if (nfound_kinds < 16) {
        found_what[nfound_kinds] = strdup(what);
        found[nfound_kinds++] = 1;
    }
}

/* Runs one seed; returns true when every check held. */
static bool run_seed(uint64_t seed, unsigned steps, bool print_trace)
{
    static struct world w;
    unsigned s, t, first;
    char kind[96];

    world_start(&w, seed);
    for (s = 0; s < steps && !w.failure[0]; s++) {
        w.step = s;
        step(&w);
    }
    if (!w.failure[0])
        settle(&w);
    world_stop(&w);
    if (!w.failure[0])
        return true;
    /* The class of the finding: the message up to its first quote. */
    snprintf(kind, sizeof(kind), "%.95s", w.failure);
    for (t = 0; kind[t]; t++) {
        if (kind[t] == '\'') {
            kind[t] = '\0';
            break;
        }
    }
    note_finding(strchr(kind, ' ') ? strchr(kind, ' ') + 1 : kind);
    fprintf(stderr, "lp_sim: seed %llu FAILED at step %u: %s\n", (unsigned long long)seed, w.step,
            w.failure);
    if (print_trace) {
        first = ntrace > TRACE_LINES ? ntrace - TRACE_LINES : 0;
        fprintf(stderr, "trace (last %u lines; replay: lp_sim --seed %llu --steps %u -v):\n",
                ntrace - first, (unsigned long long)seed, steps);
        for (t = first; t < ntrace; t++)
            fprintf(stderr, "  %s\n", trace[t % TRACE_LINES]);
        fprintf(stderr, "Redis now:\n");
        fr_dump(g_redis, now_ms());
    }
    return false;
}

static void usage(void)
{
    fprintf(stderr, "usage: lp_sim [--seeds N] [--first S] [--steps M] [--seed N] [--seconds T] "
                    "[--keep-going] [--no-faults] [-v]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    uint64_t seeds = 1000, first = 1, one = 0, t0, seed, failed = 0, ran = 0;
    unsigned steps = 400, seconds = 0, i;
    bool single = false, keep_going = false;
    struct timespec ts;
    double el;

    for (i = 1; i < (unsigned)argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < (unsigned)argc)
            seeds = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--first") == 0 && i + 1 < (unsigned)argc)
            first = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--steps") == 0 && i + 1 < (unsigned)argc)
            steps = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < (unsigned)argc)
            one = strtoull(argv[++i], NULL, 10), single = true;
        else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < (unsigned)argc)
            seconds = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--keep-going") == 0)
            keep_going = true;
        else if (strcmp(argv[i], "--no-faults") == 0)
            no_faults = true;
        else if (strcmp(argv[i], "-v") == 0)
            verbose = true;
        else
            usage();
    }
    log_set_level(LOG_LVL_ERROR);
    clock_fake = &sim_clock;
    if (fr_create(&g_redis, NULL, NULL) < 0)
        return 2;
    fp_configure(now_ms, g_redis);
    fp_set_trace(trace_submit);
    if (single)
        return run_seed(one, steps, true) ? 0 : 1;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t0 = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    for (seed = first;; seed++) {
        if (seconds == 0 && seed >= first + seeds)
            break;
        if (seconds && (seed - first) % 64 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            if ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - t0 >=
                (uint64_t)seconds * 1000000000u)
                break;
        }
        ran++;
        if (!run_seed(seed, steps, failed == 0)) {
            failed++;
            if (!keep_going)
                break;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    el = (double)((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - t0) / 1e9;
    printf("lp_sim: %llu seeds x %u steps in %.2f s (%.0f seeds/s, %.0f steps/s, %llu Redis "
           "runs), %llu failed\n",
           (unsigned long long)ran, steps, el, (double)ran / el, (double)tot_steps / el,
           (unsigned long long)tot_execs, (unsigned long long)failed);
    for (i = 0; i < nfound_kinds; i++)
        printf("  %llu x %s\n", (unsigned long long)found[i], found_what[i]);
    fr_destroy(g_redis);
    return failed ? 1 : 0;
}
