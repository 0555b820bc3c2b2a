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
    int n = snprintf(buf, sizeof(buf), "S %d %lld %d %d %s %d %d\n", seq, tt_now_us(), (int)cmd,
                     c->cfg->proxy, name, lease, wait);

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
    g_px_fd = ctx->fd;
    g_was_reset = 0;
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
 * not happen (Redis unavailable, not "outcome unknown"). */
static void do_release(struct client *c, const struct plan *p)
{
    static const char *const words[] = {"UNLOCK", "RUNLOCK", "WUNLOCK", "FAIRUNLOCK",
                                        "SEM.RELEASE"};
    enum tt_cmd rel = release_of(p->cmd);
    const char *argv[3] = {words[rel - TT_UNLOCK], p->name, "1"};
    long long val, deadline = tt_now_us() + RELEASE_RETRY_MS * 1000ll;
    enum tt_res res;

    for (;;) {
        res = px_op(c, rel, p->name, p->lease_ms, -1, rel == TT_SEM_REL ? 3 : 2, argv, &val);
        if (res != TT_R_UPSTREAM || tt_now_us() > deadline ||
            (rel == TT_SEM_REL && strstr(c->text, "outcome unknown")))
            break;
        tt_sleep_us(100000);
    }
    if (res == TT_R_NONE) { /* the proxy went away between grant and release */
        int seq = log_send(c, rel, p->name, p->lease_ms, -1);

        log_reply(c, seq, TT_R_CONN, 0, "proxy unreachable at release");
    }
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

static void hold_and_release(struct client *c, const struct plan *p, long long token)
{
    struct tt_slot *s = c->cfg->slot;

    atomic_store(&s->state, TT_ST_HOLDING);
    if (atomic_load(&s->want) == TT_WANT_RESET_HOLD) {
        raise(SIGUSR1); /* the handler resets the connection at once */
        atomic_store(&s->want, TT_WANT_NONE);
    }
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
    do_release(c, p);
    atomic_store(&s->state, TT_ST_IDLE);
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

static void run_one(struct client *c, const struct plan *p)
{
    struct tt_slot *s = c->cfg->slot;
    long long token = 0;
    enum tt_res res;

    atomic_store(&s->lease_ms, p->lease_ms);
    atomic_store(&s->state, TT_ST_WAITING);
    res = do_acquire(c, p, &token);
    atomic_store(&s->state, TT_ST_IDLE);
    if (res == TT_R_OK || res == TT_R_TOKEN)
        hold_and_release(c, p, token);
    else if (res == TT_R_NONE)
        tt_sleep_us(100000); /* proxy down: retry later */
    else if (res != TT_R_NIL)
        tt_sleep_us(50000); /* an error: back off as a real client would */
    atomic_fetch_add(&s->ops, 1);
}

static void workload(struct client *c)
{
    struct plan p;

    while (!atomic_load(&c->cfg->shm->stop)) {
        if (c->cfg->negative)
            plan_negative(c, &p);
        else if (atomic_load(&c->cfg->slot->want) == TT_WANT_STOP_HOLD)
            plan_stop_hold(c, &p);
        else
            plan_normal(c, &p);
        run_one(c, &p);
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
    while ((at = atomic_load(&cfg->shm->t0_us)) == 0)
        tt_sleep_us(1000);
    tt_sleep_us(at + (long long)cfg->script_at_ms * 1000 - tt_now_us());
    atomic_store(&cfg->slot->state, TT_ST_WAITING);
    res = px_op(c, p.cmd, p.name, p.lease_ms, p.wait_ms, argc, (const char **)argv, &token);
    if (res == TT_R_OK || res == TT_R_TOKEN)
        hold_and_release(c, &p, token);
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
    redisFree(c.res);
    close(c.log_fd);
    atomic_store(&cfg->slot->exited, 1);
    _exit(0);
}
