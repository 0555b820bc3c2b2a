/* CLUSTER SHARDS, CLUSTER SLOTS and SENTINEL GET-MASTER-ADDR-BY-NAME
 * replies -> struct pool__topo; see topo.h.
 *
 * Shapes (RESP2: the pool never switches to RESP3):
 *
 *   SHARDS: [ [ "slots", [start, end, start, end...],
 *               "nodes", [ ["id", id, "port", p, "ip", ip, "endpoint", ep,
 *                           "role", "master"|"replica", "health", h, ...],
 *                          ... ] ],
 *             ... ]
 *   SLOTS:  [ [start, end, [host, port, id, {meta}], [replica...]...], ... ]
 *   SENTINEL GET-MASTER-ADDR-BY-NAME: [host, "port"], or nil for a name
 *           the sentinel does not monitor
 *
 * A node's address is its endpoint, or its ip when the endpoint is
 * unknown, or the host the reply came from when neither is known (Redis
 * writes "" or "?" there). Unknown fields are skipped, so newer servers
 * parse as long as these keep their meaning. */
#include "pool/topo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "pool/resp.h"

static bool is_array(const struct pool_reply *r)
{
    return r->type == POOL_REPLY_ARRAY;
}

static bool is_str(const struct pool_reply *r)
{
    return r->type == POOL_REPLY_STRING || r->type == POOL_REPLY_STATUS;
}

static void topo_init(struct pool__topo *t)
{
    size_t i;

    t->nodes = NULL;
    t->nnodes = 0;
    t->cap = 0;
    for (i = 0; i < POOL_SLOTS; i++)
        t->owner[i] = -1;
}

void pool__topo_free(struct pool__topo *t)
{
    free(t->nodes);
    t->nodes = NULL;
    t->nnodes = 0;
    t->cap = 0;
}

size_t pool__topo_masters(const struct pool__topo *t)
{
    size_t i, n = 0;

    for (i = 0; i < t->nnodes; i++)
        n += t->nodes[i].master && t->nodes[i].nslots > 0;
    return n;
}

/* Copies a string reply into dst (size bytes); too long is malformed. */
static int copy_str(char *dst, size_t size, const struct pool_reply *r)
{
    if (!is_str(r) || r->len >= size)
        return -EPROTO;
    memcpy(dst, r->str, r->len);
    dst[r->len] = '\0';
    return 0;
}

static bool host_unknown(const char *h)
{
    return h[0] == '\0' || strcmp(h, "?") == 0;
}

/* The node at host:port, appended when new. Returns its index or -errno. */
static int topo_node(struct pool__topo *t, const char *host, int port)
{
    size_t i;

    for (i = 0; i < t->nnodes; i++) {
        if (t->nodes[i].port == port && strcmp(t->nodes[i].host, host) == 0)
            return (int)i;
    }
    if (t->nnodes == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        struct pool__topo_node *n = realloc(t->nodes, cap * sizeof(*n));

        if (!n)
            return -ENOMEM;
        t->nodes = n;
        t->cap = cap;
    }
    if (t->nnodes >= INT16_MAX)
        return -EPROTO;
    memset(&t->nodes[t->nnodes], 0, sizeof(t->nodes[0]));
    snprintf(t->nodes[t->nnodes].host, sizeof(t->nodes[0].host), "%s", host);
    t->nodes[t->nnodes].port = port;
    return (int)t->nnodes++;
}

/* Assigns [start, end] to master index m. */
static int topo_range(struct pool__topo *t, long long start, long long end, int m)
{
    long long s;

    if (start < 0 || end >= POOL_SLOTS || start > end)
        return -EPROTO;
    for (s = start; s <= end; s++) {
        if (t->owner[s] < 0)
            t->nodes[m].nslots++;
        t->owner[s] = (int16_t)m;
    }
    return 0;
}

/* ---- CLUSTER SHARDS ---------------------------------------------------------- */

/* One node map of a shard, as far as the pool cares. */
struct shard_node {
    char id[POOL__NODE_ID_SIZE];
    char ip[POOL__HOST_MAX];
    char endpoint[POOL__HOST_MAX];
    char health[16];
    long long port;     /* "port": plain TCP, -1 if none */
    long long tls_port; /* "tls-port", -1 if none */
    bool master;
};

