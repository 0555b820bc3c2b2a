/* Torture suite: liveness and leak checks (see tt_check_int.h).
 *
 * Stuck holds: the workload never re-enters a lock, so a release answered
 * :0 ("still held") means the owner holds a count it does not know of: an
 * earlier acquire whose outcome was unknown was applied after all and the
 * next acquire re-entered it. With a LEASE that count ends with the lease
 * (as documented for unknown outcomes); without one the watchdog renews it
 * for as long as the connection lives, and nobody else can take the lock:
 * a violation.
 *
 * Idle locks: "answered within WAIT" is met by a nil too, so a lock nobody
 * can get would pass it. A waiter answered nil is a violation when, during
 * its wait, the lock was free for idle_gap in a row: no client held it (a
 * conflicting hold, for a reader: a writer), no acquire with an unknown
 * outcome may still hold it (until its lease or the watchdog lease ran
 * out), no holder that was told it lost the lock may still hold it in
 * Redis (until its lease ran out), and no fault was near (live_settle
 * after it: a wake-up lost to a fault costs a sleep until the holder's
 * lease end). Semaphores are left out (their leaks are judged by count).
 * A MULTILOCK waiter needs every name it names at once: what kept any of
 * them busy kept it waiting (its other names' ops are the same client's
 * MULTILOCK ops in flight with it). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_check_int.h"

/* ---- permits a fault may have leaked ------------------------------------------------------ */

static bool proxy_killed(const struct tt_check_params *p, int proxy, long long from, long long to)
{
    for (int i = 0; i < p->nfaults; i++) {
        const struct tt_fault *f = &p->faults[i];

        if (f->triggered && f->kind == TT_F_PROXY_KILL && f->target == proxy &&
            f->start_us >= from && f->start_us <= to)
            return true;
    }
    return false;
}

/* A SEM op Redis may or may not have applied, where nobody can return
 * the permit: the proxy said "outcome unknown", or refused an acquire as
 * not replicated (--sync-replicas: its permits stay taken, README), or the
 * proxy died with the op in flight. */
static bool sem_op_unknown(const struct tt_check_params *p, const struct ck_op *o)
{
    if (o->cmd != TT_SEM_ACQ && o->cmd != TT_SEM_REL)
        return false;
    if (o->res == TT_R_UPSTREAM && strstr(o->text, "outcome unknown"))
        return true;
    if (o->cmd == TT_SEM_ACQ && o->res == TT_R_ERR && strncmp(o->text, "NOREPLICAS", 10) == 0)
        return true;
    return (o->res == TT_R_CONN || o->res == TT_R_TIMEOUT) &&
           proxy_killed(p, o->proxy, o->t_send, o->t_reply);
}

/* RSemaphore permits have no lease: one held through a proxy that is
 * killed -9, or taken by an acquire whose outcome is unknown, stays taken
 * (the proxy returns permits when a client disconnects, or when it stops
 * cleanly, not when it dies). The bound is how many permits the faults of
 * this run may have leaked that way; the driver fails the run if more are
 * missing at the end, or if there are more than the semaphore had. */
static void check_sem_leaks(const struct tt_history *h, const struct tt_check_params *p,
                            struct tt_report *r, const struct ck_hold *holds, int n)
{
    for (int c = 0; c < h->n; c++) {
        for (int i = 0; i < h->cl[c].n; i++)
            r->sem_leak_bound += sem_op_unknown(p, &h->cl[c].ops[i]);
    }
    for (int i = 0; i < n; i++) {
        const struct ck_hold *x = &holds[i];

        if (x->acq->cmd == TT_SEM_ACQ && proxy_killed(p, x->acq->proxy, x->start, x->end))
            r->sem_leak_bound++;
    }
}

/* ---- stuck holds -------------------------------------------------------------------------- */

/* One violation per episode: a client's first stuck release of a name
 * after a clean one (the extra count then stays, and every later release
 * of that client answers :0 too). Holds are sorted by name, start. */
