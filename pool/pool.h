/* The upstream Redis pool, shared by every client of the proxy: one node
 * (a single Redis master), for a Redis Cluster upstream one node per
 * master, or for a Redis Sentinel upstream the node of the master the
 * sentinels name; each node has a few pipelined command connections and
 * one pub/sub connection.
 *
 * Requests are appended to a connection's output and go out with everything
 * else queued in the same loop iteration (one write per connection per
 * iteration). Replies are matched FIFO. Scripts registered at creation are
 * SCRIPT LOADed on every (re)connect of every node and run with EVALSHA; a
 * NOSCRIPT reply reloads and retries once, invisibly to the caller.
 *
 * Shape: a request is routed by key to a node, then by hint to one of that
 * node's connections (so one client's requests stay ordered on one
 * pipeline). Single node: the one node, no slot computed. Cluster: the
 * slot of the key (pool_slot()) indexes a slot map built from CLUSTER
 * SHARDS (or CLUSTER SLOTS), refreshed periodically, on MOVED and when a
 * node fails; MOVED and ASK are followed, TRYAGAIN/CLUSTERDOWN/LOADING
 * retried with backoff, all within the request timeout and invisible to
 * the caller. Pub/sub keeps one subscription per channel on the node that
 * owns the channel's slot (SSUBSCRIBE in sharded mode, SUBSCRIBE in
 * classic mode) and moves it when the slot moves.
 *
 * Sentinel: the node table of a cluster with one master owning every slot
 * (so MOVED-free routing, parking, re-homing of channels and the topology
 * callback are the cluster's own). The master is asked of one sentinel at
 * a time (SENTINEL GET-MASTER-ADDR-BY-NAME): the first of the list that
 * resolves, the next one after any failure (connect, error, a name it does
 * not know, a master it named that is not one); again every
 * cluster_refresh_ms, at once on a +switch-master or +promoted-slave
 * message (one subscription, on the same sentinel), when a master
 * connection is lost and when a reply says READONLY; every 100 ms while
 * no master is ready.
 * Each master connection runs ROLE in its handshake: one to a node that is
 * not a master never becomes ready, and the sentinel is asked again. A
 * switch moves requests and channels to the new master (LOST, then READY
 * there), its connections load the scripts, and on_topology reports every
 * slot changed. Sentinels have their own AUTH (sentinel_user/password);
 * user/password/db are the master's.
 *
 * Failure contract: a request either gets exactly one callback, or the submit
 * call returns < 0 and no callback ever comes. Requests in flight when a
 * connection dies get err = -ECONNRESET (never re-sent: the command may have
 * run); requests that wait longer than the request timeout get -ETIMEDOUT
 * (and the connection is recycled, since a FIFO pipeline cannot skip a
 * reply). While no connection to the key's node is ready, submits fail fast
 * with -ENOTCONN. A cluster request whose redirect target never became
 * ready within the request timeout gets -ENOTCONN in its callback: it was
 * not executed. Sentinel: a -READONLY reply (the master was demoted
 * under us: the command did not run) is never delivered: the request
 * waits for the new master and is re-sent there, or gets -ENOTCONN (not
 * executed) when none is ready within the request timeout. While the
 * master is being switched, submits fail fast with -ENOTCONN and
 * pool_get_stats()'s last_error says so. Reconnects use exponential
 * backoff. */
#ifndef LP_POOL_POOL_H
#define LP_POOL_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pubsub-t.h"
#include "pool/reply.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pool;
struct sched_loop;
struct sched_tls_ctx;

/* Hash slots of a Redis Cluster. */
#define POOL_SLOTS 16384

/* Bytes of a slot bitmap (bit s of byte s / 8, least significant first). */
#define POOL_SLOT_BITMAP_SIZE (POOL_SLOTS / 8)

/* How channels are subscribed on a cluster (Redisson's
 * shardedSubscriptionMode). A single-node pool is always classic. */
enum pool_pubsub_mode {
    POOL_PUBSUB_AUTO = 0,    /* sharded if PUBSUB SHARDNUMSUB works (Redis >= 7) */
    POOL_PUBSUB_SHARDED = 1, /* SSUBSCRIBE on the shard owning the channel */
    POOL_PUBSUB_CLASSIC = 2, /* SUBSCRIBE (on the channel's slot owner) */
};

/* A change of the cluster's slot map, reported after the pool applied it
 * (routing and subscriptions already follow it). Sentinel: a new master
 * (every slot changed, masters 1), or the master lost (a READONLY reply:
 * masters 0, slots_served 0) until the sentinels name the next one. */
