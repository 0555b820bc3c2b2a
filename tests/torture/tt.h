/* The lockproxy torture suite: shared types of the driver, the client
 * processes and the checker.
 *
 * Design: one driver process starts a lock Redis (faulted), a resource
 * Redis (never faulted), one or two lockproxies, and forks every client
 * as its own process. Clients record each operation as two lines in their
 * own log file (tt_log), "S" when sent and "R" when answered, stamped
 * with CLOCK_MONOTONIC in microseconds (one clock for every process on
 * the box, so the stamps compare across processes). The driver injects
 * faults on a schedule and records them (struct tt_fault). After the run
 * the checker (tt_check.c) reads every log and the fault list and judges:
 * overlaps of holds, lost updates in the resource Redis, wait bounds, fair
 * FIFO, leftovers.
 *
 * Client <-> driver: a MAP_SHARED page (struct tt_shm) made before the
 * forks. Each client owns one slot and publishes what it is doing (idle,
 * waiting, holding); the driver sets `want` to ask a client to act on its
 * next hold (stop itself past its lease, reset its connection), and `stop`
 * to end the run. */
#ifndef LP_TESTS_TORTURE_TT_H
#define LP_TESTS_TORTURE_TT_H

#include <sys/types.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define TT_MAX_CLIENTS   64
#define TT_MAX_PROXIES   2
#define TT_NAME_MAX      40
#define TT_TEXT_MAX      96
#define TT_PATH_MAX      256
#define TT_SCRIPT_CLIENT 100 /* first client id of the timed scenarios' clients */
#define TT_SHARED_CLIENT 200 /* + id: the log of a workload client's second connection */

/* Commands a client sends (acquires first, then releases, then resource
 * operations in the resource Redis). */
enum tt_cmd {
    TT_LOCK = 0,   /* LOCK name [LEASE] [WAIT] */
    TT_FENCED,     /* LOCK name FENCED [LEASE] [WAIT] */
    TT_RLOCK,      /* RLOCK */
    TT_WLOCK,      /* WLOCK */
    TT_FAIRLOCK,   /* FAIRLOCK */
    TT_SEM_ACQ,    /* SEM.ACQUIRE name 1 [WAIT] */
    TT_UNLOCK,     /* UNLOCK (plain and fenced) */
    TT_RUNLOCK,    /* RUNLOCK */
    TT_WUNLOCK,    /* WUNLOCK */
    TT_FAIRUNLOCK, /* FAIRUNLOCK */
    TT_SEM_REL,    /* SEM.RELEASE name 1 */
    TT_RES_GET,    /* unfenced read of the resource */
    TT_RES_SET,    /* unfenced write of the resource */
    TT_RES_FREAD,  /* fenced read (token checked) */
    TT_RES_FWRITE, /* fenced write (token checked) */
    /* The issue-18 workload (--relock-workload), after the others so the
     * ranges above keep their meaning: */
    TT_MULTILOCK,   /* MULTILOCK n1 n2 WAIT: logged as one acquire op per name */
    TT_MULTIUNLOCK, /* MULTIUNLOCK n1 n2: one release op per name */
    TT_RELOCK,      /* LOCK name WAIT again on the connection that holds it (re-entry) */
    TT_CMD_COUNT,
};

/* How an operation was answered. */
enum tt_res {
    TT_R_NONE = 0, /* no reply recorded (process ended first) */
    TT_R_OK,       /* +OK */
    TT_R_TOKEN,    /* :n for LOCK ... FENCED (val = token) */
    TT_R_NIL,      /* nil: WAIT ran out */
    TT_R_INT,      /* :n (val) */
    TT_R_STR,      /* bulk string (val = its number, or 0) */
    TT_R_LOCKLOST, /* -LOCKLOST */
    TT_R_NOTOWNER, /* -NOTOWNER */
    TT_R_UPSTREAM, /* -UPSTREAM ... */
    TT_R_STALE,    /* the fenced resource refused a stale token */
    TT_R_ERR,      /* any other error reply (text kept) */
    TT_R_CONN,     /* connection lost or reset, or no connection */
    TT_R_TIMEOUT,  /* the client's own read timeout ran out */
    TT_R_COUNT,
};

/* What a client slot is doing right now (published for the injector). */
enum tt_state {
    TT_ST_IDLE = 0,
    TT_ST_WAITING, /* an acquire is in flight */
    TT_ST_HOLDING, /* holds a lock or permit */
};

/* Requests from the driver to one client, acted on at its next hold. */
enum tt_want {
    TT_WANT_NONE = 0,
    TT_WANT_STOP_HOLD,  /* take a LEASE'd lock, then SIGSTOP yourself holding it */
    TT_WANT_RESET_HOLD, /* reset your proxy connection while holding */
};

