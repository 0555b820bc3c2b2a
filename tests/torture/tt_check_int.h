/* Torture suite: the checker's internals, shared by tt_history.c (loading
 * the logs, rebuilding holds, printing records), tt_check.c (safety:
 * overlaps, fair FIFO, answer bounds) and tt_live.c (liveness and leaks:
 * locks left held, idle locks nobody got, permits a fault may leak).
 *
 * Ownership: a history owns its op arrays; holds point into them and live
 * only inside tt_check_run. */
#ifndef LP_TESTS_TORTURE_TT_CHECK_INT_H
#define LP_TESTS_TORTURE_TT_CHECK_INT_H

#include <stddef.h>

#include "tt_check.h"

struct ck_op {
    int client, seq, proxy, lease, wait;
    int group; /* > 0: an OWNER token shared with other connections (same group) */
    enum tt_cmd cmd;
    enum tt_res res;
    long long t_send, t_reply, val; /* t_reply -1: none */
    char name[TT_NAME_MAX];
    char text[TT_TEXT_MAX];
};

struct ck_client {
    int id;
    struct ck_op *ops; /* owned, in seq order */
    int n, cap;
};

struct tt_history {
    struct ck_client *cl; /* owned */
    int n, cap;
    long long t_base; /* earliest send, for printing */
};

struct ck_hold {
    const struct ck_op *acq;     /* borrowed */
    const struct ck_op *rel;     /* borrowed: the first release, NULL if never released */
    const struct ck_op *last;    /* borrowed: the last retry of that release (or rel) */
    long long start, end;        /* grant reply, release send (LLONG_MAX: never) */
    long long deadline;          /* client-visible LEASE deadline, LLONG_MAX without */
    enum tt_overlap_class told;  /* TT_OV_SILENT: not told */
    bool stuck;                  /* its only release answered :0, "still held" */
    const struct ck_op *reentry; /* borrowed: a RELOCK while it was held, or NULL */
    bool locklost;               /* told LOCKLOST: by the RELOCK or a release (retries too) */
};

void *ck_xrealloc(void *p, size_t n);

/* The counters of one name in r (a shared sink once TT_MAX_NAMES are used). */
struct tt_name_stat *ck_name_stat(struct tt_report *r, const char *name);

/* Seconds from the history's first op; one op / one hold as text. */
double ck_rel_s(const struct tt_history *h, long long t);
void ck_op_text(const struct tt_history *h, const struct ck_op *o, char *buf, size_t n);
void ck_hold_text(const struct tt_history *h, const struct ck_hold *x, char *buf, size_t n);

/* True for an acquire answered with the lock (OK or a token). */
bool ck_granted(const struct ck_op *o);

/* True for an op Redis may or may not have applied: "outcome unknown",
 * the client's own timeout, or a connection lost with it in flight. */
bool ck_unknown_outcome(const struct ck_op *o);

/* Every hold of every client (unsorted); *count gets how many. */
struct ck_hold *ck_build_holds(const struct tt_history *h, int *count);

/* True if a triggered fault (plus the settle time) touches [from, to]. */
bool ck_faulted(const struct tt_check_params *p, long long settle, long long from, long long to);
long long ck_overlap_us(long long a0, long long a1, long long b0, long long b1);

/* tt_live.c: the liveness and leak checks; holds sorted by name, start. */
void ck_check_live(const struct tt_history *h, const struct tt_check_params *p, struct tt_report *r,
                   struct ck_hold *holds, int n);

#endif
