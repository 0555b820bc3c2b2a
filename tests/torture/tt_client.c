/* Torture suite: one client process (forked by the driver).
 *
 * A workload client loops until shm->stop: picks an acquire (LOCK with or
 * without LEASE, LOCK ... FENCED, RLOCK, WLOCK, FAIRLOCK, SEM.ACQUIRE),
 * always with a WAIT; when granted it updates the resource under the lock
 * (unfenced: GET, sleep, SET+1; fenced: a token-checked read and write;
 * readers only read; permits only sleep), then releases. A scripted client
 * (the timed scenarios) sends one given acquire at a given time, holds,
 * releases and exits.
 *
 * Every operation is logged as an "S" line before it is sent and an "R"
 * line when answered (see tt.h); a connection that died is logged as the
 * reply conn-lost, and the next operation reconnects. A release attempted
 * without a connection is logged (S and R conn-lost) without being sent,
 * so the checker knows the holder was told.
 *
 * Faults acted on here: SIGUSR1 resets the proxy connection (SO_LINGER 0,
 * then the descriptor is replaced with an unconnected socket, so the kernel
 * sends RST and hiredis fails the blocked call); `want` in the slot asks
 * for a stop past the lease or a reset while holding. The process exits
 * with _exit only: it inherited the driver's exit handlers, which kill the
 * servers. */
#include <sys/prctl.h>
#include <sys/socket.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "tt.h"

#define OP_TIMEOUT_EXTRA_MS 25000 /* beyond WAIT: the checker's bound is far smaller */
#define CONNECT_TIMEOUT_MS  1000
#define RELEASE_RETRY_MS    10000 /* retry a release that failed upstream this long */

/* Resource scripts (resource Redis). The fenced ones take the lock's
 * fencing token and refuse any token below the highest seen (on reads as
 * well as writes, so a stale holder cannot read-modify-write between a
 * newer holder's read and write). */
static const char uset_lua[] =
    "redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])";
static const char fread_lua[] =
    "local hi = tonumber(redis.call('get', KEYS[2]) or '-1'); local t = tonumber(ARGV[1]); "
    "if t < hi then redis.call('incr', KEYS[3]); "
    "return redis.error_reply('STALE token ' .. t .. ' < ' .. hi); end; "
    "redis.call('set', KEYS[2], t); return tonumber(redis.call('get', KEYS[1]) or '0')";
static const char fwrite_lua[] =
    "local hi = tonumber(redis.call('get', KEYS[2]) or '-1'); local t = tonumber(ARGV[1]); "
    "if t < hi then redis.call('incr', KEYS[4]); "
    "return redis.error_reply('STALE token ' .. t .. ' < ' .. hi); end; "
    "redis.call('set', KEYS[2], t); redis.call('set', KEYS[1], ARGV[2]); "
    "return redis.call('incr', KEYS[3])";

/* One planned acquire and hold. */
struct plan {
    enum tt_cmd cmd;
    char name[TT_NAME_MAX];
    int lease_ms; /* 0: none (watchdog) */
    int wait_ms;  /* -1: none (wait forever) */
    int hold_ms;
};

struct client {
    const struct tt_client_cfg *cfg; /* borrowed */
    struct tt_rng rng;
    redisContext *px;  /* owned: proxy connection, or NULL */
    redisContext *res; /* owned: resource Redis connection */
    int log_fd;
    int seq;
    char text[TT_TEXT_MAX]; /* the last proxy reply's text */
    bool aux;               /* a second connection (shared OWNER): not the reset target */
    int group;              /* shared OWNER group logged with each op, 0: none */
    struct client *twin;    /* owned: the second connection (issue-18 workload), or NULL */
    int episodes;           /* shared-owner episodes so far (group numbers) */
};

static volatile int g_px_fd = -1; /* the proxy socket, for the reset handler */
static int g_placeholder = -1;    /* an unconnected socket put in its place */
static volatile sig_atomic_t g_was_reset;

/* SIGUSR1: an abrupt reset of the proxy connection (RST on close). */
static void on_reset_signal(int sig)
{
    struct linger lg = {1, 0};
    int fd = g_px_fd;

    (void)sig;
    if (fd < 0)
        return;
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    dup2(g_placeholder, fd);
    g_was_reset = 1;
}

static void block_reset(bool block)
{
    sigset_t s;

    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(block ? SIG_BLOCK : SIG_UNBLOCK, &s, NULL);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "torture client: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    _exit(3);
}

/* ---- log ------------------------------------------------------------------- */

static void log_line(struct client *c, const char *buf, int n)
{
    if (n > 0 && write(c->log_fd, buf, (size_t)n) != n)
        die("log write: %s", strerror(errno));
}