struct pool_topology_event {
    bool initial;          /* the first map since pool_start(): every slot "changed" */
    unsigned nchanged;     /* slots whose owner changed */
    const uint8_t *slots;  /* borrowed for the call: bitmap, bit set = owner changed */
    unsigned masters;      /* masters serving slots now */
    unsigned slots_served; /* slots with an owner now (16384 when fully covered) */
};

/* Called from the loop (never from inside a pool call) after each change
 * of owner of one or more slots: a failover, a migration, a resharding, a
 * Sentinel master switch. The callback may submit requests and start or
 * stop subscriptions. */
typedef void pool_topology_fn(void *arg, const struct pool_topology_event *ev);

/* True when bit slot is set in a slot bitmap. */
static inline bool pool_slot_bitmap_has(const uint8_t *bitmap, unsigned slot)
{
    return slot < POOL_SLOTS && (bitmap[slot >> 3] & (1u << (slot & 7))) != 0;
}

/* Reply callback: the one completion of a request (struct pool_result,
 * reply.h). */
typedef void pool_reply_fn(void *arg, const struct pool_result *res);

struct pool_opts {
    const char *host;            /* TCP host, or NULL when unix_path is set (single node) */
    int port;                    /* TCP port */
    const char *unix_path;       /* unix socket path, or NULL */
    const char *user;            /* AUTH user, or NULL */
    const char *password;        /* AUTH password, or NULL (no AUTH) */
    int db;                      /* SELECT db when non-zero */
    unsigned size;               /* command connections (>= 1) */
    unsigned connect_timeout_ms; /* per connect attempt */
    unsigned request_timeout_ms; /* oldest in-flight reply age before recycling */
    unsigned backoff_min_ms;     /* first reconnect delay */
    unsigned backoff_max_ms;     /* reconnect delay cap */
    /* Redis Cluster upstream: "host:port[,host:port...]" seed nodes (IPv6
     * as "[addr]:port"). When set, host, port and unix_path are ignored,
     * db must be 0 and size is per master. NULL: a single node. */
    const char *cluster_seeds;
    enum pool_pubsub_mode pubsub_mode; /* cluster only (AUTO or CLASSIC otherwise) */
    unsigned cluster_refresh_ms;       /* periodic topology refresh (cluster), re-ask (sentinel) */
    pool_topology_fn *on_topology;     /* borrowed: slot map changes (cluster, sentinel), or NULL */
    void *topology_arg;                /* borrowed: its argument */
    /* Redis Sentinel upstream: "host:port[,host:port...]" sentinels (IPv6
     * as "[addr]:port"), asked in this order for sentinel_master. When
     * set, host, port and unix_path are ignored and cluster_seeds must be
     * NULL; user, password and db are the master's. NULL: no sentinel. */
    const char *sentinels;
    const char *sentinel_master;   /* the master's name (SENTINEL MONITOR <name>) */
    const char *sentinel_user;     /* the sentinels' AUTH user, or NULL */
    const char *sentinel_password; /* the sentinels' AUTH password, or NULL (no AUTH) */
    /* Script batching (pool/batch.c): most requests one runner call carries
     * (0 or 1: every script is sent alone). Single node and Sentinel only. */
    unsigned batch_max;
    /* Called with every script request's result (pool_eval,
     * pool_eval_wait) just before its callback, or NULL: where the caller
     * observes round trips (res->rtt_us) without wrapping each callback.
     * Borrowed, as its argument. */
    pool_reply_fn *on_eval;
    void *eval_arg;
};

/* Fills opts with defaults (localhost:6379, size 2, 1000/3000/50/2000 ms,
 * no cluster, no sentinel, pub/sub AUTO, refresh every 1000 ms, batches
 * of up to 32 scripts). */
void pool_opts_default(struct pool_opts *o);

/* A script the pool keeps loaded. Text is borrowed for the pool's life.
 *
 * Batching (pool/batch.c): one script of the table may be the runner, a
 * script that runs several other scripts' bodies, one per request, in one
 * call: its KEYS are every request's keys in turn, its ARGV per request
 * the script's op number then the request's arguments, and it answers an
 * array of the requests' replies in order (an error element for a request
 * whose script failed). A script with batch_op >= 1 is that op of the
 * runner: requests of it with exactly batch_keys keys and batch_args
 * arguments that meet on a connection within one loop iteration go out as
 * one runner call, as if pipelined one by one (each caller gets its own
 * reply). Any other script, or a lone request, goes out as itself. */
