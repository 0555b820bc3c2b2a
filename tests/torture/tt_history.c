/* Torture suite: reading the client logs into a history, rebuilding the
 * holds, printing records, and the report's bookkeeping (see
 * tt_check_int.h). */
#include <dirent.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_check_int.h"

#define LINE_MAX_LEN 512

static const char *const class_names[TT_OV_COUNT] = {
    "silent",     "told-lost",     "told-error",    "told-conn",
    "told-noend", "past-deadline", "failover-lost",
};

const char *tt_overlap_class_name(enum tt_overlap_class c)
{
    return (unsigned)c < TT_OV_COUNT ? class_names[c] : "?";
}

void *ck_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);

    if (!q) {
        fprintf(stderr, "torture: out of memory\n");
        exit(2);
    }
    return q;
}

/* ---- report ------------------------------------------------------------------- */

void tt_report_add(struct tt_report *r, const char *check, const char *name, const char *fmt, ...)
{
    struct tt_violation *v;
    va_list ap;
    int n;

    if (r->nviol == r->capviol) {
        r->capviol = r->capviol ? 2 * r->capviol : 16;
        r->viol = ck_xrealloc(r->viol, (size_t)r->capviol * sizeof(*r->viol));
    }
    v = &r->viol[r->nviol++];
    v->check = check;
    snprintf(v->name, sizeof(v->name), "%s", name ? name : "");
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    v->text = ck_xrealloc(NULL, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(v->text, (size_t)n + 1, fmt, ap);
    va_end(ap);
}

void tt_report_free(struct tt_report *r)
{
    for (int i = 0; i < r->nviol; i++)
        free(r->viol[i].text);
    free(r->viol);
    r->viol = NULL;
    r->nviol = r->capviol = 0;
}

int tt_report_count(const struct tt_report *r, const char *check, const char *name)
{
    int n = 0;

    for (int i = 0; i < r->nviol; i++) {
        if ((!check || strcmp(r->viol[i].check, check) == 0) &&
            (!name || strcmp(r->viol[i].name, name) == 0))
            n++;
    }
    return n;
}

struct tt_name_stat *ck_name_stat(struct tt_report *r, const char *name)
{
    static struct tt_name_stat sink;

    for (int i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i].name, name) == 0)
            return &r->names[i];
    }
    if (r->nnames == TT_MAX_NAMES)
        return &sink;
    snprintf(r->names[r->nnames].name, TT_NAME_MAX, "%s", name);
    return &r->names[r->nnames++];
}

struct tt_name_stat tt_check_name_stat(const struct tt_report *r, const char *name)
{
    struct tt_name_stat none;

    for (int i = 0; i < r->nnames; i++) {
        if (strcmp(r->names[i].name, name) == 0)
            return r->names[i];
    }
    memset(&none, 0, sizeof(none));
    return none;
}

/* ---- loading -------------------------------------------------------------------- */

static struct ck_op *client_push(struct ck_client *c)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        c->ops = ck_xrealloc(c->ops, (size_t)c->cap * sizeof(*c->ops));
    }
    memset(&c->ops[c->n], 0, sizeof(c->ops[0]));
    return &c->ops[c->n++];
}

static void parse_send(struct ck_client *c, const char *line)
{
    struct ck_op o;
    int cmd;

    memset(&o, 0, sizeof(o));
    /* The 8th field (shared OWNER group) is optional: 0 when absent. */
    if (sscanf(line, "S %d %lld %d %d %39s %d %d %d", &o.seq, &o.t_send, &cmd, &o.proxy, o.name,
               &o.lease, &o.wait, &o.group) < 7 ||
        cmd < 0 || cmd >= TT_CMD_COUNT)
        return;
    o.cmd = (enum tt_cmd)cmd;
    o.client = c->id;
    o.t_reply = -1;
    o.res = TT_R_NONE;
    *client_push(c) = o;
}

static void parse_reply(struct ck_client *c, const char *line)
{
    long long t, val;
    int seq, res, off = 0;
    struct ck_op *o;

    if (sscanf(line, "R %d %lld %d %lld %n", &seq, &t, &res, &val, &off) < 4 || seq < 1 ||
        seq > c->n || res < 0 || res >= TT_R_COUNT)
        return;
    o = &c->ops[seq - 1];
    if (o->seq != seq)
        return;
    o->t_reply = t;
    o->res = (enum tt_res)res;
    o->val = val;
    snprintf(o->text, sizeof(o->text), "%.*s", (int)strcspn(line + off, "\n"), line + off);
}