static int shard_node_field(struct shard_node *n, const struct pool_reply *k,
                            const struct pool_reply *v)
{
    if (pool__resp_str_is(k, "id"))
        return copy_str(n->id, sizeof(n->id), v);
    if (pool__resp_str_is(k, "ip"))
        return copy_str(n->ip, sizeof(n->ip), v);
    if (pool__resp_str_is(k, "endpoint"))
        return copy_str(n->endpoint, sizeof(n->endpoint), v);
    if (pool__resp_str_is(k, "health"))
        return copy_str(n->health, sizeof(n->health), v);
    if (pool__resp_str_is(k, "role"))
        n->master = pool__resp_str_is(v, "master");
    else if (pool__resp_str_is(k, "port"))
        n->port = v->type == POOL_REPLY_INTEGER ? v->integer : -1;
    else if (pool__resp_str_is(k, "tls-port"))
        n->tls_port = v->type == POOL_REPLY_INTEGER ? v->integer : -1;
    return 0;
}

/* One node of a shard: *idx is its index, or -1 when it has no port of
 * the pool's kind (plain "port", or "tls-port" for a TLS pool: a node
 * without it is not reachable by the pool). Returns 0 or -errno. */
static int shard_node_parse(struct pool__topo *t, const struct pool_reply *r, const char *fallback,
                            int *idx)
{
    struct shard_node n;
    const char *host;
    size_t i;
    int err;

    *idx = -1;
    memset(&n, 0, sizeof(n));
    n.port = -1;
    n.tls_port = -1;
    if (!is_array(r) || r->elements % 2)
        return -EPROTO;
    for (i = 0; i < r->elements; i += 2) {
        err = shard_node_field(&n, r->element[i], r->element[i + 1]);
        if (err < 0)
            return err;
    }
    if (t->tls)
        n.port = n.tls_port;
    if (n.port <= 0 || n.port > 65535)
        return 0;
    host = !host_unknown(n.endpoint) ? n.endpoint : !host_unknown(n.ip) ? n.ip : fallback;
    *idx = topo_node(t, host, (int)n.port);
    if (*idx < 0)
        return *idx;
    memcpy(t->nodes[*idx].id, n.id, sizeof(n.id));
    memcpy(t->nodes[*idx].health, n.health, sizeof(n.health));
    t->nodes[*idx].master = n.master;
    return 0;
}

/* The nodes of one shard; *master is the master's index, or -1 if none.
 * Right after a failover a shard may list its failed old master too: a
 * master not marked "failed" wins. */
static int shard_nodes(struct pool__topo *t, const struct pool_reply *nodes, const char *fallback,
                       int *master)
{
    size_t i;
    int idx, err;

    *master = -1;
    if (!is_array(nodes))
        return -EPROTO;
    for (i = 0; i < nodes->elements; i++) {
        err = shard_node_parse(t, nodes->element[i], fallback, &idx);
        if (err < 0)
            return err;
        if (idx < 0 || !t->nodes[idx].master)
            continue;
        if (*master < 0 || strcmp(t->nodes[*master].health, "failed") == 0)
            *master = idx;
    }
    return 0;
}

static int shard_slots(struct pool__topo *t, const struct pool_reply *slots, int master)
{
    size_t i;
    int err;

    if (!is_array(slots) || slots->elements % 2)
        return -EPROTO;
    for (i = 0; i < slots->elements; i += 2) {
        const struct pool_reply *a = slots->element[i], *b = slots->element[i + 1];

        if (a->type != POOL_REPLY_INTEGER || b->type != POOL_REPLY_INTEGER)
            return -EPROTO;
        if (master < 0)
            continue; /* a shard without a reachable master serves nothing */
        err = topo_range(t, a->integer, b->integer, master);
        if (err < 0)
            return err;
    }
    return 0;
}