struct tt_slot {
    _Atomic int pid;              /* the client process, 0 before fork */
    _Atomic int state;            /* enum tt_state */
    _Atomic int lease_ms;         /* LEASE of the current acquire, 0 = watchdog */
    _Atomic int want;             /* enum tt_want, cleared by the client when done */
    _Atomic int self_stopped;     /* set just before the client stops itself */
    _Atomic long long stopped_us; /* when it stopped itself */
    _Atomic int stop_lease_ms;    /* the lease it holds while stopped */
    _Atomic long long ops;        /* operations completed */
    _Atomic int exited;           /* the client finished its loop */
    _Atomic int connected;        /* a scripted client is connected, waiting for t0 */
};

struct tt_shm {
    _Atomic int stop;                         /* end the run: finish the current op and exit */
    _Atomic long long t0_us;                  /* scenario time origin */
    struct tt_slot slot[TT_MAX_CLIENTS + 16]; /* workload, scripted, one auxiliary */
};

/* Fault kinds; the bit (1 << kind) selects it in --faults. */
enum tt_fault_kind {
    TT_F_REDIS_KILL = 0,    /* kill -9 the lock Redis, restart it (AOF) */
    TT_F_REDIS_SLEEP,       /* DEBUG SLEEP on the lock Redis */
    TT_F_KILL_CMD_CONN,     /* CLIENT KILL one proxy command connection */
    TT_F_KILL_PUBSUB_CONN,  /* CLIENT KILL the pub/sub connections */
    TT_F_PROXY_STOP,        /* SIGSTOP a proxy past the watchdog lease, SIGCONT */
    TT_F_PROXY_KILL,        /* kill -9 a proxy, restart it on its port */
    TT_F_CLIENT_STOP,       /* SIGSTOP a waiting client, SIGCONT */
    TT_F_CLIENT_STOP_LEASE, /* a client stops itself holding a LEASE'd lock, past the lease */
    TT_F_CLIENT_RESET,      /* a client resets its connection (RST) while waiting or holding */
    TT_F_SLOW_READER,       /* a client pipelines requests and never reads */
    TT_F_PARTITION,         /* the fault relay cuts P0 from Redis (both directions paused),
                               then heals, sometimes with a reset (--partitions) */
    /* --cluster only (the lock Redis is a 6-node Redis Cluster): */
    TT_F_SLOT_MIGRATE,     /* move the slot of a workload name to another master */
    TT_F_CLUSTER_FAILOVER, /* CLUSTER FAILOVER on the replica of a workload name's master */
    TT_F_MASTER_KILL,      /* kill -9 a workload name's master; its replica takes over; the
                              killed node comes back as a replica */
    /* --sentinel only (the lock Redis is a master with 2 replicas and 3 sentinels): */
    TT_F_SENTINEL_FAILOVER, /* SENTINEL FAILOVER */
    TT_F_SENTINEL_KILL,     /* kill -9 the master; the sentinels promote a replica; the killed
                               node comes back and the sentinels make it a replica */
    TT_F_COUNT,
};

/* The fault kinds of a single lock Redis, and of a cluster (--cluster).
 * The default set leaves partition out until it is switched on
 * (--partitions or LP_TORTURE_PARTITIONS=1, torture.c). */
#define TT_F_SINGLE_MASK ((1u << TT_F_SLOT_MIGRATE) - 1)
#define TT_F_CLUSTER_MASK \
    ((1u << TT_F_SLOT_MIGRATE) | (1u << TT_F_CLUSTER_FAILOVER) | (1u << TT_F_MASTER_KILL))
#define TT_F_SENTINEL_MASK ((1u << TT_F_SENTINEL_FAILOVER) | (1u << TT_F_SENTINEL_KILL))

/* One injected fault, as the checker sees it. */
struct tt_fault {
    enum tt_fault_kind kind;
    int target;         /* proxy index, client id, or -1 */
    long long start_us; /* monotonic */
    long long end_us;   /* healed (restarted, resumed) */
    int param;          /* ms or bytes, per kind */
    unsigned names;     /* cluster faults: workload names on the slots or master touched
                           (bit i: tt_workload_names[i]) */
    bool triggered;     /* the fault actually happened (a target was found) */
    bool scenario;      /* injected by a timed scenario, not by the schedule */
    char note[TT_TEXT_MAX];
};

