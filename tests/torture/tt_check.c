/* Torture suite: the safety checks of the history (see tt_check.h for the
 * rules): overlaps, fair FIFO, answers within their bounds.
 *
 * Fair-lock FIFO: for two FAIRLOCK waiters A and B of one name (through
 * any proxies: the queue is in Redis), both granted, A known to be queued
 * before B (A was sent more than fifo_margin before B, and A was still
 * waiting when B was sent), with no fault anywhere from A's send to the
 * later grant (plus the settle time): A must be granted first. The margin
 * covers the time from a client's send to its first attempt reaching
 * Redis's queue; without a fault nothing should take that long on
 * loopback. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_check_int.h"

static int hold_cmp(const void *a, const void *b)
{
    const struct ck_hold *x = a, *y = b;
    int c = strcmp(x->acq->name, y->acq->name);

    if (c)
        return c;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* ---- overlaps ---------------------------------------------------------------------------- */

static bool conflict(const struct ck_hold *x, const struct ck_hold *y)
{
    if (x->acq->group > 0 && x->acq->group == y->acq->group)
        return false; /* one shared OWNER token: one owner */
    return !(x->acq->cmd == TT_RLOCK && y->acq->cmd == TT_RLOCK);
}

/* Neither holder told LOCKLOST, the first one's connection alive. */
static bool untold(enum tt_overlap_class c, const struct ck_hold *x, const struct ck_hold *y)
{
    if (c == TT_OV_PAST_DEADLINE || c == TT_OV_FAILOVER_LOST || c == TT_OV_TOLD_CONN ||
        c == TT_OV_TOLD_NOEND)
        return false;
    return !x->locklost && !y->locklost;
}

static void report_untold(const struct tt_history *h, struct tt_report *r, const struct ck_hold *x,
                          const struct ck_hold *y, enum tt_overlap_class c)
{
    char tx[1400], ty[1400];

    ck_hold_text(h, x, tx, sizeof(tx));
    ck_hold_text(h, y, ty, sizeof(ty));
    tt_report_add(r, "untold", x->acq->name,
                  "untold overlap on %s from %.3f (class %s): both holders were told they hold "
                  "it, neither was ever told LOCKLOST\n%s\n%s",
                  x->acq->name, ck_rel_s(h, y->start), tt_overlap_class_name(c), tx, ty);
}

/* A master was killed from X's grant to Y's (the failover-lost class): a
 * cluster master-kill, or with Sentinel a kill or a SENTINEL FAILOVER
 * (Sentinel does not stop the old master's writes before it promotes a
 * replica, as CLUSTER FAILOVER does). */
static bool master_killed(const struct tt_check_params *p, long long from, long long to)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct tt_fault *f = &p->faults[i];
        bool kind = f->kind == TT_F_MASTER_KILL || f->kind == TT_F_SENTINEL_KILL ||
                    f->kind == TT_F_SENTINEL_FAILOVER;

        if (f->triggered && kind && f->start_us >= from && f->start_us <= to)
            return true;
    }
    return false;
}

static enum tt_overlap_class classify(const struct tt_check_params *p, const struct ck_hold *x,
                                      const struct ck_hold *y)
{
    if (p->blind)
        return TT_OV_SILENT;
    if (y->start > x->deadline || y->start > y->deadline)
        return TT_OV_PAST_DEADLINE;
    if ((x->told == TT_OV_TOLD_LOST || x->told == TT_OV_TOLD_ERROR) &&
        master_killed(p, x->start, y->start))
        return TT_OV_FAILOVER_LOST;
    return x->told;
}

static void report_overlap(const struct tt_history *h, struct tt_report *r, const struct ck_hold *x,
                           const struct ck_hold *y, const char *what)
{
    char tx[1400], ty[1400];

    ck_hold_text(h, x, tx, sizeof(tx));
    ck_hold_text(h, y, ty, sizeof(ty));
    tt_report_add(r, "overlap", x->acq->name,
                  "silent overlap on %s (%s) from %.3f: the first holder was never told it lost "
                  "the lock, and the second grant came before any LEASE deadline\n%s\n%s",
                  x->acq->name, what, ck_rel_s(h, y->start), tx, ty);
}

