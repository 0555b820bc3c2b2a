/* What the engine reads of the proxy's options (struct lk_config, in
 * struct lk_engine): the front end copies them in at start-up and after a
 * config reload (the fields a reload may change are marked), so engine/
 * never reads the proxy's own options. */
#ifndef LP_ENGINE_CONFIG_H
#define LP_ENGINE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "pool/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PX_REDLOCK_MAX 9u /* most RedLock masters (--redlock-upstream) */

/* The fate of a closed connection's locks (--on-disconnect). */
enum px_on_disconnect {
    PX_DISCONNECT_RELEASE = 0, /* release a dead connection's locks at once */
    PX_DISCONNECT_EXPIRE = 1,  /* stop renewing; locks expire at lease end */
};

struct lk_config {
    uint64_t watchdog_ms;          /* lease used (and renewed) without LEASE */
    unsigned upstream_timeout_ms;  /* oldest upstream reply wait before failing */
    unsigned sync_replicas;        /* WAIT for N replicas after a write, 0 off (reload) */
    unsigned sync_timeout_ms;      /* WAIT's timeout (reload) */
    enum px_on_disconnect on_disc; /* (reload) */
    uint64_t linger_ms;            /* idle time before a channel is unsubscribed (reload) */
    int cluster_pubsub;            /* enum pool_pubsub_mode */
    bool slots_move;               /* the upstream is a Cluster or Sentinel-managed */
    /* RedLock's independent masters: 0, or odd >= 3 (pool options whose
     * strings the front end keeps for the engine's life). */
    struct pool_opts redlock[PX_REDLOCK_MAX];
    unsigned nredlock;
};

#ifdef __cplusplus
}
#endif

#endif
