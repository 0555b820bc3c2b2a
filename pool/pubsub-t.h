/* Subscription listener type, embedded by whoever listens on a channel
 * (the proxy's per-lock entries). */
#ifndef LP_POOL_PUBSUB_T_H
#define LP_POOL_PUBSUB_T_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct pool_sub;
struct pool_chan;

enum pool_sub_event {
    POOL_SUB_READY = 1,   /* subscription confirmed: re-check state now */
    POOL_SUB_MESSAGE = 2, /* a message: msg/len hold the payload (borrowed) */
    POOL_SUB_LOST = 3,    /* subscription lost (connection, slot moved): messages may be missed */
};

/* Which upstream subscription a listener asks for (pool_sub_start_kind). */
enum pool_sub_kind {
    POOL_SUB_AUTO = 0,    /* the pool's mode: SSUBSCRIBE when sharded, else SUBSCRIBE */
    POOL_SUB_CLASSIC = 1, /* SUBSCRIBE, whatever the mode */
    POOL_SUB_SHARDED = 2, /* SSUBSCRIBE, whatever the mode (Redis >= 7) */
    POOL_SUB_PATTERN = 3, /* PSUBSCRIBE: the name is a glob pattern */
};

typedef void pool_sub_fn(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len);

struct pool_sub {
    pool_sub_fn *cb;        /* borrowed: event callback */
    struct pool_chan *chan; /* borrowed: pool-owned channel record, NULL when stopped */
};

#ifdef __cplusplus
}
#endif

#endif
