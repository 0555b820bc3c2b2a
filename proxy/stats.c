/* Counters defined once; see stats.h. The tables are the PX_STATS_*
 * macros of proxy/stats.def and engine/stats.def: each is expanded
 * twice here, into a static descriptor array and into a function that
 * reads the values, so both follow the rows' order. */
#include "proxy/stats.h"

#include "common/compiler.h"
#include "common/list.h"
#include "engine/engine.h"
#include "pool/pool.h"
#include "proxy/client.h"
#include "proxy/fwd.h"
#include "proxy/server.h"
#include "proxy/stats.def"
#include "proxy/subs.h"
#include "sched/loop.h"

unsigned px_stats_blocked_clients(const struct px_server *srv)
{
    const struct list *n;
    unsigned b = 0;

    for (n = srv->clients.next; n != &srv->clients; n = n->next)
        b += list_entry(n, struct px_client, client_node)->barrier != NULL;
    return b;
}

#define DESC_S(field, info, prom, kind, help) {info, prom, PX_STAT_##kind, help},
#define DESC_V(info, prom, kind, help, value) {info, prom, PX_STAT_##kind, help},

static const struct px_stat_desc d_clients[] = {PX_STATS_CLIENTS(DESC_S, DESC_V)};
static const struct px_stat_desc d_stats[] = {PX_STATS_STATS(DESC_S, DESC_V)};
static const struct px_stat_desc d_latency[] = {PX_STATS_LATENCY(DESC_S, DESC_V)};
static const struct px_stat_desc d_upstream[] = {PX_STATS_UPSTREAM(DESC_S, DESC_V)};
static const struct px_stat_desc d_sentinel[] = {PX_STATS_SENTINEL(DESC_S, DESC_V)};
static const struct px_stat_desc d_locks[] = {PX_STATS_LOCKS(DESC_S, DESC_V)};
static const struct px_stat_desc d_topology[] = {PX_STATS_TOPOLOGY(DESC_S, DESC_V)};
static const struct px_stat_desc d_passthrough[] = {PX_STATS_PASSTHROUGH(DESC_S, DESC_V)};
static const struct px_stat_desc d_pubsub[] = {PX_STATS_PUBSUB(DESC_S, DESC_V)};

static const struct {
    const struct px_stat_desc *d; /* rows */
    size_t n;                     /* how many */
} groups[PX_STATS_G_COUNT] = {
    [PX_STATS_G_CLIENTS] = {d_clients, LP_ARRAY_SIZE(d_clients)},
    [PX_STATS_G_STATS] = {d_stats, LP_ARRAY_SIZE(d_stats)},
    [PX_STATS_G_LATENCY] = {d_latency, LP_ARRAY_SIZE(d_latency)},
    [PX_STATS_G_UPSTREAM] = {d_upstream, LP_ARRAY_SIZE(d_upstream)},
    [PX_STATS_G_SENTINEL] = {d_sentinel, LP_ARRAY_SIZE(d_sentinel)},
    [PX_STATS_G_LOCKS] = {d_locks, LP_ARRAY_SIZE(d_locks)},
    [PX_STATS_G_TOPOLOGY] = {d_topology, LP_ARRAY_SIZE(d_topology)},
    [PX_STATS_G_PASSTHROUGH] = {d_passthrough, LP_ARRAY_SIZE(d_passthrough)},
    [PX_STATS_G_PUBSUB] = {d_pubsub, LP_ARRAY_SIZE(d_pubsub)},
};

_Static_assert(LP_ARRAY_SIZE(d_locks) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_upstream) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_clients) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_stats) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_latency) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_sentinel) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");
_Static_assert(LP_ARRAY_SIZE(d_topology) <= PX_STATS_GROUP_MAX, "raise PX_STATS_GROUP_MAX");

const struct px_stat_desc *px_stats_descs(enum px_stats_group g, size_t *n)
{
    *n = groups[g].n;
    return groups[g].d;
}