static int log_send(struct client *c, enum tt_cmd cmd, const char *name, int lease, int wait)
{
    char buf[256];
    int seq = ++c->seq;
    int n = c->group > 0
                ? snprintf(buf, sizeof(buf), "S %d %lld %d %d %s %d %d %d\n", seq, tt_now_us(),
                           (int)cmd, c->cfg->proxy, name, lease, wait, c->group)
                : snprintf(buf, sizeof(buf), "S %d %lld %d %d %s %d %d\n", seq, tt_now_us(),
                           (int)cmd, c->cfg->proxy, name, lease, wait);

    log_line(c, buf, n);
    return seq;
}

static void log_reply(struct client *c, int seq, enum tt_res res, long long val, const char *text)
{
    char buf[256], clean[TT_TEXT_MAX];
    size_t i;
    int n;

    for (i = 0; text && text[i] && i + 1 < sizeof(clean); i++)
        clean[i] = (text[i] == '\n' || text[i] == '\r') ? ' ' : text[i];
    clean[i] = '\0';
    n = snprintf(buf, sizeof(buf), "R %d %lld %d %lld %s\n", seq, tt_now_us(), (int)res, val,
                 clean);
    log_line(c, buf, n);
}

/* ---- connections ------------------------------------------------------------- */

static redisContext *connect_port(int port)
{
    struct timeval tv = {0, CONNECT_TIMEOUT_MS * 1000};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", port, tv);

    if (ctx && ctx->err) {
        redisFree(ctx);
        return NULL;
    }
    return ctx;
}

static void px_drop(struct client *c)
{
    block_reset(true);
    if (!c->aux)
        g_px_fd = -1;
    if (c->px)
        redisFree(c->px);
    c->px = NULL;
    block_reset(false);
}

static bool px_connect(struct client *c)
{
    redisContext *ctx;

    if (c->px)
        return true;
    ctx = connect_port(c->cfg->proxy_port);
    if (!ctx)
        return false;
    block_reset(true);
    c->px = ctx;
    if (!c->aux) {
        g_px_fd = ctx->fd;
        g_was_reset = 0;
    }
    block_reset(false);
    return true;
}

static void set_timeout(redisContext *ctx, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    redisSetTimeout(ctx, tv);
}

/* ---- replies ------------------------------------------------------------------ */

