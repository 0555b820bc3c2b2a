/* Upstream TLS (rediss://): the pool's client context and the name each
 * connection's server certificate must carry. The session itself is
 * sched/tls.c's; here is only what the pool decides: whether a new
 * connection runs TLS and which name it verifies (and sends as SNI);
 * rconn.c puts a TLS failure's reason in last_error ("TLS: ...").
 *
 * The name is the --upstream-tls-server-name override when set, else the
 * host of the address the connection goes to (the URL's host for a single
 * node; for a Cluster upstream, the node's announced host, which is why
 * the override exists: nodes announced by IP need certificates with IP
 * addresses, or a shared name). Contexts are reference counted, so a
 * reload may swap in a new one while live connections keep theirs. */
#include "sched/tls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool-int.h"
#include "pool/pool.h"

int pool_set_tls(struct pool *p, struct sched_tls_ctx *ctx, const char *server_name)
{
    char *name = NULL;

    if (ctx && p->opts.unix_path)
        return -EINVAL;
    if (ctx && server_name && server_name[0] && !(name = strdup(server_name)))
        return -ENOMEM;
    sched_tls_ctx_put(p->tls);
    free(p->tls_server_name);
    p->tls = ctx ? sched_tls_ctx_get(ctx) : NULL;
    p->tls_server_name = name;
    return 0;
}

int pool__tls_start(struct pool *p, struct sched_conn *c, const char *host)
{
    if (!p->tls)
        return 0;
    return sched_conn_start_tls(c, p->tls, p->tls_server_name ? p->tls_server_name : host);
}

const char *pool__tls_error(const struct sched_conn *c)
{
    return sched_conn_tls_error(c);
}

void pool__tls_deinit(struct pool *p)
{
    sched_tls_ctx_put(p->tls);
    free(p->tls_server_name);
    p->tls = NULL;
    p->tls_server_name = NULL;
}