/* The values, in the rows' order, from the group's inputs (stats.def). */
#define VAL_S(field, info, prom, kind, help) v[i++] = s->field;
#define VAL_V(info, prom, kind, help, value) v[i++] = (uint64_t)(value);

static void vals_clients(struct px_server *srv, uint64_t *v)
{
    const struct px_stats *s = &srv->stats;
    size_t i = 0;

    PX_STATS_CLIENTS(VAL_S, VAL_V)
}

static void vals_stats(struct px_server *srv, uint64_t *v)
{
    const struct px_stats *s = &srv->stats;
    size_t i = 0;

    PX_STATS_STATS(VAL_S, VAL_V)
}

static void vals_latency(struct px_server *srv, uint64_t *v)
{
    struct sched_loop_latency lat;
    size_t i = 0;

    sched_loop_latency(srv->loop, &lat);
    PX_STATS_LATENCY(VAL_S, VAL_V)
}

static void vals_upstream(struct px_server *srv, uint64_t *v)
{
    struct pool_stats st;
    size_t i = 0;

    pool_get_stats(srv->pool, &st);
    PX_STATS_UPSTREAM(VAL_S, VAL_V)
}

static void vals_sentinel(struct px_server *srv, uint64_t *v)
{
    struct pool_stats st;
    size_t i = 0;

    pool_get_stats(srv->pool, &st);
    PX_STATS_SENTINEL(VAL_S, VAL_V)
}

static void vals_locks(struct px_server *srv, uint64_t *v)
{
    const struct lk_engine *eng = srv->engine;
    const struct lk_stats *s = &eng->stats;
    size_t i = 0;

    PX_STATS_LOCKS(VAL_S, VAL_V)
}

static void vals_topology(struct px_server *srv, uint64_t *v)
{
    const struct lk_engine *eng = srv->engine;
    const struct lk_stats *s = &eng->stats;
    size_t i = 0;

    PX_STATS_TOPOLOGY(VAL_S, VAL_V)
}

static void vals_passthrough(struct px_server *srv, uint64_t *v)
{
    struct px_fwd_stats st;
    size_t i = 0;

    px_fwd_get_stats(srv, &st);
    PX_STATS_PASSTHROUGH(VAL_S, VAL_V)
}

static void vals_pubsub(struct px_server *srv, uint64_t *v)
{
    struct px_subs_stats st;
    size_t i = 0;

    px_subs_get_stats(srv, &st);
    PX_STATS_PUBSUB(VAL_S, VAL_V)
}

void px_stats_view(struct px_server *srv, enum px_stats_group g, struct px_stats_view *out)
{
    static void (*const vals[PX_STATS_G_COUNT])(struct px_server *, uint64_t *) = {
        [PX_STATS_G_CLIENTS] = vals_clients,   [PX_STATS_G_STATS] = vals_stats,
        [PX_STATS_G_LATENCY] = vals_latency,   [PX_STATS_G_UPSTREAM] = vals_upstream,
        [PX_STATS_G_SENTINEL] = vals_sentinel, [PX_STATS_G_LOCKS] = vals_locks,
        [PX_STATS_G_TOPOLOGY] = vals_topology, [PX_STATS_G_PASSTHROUGH] = vals_passthrough,
        [PX_STATS_G_PUBSUB] = vals_pubsub,
    };

    out->desc = px_stats_descs(g, &out->n);
    vals[g](srv, out->v);
}

void px_stats_write_info(struct buf *o, const struct px_stats_view *v)
{
    size_t i;

    for (i = 0; i < v->n; i++) {
        if (v->desc[i].info)
            buf_appendf(o, "%s:%llu\r\n", v->desc[i].info, (unsigned long long)v->v[i]);
    }
}

void px_stats_write_prom(struct buf *o, const struct px_stats_view *v)
{
    size_t i;

    for (i = 0; i < v->n; i++) {
        const struct px_stat_desc *d = &v->desc[i];

        if (d->prom)
            buf_appendf(o, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", d->prom, d->help, d->prom,
                        d->kind == PX_STAT_COUNTER ? "counter" : "gauge", d->prom,
                        (unsigned long long)v->v[i]);
    }
}