static int load_file(struct tt_history *h, const char *path, int id)
{
    char line[LINE_MAX_LEN];
    struct ck_client *c;
    FILE *f = fopen(path, "r");

    if (!f) {
        perror(path);
        return -1;
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->cl = ck_xrealloc(h->cl, (size_t)h->cap * sizeof(*h->cl));
    }
    c = &h->cl[h->n++];
    memset(c, 0, sizeof(*c));
    c->id = id;
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == 'S')
            parse_send(c, line);
        else if (line[0] == 'R')
            parse_reply(c, line);
    }
    fclose(f);
    for (int i = 0; i < c->n; i++) {
        if (h->t_base == 0 || c->ops[i].t_send < h->t_base)
            h->t_base = c->ops[i].t_send;
    }
    return 0;
}

struct tt_history *tt_history_load(const char *dir, long long t0_us)
{
    struct tt_history *h = ck_xrealloc(NULL, sizeof(*h));
    char path[TT_PATH_MAX + 64];
    struct dirent *de;
    DIR *d = opendir(dir);
    int id;

    memset(h, 0, sizeof(*h));
    if (!d) {
        perror(dir);
        free(h);
        return NULL;
    }
    while ((de = readdir(d)) != NULL) {
        if (sscanf(de->d_name, "client-%d.log", &id) != 1)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (load_file(h, path, id) < 0) {
            closedir(d);
            tt_history_free(h);
            return NULL;
        }
    }
    closedir(d);
    if (t0_us)
        h->t_base = t0_us;
    return h;
}

void tt_history_free(struct tt_history *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->n; i++)
        free(h->cl[i].ops);
    free(h->cl);
    free(h);
}

/* ---- printing ops ------------------------------------------------------------------ */

double ck_rel_s(const struct tt_history *h, long long t)
{
    return (double)(t - h->t_base) / 1e6;
}

/* One op as text: "client 3 via P0: LOCK tt:lock:0 lease=5000 wait=900 sent
 * 12.345 -> OK at 12.400" (seconds from the first op of the run). */
void ck_op_text(const struct tt_history *h, const struct ck_op *o, char *buf, size_t n)
{
    char reply[TT_TEXT_MAX + 64] = "no reply";
    const char *rn = tt_res_name(o->res);
    double at = ck_rel_s(h, o->t_reply);

    if (o->t_reply >= 0 && (o->res == TT_R_TOKEN || o->res == TT_R_INT || o->res == TT_R_STR))
        snprintf(reply, sizeof(reply), "%s %lld at %.3f", rn, o->val, at);
    else if (o->t_reply >= 0 && o->text[0])
        snprintf(reply, sizeof(reply), "%s \"%.60s\" at %.3f", rn, o->text, at);
    else if (o->t_reply >= 0)
        snprintf(reply, sizeof(reply), "%s at %.3f", rn, at);
    snprintf(buf, n, "client %d via P%d: %s %s lease=%d wait=%d sent %.3f -> %s", o->client,
             o->proxy, tt_cmd_name(o->cmd), o->name, o->lease, o->wait, ck_rel_s(h, o->t_send),
             reply);
}

/* ---- holds --------------------------------------------------------------------------- */

static enum tt_overlap_class told_of(const struct ck_op *rel)
{
    if (!rel)
        return TT_OV_TOLD_NOEND;
    switch (rel->res) {
    case TT_R_INT:
    case TT_R_NONE: /* sent, never answered: the hold ended at the send all the same */
        return TT_OV_SILENT;
    case TT_R_LOCKLOST:
    case TT_R_NOTOWNER:
        return TT_OV_TOLD_LOST;
    case TT_R_CONN:
    case TT_R_TIMEOUT:
        return TT_OV_TOLD_CONN;
    default:
        return TT_OV_TOLD_ERROR;
    }
}

/* What the holder was told, from its first release and the retries of a
 * release that failed upstream (the client retries until a definite
 * answer): a retry that released it (:1 or :0) shows the lock was still
 * held, so the holder was told nothing; any other last answer counts. */
static enum tt_overlap_class told_chain(const struct ck_op *rel, const struct ck_op *last)
{
    if (!rel || rel == last || (rel->res != TT_R_UPSTREAM && rel->res != TT_R_ERR))
        return told_of(rel);
    if (last->res == TT_R_INT)
        return TT_OV_SILENT;
    if (last->res == TT_R_NOTOWNER && strstr(rel->text, "outcome unknown"))
        return TT_OV_TOLD_ERROR; /* the first try may have released it */
    return told_of(last);
}

bool ck_unknown_outcome(const struct ck_op *o)
{
    return (o->res == TT_R_UPSTREAM && strstr(o->text, "outcome unknown")) || o->res == TT_R_CONN ||
           o->res == TT_R_TIMEOUT;
}

bool ck_granted(const struct ck_op *o)
{
    return tt_cmd_is_acquire(o->cmd) && (o->res == TT_R_OK || o->res == TT_R_TOKEN);
}

