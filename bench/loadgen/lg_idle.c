/* Idle-memory mode (--idle N). The connections are opened one after the
 * other with hiredis's blocking API, and each answers a PING before the
 * next one is opened: the proxy has then accepted it and set up its
 * per-client state (reader, buffers, receive), and the accept backlog can
 * never overflow. After --idle-settle seconds the proxy's VmRSS and RssAnon
 * are read from /proc/PID/status; the connections are then closed, and
 * after another settle the RSS is read again (memory the allocator keeps
 * for reuse shows up there, leaks too).
 *
 * RSS counts user-space memory only. Socket buffers are kernel memory
 * (charged to no process), so the system-wide TCP memory of
 * /proc/net/sockstat is read at the same moments and reported beside it;
 * it includes both ends of every connection and anything else on the
 * machine, so it is context, not part of the figure. */
#include "bench/loadgen/lg_idle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench/loadgen/lg_run.h"
#include "bench/loadgen/lg_stats.h"
#include "common/clock.h"

#define IO_TIMEOUT_S 5
#define KIB          1024.0

/* One memory reading. */
struct idle_mem {
    bool ok;       /* VmRSS and RssAnon were read */
    long rss_kib;  /* proxy VmRSS */
    long anon_kib; /* proxy RssAnon */
    long tcp_kib;  /* system-wide TCP socket memory, -1 if unknown */
};

struct idle_state {
    const struct lg_opts *o; /* borrowed: options */
    redisContext **ctx;      /* owned: o->idle slots, NULL where not open */
    unsigned opened;         /* connections that answered PING */
    char error[192];         /* the first failure, or empty */
    double open_s;           /* time to open them all */
    char backend[32];        /* proxy's io_backend (INFO), "?" if unknown */
    long connected;          /* proxy's connected_clients (INFO), -1 if unknown */
    struct idle_mem before;  /* before the first connection */
    struct idle_mem open;    /* with every connection open */
    struct idle_mem closed;  /* after closing them */
};

/* ---- measuring --------------------------------------------------------- */

static void settle(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        if (lg_run_was_interrupted())
            return;
    }
}

static void read_mem(const struct idle_state *st, struct idle_mem *m)
{
    long pages;

    m->ok = lg_proc_status_kib(st->o->proxy_pid, "VmRSS", &m->rss_kib) == 0 &&
            lg_proc_status_kib(st->o->proxy_pid, "RssAnon", &m->anon_kib) == 0;
    m->tcp_kib = lg_tcp_mem_pages(&pages) == 0 ? pages * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

static void fail(struct idle_state *st, unsigned i, const char *what, const char *why)
{
    if (st->error[0] == '\0')
        snprintf(st->error, sizeof(st->error), "connection %u: %s: %.120s", i, what, why);
}

/* Opens connection i and PINGs it. Returns 0 or -1 (st->error set). */
static int open_one(struct idle_state *st, unsigned i)
{
    char err[160];
    redisContext *c = lg_redis_connect(&st->o->proxy, IO_TIMEOUT_S, err, sizeof(err));
    redisReply *r;

    if (!c) {
        fail(st, i, "connect", err);
        return -1;
    }
    r = redisCommand(c, "PING");
    if (!r || r->type != REDIS_REPLY_STATUS || strcmp(r->str, "PONG") != 0) {
        fail(st, i, "PING", !r ? c->errstr : r->type == REDIS_REPLY_ERROR ? r->str : "not PONG");
        freeReplyObject(r);
        redisFree(c);
        return -1;
    }
    freeReplyObject(r);
    st->ctx[i] = c;
    return 0;
}

static void open_all(struct idle_state *st)
{
    uint64_t t0 = clock_mono_ns();

    for (unsigned i = 0; i < st->o->idle && !lg_run_was_interrupted(); i++) {
        if (open_one(st, i) < 0)
            break;
        st->opened++;
    }
    st->open_s = (double)(clock_mono_ns() - t0) / 1e9;
    if (lg_run_was_interrupted() && st->error[0] == '\0')
        snprintf(st->error, sizeof(st->error), "interrupted");
}

/* io_backend and connected_clients, asked on the first idle connection
 * (after the RSS reading, so it does not disturb it). */
static void proxy_info(struct idle_state *st)
{
    redisReply *r = st->opened ? redisCommand(st->ctx[0], "INFO") : NULL;
    char v[32];

    snprintf(st->backend, sizeof(st->backend), "?");
    st->connected = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        if (lg_info_field(r->str, "io_backend", v, sizeof(v)) == 0)
            snprintf(st->backend, sizeof(st->backend), "%s", v);
        if (lg_info_field(r->str, "connected_clients", v, sizeof(v)) == 0)
            st->connected = strtol(v, NULL, 10);
    }
    freeReplyObject(r);
}

static void close_all(struct idle_state *st)
{
    for (unsigned i = 0; i < st->o->idle; i++) {
        redisFree(st->ctx[i]);
        st->ctx[i] = NULL;
    }
}

/* ---- output ------------------------------------------------------------ */

static long added_kib(const struct idle_state *st)
{
    return st->open.rss_kib - st->before.rss_kib;
}

static double per_conn_bytes(const struct idle_state *st, long kib)
{
    return st->opened ? (double)kib * KIB / st->opened : 0.0;
}

static void print_mem_line(const char *label, const struct idle_mem *m)
{
    if (!m->ok) {
        printf("  %-18s n/a\n", label);
        return;
    }
    printf("  %-18s VmRSS %8.1f MiB  RssAnon %8.1f MiB", label, m->rss_kib / KIB,
           m->anon_kib / KIB);
    if (m->tcp_kib >= 0)
        printf("  (system TCP memory %.1f MiB)", m->tcp_kib / KIB);
    printf("\n");
}