struct pool_script {
    const char *name;    /* for logs */
    const char *text;    /* Lua source */
    unsigned batch_op;   /* >= 1: the runner's op number for this script; 0: never batched */
    unsigned batch_keys; /* batch_op: the script's KEYS count */
    unsigned batch_args; /* batch_op: the script's ARGV count */
    bool runner;         /* this is the batch runner (one per table at most) */
};

/* Copies opts (strings included). scripts are borrowed; their index is the
 * script id for pool_eval(). Returns 0 or -ENOMEM / -EINVAL. */
int pool_create(struct pool **out, struct sched_loop *loop, const struct pool_opts *opts,
                const struct pool_script *scripts, size_t nscripts);

/* Upstream TLS (rediss://, rediss-cluster://), set before pool_start() or
 * at any time after (a reload): every connection made from then on (every
 * node's, the topology connection's) runs a TLS handshake with ctx (a
 * SCHED_TLS_CLIENT context; the pool takes a reference; NULL turns TLS
 * off) before its AUTH, and the server's certificate must name
 * server_name, or the host the connection goes to (a cluster node's
 * announced host) when server_name is NULL or "". Connections already up
 * keep their session. A failed handshake is a failed connect: backoff and
 * retry, last_error "TLS: <OpenSSL's reason>" (a cluster: prefixed with
 * the node), requests fail fast meanwhile. Returns 0, -EINVAL (a unix
 * socket upstream) or -ENOMEM (nothing changed). */
int pool_set_tls(struct pool *p, struct sched_tls_ctx *ctx, const char *server_name);

/* Starts connecting (command and pub/sub connections; a cluster: the
 * topology connection, the nodes follow its first answer; sentinel: the
 * query and subscription connections to the first sentinel, the master
 * follows its answer). The host (the seeds, the sentinels) is resolved
 * here, blocking: start-up only; later lookups never block the loop.
 * Returns 0 or -errno (e.g. the host, or no seed or sentinel, resolves). */
int pool_start(struct pool *p);

/* Closes every connection; pending requests get -ECONNRESET callbacks and
 * subscribers POOL_SUB_LOST. Call pool_is_stopped() / run the loop until all
 * connections are released, then pool_destroy(). */
void pool_stop(struct pool *p);
bool pool_is_stopped(const struct pool *p);
void pool_destroy(struct pool *p);

/* True when at least one command connection is ready (scripts loaded);
 * a cluster: of at least one master. */
bool pool_is_ready(const struct pool *p);

/* Sends a command (argv borrowed for the call). hint picks the connection
 * (callers pass a per-client number so one client's requests stay in order
 * on one connection). Returns 0 (callback will come) or -ENOTCONN/-ENOMEM. */
int pool_command(struct pool *p, uint64_t hint, int argc, const char *const *argv,
                 const size_t *lens, pool_reply_fn *cb, void *arg);

/* As pool_command(), routed to the owner of slot (cluster; 0 <= slot <
 * POOL_SLOTS), or to any node when slot is -1, whatever argv[1] is (for
 * commands whose first argument is not the key: PUBSUB SHARDNUMSUB ch,
 * INFO). A single-node pool ignores slot. */
int pool_command_slot(struct pool *p, uint64_t hint, int slot, int argc, const char *const *argv,
                      const size_t *lens, pool_reply_fn *cb, void *arg);

/* EVALSHA of script id with numkeys keys: argv holds keys then args.
 * NOSCRIPT is retried once with a reload. Same return contract. In a
 * cluster the first key routes (the keys must share its slot, else Redis
 * answers CROSSSLOT); numkeys == 0 goes to any node. */
int pool_eval(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
              const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg);

/* Replicated writes (--sync-replicas): pool_eval_wait() sends "WAIT
 * replicas timeout_ms" right behind the EVALSHA, in the same write on the
 * same connection, so WAIT counts the replicas that acknowledged this
 * script's effects (and everything the connection wrote before). The
 * script's reply is held until WAIT answers; then the callback gets it,
 * with the replicas WAIT counted in its result (res->acks). A script re-sent (NOSCRIPT, MOVED, ASK,
 * TRYAGAIN, READONLY) is followed by a new WAIT where it runs. WAIT blocks
 * the connection in Redis for up to timeout_ms when fewer replicas answer,
 * and requests queued behind it on that connection wait too: keep
 * timeout_ms well below the request timeout. */