/* Every hold of every client, in no particular order. */
static struct ck_hold *hold_push(struct ck_hold **holds, int *n, int *cap)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 1024;
        *holds = ck_xrealloc(*holds, (size_t)*cap * sizeof(**holds));
    }
    memset(&(*holds)[*n], 0, sizeof(**holds));
    return &(*holds)[(*n)++];
}

/* A release op o closes hold x (its first release), or retries it. A
 * re-entered hold's first release answers :0 by design, and so does a
 * release by one connection of a shared OWNER token while another still
 * holds: neither is a stuck count. */
static void hold_release(struct ck_hold *x, const struct ck_op *o)
{
    bool first = !x->rel;
    bool expect_zero = (x->reentry && first) || x->acq->group > 0;

    if (!x->rel) {
        x->rel = o;
        x->end = o->t_send;
    }
    x->last = o;
    x->told = told_chain(x->rel, o);
    x->locklost = x->locklost || o->res == TT_R_LOCKLOST;
    if (x->reentry && x->reentry->res == TT_R_LOCKLOST)
        x->told = TT_OV_TOLD_LOST;
    x->stuck =
        x->stuck || (o->res == TT_R_INT && o->val == 0 && o->cmd != TT_SEM_REL && !expect_zero);
}

/* The client's current hold per name (MULTILOCK holds several at once). */
struct cur_hold {
    const char *name;
    int hold; /* index in the hold array */
};

static int cur_find(struct cur_hold *cur, int ncur, const char *name)
{
    for (int i = 0; i < ncur; i++) {
        if (strcmp(cur[i].name, name) == 0)
            return i;
    }
    return -1;
}

/* Sets (hold >= 0) or clears (hold < 0) name's current hold. */
static void cur_set(struct cur_hold *cur, int *ncur, const char *name, int hold)
{
    int i = cur_find(cur, *ncur, name);

    if (i < 0 && hold >= 0 && *ncur < TT_WORKLOAD_NAMES + 8) {
        i = (*ncur)++;
        cur[i].name = name;
    }
    if (i >= 0)
        cur[i].hold = hold;
}

/* Every hold of every client, in no particular order. A release closes
 * the client's current hold of its name (the latest grant, until the next
 * acquire of that name); a RELOCK marks it re-entered. */
struct ck_hold *ck_build_holds(const struct tt_history *h, int *count)
{
    struct ck_hold *holds = NULL, *x;
    int n = 0, cap = 0;

    for (int c = 0; c < h->n; c++) {
        struct cur_hold cur[TT_WORKLOAD_NAMES + 8];
        int ncur = 0;

        for (int i = 0; i < h->cl[c].n; i++) {
            const struct ck_op *o = &h->cl[c].ops[i];
            int k = cur_find(cur, ncur, o->name);
            int at = k >= 0 ? cur[k].hold : -1;

            if (tt_cmd_is_acquire(o->cmd))
                cur_set(cur, &ncur, o->name, -1);
            if (ck_granted(o)) {
                x = hold_push(&holds, &n, &cap);
                x->acq = o;
                x->start = o->t_reply;
                x->end = LLONG_MAX;
                x->deadline = o->lease > 0 ? o->t_send + (long long)o->lease * 1000 : LLONG_MAX;
                x->told = TT_OV_TOLD_NOEND;
                cur_set(cur, &ncur, o->name, n - 1);
            } else if (at >= 0 && o->cmd == TT_RELOCK) {
                holds[at].reentry = o;
                holds[at].locklost = holds[at].locklost || o->res == TT_R_LOCKLOST;
            } else if (at >= 0 && tt_cmd_is_release(o->cmd)) {
                hold_release(&holds[at], o);
            }
        }
    }
    *count = n;
    return holds;
}

void ck_hold_text(const struct tt_history *h, const struct ck_hold *x, char *buf, size_t n)
{
    char a[400], r[400], extra[460] = "";

    ck_op_text(h, x->acq, a, sizeof(a));
    if (x->rel)
        ck_op_text(h, x->rel, r, sizeof(r));
    else
        snprintf(r, sizeof(r), "never released");
    if (x->reentry) {
        char e[400];

        ck_op_text(h, x->reentry, e, sizeof(e));
        snprintf(extra, sizeof(extra), "\n    re-entry %s", e);
    } else if (x->acq->group > 0) {
        snprintf(extra, sizeof(extra), "\n    (shared OWNER token, group %d)", x->acq->group);
    }
    if (x->last && x->last != x->rel) {
        char l[400];

        ck_op_text(h, x->last, l, sizeof(l));
        snprintf(buf, n, "    hold  %s%s\n    until %s\n    last retry %s", a, extra, r, l);
        return;
    }
    snprintf(buf, n, "    hold  %s%s\n    until %s", a, extra, r);
}