/* Semaphore grant y with the active holds before it. */
static void count_overlap(struct tt_report *r, const char *name, enum tt_overlap_class c)
{
    r->overlaps[c]++;
    ck_name_stat(r, name)->overlaps[c]++;
}

static void check_permits(const struct tt_history *h, const struct tt_check_params *p,
                          struct tt_report *r, struct ck_hold **act, int nact,
                          const struct ck_hold *y, int permits)
{
    long long oldest = y->start;
    int untold = 0;

    for (int i = 0; i < nact; i++) {
        untold += act[i]->told == TT_OV_SILENT;
        if (act[i]->told == TT_OV_SILENT && act[i]->start < oldest)
            oldest = act[i]->start;
    }
    if (nact + 1 <= permits)
        return;
    if (untold + 1 <= permits) {
        count_overlap(r, y->acq->name, TT_OV_TOLD_CONN); /* over N only with told holders */
        return;
    }
    if (master_killed(p, oldest, y->start)) {
        /* A permit has no owner to re-check after a failover: one taken
         * on the old master and not replicated is gone unseen. */
        count_overlap(r, y->acq->name, TT_OV_FAILOVER_LOST);
        return;
    }
    count_overlap(r, y->acq->name, TT_OV_SILENT);
    for (int i = 0; i < nact; i++) {
        if (act[i]->told == TT_OV_SILENT) {
            char what[64];

            snprintf(what, sizeof(what), "%d untold permit holders of %d", untold + 1, permits);
            report_overlap(h, r, act[i], y, what);
            break; /* one record pair per grant is enough */
        }
    }
}

/* Holds [from, to) of one name, sorted by start. */
static void check_name(const struct tt_history *h, const struct tt_check_params *p,
                       struct tt_report *r, struct ck_hold *g, int n)
{
    struct ck_hold **act = ck_xrealloc(NULL, (size_t)n * sizeof(*act));
    bool sem = g[0].acq->cmd == TT_SEM_ACQ;
    int nact = 0;

    ck_name_stat(r, g[0].acq->name)->holds += n;
    for (int j = 0; j < n; j++) {
        struct ck_hold *y = &g[j];
        int k = 0;

        for (int i = 0; i < nact; i++) { /* drop holds that ended before y's grant */
            if (act[i]->end > y->start)
                act[k++] = act[i];
        }
        nact = k;
        if (sem) {
            check_permits(h, p, r, act, nact, y, p->sem_permits);
        } else {
            for (int i = 0; i < nact; i++) {
                enum tt_overlap_class c;

                if (!conflict(act[i], y))
                    continue;
                c = classify(p, act[i], y);
                count_overlap(r, y->acq->name, c);
                if (c == TT_OV_SILENT)
                    report_overlap(h, r, act[i], y, "two holders");
                if (!p->blind && untold(c, act[i], y)) {
                    r->untold++;
                    ck_name_stat(r, y->acq->name)->untold++;
                    if (p->strict_untold && c != TT_OV_SILENT) /* silent: reported above */
                        report_untold(h, r, act[i], y, c);
                }
            }
        }
        act[nact++] = y;
    }
    free(act);
}

/* ---- fair-lock FIFO ----------------------------------------------------------------------- */

bool ck_faulted(const struct tt_check_params *p, long long settle, long long from, long long to)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct tt_fault *f = &p->faults[i];

        if (f->triggered && f->start_us <= to && f->end_us + settle >= from)
            return true;
    }
    return false;
}