struct pool_wait {
    unsigned replicas;   /* in: WAIT's numreplicas, >= 1 */
    unsigned timeout_ms; /* in: WAIT's timeout in ms, >= 1 */
};

/* pool_eval() followed by WAIT (see struct pool_wait; w borrowed until the
 * callback, which comes after WAIT's answer). Same return contract. */
int pool_eval_wait(struct pool *p, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, struct pool_wait *w,
                   pool_reply_fn *cb, void *arg);

/* The cluster hash slot of key (Redis's HASH_SLOT: CRC16 of the hash tag,
 * the text between the first '{' and the first '}' after it when not
 * empty, else of the whole key) modulo 16384. What pool_command() and
 * pool_eval() route by; group multi-key scripts by it. */
uint16_t pool_slot(const char *key, size_t len);

/* Redisson's calcSlot(): the first '{' and the first '}' anywhere in the
 * key. Differs from pool_slot() only when a '}' comes before the first '{'. */
uint16_t pool_slot_redisson(const char *key, size_t len);

/* CRC16/XMODEM of buf, as the cluster specification defines it. */
uint16_t pool_crc16(const char *buf, size_t len);

/* The address ("host:port") of the master serving slot (< POOL_SLOTS), or
 * NULL when no master is known to; a single node: its address. Borrowed
 * until the loop runs again. */
const char *pool_slot_owner(const struct pool *p, unsigned slot);

/* True for a Redis Cluster upstream (opts.cluster_seeds). */
bool pool_is_cluster(const struct pool *p);

/* True for a Redis Sentinel upstream (opts.sentinels). */
bool pool_is_sentinel(const struct pool *p);

/* True when channels are subscribed with SSUBSCRIBE, so publishers must
 * use SPUBLISH for listeners to hear them; false for SUBSCRIBE/PUBLISH. In
 * AUTO mode false until the first topology is known (pool_is_ready()). */
bool pool_pubsub_sharded(const struct pool *p);

/* False while a cluster in AUTO mode has not answered the detection yet
 * (pool_pubsub_sharded() may still change); true otherwise. */
bool pool_pubsub_known(const struct pool *p);

/* A single-node pool whose upstream answers MOVED or ASK (it is a Redis
 * Cluster node) delivers instead the error reply
 *     UPSTREAM redis://HOST:PORT is a Redis Cluster node (it answered
 *     MOVED <slot> <addr>): use redis-cluster://HOST:PORT
 * (one line), logs it at ERROR once, keeps it as last_error and sets
 * pool_stats.upstream_is_cluster. The reply starts with this code: */
#define POOL_ERR_IS_CLUSTER_CODE "UPSTREAM"

/* Pub/sub: one upstream SUBSCRIBE (SSUBSCRIBE) per channel, one listener
 * per channel. Starting a sub copies the channel name. The listener gets
 * POOL_SUB_READY each time the subscription is confirmed (first time and
 * after every reconnect or move), POOL_SUB_MESSAGE per message,
 * POOL_SUB_LOST when the subscription was lost (its node's pub/sub
 * connection dropped, or, in a cluster, the channel's slot moved or its
 * shard failed over: messages may have been missed; READY follows once it
 * is subscribed again, on the new owner). Returns 0 or -ENOMEM / -EEXIST
 * (channel has a listener). */
int pool_sub_start(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                   pool_sub_fn *cb);

/* As pool_sub_start(), for the upstream subscription kind names (AUTO:
 * pool_sub_start()). Records are per name and namespace (classic,
 * sharded, pattern): an AUTO listener shares the namespace of the pool's
 * mode, so starting CLASSIC on a classic pool's AUTO channel (or SHARDED on
 * a sharded one's) while it has a listener is -EEXIST too. A pattern's home is its slot owner
 * (classic messages reach every node of a cluster). -EINVAL: bad kind. */
int pool_sub_start_kind(struct pool *p, struct pool_sub *s, const char *channel, size_t len,
                        enum pool_sub_kind kind, pool_sub_fn *cb);

/* During a POOL_SUB_MESSAGE callback: the channel the message was
 * published to (for a pattern, the matching channel; borrowed for the
 * call). */
const char *pool_sub_msg_channel(const struct pool *p, size_t *len);

/* Detaches the listener and sends UNSUBSCRIBE. No callback follows; s may
 * be freed at once. */
void pool_sub_stop(struct pool *p, struct pool_sub *s);

