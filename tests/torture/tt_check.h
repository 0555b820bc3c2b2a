/* Torture suite: the checker. Reads every client log of a run, rebuilds
 * each hold, and judges the history against the fault list.
 *
 * A hold is [grant reply received, release sent] (conservative: the
 * client surely held it then). For two conflicting holds X and Y on one
 * name (exclusive locks, a writer with anyone, or more permit holders than
 * the semaphore has), X granted first, overlapping from Y's grant:
 * - past-deadline: Y's grant came after X's client-visible LEASE deadline
 *   (send of X's acquire + LEASE), or after Y's own (a grant read after
 *   send + LEASE is one a client must not use); a lease ends the promise;
 * - told: X was told it lost the lock: its release got LOCKLOST or
 *   NOTOWNER (told-lost), another error (told-error), its connection died
 *   (told-conn), or it never released (its process ended, told-noend);
 * - silent: anything else. A violation: someone was told it holds a lock
 *   while another holder was never told otherwise. That Y is told later
 *   (its own release gets LOCKLOST) does not excuse it: at Y's grant, X
 *   still held the lock, so the grant itself was wrong (the late grant).
 * - failover-lost (--cluster): X was told (told-lost or told-error) and a
 *   master was killed between X's grant and Y's: replication is
 *   asynchronous, so the grant (or a renewal) the replica had not received
 *   was gone on the new master, which gave the lock to Y. Allowed and
 *   documented (README: failover guarantees); counted apart.
 * Semaphores have no LEASE: at each grant, holders that were not told
 * must number at most the permits.
 *
 * Untold overlaps (issue 18's measure, stricter than the classes above):
 * a conflicting pair of holds, neither past a LEASE deadline, where
 * neither holder was told LOCKLOST (by a release, a retry of it, or the
 * reply to a re-entry) and the first holder's connection did not die: two
 * clients both told they hold the lock, and neither told otherwise. A
 * NOTOWNER after an "outcome unknown" release does not count as told here.
 * Counted always; violations ("untold") only with strict_untold (the
 * issue-18 classes switched on). Holds of one shared OWNER token (one
 * group) never conflict with each other.
 *
 * Also: every answer within its WAIT + bound + the time its client or its
 * proxy was stopped; fair-lock FIFO (see tt_check.c); every op answered;
 * after each cluster fault, service back on the names it touched: the
 * first acquire of such a name sent after the fault healed (the new owner
 * serves the slot) is granted within recovery_bound (if granted at all:
 * a nil or an error then is a violation as well). */
#ifndef LP_TESTS_TORTURE_TT_CHECK_H
#define LP_TESTS_TORTURE_TT_CHECK_H

#include "tt.h"

enum tt_overlap_class {
    TT_OV_SILENT = 0,
    TT_OV_TOLD_LOST,
    TT_OV_TOLD_ERROR,
    TT_OV_TOLD_CONN,
    TT_OV_TOLD_NOEND,
    TT_OV_PAST_DEADLINE,
    TT_OV_FAILOVER_LOST,
    TT_OV_COUNT,
};

#define TT_MAX_NAMES 32

/* Per lock name. */
struct tt_name_stat {
    char name[TT_NAME_MAX];
    long long holds;
    long long overlaps[TT_OV_COUNT];
    long long untold;
    long long fifo_pairs;
};

/* One violation, with the records that show it. */
struct tt_violation {
    const char *check;      /* "overlap", "wait-bound", "fifo", "lost-update", "leftover", ... */
    char name[TT_NAME_MAX]; /* lock name, or "" */
    char *text;             /* owned: description and op records */
};