/* Settings of a run. */
struct tt_config {
    int duration_s;          /* length of the random-fault phase */
    int clients;             /* workload clients */
    int proxies;             /* 1 or 2 */
    unsigned seed;           /* everything random derives from it */
    const char *io;          /* "uring" or "epoll" */
    unsigned faults;         /* mask of enum tt_fault_kind */
    bool negative;           /* negative control: LEASE shorter than the hold, no faults */
    bool scenarios;          /* run the timed scenarios first */
    bool long_run;           /* faults keep coming (cycles), not one of each */
    const char *json_path;   /* machine-readable summary, or NULL */
    const char *log_dir;     /* keep the client logs here, or NULL (temp dir) */
    int rss_limit_mb;        /* proxy peak RSS bound */
    int watchdog_ms;         /* --lock-watchdog-timeout of the proxies */
    int upstream_timeout_ms; /* --upstream-timeout of the proxies */
    int linger_ms;           /* --subscription-linger of the proxies */
    int sem_permits;         /* permits of the semaphore */
    bool cluster;            /* the lock Redis is a Redis Cluster (redis-cluster://) */
    bool sentinel;           /* the lock Redis is Sentinel-managed (redis-sentinel://) */
    int sync_replicas;       /* --sync-replicas of the proxies, 0 off */
    int sync_timeout_ms;     /* --sync-timeout of the proxies */
    const char *report_only; /* --report-only: checks ("stuck-hold,fifo") whose violations are
                                printed but do not fail the run, or NULL */
    bool partitions;         /* P0's upstream goes through the fault relay; partition faults */
    bool relock;             /* the issue-18 workload: re-lock after a loss, shared OWNER
                                tokens, MULTILOCK; untold overlaps are violations */
    unsigned relock_kinds;   /* its kinds (bit: TT_K_*), all by default */
};

/* The kinds of the issue-18 workload (--relock-kinds). */
#define TT_K_REENTER 1u /* hold long, LOCK again on the same connection, UNLOCK per grant */
#define TT_K_SHARED  2u /* one OWNER token on two connections */
#define TT_K_MULTI   4u /* MULTILOCK of both plain names */
#define TT_K_ALL     7u

/* Where a client connects and what it runs. */
struct tt_client_cfg {
    int id;            /* 0.. workload, TT_SCRIPT_CLIENT.. scripted */
    int proxy;         /* proxy index */
    int proxy_port;    /* its port (a restarted proxy keeps it) */
    int resource_port; /* resource Redis */
    unsigned seed;
    bool negative;
    char log_path[TT_PATH_MAX + 32];
    char log_path2[TT_PATH_MAX + 32]; /* the second connection's log (issue-18 workload) */
    struct tt_shm *shm;               /* borrowed: shared page */
    struct tt_slot *slot;             /* borrowed: this client's slot */
    /* scripted clients (the timed scenarios) only: */
    const char *script_cmd;  /* acquire command line, e.g. "LOCK k WAIT 4000" */
    enum tt_cmd script_kind; /* its kind */
    int script_at_ms;        /* send time after shm->t0_us */
    int script_hold_ms;      /* hold after the grant */
    bool script_relock;      /* after the hold, LOCK again (re-entry), then UNLOCK per grant */
    bool relock;             /* workload: the issue-18 kinds too */
    unsigned relock_kinds;   /* which of them (TT_K_*) */
};

/* Lock names of the workload, and their kinds. */
#define TT_LOCK_NAMES 2 /* tt:lock:0..1, LOCK and LOCK ... FENCED */
#define TT_RW_NAMES   1 /* tt:rw:0 */
#define TT_FAIR_NAMES 2 /* tt:fair:0..1 */
#define TT_SEM_NAME   "tt:sem:0"

/* Every lock name of the workload (the cluster faults pick among them). */
#define TT_WORKLOAD_NAMES 6
extern const char *const tt_workload_names[TT_WORKLOAD_NAMES];

/* Monotonic microseconds (one clock for every process of the run). */
long long tt_now_us(void);
void tt_sleep_us(long long us);

/* Deterministic PRNG (splitmix64 seeded). */
struct tt_rng {
    unsigned long long s;
};
void tt_rng_seed(struct tt_rng *r, unsigned long long seed);
unsigned long long tt_rng_next(struct tt_rng *r);
/* Uniform in [lo, hi]. */
int tt_rng_range(struct tt_rng *r, int lo, int hi);

const char *tt_cmd_name(enum tt_cmd c);
const char *tt_res_name(enum tt_res r);
const char *tt_fault_name(enum tt_fault_kind k);
/* Parses a fault name; -1 if unknown. */
int tt_fault_parse(const char *name);

/* True for the commands that take a lock or permit. */
bool tt_cmd_is_acquire(enum tt_cmd c);
bool tt_cmd_is_release(enum tt_cmd c);

/* Runs a workload or scripted client; never returns (_exit). */
void tt_client_main(const struct tt_client_cfg *cfg) __attribute__((noreturn));

#endif
