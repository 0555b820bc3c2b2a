/* A listener of a shared subscription (the front end's hubs, proxy/subs.h):
 * the record a waitset embeds to hear its channel, through the engine's
 * hooks front.sub_listen and front.sub_unlisten (engine.h), so the hubs
 * stay in the front end, shared with pass-through clients. */
#ifndef LP_ENGINE_SUB_LSN_H
#define LP_ENGINE_SUB_LSN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/list.h"
#include "pool/pubsub-t.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_hub;
struct px_sub_lsn;

/* A hub event: READY, LOST, or MESSAGE with the channel it was published
 * on (a pattern's matching channel) and the payload; borrowed for the
 * call. */
typedef void px_sub_lsn_fn(struct px_sub_lsn *l, enum pool_sub_event ev, const char *chan,
                           size_t clen, const char *msg, size_t len);

struct px_sub_lsn {
    struct list node;   /* in hub->lsns while listening */
    struct px_hub *hub; /* borrowed: the hub, NULL when not listening */
    px_sub_lsn_fn *cb;  /* borrowed */
    bool client;        /* a pass-through client's (counted in INFO) */
};

#ifdef __cplusplus
}
#endif

#endif
