/* Start-up and readiness announcements; see ready.h. */
#include "proxy/ready.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/compiler.h"
#include "common/log.h"
#include "pool/pool.h"
#include "proxy/notify.h"
#include "proxy/server.h"
#include "sched/loop.h"

#ifndef LP_VERSION
#define LP_VERSION "0.0.0"
#endif

/* Appends a as a client would write it (no credentials). */
static void addr_append(struct buf *b, const struct px_addr *a, bool upstream)
{
    const char *s = a->tls ? "s" : "";

    if (a->path[0])
        buf_appendf(b, "unix://%s", a->path);
    else if (upstream && a->cluster)
        buf_appendf(b, "redis%s-cluster://%s", s, a->seeds);
    else if (upstream && a->sentinels[0])
        buf_appendf(b, "redis%s-sentinel://%s/%s", s, a->sentinels, a->master_name);
    else if (upstream)
        buf_appendf(b, "redis%s://%s:%d", s, a->host, a->port);
    else
        buf_appendf(b, "%s%s:%d", a->tls ? "tls://" : "", a->host, a->port);
}

static void notify(const char *state)
{
    int rc = px_notify(state);

    if (rc < 0)
        log_msg(LOG_LVL_WARN, "cannot notify systemd ($NOTIFY_SOCKET): %s", strerror(-rc));
}

static void announce_ready(struct px_server *srv)
{
    struct buf up;

    srv->ready = 2;
    buf_init(&up);
    addr_append(&up, &srv->opts.upstream, true);
    buf_append(&up, "", 1);
    log_msg(LOG_LVL_INFO, "ready: upstream %s answers (io=%s uuid=%s)", up.data,
            sched_loop_backend(srv->loop), srv->uuid);
    buf_deinit(&up);
    notify("READY=1\nSTATUS=ready");
}

static void watchdog_ping(struct sched_timer *t)
{
    struct px_server *srv = LP_CONTAINER_OF(t, struct px_server, sdwd);

    notify("WATCHDOG=1");
    sched_loop_timer_add(srv->loop, t, sched_loop_now_ms(srv->loop) + srv->sdwd_ms);
}

/* Starts the WATCHDOG=1 pings when $WATCHDOG_USEC asks for them (and
 * $WATCHDOG_PID, if set, is this process, as sd_watchdog_enabled(3)). */
static void watchdog_start(struct px_server *srv)
{
    const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
    unsigned long long us;
    char *end;

    if (!usec || !getenv("NOTIFY_SOCKET"))
        return;
    if (pid && strtoll(pid, NULL, 10) != (long long)getpid())
        return;
    us = strtoull(usec, &end, 10);
    if (*end || us == 0)
        return;
    srv->sdwd_ms = LP_MAX(us / 2000, 1ull);
    sched_timer_init(&srv->sdwd, watchdog_ping);
    watchdog_ping(&srv->sdwd);
    log_msg(LOG_LVL_INFO, "systemd watchdog: WATCHDOG=1 every %llu ms",
            (unsigned long long)srv->sdwd_ms);
}

void px_ready_start(struct px_server *srv)
{
    struct pool_stats st;
    struct buf b;
    unsigned i;

    buf_init(&b);
    for (i = 0; i < srv->opts.nlisten; i++) {
        buf_appendf(&b, "%s", i ? ", " : "");
        addr_append(&b, &srv->opts.listen[i], false);
    }
    buf_append(&b, "", 1);
    log_msg(LOG_LVL_INFO, "lockproxy %s listening on %s", LP_VERSION, b.data);
    buf_deinit(&b);
    watchdog_start(srv);
    srv->ready = 1;
    if (pool_is_ready(srv->pool))
        return announce_ready(srv);
    buf_init(&b);
    addr_append(&b, &srv->opts.upstream, true);
    buf_append(&b, "", 1);
    pool_get_stats(srv->pool, &st);
    log_msg(LOG_LVL_WARN,
            "waiting for upstream %s (%s%s%s): lock commands fail with UPSTREAM errors and "
            "/healthz answers 503 until it answers",
            b.data, st.state, st.last_error && st.last_error[0] ? ": " : "",
            st.last_error ? st.last_error : "");
    buf_deinit(&b);
    notify("STATUS=waiting for upstream");
}

void px_ready_poll(struct px_server *srv)
{
    if (srv->ready == 1 && pool_is_ready(srv->pool))
        announce_ready(srv);
}

void px_ready_stopping(struct px_server *srv)
{
    if (srv->sdwd_ms)
        sched_loop_timer_del(srv->loop, &srv->sdwd);
    notify("STOPPING=1\nSTATUS=stopping");
}