static int shard_parse(struct pool__topo *t, const struct pool_reply *r, const char *fallback)
{
    const struct pool_reply *slots = NULL, *nodes = NULL;
    int master, err;
    size_t i;

    if (!is_array(r) || r->elements % 2)
        return -EPROTO;
    for (i = 0; i < r->elements; i += 2) {
        if (pool__resp_str_is(r->element[i], "slots"))
            slots = r->element[i + 1];
        else if (pool__resp_str_is(r->element[i], "nodes"))
            nodes = r->element[i + 1];
    }
    if (!slots || !nodes)
        return -EPROTO;
    err = shard_nodes(t, nodes, fallback, &master);
    if (err == 0)
        err = shard_slots(t, slots, master);
    return err;
}

/* Both replies are arrays of entries (a shard, a slot range). */
typedef int topo_entry_fn(struct pool__topo *t, const struct pool_reply *e, const char *fallback);

static int parse_entries(struct pool__topo *t, const struct pool_reply *r, const char *fallback,
                         topo_entry_fn *entry, bool tls)
{
    size_t i;
    int err;

    topo_init(t);
    t->tls = tls;
    if (r->type != POOL_REPLY_ARRAY)
        return -EPROTO;
    for (i = 0; i < r->elements; i++) {
        err = entry(t, r->element[i], fallback);
        if (err < 0)
            return err;
    }
    return 0;
}

int pool__topo_parse_shards(struct pool__topo *t, const struct pool_reply *r,
                            const char *fallback_host, bool tls)
{
    return parse_entries(t, r, fallback_host, shard_parse, tls);
}

/* ---- CLUSTER SLOTS ----------------------------------------------------------- */

/* [host, port, id?, meta?] -> node index. */
static int slots_node(struct pool__topo *t, const struct pool_reply *r, const char *fallback,
                      bool master)
{
    char host[POOL__HOST_MAX];
    int idx;

    if (r->type != POOL_REPLY_ARRAY || r->elements < 2 ||
        r->element[1]->type != POOL_REPLY_INTEGER || r->element[1]->integer <= 0 ||
        r->element[1]->integer > 65535 || copy_str(host, sizeof(host), r->element[0]) < 0)
        return -EPROTO;
    idx = topo_node(t, host_unknown(host) ? fallback : host, (int)r->element[1]->integer);
    if (idx < 0)
        return idx;
    if (r->elements >= 3 && copy_str(t->nodes[idx].id, sizeof(t->nodes[idx].id), r->element[2]))
        return -EPROTO;
    if (master)
        t->nodes[idx].master = true;
    return idx;
}

static int slots_entry(struct pool__topo *t, const struct pool_reply *r, const char *fallback)
{
    int m, idx;
    size_t i;

    if (r->type != POOL_REPLY_ARRAY || r->elements < 3 ||
        r->element[0]->type != POOL_REPLY_INTEGER || r->element[1]->type != POOL_REPLY_INTEGER)
        return -EPROTO;
    m = slots_node(t, r->element[2], fallback, true);
    if (m < 0)
        return m;
    for (i = 3; i < r->elements; i++) {
        idx = slots_node(t, r->element[i], fallback, false);
        if (idx < 0)
            return idx;
    }
    return topo_range(t, r->element[0]->integer, r->element[1]->integer, m);
}

int pool__topo_parse_slots(struct pool__topo *t, const struct pool_reply *r,
                           const char *fallback_host)
{
    return parse_entries(t, r, fallback_host, slots_entry, false);
}

/* ---- SENTINEL GET-MASTER-ADDR-BY-NAME ------------------------------------------ */

int pool__topo_parse_sentinel(struct pool__topo *t, const struct pool_reply *r)
{
    char host[POOL__HOST_MAX];
    int64_t port;
    int idx;

    topo_init(t);
    if (r->type == POOL_REPLY_NIL)
        return -ENOENT;
    if (!is_array(r) || r->elements != 2 || copy_str(host, sizeof(host), r->element[0]) < 0 ||
        host_unknown(host) || !is_str(r->element[1]) ||
        util_parse_i64(r->element[1]->str, r->element[1]->len, &port) < 0 || port <= 0 ||
        port > 65535)
        return -EPROTO;
    idx = topo_node(t, host, (int)port);
    if (idx < 0)
        return idx;
    t->nodes[idx].master = true;
    return topo_range(t, 0, POOL_SLOTS - 1, idx);
}