static void print_report(const struct idle_state *st)
{
    const struct lg_opts *o = st->o;

    printf("lockproxy-bench idle: %u connections to %s, proxy pid %d, io_backend %s\n", o->idle,
           o->proxy.name, o->proxy_pid, st->backend);
    printf("  %-18s %u of %u in %.2f s (each answered PING); proxy reports %ld "
           "connected_clients\n",
           "opened", st->opened, o->idle, st->open_s, st->connected);
    print_mem_line("before", &st->before);
    print_mem_line("connections open", &st->open);
    print_mem_line("after closing", &st->closed);
    if (st->before.ok && st->open.ok)
        printf("  %-18s %+.2f MiB VmRSS (%.0f bytes per connection), %+.2f MiB RssAnon\n",
               "added by idle", added_kib(st) / KIB, per_conn_bytes(st, added_kib(st)),
               (st->open.anon_kib - st->before.anon_kib) / KIB);
    if (st->before.tcp_kib >= 0 && st->open.tcp_kib >= 0)
        printf("  %-18s %+.2f MiB system-wide (kernel socket buffers, both ends; not in RSS)\n",
               "TCP memory", (st->open.tcp_kib - st->before.tcp_kib) / KIB);
    if (st->error[0])
        printf("  %-18s %s\n", "problem", st->error);
}

static void json_mem(FILE *f, const char *name, long before, long open, long closed, bool last)
{
    fprintf(f, "  \"%s\": {\"before\": %ld, \"open\": %ld, \"closed\": %ld}%s\n", name, before,
            open, closed, last ? "" : ",");
}

static int write_json(const struct idle_state *st, const char *path)
{
    const struct lg_opts *o = st->o;
    FILE *f = fopen(path, "w");

    if (!f)
        return -errno;
    fprintf(f, "{\n  \"tool\": \"lockproxy-bench\",\n  \"mode\": \"idle\",\n");
    fprintf(f,
            "  \"config\": {\"proxy\": \"%s\", \"proxy_pid\": %d, \"connections\": %u, "
            "\"settle_s\": %.3f},\n",
            o->proxy.name, o->proxy_pid, o->idle, o->idle_settle_s);
    fprintf(f,
            "  \"opened\": %u, \"open_seconds\": %.3f, \"io_backend\": \"%s\", "
            "\"connected_clients\": %ld, \"ok\": %s,\n",
            st->opened, st->open_s, st->backend, st->connected, st->error[0] ? "false" : "true");
    fprintf(f, "  \"added_kib\": %ld, \"bytes_per_connection\": %.1f,\n", added_kib(st),
            per_conn_bytes(st, added_kib(st)));
    json_mem(f, "rss_kib", st->before.rss_kib, st->open.rss_kib, st->closed.rss_kib, false);
    json_mem(f, "rss_anon_kib", st->before.anon_kib, st->open.anon_kib, st->closed.anon_kib, false);
    json_mem(f, "tcp_mem_kib", st->before.tcp_kib, st->open.tcp_kib, st->closed.tcp_kib, true);
    fprintf(f, "}\n");
    return fclose(f) == 0 ? 0 : -errno;
}

static int write_kv(const struct idle_state *st, const char *path)
{
    FILE *f = fopen(path, "w");

    if (!f)
        return -errno;
    fprintf(f, "idle ok %d\nidle connections %u\nidle opened %u\nidle io_backend %s\n",
            st->error[0] ? 0 : 1, st->o->idle, st->opened, st->backend);
    fprintf(f, "idle connected_clients %ld\nidle rss_before_kib %ld\nidle rss_open_kib %ld\n",
            st->connected, st->before.rss_kib, st->open.rss_kib);
    fprintf(f, "idle rss_closed_kib %ld\nidle rss_added_kib %ld\nidle bytes_per_conn %.1f\n",
            st->closed.rss_kib, added_kib(st), per_conn_bytes(st, added_kib(st)));
    fprintf(f, "idle tcp_mem_added_kib %ld\n", st->open.tcp_kib - st->before.tcp_kib);
    return fclose(f) == 0 ? 0 : -errno;
}

static int write_outputs(const struct idle_state *st)
{
    int rc = 0, e;

    if (st->o->json_path && (e = write_json(st, st->o->json_path)) < 0) {
        fprintf(stderr, "lockproxy-bench: %s: %s\n", st->o->json_path, strerror(-e));
        rc = e;
    }
    if (st->o->kv_path && (e = write_kv(st, st->o->kv_path)) < 0) {
        fprintf(stderr, "lockproxy-bench: %s: %s\n", st->o->kv_path, strerror(-e));
        rc = e;
    }
    return rc;
}

/* ---- entry ------------------------------------------------------------- */

int lg_idle_main(const struct lg_opts *o)
{
    struct idle_state st;
    int out_rc;

    memset(&st, 0, sizeof(st));
    st.o = o;
    st.ctx = calloc(o->idle, sizeof(*st.ctx));
    if (!st.ctx) {
        fprintf(stderr, "lockproxy-bench: out of memory\n");
        return 1;
    }
    read_mem(&st, &st.before);
    open_all(&st);
    settle(o->idle_settle_s);
    read_mem(&st, &st.open);
    proxy_info(&st);
    close_all(&st);
    settle(o->idle_settle_s);
    read_mem(&st, &st.closed);
    free(st.ctx);
    print_report(&st);
    out_rc = write_outputs(&st);
    if (!st.before.ok || !st.open.ok)
        return 1;
    return st.error[0] || out_rc < 0 ? 1 : 0;
}