static void check_fifo(const struct tt_history *h, const struct tt_check_params *p,
                       struct tt_report *r, const struct ck_hold *g, int n)
{
    for (int i = 0; i < n; i++) {
        const struct ck_hold *a = &g[i];

        for (int j = 0; j < n; j++) {
            const struct ck_hold *b = &g[j];
            char ta[1400], tb[1400];

            if (b->acq->t_send - a->acq->t_send <= p->fifo_margin_us || a->start <= b->acq->t_send)
                continue;
            if (ck_faulted(p, p->fault_settle_us, a->acq->t_send,
                           a->start > b->start ? a->start : b->start))
                continue;
            r->fifo_pairs++;
            ck_name_stat(r, a->acq->name)->fifo_pairs++;
            if (b->start >= a->start)
                continue;
            r->fifo_inversions++;
            ck_hold_text(h, a, ta, sizeof(ta));
            ck_hold_text(h, b, tb, sizeof(tb));
            tt_report_add(r, "fifo", a->acq->name,
                          "fair lock %s granted out of order: the second waiter, sent %.0f ms "
                          "after the first, got it first (no fault near)\n%s\n%s",
                          a->acq->name, (double)(b->acq->t_send - a->acq->t_send) / 1000, ta, tb);
        }
    }
}

/* ---- answers within bounds ------------------------------------------------------------------ */

long long ck_overlap_us(long long a0, long long a1, long long b0, long long b1)
{
    long long lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;

    return hi > lo ? hi - lo : 0;
}

/* Time in [send, reply] during which the op's client or its proxy was stopped. */
static long long stalled_us(const struct tt_check_params *p, const struct ck_op *o)
{
    long long s = 0;

    for (int i = 0; i < p->nfaults; i++) {
        const struct tt_fault *f = &p->faults[i];
        bool mine = ((f->kind == TT_F_CLIENT_STOP || f->kind == TT_F_CLIENT_STOP_LEASE) &&
                     f->target == o->client) ||
                    (f->kind == TT_F_PROXY_STOP && f->target == o->proxy);

        if (f->triggered && mine)
            s += ck_overlap_us(o->t_send, o->t_reply, f->start_us, f->end_us);
    }
    return s;
}

static void check_answer(const struct tt_history *h, const struct tt_check_params *p,
                         struct tt_report *r, const struct ck_op *o)
{
    long long elapsed, allow;
    char t[400];

    if (o->t_reply < 0) {
        r->unanswered++;
        ck_op_text(h, o, t, sizeof(t));
        tt_report_add(r, "unanswered", o->name, "never answered (the run ended first)\n    %s", t);
        return;
    }
    if (tt_cmd_is_acquire(o->cmd) && o->wait < 0)
        return; /* waits forever by request */
    elapsed = o->t_reply - o->t_send;
    if (tt_cmd_is_acquire(o->cmd) && elapsed - (long long)o->wait * 1000 > r->max_wait_overrun_us)
        r->max_wait_overrun_us = elapsed - (long long)o->wait * 1000;
    allow = (o->wait > 0 ? (long long)o->wait * 1000 : 0) + p->bound_us + stalled_us(p, o);
    if (elapsed - allow > r->max_bound_overrun_us)
        r->max_bound_overrun_us = elapsed - allow;
    if (elapsed <= allow)
        return;
    ck_op_text(h, o, t, sizeof(t));
    tt_report_add(r, "wait-bound", o->name,
                  "answered %.0f ms after it was sent; allowed WAIT + %.0f ms bound + %.0f ms "
                  "stopped = %.0f ms\n    %s",
                  (double)elapsed / 1000, (double)p->bound_us / 1000,
                  (double)stalled_us(p, o) / 1000, (double)allow / 1000, t);
}

static void count_and_bound(const struct tt_history *h, const struct tt_check_params *p,
                            struct tt_report *r)
{
    for (int c = 0; c < h->n; c++) {
        for (int i = 0; i < h->cl[c].n; i++) {
            const struct ck_op *o = &h->cl[c].ops[i];

            r->by_cmd[o->cmd]++;
            if (!tt_cmd_is_acquire(o->cmd) && !tt_cmd_is_release(o->cmd) && o->cmd != TT_RELOCK) {
                r->res_ops++;
                continue;
            }
            r->ops++;
            r->by_res[o->res]++;
            if (ck_granted(o))
                r->grants[o->cmd]++;
            check_answer(h, p, r, o);
        }
    }
}