struct pool_stats {
    unsigned conns;            /* command connections configured (all masters) */
    unsigned conns_ready;      /* command connections ready */
    bool pubsub_ready;         /* pub/sub connection subscribed-capable (cluster: all masters') */
    uint64_t channels;         /* channels subscribed or subscribing */
    uint64_t requests;         /* requests sent */
    uint64_t inflight;         /* requests awaiting a reply */
    uint64_t reconnects;       /* successful reconnects after a loss */
    uint64_t restarts;         /* masters that answered with a new run_id (restarted) */
    uint64_t errors;           /* requests failed by connection loss or timeout */
    uint64_t batches;          /* writes (flushes) to command connections */
    uint64_t noscript_retries; /* NOSCRIPT reloads */
    uint64_t script_batches;   /* runner calls (batches of >= 2 scripts) */
    uint64_t batched;          /* requests that went out in those */
    const char *state;         /* "up", "connecting", "down"; cluster also "degraded" */
    const char *last_error;    /* last connection error text, or "" */
    /* Cluster (zero for a single node unless noted). */
    bool cluster;                /* a Redis Cluster upstream */
    bool upstream_is_cluster;    /* single node: it answered MOVED/ASK (POOL_ERR_IS_CLUSTER_CODE) */
    const char *pubsub_mode;     /* "classic", "sharded", "" (cluster, not yet detected) */
    unsigned nodes;              /* masters in the node table (1 for a single node) */
    unsigned nodes_ready;        /* of which with a ready command connection */
    unsigned slots_served;       /* slots with a known owner */
    uint64_t topology_refreshes; /* topology replies applied */
    uint64_t topology_changes;   /* slot map changes reported (on_topology calls) */
    uint64_t moved;              /* MOVED replies received (all nodes, ever) */
    uint64_t ask;                /* ASK replies received */
    uint64_t tryagain;           /* TRYAGAIN, CLUSTERDOWN, LOADING replies received */
    /* Sentinel (zero, false or "" otherwise). */
    bool sentinel;              /* a Redis Sentinel upstream */
    const char *master_name;    /* the monitored master's name */
    const char *master_addr;    /* "host:port" of the master in use, "" while none */
    const char *sentinel_addr;  /* the sentinel asked now ("host:port") */
    unsigned sentinels;         /* sentinels configured */
    bool sentinel_connected;    /* the query connection to sentinel_addr is ready */
    bool sentinel_subscribed;   /* the +switch-master/+promoted-slave subscription is up */
    uint64_t sentinel_answers;  /* answers naming a master */
    uint64_t sentinel_failures; /* sentinels given up on (connect, error, unknown name) */
    uint64_t master_switches;   /* a different master named (the first one not counted) */
    uint64_t switch_events;     /* +switch-master/+promoted-slave messages for this master */
    uint64_t readonly;          /* READONLY replies (the request waited for the new master) */
    uint64_t role_mismatches;   /* master connections refused: ROLE was not master */
};
void pool_get_stats(const struct pool *p, struct pool_stats *st);

/* One node of the pool, for INFO and /metrics. Strings are borrowed until
 * the loop runs again (a topology change may free the node). */
struct pool_node_stats {
    const char *addr;     /* "host:port" (or the unix socket path) */
    const char *id;       /* cluster node id, "" if unknown (single node) */
    const char *state;    /* "up", "connecting", "down", "draining" */
    const char *role;     /* "master"; "replica" or "gone" while draining */
    const char *health;   /* CLUSTER SHARDS health ("online", "failed", "loading"), or "" */
    unsigned slots;       /* slots it owns in the map (16384 for a single node) */
    unsigned conns;       /* command connections */
    unsigned conns_ready; /* of which ready */
    bool pubsub_ready;    /* its pub/sub connection is ready */
    uint64_t channels;    /* subscriptions homed on it */
    uint64_t requests;    /* caller requests sent to it (retries included) */
    uint64_t errors;      /* requests failed on it by connection loss or timeout */
    uint64_t moved;       /* MOVED replies it gave */
    uint64_t ask;         /* ASK replies it gave */
    uint64_t tryagain;    /* TRYAGAIN/CLUSTERDOWN/LOADING replies it gave */
    uint64_t latency_us;  /* round trip, moving average (1/8) of sampled requests; 0: none yet */
    uint64_t latency_last_us; /* the last sampled round trip */
};

/* Fills out[0..max) with the nodes' stats (active nodes first, each group
 * in order of creation) and returns how many nodes there are (may exceed
 * max). */
size_t pool_get_node_stats(const struct pool *p, struct pool_node_stats *out, size_t max);

#ifdef __cplusplus
}
#endif

#endif
