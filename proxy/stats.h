/* Counters defined once: the rows of proxy/stats.def and
 * engine/stats.def, as descriptors (INFO name, Prometheus family,
 * type, HELP) and as the values a server shows now. INFO sections and
 * /metrics are rendered from them, so a counter added to a table shows in
 * both, with the names the table gives. */
#ifndef LP_PROXY_STATS_H
#define LP_PROXY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

enum px_stat_kind {
    PX_STAT_COUNTER = 0, /* only grows; the family ends in _total */
    PX_STAT_GAUGE = 1,   /* goes up and down, or a setting */
};

struct px_stat_desc {
    const char *info;       /* INFO field, NULL: /metrics only */
    const char *prom;       /* Prometheus family, NULL: INFO only */
    enum px_stat_kind kind; /* counter or gauge */
    const char *help;       /* HELP text */
};

/* One table each (the PX_STATS_* macros). */
enum px_stats_group {
    PX_STATS_G_CLIENTS = 0,
    PX_STATS_G_STATS = 1,
    PX_STATS_G_LATENCY = 2,
    PX_STATS_G_UPSTREAM = 3,
    PX_STATS_G_SENTINEL = 4,
    PX_STATS_G_LOCKS = 5,
    PX_STATS_G_TOPOLOGY = 6,
    PX_STATS_G_PASSTHROUGH = 7,
    PX_STATS_G_PUBSUB = 8,
    PX_STATS_G_COUNT = 9,
};

#define PX_STATS_GROUP_MAX 32 /* most rows of one group */

/* A group's rows and their values now. */
struct px_stats_view {
    const struct px_stat_desc *desc; /* borrowed: static table */
    size_t n;                        /* rows */
    uint64_t v[PX_STATS_GROUP_MAX];  /* value of each row */
};

/* Group g's static descriptors; *n gets their count. */
const struct px_stat_desc *px_stats_descs(enum px_stats_group g, size_t *n);

/* Fills out with group g's rows and srv's values. */
void px_stats_view(struct px_server *srv, enum px_stats_group g, struct px_stats_view *out);

/* Appends "info:value\r\n" for each row with an INFO name. */
void px_stats_write_info(struct buf *o, const struct px_stats_view *v);

/* Appends HELP, TYPE and the sample for each row with a family name. */
void px_stats_write_prom(struct buf *o, const struct px_stats_view *v);

/* Clients with a waiting command (Redis's blocked_clients). */
unsigned px_stats_blocked_clients(const struct px_server *srv);

#ifdef __cplusplus
}
#endif

#endif