static void check_stuck(const struct tt_history *h, struct tt_report *r,
                        const struct ck_hold *holds, int n)
{
    bool prev[TT_SCRIPT_CLIENT + 32] = {false};

    for (int i = 0; i < n; i++) {
        const struct ck_hold *x = &holds[i];
        int c = x->acq->client;
        bool first;
        char t[1400];

        if (i > 0 && strcmp(x->acq->name, holds[i - 1].acq->name) != 0)
            memset(prev, 0, sizeof(prev));
        if (c < 0 || c >= (int)(sizeof(prev) / sizeof(prev[0])))
            continue;
        first = x->stuck && !prev[c];
        prev[c] = x->stuck;
        if (!x->stuck)
            continue;
        if (x->acq->lease > 0) {
            r->stuck_leased++;
            continue;
        }
        r->stuck_watchdog++;
        if (!first)
            continue;
        r->stuck_episodes++;
        ck_hold_text(h, x, t, sizeof(t));
        tt_report_add(r, "stuck-hold", x->acq->name,
                      "%s stays held after its holder's only release (answered :0, still held): "
                      "an earlier acquire with an unknown outcome was applied and merged into "
                      "this hold, which the watchdog now renews for as long as the connection "
                      "lives (later releases of this client answer :0 too)\n%s",
                      x->acq->name, t);
    }
}

/* ---- idle locks ---------------------------------------------------------------------------- */

struct busy {
    long long from, to;
    bool write; /* blocks readers too */
};

struct busy_set {
    struct busy *v; /* owned */
    int n, cap;
};

static void busy_add(struct busy_set *b, long long from, long long to, bool write)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 256;
        b->v = ck_xrealloc(b->v, (size_t)b->cap * sizeof(*b->v));
    }
    b->v[b->n].from = from;
    b->v[b->n].to = to;
    b->v[b->n].write = write;
    b->n++;
}

static int busy_cmp(const void *a, const void *b)
{
    const struct busy *x = a, *y = b;

    return x->from < y->from ? -1 : x->from > y->from;
}

static long long lease_us(const struct tt_check_params *p, const struct ck_op *o)
{
    return o->lease > 0 ? (long long)o->lease * 1000 : p->watchdog_us;
}

static long long saturating_add(long long a, long long b)
{
    return a > LLONG_MAX - b ? LLONG_MAX : a + b;
}

/* When the lock of hold x was surely free again in Redis. */
static long long hold_busy_until(const struct tt_check_params *p, const struct ck_hold *x)
{
    long long end = x->last && x->last->t_reply >= 0 ? x->last->t_reply : x->end;

    if (x->stuck)
        return x->acq->lease > 0 ? saturating_add(end, lease_us(p, x->acq)) : LLONG_MAX;
    if (x->told != TT_OV_SILENT)
        return saturating_add(end, lease_us(p, x->acq));
    return end;
}

/* Everything that may have kept name busy (g: its n holds): holds,
 * unknown outcomes, faults. Appended to b, unsorted. */
static void collect_busy(const struct tt_history *h, const struct tt_check_params *p,
                         const char *name, const struct ck_hold *g, int n, struct busy_set *b)
{
    for (int i = 0; i < n; i++)
        busy_add(b, g[i].start, hold_busy_until(p, &g[i]), g[i].acq->cmd != TT_RLOCK);
    for (int c = 0; c < h->n; c++) {
        for (int i = 0; i < h->cl[c].n; i++) {
            const struct ck_op *o = &h->cl[c].ops[i];

            if (tt_cmd_is_acquire(o->cmd) && ck_unknown_outcome(o) && strcmp(o->name, name) == 0)
                busy_add(b, o->t_send,
                         saturating_add(o->t_reply < 0 ? LLONG_MAX : o->t_reply, lease_us(p, o)),
                         o->cmd != TT_RLOCK);
        }
    }
    for (int i = 0; i < p->nfaults; i++) {
        if (p->faults[i].triggered)
            busy_add(b, p->faults[i].start_us, p->faults[i].end_us + p->live_settle_us, true);
    }
}

/* The holds of name in holds (sorted by name); *n gets how many. */
static const struct ck_hold *holds_of(const struct ck_hold *holds, int nholds, const char *name,
                                      int *n)
{
    int i = 0, j;

    while (i < nholds && strcmp(holds[i].acq->name, name) != 0)
        i++;
    for (j = i; j < nholds && strcmp(holds[j].acq->name, name) == 0; j++)
        ;
    *n = j - i;
    return holds + i;
}

static bool in_flight_together(const struct ck_op *a, const struct ck_op *b)
{
    long long a1 = a->t_reply < 0 ? LLONG_MAX : a->t_reply;
    long long b1 = b->t_reply < 0 ? LLONG_MAX : b->t_reply;

    return a->t_send <= b1 && b->t_send <= a1;
}

/* The busy set of a MULTILOCK waiter o (ops[i] of client cl): its own
 * name's (own) plus every other name of the same MULTILOCK, found as the
 * client's neighbouring MULTILOCK ops in flight with it. Sorted. */