struct tt_report {
    long long ops;                   /* lock-service ops (acquires and releases) */
    long long res_ops;               /* resource ops */
    long long by_cmd[TT_CMD_COUNT];  /* ops per command */
    long long by_res[TT_R_COUNT];    /* replies of lock-service ops, per class */
    long long grants[TT_CMD_COUNT];  /* granted acquires per kind */
    long long overlaps[TT_OV_COUNT]; /* conflicting hold pairs per class */
    long long untold;                /* conflicting pairs where nobody was told LOCKLOST */
    long long max_wait_overrun_us;   /* latest answer past WAIT (acquires with WAIT) */
    long long max_bound_overrun_us;  /* worst (answer - allowance); > 0 is a violation */
    long long fifo_pairs;            /* fair-lock pairs checked */
    long long fifo_inversions;
    long long unanswered;      /* ops with no reply at the end */
    long long sem_leak_bound;  /* permits faults may have leaked (see tt_live.c) */
    long long stuck_watchdog;  /* releases answered "still held", no LEASE */
    long long stuck_episodes;  /* of which the first of a client and name: violations */
    long long stuck_leased;    /* the same with a LEASE: held until it ends (documented) */
    long long idle_checked;    /* nil answers checked for an idle lock (tt_live.c) */
    long long idle_starved;    /* of which the lock was free long enough: violations */
    long long idle_max_gap_us; /* longest free stretch such a waiter saw */
    long long idle_multi_held; /* MULTILOCK waiters whose own name was free long enough but
                                  another of their names held: not starved */
    /* Cluster faults: the longest outage as the injector saw it (start to
     * healed), and the longest time from healed to the first grant of a
     * name the fault touched, among acquires sent after it healed. */
    long long cluster_faults, cluster_outage_max_us, cluster_recovery_max_us;
    /* Resource (filled by the driver from the resource Redis). */
    long long unfenced_writes, unfenced_lost;
    long long fenced_writes, fenced_lost, fenced_rejected;
    /* End state (filled by the driver). */
    long long blind_silent; /* negative control: silent overlaps when re-checked blind */
    long long leftover_keys;
    long long sem_count_end;
    long long rss_peak_kb[TT_MAX_PROXIES];
    long long rss_end_kb[TT_MAX_PROXIES];
    struct tt_name_stat names[TT_MAX_NAMES];
    int nnames;
    struct tt_violation *viol; /* owned array */
    int nviol, capviol;
};

struct tt_check_params {
    int sem_permits;
    long long bound_us;        /* answer bound beyond WAIT */
    long long fifo_margin_us;  /* A must be sent this much before B to be known ahead */
    long long fault_settle_us; /* a fault's effects are assumed to last this long after it */
    long long idle_gap_us;     /* a free lock must be granted to a waiter within this */
    long long
        live_settle_us;    /* after a fault, waiters may sleep this long (re-poll at lease end) */
    long long watchdog_us; /* the proxies' watchdog lease */
    long long recovery_bound_us; /* cluster faults: service back within this of healing */
    bool blind;                  /* class every overlap silent (the negative control's proof) */
    bool strict_untold;          /* an untold overlap is a violation */
    const struct tt_fault *faults;
    int nfaults;
};

struct tt_history;

/* Reads every client-*.log in dir; printed times count from t0_us (0:
 * the first op). NULL on error (message printed). */
struct tt_history *tt_history_load(const char *dir, long long t0_us);
void tt_history_free(struct tt_history *h);

/* Runs every history check, adding counts and violations to r. */
void tt_check_run(const struct tt_history *h, const struct tt_check_params *p, struct tt_report *r);

/* Adds a violation (printf-style text). */
void tt_report_add(struct tt_report *r, const char *check, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void tt_report_free(struct tt_report *r);

/* Violations of one check (NULL: any) on one name (NULL: any). */
int tt_report_count(const struct tt_report *r, const char *check, const char *name);

/* The counts of one name; all zero if the name was never held. */
struct tt_name_stat tt_check_name_stat(const struct tt_report *r, const char *name);

const char *tt_overlap_class_name(enum tt_overlap_class c);

/* Checks the checker on synthetic histories (tt_selftest.c); 0 on success. */
int tt_selftest_run(void);

#endif