/* ---- service after cluster faults ------------------------------------------------------- */

static bool touched(const struct tt_fault *f, const char *name)
{
    for (int i = 0; i < TT_WORKLOAD_NAMES; i++) {
        if ((f->names & (1u << i)) && strcmp(tt_workload_names[i], name) == 0)
            return true;
    }
    return false;
}

/* The acquire of a touched name sent after f healed that was answered
 * first; with grant set, the first that was granted. NULL if none. */
static const struct ck_op *first_after(const struct tt_history *h, const struct tt_fault *f,
                                       bool grant)
{
    const struct ck_op *best = NULL;

    for (int c = 0; c < h->n; c++) {
        for (int i = 0; i < h->cl[c].n; i++) {
            const struct ck_op *o = &h->cl[c].ops[i];

            if (!tt_cmd_is_acquire(o->cmd) || o->t_send < f->end_us || o->t_reply < 0 ||
                !touched(f, o->name) || (grant && !ck_granted(o)))
                continue;
            if (!best || o->t_reply < best->t_reply)
                best = o;
            break; /* this client's later ops are answered later */
        }
    }
    return best;
}

/* Service is back when a touched name is granted again within the bound
 * after the fault healed (the injector's view: the proxies follow the new
 * master). Errors in between are allowed: a proxy that has not refreshed
 * its map yet, or a new master whose replicas still sync, answers an
 * error at once, and the client tries again. */
static void check_recovery(const struct tt_history *h, const struct tt_check_params *p,
                           struct tt_report *r)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct tt_fault *f = &p->faults[i];
        const struct ck_op *o, *first;
        long long rec;
        char t[400];

        if (!f->triggered || f->kind < TT_F_SLOT_MIGRATE || f->names == 0)
            continue;
        r->cluster_faults++;
        if (f->end_us - f->start_us > r->cluster_outage_max_us)
            r->cluster_outage_max_us = f->end_us - f->start_us;
        first = first_after(h, f, false);
        if (!first)
            continue; /* no acquire after it (unanswered ops are reported anyway) */
        o = first_after(h, f, true);
        rec = o ? o->t_reply - f->end_us : -1;
        if (o && rec > r->cluster_recovery_max_us)
            r->cluster_recovery_max_us = rec;
        if (o && rec <= p->recovery_bound_us)
            continue;
        if (!o && first->res == TT_R_NIL && first->wait >= 0)
            continue; /* contended: it waited its WAIT out (idle locks are judged apart) */
        ck_op_text(h, o ? o : first, t, sizeof(t));
        tt_report_add(r, "recovery", (o ? o : first)->name,
                      "after %s (healed at %.3f), no acquire of a name it touched was granted "
                      "within %.0f ms (first grant: %s)\n    %s",
                      tt_fault_name(f->kind), ck_rel_s(h, f->end_us),
                      (double)p->recovery_bound_us / 1000, o ? "too late" : "none", t);
    }
}

/* ---- entry ------------------------------------------------------------------------------- */

void tt_check_run(const struct tt_history *h, const struct tt_check_params *p, struct tt_report *r)
{
    int n, from = 0;
    struct ck_hold *holds = ck_build_holds(h, &n);

    r->max_wait_overrun_us = r->max_bound_overrun_us = LLONG_MIN; /* none yet */
    count_and_bound(h, p, r);
    if (n > 0)
        qsort(holds, (size_t)n, sizeof(*holds), hold_cmp);
    ck_check_live(h, p, r, holds, n);
    check_recovery(h, p, r);
    for (int i = 1; i <= n; i++) {
        if (i < n && strcmp(holds[i].acq->name, holds[from].acq->name) == 0)
            continue;
        check_name(h, p, r, &holds[from], i - from);
        if (holds[from].acq->cmd == TT_FAIRLOCK)
            check_fifo(h, p, r, &holds[from], i - from);
        from = i;
    }
    free(holds);
}