static void multi_busy(const struct tt_history *h, const struct tt_check_params *p,
                       const struct ck_hold *holds, int nholds, const struct ck_client *cl, int i,
                       const struct busy_set *own, struct busy_set *b)
{
    const struct ck_op *o = &cl->ops[i];

    b->n = 0;
    for (int k = 0; k < own->n; k++)
        busy_add(b, own->v[k].from, own->v[k].to, own->v[k].write);
    for (int dir = -1; dir <= 1; dir += 2) {
        for (int k = i + dir; k >= 0 && k < cl->n; k += dir) {
            const struct ck_op *x = &cl->ops[k];
            const struct ck_hold *g;
            int n;

            if (x->cmd != TT_MULTILOCK || !in_flight_together(o, x))
                break;
            if (strcmp(x->name, o->name) == 0)
                continue;
            g = holds_of(holds, nholds, x->name, &n);
            collect_busy(h, p, x->name, g, n, b);
        }
    }
    qsort(b->v, (size_t)b->n, sizeof(*b->v), busy_cmp);
}

/* The longest idle stretch in [from, to] for a waiter of kind cmd (a
 * reader minds only writers); its start in *at. */
static long long longest_idle(const struct busy_set *b, enum tt_cmd cmd, long long from,
                              long long to, long long *at)
{
    long long cursor = from, best = 0;

    *at = from;
    for (int i = 0; i < b->n && cursor < to; i++) {
        const struct busy *x = &b->v[i];
        long long gap;

        if ((cmd == TT_RLOCK && !x->write) || x->to <= cursor)
            continue;
        gap = (x->from < to ? x->from : to) - cursor;
        if (gap > best) {
            best = gap;
            *at = cursor;
        }
        if (x->to > cursor)
            cursor = x->to;
    }
    if (to - cursor > best) {
        best = to - cursor;
        *at = cursor;
    }
    return best;
}

static void check_idle(const struct tt_history *h, const struct tt_check_params *p,
                       struct tt_report *r, const struct ck_hold *holds, int nholds,
                       const struct ck_hold *g, int n)
{
    const char *name = g[0].acq->name;
    struct busy_set b = {NULL, 0, 0}, mb = {NULL, 0, 0};
    long long at, gap;
    char t[400];

    if (g[0].acq->cmd == TT_SEM_ACQ)
        return;
    collect_busy(h, p, name, g, n, &b);
    qsort(b.v, (size_t)b.n, sizeof(*b.v), busy_cmp);
    for (int c = 0; c < h->n; c++) {
        for (int i = 0; i < h->cl[c].n; i++) {
            const struct ck_op *o = &h->cl[c].ops[i];
            const struct busy_set *busy = &b;

            if (!tt_cmd_is_acquire(o->cmd) || o->res != TT_R_NIL || strcmp(o->name, name) != 0 ||
                o->t_reply - o->t_send < p->idle_gap_us)
                continue;
            r->idle_checked++;
            if (o->cmd == TT_MULTILOCK) {
                multi_busy(h, p, holds, nholds, &h->cl[c], i, &b, &mb);
                busy = &mb;
                r->idle_multi_held +=
                    longest_idle(&b, o->cmd, o->t_send, o->t_reply, &at) >= p->idle_gap_us &&
                    longest_idle(&mb, o->cmd, o->t_send, o->t_reply, &at) < p->idle_gap_us;
            }
            gap = longest_idle(busy, o->cmd, o->t_send, o->t_reply, &at);
            if (gap > r->idle_max_gap_us)
                r->idle_max_gap_us = gap;
            if (gap < p->idle_gap_us)
                continue;
            r->idle_starved++;
            ck_op_text(h, o, t, sizeof(t));
            tt_report_add(r, "idle-starvation", name,
                          "%s was free from %.3f for %.0f ms (no client held it, no acquire "
                          "with an unknown outcome or lost holder could, no fault near) while "
                          "this waiter waited, and it was answered nil\n    %s",
                          name, ck_rel_s(h, at), (double)gap / 1000, t);
        }
    }
    free(b.v);
    free(mb.v);
}

void ck_check_live(const struct tt_history *h, const struct tt_check_params *p, struct tt_report *r,
                   struct ck_hold *holds, int n)
{
    int from = 0;

    check_sem_leaks(h, p, r, holds, n);
    check_stuck(h, r, holds, n);
    for (int i = 1; i <= n; i++) {
        if (i < n && strcmp(holds[i].acq->name, holds[from].acq->name) == 0)
            continue;
        check_idle(h, p, r, holds, n, &holds[from], i - from);
        from = i;
    }
}