static bool err_is(const redisReply *r, const char *prefix)
{
    return strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static enum tt_res classify_error(const redisReply *r)
{
    if (err_is(r, "LOCKLOST"))
        return TT_R_LOCKLOST;
    if (err_is(r, "NOTOWNER"))
        return TT_R_NOTOWNER;
    if (err_is(r, "UPSTREAM"))
        return TT_R_UPSTREAM;
    if (err_is(r, "STALE"))
        return TT_R_STALE;
    return TT_R_ERR;
}

/* Classifies r (NULL: the context failed) into *val and text. */
static enum tt_res classify(redisContext *ctx, redisReply *r, enum tt_cmd cmd, long long *val,
                            char *text, size_t tn)
{
    *val = 0;
    text[0] = '\0';
    if (!r) {
        snprintf(text, tn, "%.60s", ctx->errstr);
        /* hiredis reports its read timeout as EAGAIN's text */
        return ctx->err == REDIS_ERR_IO && strstr(ctx->errstr, "temporarily") ? TT_R_TIMEOUT
                                                                              : TT_R_CONN;
    }
    switch (r->type) {
    case REDIS_REPLY_STATUS:
        snprintf(text, tn, "%s", r->str);
        return strcmp(r->str, "OK") == 0 ? TT_R_OK : TT_R_ERR;
    case REDIS_REPLY_INTEGER:
        *val = r->integer;
        return cmd == TT_FENCED ? TT_R_TOKEN : TT_R_INT;
    case REDIS_REPLY_NIL:
        return TT_R_NIL;
    case REDIS_REPLY_STRING:
        *val = strtoll(r->str, NULL, 10);
        return TT_R_STR;
    case REDIS_REPLY_ERROR:
        snprintf(text, tn, "%s", r->str);
        return classify_error(r);
    default:
        snprintf(text, tn, "unexpected reply type %d", r->type);
        return TT_R_ERR;
    }
}

/* Sends argv on the proxy connection and logs it; reconnects first if
 * needed. A release with no connection is logged as conn-lost unsent.
 * The reply's text goes to c->text. */
static enum tt_res px_op(struct client *c, enum tt_cmd cmd, const char *name, int lease, int wait,
                         int argc, const char **argv, long long *val)
{
    char *text = c->text;
    enum tt_res res;
    redisReply *r;
    int seq;

    text[0] = '\0';
    if (!c->px && tt_cmd_is_release(cmd)) {
        seq = log_send(c, cmd, name, lease, wait);
        log_reply(c, seq, TT_R_CONN, 0, "no connection (it died while holding)");
        return TT_R_CONN;
    }
    if (!px_connect(c))
        return TT_R_NONE; /* proxy down: nothing sent, nothing logged */
    set_timeout(c->px, (wait > 0 ? wait : 0) + OP_TIMEOUT_EXTRA_MS);
    seq = log_send(c, cmd, name, lease, wait);
    r = redisCommandArgv(c->px, argc, argv, NULL);
    res = classify(c->px, r, cmd, val, text, sizeof(c->text));
    log_reply(c, seq, res, *val, text);
    if (r)
        freeReplyObject(r);
    else
        px_drop(c);
    return res;
}

/* A command on the resource Redis, logged. */
static enum tt_res res_op(struct client *c, enum tt_cmd cmd, const char *name, int argc,
                          const char **argv, long long *val)
{
    char text[TT_TEXT_MAX];
    enum tt_res res;
    redisReply *r;
    int seq = log_send(c, cmd, name, 0, 0);

    r = redisCommandArgv(c->res, argc, argv, NULL);
    res = classify(c->res, r, cmd, val, text, sizeof(text));
    log_reply(c, seq, res, *val, text);
    if (!r)
        die("resource Redis connection failed: %s", c->res->errstr);
    freeReplyObject(r);
    return res;
}

/* ---- acquire / release ---------------------------------------------------------- */

static const char *acquire_word(enum tt_cmd cmd)
{
    static const char *const words[] = {"LOCK",  "LOCK",     "RLOCK",
                                        "WLOCK", "FAIRLOCK", "SEM.ACQUIRE"};

    return words[cmd];
}

static enum tt_cmd release_of(enum tt_cmd acq)
{
    static const enum tt_cmd rel[] = {TT_UNLOCK,  TT_UNLOCK,     TT_RUNLOCK,
                                      TT_WUNLOCK, TT_FAIRUNLOCK, TT_SEM_REL};

    return rel[acq];
}

static enum tt_res do_acquire(struct client *c, const struct plan *p, long long *token)
{
    char lease[16], wait[16];
    const char *argv[10];
    int n = 0;

    argv[n++] = acquire_word(p->cmd);
    argv[n++] = p->name;
    if (p->cmd == TT_SEM_ACQ)
        argv[n++] = "1";
    if (p->cmd == TT_FENCED)
        argv[n++] = "FENCED";
    if (p->lease_ms > 0 && p->cmd != TT_SEM_ACQ) {
        snprintf(lease, sizeof(lease), "%d", p->lease_ms);
        argv[n++] = "LEASE";
        argv[n++] = lease;
    }
    if (p->wait_ms >= 0) {
        snprintf(wait, sizeof(wait), "%d", p->wait_ms);
        argv[n++] = "WAIT";
        argv[n++] = wait;
    }
    return px_op(c, p->cmd, p->name, p->lease_ms, p->wait_ms, n, argv, token);
}

/* Releases, retrying while the proxy answers UPSTREAM (the release did
 * not happen, or may not have): a client that gave up would leave the
 * lock held, renewed by the watchdog, for as long as its connection lives.
 * SEM.RELEASE is not idempotent, so it is retried only when it surely did
 * not happen (Redis unavailable, not "outcome unknown"). owner: an OWNER
 * token, or NULL. Returns the last answer. */
static enum tt_res do_release_owner(struct client *c, const struct plan *p, const char *owner)
{
    static const char *const words[] = {"UNLOCK", "RUNLOCK", "WUNLOCK", "FAIRUNLOCK",
                                        "SEM.RELEASE"};
    enum tt_cmd rel = release_of(p->cmd);
    const char *argv[4] = {words[rel - TT_UNLOCK], p->name, "1", NULL};
    long long val, deadline = tt_now_us() + RELEASE_RETRY_MS * 1000ll;
    int argc = rel == TT_SEM_REL ? 3 : 2;
    enum tt_res res;

    if (owner) {
        argv[2] = "OWNER";
        argv[3] = owner;
        argc = 4;
    }
    for (;;) {
        res = px_op(c, rel, p->name, p->lease_ms, -1, argc, argv, &val);
        if (res != TT_R_UPSTREAM || tt_now_us() > deadline ||
            (rel == TT_SEM_REL && strstr(c->text, "outcome unknown")))
            break;
        tt_sleep_us(100000);
    }
    if (res == TT_R_NONE) { /* the proxy went away between grant and release */
        int seq = log_send(c, rel, p->name, p->lease_ms, -1);

        log_reply(c, seq, TT_R_CONN, 0, "proxy unreachable at release");
    }
    return res;
}

static enum tt_res do_release(struct client *c, const struct plan *p)
{
    return do_release_owner(c, p, NULL);
}

/* ---- the work under the lock ----------------------------------------------------- */

static void key_of(char *out, size_t n, const char *prefix, const char *name)
{
    snprintf(out, n, "%s:%s", prefix, name);
}

/* Stops this process holding a LEASE'd lock if the driver asked for it;
 * the driver sends SIGCONT after the lease ran out. */
static void maybe_stop_holding(struct client *c, const struct plan *p)
{
    struct tt_slot *s = c->cfg->slot;

    if (atomic_load(&s->want) != TT_WANT_STOP_HOLD || p->lease_ms <= 0)
        return;
    atomic_store(&s->stop_lease_ms, p->lease_ms);
    atomic_store(&s->stopped_us, tt_now_us());
    atomic_store(&s->self_stopped, 1);
    raise(SIGSTOP);
    atomic_store(&s->self_stopped, 0);
    atomic_store(&s->want, TT_WANT_NONE);
}

static void unfenced_update(struct client *c, const struct plan *p)
{
    char k[TT_NAME_MAX + 8], kw[TT_NAME_MAX + 8], v[24];
    const char *get[2] = {"GET", k};
    const char *set[6] = {"EVAL", uset_lua, "2", k, kw, v};
    long long val = 0;

    key_of(k, sizeof(k), "u", p->name);
    key_of(kw, sizeof(kw), "uw", p->name);
    res_op(c, TT_RES_GET, p->name, 2, get, &val);
    maybe_stop_holding(c, p);
    tt_sleep_us((long long)p->hold_ms * 1000);
    snprintf(v, sizeof(v), "%lld", val + 1);
    res_op(c, TT_RES_SET, p->name, 6, set, &val);
}

static void fenced_update(struct client *c, const struct plan *p, long long token)
{
    char k[TT_NAME_MAX + 8], khi[TT_NAME_MAX + 8], kw[TT_NAME_MAX + 8], krej[TT_NAME_MAX + 8];
    char t[24], v[24];
    const char *rd[7] = {"EVAL", fread_lua, "3", k, khi, krej, t};
    const char *wr[9] = {"EVAL", fwrite_lua, "4", k, khi, kw, krej, t, v};
    long long val = 0;

    key_of(k, sizeof(k), "f", p->name);
    key_of(khi, sizeof(khi), "fhi", p->name);
    key_of(kw, sizeof(kw), "fw", p->name);
    key_of(krej, sizeof(krej), "frej", p->name);
    snprintf(t, sizeof(t), "%lld", token);
    if (res_op(c, TT_RES_FREAD, p->name, 7, rd, &val) != TT_R_INT) {
        tt_sleep_us((long long)p->hold_ms * 1000);
        return; /* stale already: a fenced client writes nothing */
    }
    maybe_stop_holding(c, p);
    tt_sleep_us((long long)p->hold_ms * 1000);
    snprintf(v, sizeof(v), "%lld", val + 1);
    res_op(c, TT_RES_FWRITE, p->name, 9, wr, &val);
}

static void read_only(struct client *c, const struct plan *p)
{
    char k[TT_NAME_MAX + 8];
    const char *get[2] = {"GET", k};
    long long val;

    key_of(k, sizeof(k), "u", p->name);
    res_op(c, TT_RES_GET, p->name, 2, get, &val);
    maybe_stop_holding(c, p);
    tt_sleep_us((long long)p->hold_ms * 1000);
}

/* Resets the proxy connection if the driver asked for a reset while
 * holding; the release then finds no connection. */
static void maybe_reset_holding(struct client *c)
{
    struct tt_slot *s = c->cfg->slot;

    if (atomic_load(&s->want) != TT_WANT_RESET_HOLD)
        return;
    raise(SIGUSR1); /* the handler resets the connection at once */
    atomic_store(&s->want, TT_WANT_NONE);
}

static enum tt_res hold_and_release(struct client *c, const struct plan *p, long long token)
{
    struct tt_slot *s = c->cfg->slot;
    enum tt_res res;

    atomic_store(&s->state, TT_ST_HOLDING);
    maybe_reset_holding(c);
    if (p->cmd == TT_FENCED)
        fenced_update(c, p, token);
    else if (p->cmd == TT_RLOCK)
        read_only(c, p);
    else if (p->cmd == TT_SEM_ACQ)
        tt_sleep_us((long long)p->hold_ms * 1000);
    else
        unfenced_update(c, p);
    if (c->px && g_was_reset)
        px_drop(c); /* reset while holding: the release finds no connection */
    res = do_release(c, p);
    atomic_store(&s->state, TT_ST_IDLE);
    return res;
}

/* ---- workload -------------------------------------------------------------------- */

static void plan_normal(struct client *c, struct plan *p)
{
    struct tt_rng *r = &c->rng;
    int pick = tt_rng_range(r, 0, 99);

    p->lease_ms = 0;
    if (pick < 25 || pick >= 90) {
        p->cmd = pick < 25 ? TT_LOCK : TT_FENCED;
        snprintf(p->name, sizeof(p->name), "tt:lock:%d", tt_rng_range(r, 0, TT_LOCK_NAMES - 1));
    } else if (pick < 45) {
        p->cmd = pick < 35 ? TT_RLOCK : TT_WLOCK;
        snprintf(p->name, sizeof(p->name), "tt:rw:%d", tt_rng_range(r, 0, TT_RW_NAMES - 1));
    } else if (pick < 65) {
        p->cmd = TT_FAIRLOCK;
        snprintf(p->name, sizeof(p->name), "tt:fair:%d", tt_rng_range(r, 0, TT_FAIR_NAMES - 1));
    } else if (pick < 80) {
        p->cmd = TT_SEM_ACQ;
        snprintf(p->name, sizeof(p->name), "%s", TT_SEM_NAME);
    } else {
        p->cmd = TT_FENCED;
        snprintf(p->name, sizeof(p->name), "tt:lock:%d", tt_rng_range(r, 0, TT_LOCK_NAMES - 1));
    }
    /* A LEASE above WAIT + hold: the client-visible deadline (send +
     * LEASE) only passes under a fault. */
    if (p->cmd != TT_SEM_ACQ && tt_rng_range(r, 0, 99) < 40)
        p->lease_ms = tt_rng_range(r, 3500, 4500);
    p->wait_ms = tt_rng_range(r, 200, 3000);
    p->hold_ms = tt_rng_range(r, 2, 40);
}

/* Negative control: every LEASE is shorter than the hold. */
static void plan_negative(struct client *c, struct plan *p)
{
    struct tt_rng *r = &c->rng;

    p->cmd = tt_rng_range(r, 0, 1) ? TT_FENCED : TT_LOCK;
    snprintf(p->name, sizeof(p->name), "tt:lock:%d", tt_rng_range(r, 0, TT_LOCK_NAMES - 1));
    p->lease_ms = tt_rng_range(r, 20, 60);
    p->wait_ms = 3000;
    p->hold_ms = tt_rng_range(r, 80, 150);
}

/* The driver asked this client to stop past its lease: a LEASE'd plain
 * or fenced lock, with a lease short enough to keep the fault short. */
static void plan_stop_hold(struct client *c, struct plan *p)
{
    p->cmd = tt_rng_range(&c->rng, 0, 1) ? TT_FENCED : TT_LOCK;
    snprintf(p->name, sizeof(p->name), "tt:lock:%d", tt_rng_range(&c->rng, 0, TT_LOCK_NAMES - 1));
    p->lease_ms = 1000;
    p->wait_ms = 3000;
    p->hold_ms = 5;
}

/* Runs one plan; true if its release was answered LOCKLOST (the issue-18
 * workload then re-locks at once). */
static bool run_one(struct client *c, const struct plan *p)
{
    struct tt_slot *s = c->cfg->slot;
    long long token = 0;
    enum tt_res res;
    bool lost = false;

    atomic_store(&s->lease_ms, p->lease_ms);
    atomic_store(&s->state, TT_ST_WAITING);
    res = do_acquire(c, p, &token);
    atomic_store(&s->state, TT_ST_IDLE);
    if (res == TT_R_OK || res == TT_R_TOKEN)
        lost = hold_and_release(c, p, token) == TT_R_LOCKLOST;
    else if (res == TT_R_NONE)
        tt_sleep_us(100000); /* proxy down: retry later */
    else if (res != TT_R_NIL)
        tt_sleep_us(50000); /* an error: back off as a real client would */
    atomic_fetch_add(&s->ops, 1);
    return lost;
}

/* ---- the issue-18 workload (--relock-workload) --------------------------------------
 *
 * Three kinds besides the plain ones, each a path the outside fault test
 * broke (issue 18):
 * - reenter: LOCK (watchdog lease), a long hold (it may straddle a
 *   partition or a stop, and the lease may end meanwhile), LOCK again on
 *   the same connection (a re-entry: TT_RELOCK), then UNLOCK once per
 *   grant. A lost first hold must show as LOCKLOST somewhere in that
 *   sequence; a release answered LOCKLOST makes any client lock again at
 *   once;
 * - shared: two connections take one name with one OWNER token (count 2,
 *   one owner: group); then the first releases, or closes its connection,
 *   or the second releases first; the other holds on and releases;
 * - multi: MULTILOCK of both plain names, hold, MULTIUNLOCK. */

enum kind { K_PLAIN = 0, K_REENTER, K_SHARED, K_MULTI };

static enum kind pick_kind(struct client *c)
{
    int pick = tt_rng_range(&c->rng, 0, 99);
    unsigned k = c->cfg->relock_kinds;
    enum kind want = pick < 15 ? K_REENTER : pick < 27 ? K_SHARED : pick < 37 ? K_MULTI : K_PLAIN;

    if (!c->cfg->relock || (want == K_REENTER && !(k & TT_K_REENTER)) ||
        (want == K_SHARED && !(k & TT_K_SHARED)) || (want == K_MULTI && !(k & TT_K_MULTI)))
        return K_PLAIN;
    return want;
}

static void plan_name_lock(struct client *c, struct plan *p)
{
    p->cmd = TT_LOCK;
    snprintf(p->name, sizeof(p->name), "tt:lock:%d", tt_rng_range(&c->rng, 0, TT_LOCK_NAMES - 1));
    p->lease_ms = 0;
    p->wait_ms = tt_rng_range(&c->rng, 200, 3000);
}

static enum tt_res lock_argv(struct client *c, enum tt_cmd cmd, const struct plan *p,
                             const char *owner)
{
    char wait[16];
    const char *argv[6] = {"LOCK", p->name, "WAIT", wait, "OWNER", owner};
    long long val;

    snprintf(wait, sizeof(wait), "%d", p->wait_ms);
    return px_op(c, cmd, p->name, 0, p->wait_ms, owner ? 6 : 4, argv, &val);
}

static bool granted(enum tt_res r)
{
    return r == TT_R_OK || r == TT_R_TOKEN;
}

static bool run_reenter(struct client *c, struct plan *p)
{
    struct tt_slot *s = c->cfg->slot;
    enum tt_res res, again, rel;
    bool lost;

    plan_name_lock(c, p);
    p->hold_ms = tt_rng_range(&c->rng, 300, 2500);
    atomic_store(&s->lease_ms, 0);
    atomic_store(&s->state, TT_ST_WAITING);
    res = lock_argv(c, TT_LOCK, p, NULL);
    atomic_store(&s->state, granted(res) ? TT_ST_HOLDING : TT_ST_IDLE);
    if (!granted(res)) {
        if (res != TT_R_NIL)
            tt_sleep_us(50000);
        return false;
    }
    maybe_reset_holding(c);
    if (c->px && g_was_reset)
        px_drop(c);
    tt_sleep_us((long long)p->hold_ms * 1000);
    again = c->px ? lock_argv(c, TT_RELOCK, p, NULL) : TT_R_CONN;
    rel = do_release(c, p);
    lost = rel == TT_R_LOCKLOST || again == TT_R_LOCKLOST;
    if (granted(again) && do_release(c, p) == TT_R_LOCKLOST)
        lost = true;
    atomic_store(&s->state, TT_ST_IDLE);
    return lost;
}

/* The second connection of c, logging as client TT_SHARED_CLIENT + id. */
static struct client *twin_of(struct client *c)
{
    struct client *t;

    if (c->twin)
        return c->twin;
    t = calloc(1, sizeof(*t));
    if (!t)
        die("out of memory");
    t->cfg = c->cfg;
    t->aux = true;
    t->log_fd = open(c->cfg->log_path2, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (t->log_fd < 0)
        die("cannot open %s: %s", c->cfg->log_path2, strerror(errno));
    c->twin = t;
    return t;
}

/* c closes its connection while holding (a plain close): logged as a
 * release that found no connection, so the checker ends c's hold there. */
static void close_holding(struct client *c, const struct plan *p)
{
    int seq;

    px_drop(c);
    seq = log_send(c, TT_UNLOCK, p->name, 0, -1);
    log_reply(c, seq, TT_R_CONN, 0, "closed its connection (shared OWNER)");
}

static bool run_shared(struct client *c, struct plan *p)
{
    struct tt_slot *s = c->cfg->slot;
    struct client *t = twin_of(c);
    int variant = tt_rng_range(&c->rng, 0, 2);
    enum tt_res r1, r2, last = TT_R_NONE;
    char owner[48];

    plan_name_lock(c, p);
    p->hold_ms = tt_rng_range(&c->rng, 20, 600);
    c->group = t->group = (c->cfg->id + 1) * 100000 + ++c->episodes;
    snprintf(owner, sizeof(owner), "tt-own-%d-%d", c->cfg->id, c->episodes);
    atomic_store(&s->lease_ms, 0);
    atomic_store(&s->state, TT_ST_WAITING);
    r1 = lock_argv(c, TT_LOCK, p, owner);
    atomic_store(&s->state, granted(r1) ? TT_ST_HOLDING : TT_ST_IDLE);
    if (granted(r1)) {
        maybe_reset_holding(c);
        if (c->px && g_was_reset)
            px_drop(c); /* its release finds no connection: logged conn-lost */
        r2 = lock_argv(t, TT_LOCK, p, owner);
        if (!granted(r2)) {
            tt_sleep_us((long long)p->hold_ms * 1000);
            last = do_release_owner(c, p, owner);
        } else if (variant == 0 || variant == 1) {
            if (variant == 0)
                do_release_owner(c, p, owner);
            else
                close_holding(c, p);
            tt_sleep_us((long long)p->hold_ms * 1000);
            last = do_release_owner(t, p, owner);
        } else {
            do_release_owner(t, p, owner);
            tt_sleep_us((long long)p->hold_ms * 1000);
            last = do_release_owner(c, p, owner);
        }
    } else if (r1 != TT_R_NIL) {
        tt_sleep_us(50000);
    }
    c->group = t->group = 0;
    atomic_store(&s->state, TT_ST_IDLE);
    return last == TT_R_LOCKLOST;
}

/* The reply to MULTIUNLOCK for one of its names: an error names the
 * first name that was not held (the others are released); without a name
 * in it, every name gets it. */
static enum tt_res multi_part(enum tt_res res, const char *text, const char *name,
                              const char *const *names, int n)
{
    bool named = false;

    if (res != TT_R_LOCKLOST && res != TT_R_NOTOWNER)
        return res;
    for (int i = 0; i < n; i++)
        named = named || strstr(text, names[i]) != NULL;
    return !named || strstr(text, name) ? res : TT_R_INT;
}

/* MULTILOCK or MULTIUNLOCK over names, logged as one op per name (S lines
 * before the send, R lines after). */
static enum tt_res px_multi(struct client *c, enum tt_cmd cmd, const char *const *names, int n,
                            int lease, int wait, int argc, const char **argv)
{
    int seq[TT_LOCK_NAMES];
    enum tt_res res;
    redisReply *r;
    long long val;

    if (!px_connect(c))
        return TT_R_NONE;
    set_timeout(c->px, (wait > 0 ? wait : 0) + OP_TIMEOUT_EXTRA_MS);
    for (int i = 0; i < n; i++)
        seq[i] = log_send(c, cmd, names[i], lease, wait);
    r = redisCommandArgv(c->px, argc, argv, NULL);
    res = classify(c->px, r, TT_MULTILOCK, &val, c->text, sizeof(c->text));
    for (int i = 0; i < n; i++) {
        enum tt_res part =
            cmd == TT_MULTIUNLOCK ? multi_part(res, c->text, names[i], names, n) : res;

        log_reply(c, seq[i], part, part == TT_R_INT && part != res ? 1 : val, c->text);
    }
    if (r)
        freeReplyObject(r);
    else
        px_drop(c);
    return res;
}

static bool run_multi(struct client *c, struct plan *p)
{
    static const char *const names[TT_LOCK_NAMES] = {"tt:lock:0", "tt:lock:1"};
    struct tt_slot *s = c->cfg->slot;
    char lease[16], wait[16];
    const char *argv[8] = {"MULTILOCK", names[0], names[1]};
    const char *un[3] = {"MULTIUNLOCK", names[0], names[1]};
    long long deadline;
    enum tt_res res;
    int argc = 3;

    p->lease_ms = tt_rng_range(&c->rng, 0, 99) < 40 ? tt_rng_range(&c->rng, 3500, 4500) : 0;
    p->wait_ms = tt_rng_range(&c->rng, 200, 3000);
    p->hold_ms = tt_rng_range(&c->rng, 2, 40);
    if (p->lease_ms > 0) {
        snprintf(lease, sizeof(lease), "%d", p->lease_ms);
        argv[argc++] = "LEASE";
        argv[argc++] = lease;
    }
    snprintf(wait, sizeof(wait), "%d", p->wait_ms);
    argv[argc++] = "WAIT";
    argv[argc++] = wait;
    atomic_store(&s->lease_ms, p->lease_ms);
    atomic_store(&s->state, TT_ST_WAITING);
    res = px_multi(c, TT_MULTILOCK, names, TT_LOCK_NAMES, p->lease_ms, p->wait_ms, argc, argv);
    if (!granted(res)) {
        atomic_store(&s->state, TT_ST_IDLE);
        if (res != TT_R_NIL)
            tt_sleep_us(50000);
        return false;
    }
    atomic_store(&s->state, TT_ST_HOLDING);
    maybe_reset_holding(c);
    if (c->px && g_was_reset)
        px_drop(c);
    tt_sleep_us((long long)p->hold_ms * 1000);
    deadline = tt_now_us() + RELEASE_RETRY_MS * 1000ll;
    do {
        if (!c->px) { /* the connection died while holding */
            for (int i = 0; i < TT_LOCK_NAMES; i++) {
                int seq = log_send(c, TT_MULTIUNLOCK, names[i], p->lease_ms, -1);

                log_reply(c, seq, TT_R_CONN, 0, "no connection (it died while holding)");
            }
            break;
        }
        res = px_multi(c, TT_MULTIUNLOCK, names, TT_LOCK_NAMES, p->lease_ms, -1, 3, un);
    } while (res == TT_R_UPSTREAM && tt_now_us() < deadline && (tt_sleep_us(100000), true));
    atomic_store(&s->state, TT_ST_IDLE);
    return res == TT_R_LOCKLOST;
}

static void workload(struct client *c)
{
    struct plan p;
    bool again = false; /* re-lock at once: the last release answered LOCKLOST */

    while (!atomic_load(&c->cfg->shm->stop)) {
        enum kind k = again ? K_PLAIN : pick_kind(c);

        if (again)
            ; /* the same plan once more, on the same connection, at once */
        else if (c->cfg->negative)
            plan_negative(c, &p);
        else if (atomic_load(&c->cfg->slot->want) == TT_WANT_STOP_HOLD)
            plan_stop_hold(c, &p), k = K_PLAIN;
        else if (k == K_PLAIN)
            plan_normal(c, &p);
        switch (k) {
        case K_REENTER:
            again = run_reenter(c, &p);
            break;
        case K_SHARED:
            again = run_shared(c, &p);
            break;
        case K_MULTI:
            run_multi(c, &p); /* a lost MULTILOCK is not re-run */
            again = false;
            break;
        default:
            again = run_one(c, &p) && c->cfg->relock;
            break;
        }
        if (k != K_PLAIN)
            atomic_fetch_add(&c->cfg->slot->ops, 1);
        if (again && k != K_PLAIN) { /* a plain LOCK of the name just lost */
            p.cmd = TT_LOCK;
            p.lease_ms = 0;
            p.wait_ms = tt_rng_range(&c->rng, 200, 3000);
            p.hold_ms = tt_rng_range(&c->rng, 2, 40);
        }
        if (!again)
            tt_sleep_us(tt_rng_range(&c->rng, 0, 10) * 1000);
    }
}

/* ---- scripted client ---------------------------------------------------------- */

static int option_value(const char *cmd, const char *opt, int dflt)
{
    const char *p = strstr(cmd, opt);

    return p ? atoi(p + strlen(opt)) : dflt;
}

static void scripted(struct client *c)
{
    const struct tt_client_cfg *cfg = c->cfg;
    char buf[128], *argv[10], *save = NULL;
    struct plan p;
    long long token = 0, at;
    enum tt_res res;
    int argc = 0;

    snprintf(buf, sizeof(buf), "%s", cfg->script_cmd);
    for (char *t = strtok_r(buf, " ", &save); t && argc < 10; t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    memset(&p, 0, sizeof(p));
    p.cmd = cfg->script_kind;
    snprintf(p.name, sizeof(p.name), "%s", argv[1]);
    p.lease_ms = option_value(cfg->script_cmd, "LEASE ", 0);
    p.wait_ms = option_value(cfg->script_cmd, "WAIT ", -1);
    p.hold_ms = cfg->script_hold_ms;
    if (!px_connect(c))
        die("scripted client %d cannot connect to port %d", cfg->id, cfg->proxy_port);
    atomic_store(&cfg->slot->connected, 1);
    while ((at = atomic_load(&cfg->shm->t0_us)) == 0)
        tt_sleep_us(1000);
    tt_sleep_us(at + (long long)cfg->script_at_ms * 1000 - tt_now_us());
    atomic_store(&cfg->slot->state, TT_ST_WAITING);
    res = px_op(c, p.cmd, p.name, p.lease_ms, p.wait_ms, argc, (const char **)argv, &token);
    if (granted(res) && cfg->script_relock) {
        enum tt_res again;

        tt_sleep_us((long long)p.hold_ms * 1000);
        p.wait_ms = 3000;
        again = c->px ? lock_argv(c, TT_RELOCK, &p, NULL) : TT_R_CONN;
        do_release(c, &p);
        if (granted(again))
            do_release(c, &p);
    } else if (granted(res)) {
        hold_and_release(c, &p, token);
    }
    atomic_store(&cfg->slot->state, TT_ST_IDLE);
}

/* ---- entry ------------------------------------------------------------------------ */

void tt_client_main(const struct tt_client_cfg *cfg)
{
    struct sigaction sa;
    struct client c;

    memset(&c, 0, sizeof(c));
    c.cfg = cfg;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_reset_signal; /* no SA_RESTART: a blocked read returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    g_placeholder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    tt_rng_seed(&c.rng, ((unsigned long long)cfg->seed << 16) ^ (unsigned long long)cfg->id);
    c.log_fd = open(cfg->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (c.log_fd < 0 || g_placeholder < 0)
        die("client %d: cannot open %s: %s", cfg->id, cfg->log_path, strerror(errno));
    c.res = connect_port(cfg->resource_port);
    if (!c.res)
        die("client %d: cannot connect to the resource Redis", cfg->id);
    set_timeout(c.res, 10000);
    if (cfg->script_cmd)
        scripted(&c);
    else
        workload(&c);
    px_drop(&c);
    if (c.twin) {
        px_drop(c.twin);
        close(c.twin->log_fd);
        free(c.twin);
    }
    redisFree(c.res);
    close(c.log_fd);
    atomic_store(&cfg->slot->exited, 1);
    _exit(0);
}
