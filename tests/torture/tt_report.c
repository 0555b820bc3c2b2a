/* Torture suite: the human summary and the JSON summary of a run. */
#include "tt_report.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define PRINT_VIOLATIONS 20 /* in full; the rest are counted */

/* Milliseconds of a maximum that may have no value (LLONG_MIN). */
static double max_ms(long long us)
{
    return us == LLONG_MIN ? 0.0 : (double)us / 1000;
}

static bool report_only(const struct tt_config *c, const char *check)
{
    size_t n = strlen(check);
    const char *p = c->report_only;

    while (p && *p) {
        if (strncmp(p, check, n) == 0 && (p[n] == ',' || p[n] == '\0'))
            return true;
        p = strchr(p, ',');
        p = p ? p + 1 : NULL;
    }
    return false;
}

int tt_report_failing(const struct tt_config *c, const struct tt_report *r)
{
    int n = 0;

    for (int i = 0; i < r->nviol; i++)
        n += !report_only(c, r->viol[i].check);
    return n;
}

void tt_report_header(const struct tt_config *c, FILE *f)
{
    fprintf(f, "torture: seed %u, io %s, %d clients, %d prox%s, %d s fault phase%s%s\n", c->seed,
            c->io, c->clients, c->proxies, c->proxies == 1 ? "y" : "ies", c->duration_s,
            c->long_run ? " (long: fault cycles)" : "",
            c->negative ? ", NEGATIVE CONTROL (LEASE < hold)" : "");
    if (c->cluster)
        fprintf(f, "  lock Redis: a Redis Cluster, 3 masters + 3 replicas (redis-cluster://)\n");
    if (c->sentinel)
        fprintf(f, "  lock Redis: 1 master + 2 replicas, 3 sentinels (redis-sentinel://)\n");
    if (c->sync_replicas > 0)
        fprintf(f, "  proxies: --sync-replicas %d --sync-timeout %d\n", c->sync_replicas,
                c->sync_timeout_ms);
    if (c->partitions || c->relock)
        fprintf(f, "  issue-18 classes:%s%s%s%s%s (untold overlaps fail the run)\n",
                c->partitions ? " partitions (P0 through the fault relay);" : "",
                c->relock ? " workload: re-lock after LOCKLOST" : "",
                c->relock && (c->relock_kinds & TT_K_REENTER) ? ", re-entry" : "",
                c->relock && (c->relock_kinds & TT_K_SHARED) ? ", shared OWNER" : "",
                c->relock && (c->relock_kinds & TT_K_MULTI) ? ", MULTILOCK" : "");
    fprintf(f,
            "  proxies: --lock-watchdog-timeout %d --upstream-timeout %d "
            "--subscription-linger %d; semaphore %d permits\n",
            c->watchdog_ms, c->upstream_timeout_ms, c->linger_ms, c->sem_permits);
}

static void print_faults(const struct tt_fault *faults, int n, FILE *f)
{
    int count[TT_F_COUNT] = {0}, scen = 0;

    for (int i = 0; i < n; i++) {
        scen += faults[i].scenario;
        count[faults[i].kind] += faults[i].triggered && !faults[i].scenario;
    }
    fprintf(f, "faults injected:");
    for (int k = 0; k < TT_F_COUNT; k++)
        fprintf(f, " %s %d,", tt_fault_name((enum tt_fault_kind)k), count[k]);
    fprintf(f, " and %d in the timed scenarios\n", scen);
}

static void print_ops(const struct tt_report *r, FILE *f)
{
    fprintf(f, "ops: %lld lock-service ops, %lld resource ops; granted:", r->ops, r->res_ops);
    for (int c = 0; c <= TT_SEM_ACQ; c++)
        fprintf(f, " %s %lld", tt_cmd_name((enum tt_cmd)c), r->grants[c]);
    if (r->by_cmd[TT_MULTILOCK] || r->by_cmd[TT_RELOCK])
        fprintf(f, " %s %lld (per name); re-entries %lld", tt_cmd_name(TT_MULTILOCK),
                r->grants[TT_MULTILOCK], r->by_cmd[TT_RELOCK]);
    fprintf(f, "\n  replies:");
    for (int i = 1; i < TT_R_COUNT; i++) {
        if (r->by_res[i])
            fprintf(f, " %s %lld", tt_res_name((enum tt_res)i), r->by_res[i]);
    }
    fprintf(f, "\n");
}

void tt_report_print(const struct tt_config *c, const struct tt_report *r,
                     const struct tt_fault *faults, int nfaults, const struct tt_scenario_result *s,
                     FILE *f)
{
    fprintf(f, "\n");
    print_faults(faults, nfaults, f);
    print_ops(r, f);
    fprintf(f, "overlaps:");
    for (int i = 0; i < TT_OV_COUNT; i++)
        fprintf(f, " %s %lld", tt_overlap_class_name((enum tt_overlap_class)i), r->overlaps[i]);
    fprintf(f, "; untold (nobody told LOCKLOST) %lld%s", r->untold,
            c->partitions || c->relock ? "" : " (report-only without the issue-18 classes)");
    fprintf(f,
            "\nlost updates: unfenced %lld of %lld writes (allowed), fenced %lld of %lld "
            "(stale tokens refused: %lld)\n",
            r->unfenced_lost, r->unfenced_writes, r->fenced_lost, r->fenced_writes,
            r->fenced_rejected);
    fprintf(f,
            "answers: latest past WAIT %.0f ms; worst against WAIT + %d ms + stops: %+.0f ms; "
            "unanswered %lld\n",
            max_ms(r->max_wait_overrun_us), c->upstream_timeout_ms + 2000,
            max_ms(r->max_bound_overrun_us), r->unanswered);
    fprintf(f, "fair FIFO: %lld pairs checked, %lld inversions\n", r->fifo_pairs,
            r->fifo_inversions);
    if (c->negative)
        fprintf(f, "negative control: %lld silent overlaps when re-checked blind\n",
                r->blind_silent);
    fprintf(f,
            "liveness: %lld nil answers checked for an idle lock (longest free stretch %.0f ms), "
            "%lld starved (%lld MULTILOCK waiters kept by another of their names); releases "
            "answered still-held: %lld without LEASE (%lld stuck holds), %lld with LEASE\n",
            r->idle_checked, (double)r->idle_max_gap_us / 1000, r->idle_starved, r->idle_multi_held,
            r->stuck_watchdog, r->stuck_episodes, r->stuck_leased);
    fprintf(f,
            "end: %lld leftover keys, semaphore %lld/%d permits (faults may leak %lld), proxy "
            "peak RSS",
            r->leftover_keys, r->sem_count_end, c->sem_permits, r->sem_leak_bound);
    for (int i = 0; i < c->proxies; i++)
        fprintf(f, " P%d %lld KB", i, r->rss_peak_kb[i]);
    fprintf(f, " (bound %d MB)\n", c->rss_limit_mb);
    if (c->cluster || c->sentinel)
        fprintf(f,
                "%s: %lld faults touching workload names; longest outage (fault to "
                "healed) %.0f ms; longest healed-to-first-grant %.0f ms (bound 5000); "
                "failover-lost overlaps %lld\n",
                c->cluster ? "cluster" : "sentinel", r->cluster_faults,
                (double)r->cluster_outage_max_us / 1000, (double)r->cluster_recovery_max_us / 1000,
                r->overlaps[TT_OV_FAILOVER_LOST]);
    if (s->ran)
        fprintf(f,
                "scenarios: fair-fifo %lld pairs, %d inversions; late-grant %d silent "
                "overlap(s)%s; lease-lost-told %lld told-lost, %d silent\n",
                s->fifo_pairs, s->fifo_inversions, s->late_silent,
                s->late_silent ? " (the late-grant bug)" : "", s->told_lost, s->told_silent);
    if (s->ran && s->partitions)
        fprintf(f, "  partition-unlock and partition-relock: %lld untold overlap(s)%s\n",
                s->part_untold, s->part_untold ? " (issue 18 items 1/2)" : "");
    for (int i = 0; i < r->nviol && i < PRINT_VIOLATIONS; i++)
        fprintf(f, "\nVIOLATION %d [%s]%s %s\n", i + 1, r->viol[i].check,
                report_only(c, r->viol[i].check) ? " (report-only)" : "", r->viol[i].text);
    if (r->nviol > PRINT_VIOLATIONS)
        fprintf(f, "\n... and %d more violations (see the JSON)\n", r->nviol - PRINT_VIOLATIONS);
    fprintf(f, "\nRESULT: %s (%d violation%s", tt_report_failing(c, r) ? "FAIL" : "PASS", r->nviol,
            r->nviol == 1 ? "" : "s");
    if (r->nviol > tt_report_failing(c, r))
        fprintf(f, ", of which %d of report-only checks: %s", r->nviol - tt_report_failing(c, r),
                c->report_only);
    fprintf(f, ")\n");
}

/* ---- JSON ---------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_counts(FILE *f, const char *key, const long long *v, int n,
                        const char *(*name)(int))
{
    fprintf(f, "  \"%s\": {", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s\": %lld", i ? ", " : "", name(i), v[i]);
    fprintf(f, "},\n");
}

static const char *ov_name(int i)
{
    return tt_overlap_class_name((enum tt_overlap_class)i);
}

static const char *cmd_name(int i)
{
    return tt_cmd_name((enum tt_cmd)i);
}

static const char *res_name(int i)
{
    return tt_res_name((enum tt_res)i);
}

static void json_faults(FILE *f, const struct tt_fault *faults, int n, long long t0)
{
    fprintf(f, "  \"faults\": [");
    for (int i = 0; i < n; i++) {
        const struct tt_fault *x = &faults[i];

        fprintf(f,
                "%s\n    {\"kind\": \"%s\", \"target\": %d, \"start_s\": %.3f, "
                "\"duration_ms\": %.0f, \"injected\": %s, \"scenario\": %s, \"note\": ",
                i ? "," : "", tt_fault_name(x->kind), x->target, (double)(x->start_us - t0) / 1e6,
                (double)(x->end_us - x->start_us) / 1000, x->triggered ? "true" : "false",
                x->scenario ? "true" : "false");
        json_str(f, x->note);
        fputc('}', f);
    }
    fprintf(f, "\n  ],\n");
}

static void json_violations(FILE *f, const struct tt_report *r)
{
    fprintf(f, "  \"violations\": [");
    for (int i = 0; i < r->nviol; i++) {
        fprintf(f, "%s\n    {\"check\": \"%s\", \"name\": ", i ? "," : "", r->viol[i].check);
        json_str(f, r->viol[i].name);
        fprintf(f, ", \"text\": ");
        json_str(f, r->viol[i].text);
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n");
}

void tt_report_json(const struct tt_config *c, const struct tt_report *r,
                    const struct tt_fault *faults, int nfaults, const struct tt_scenario_result *s,
                    long long t0, const char *path)
{
    FILE *f = fopen(path, "w");

    if (!f) {
        perror(path);
        return;
    }
    fprintf(f,
            "{\n  \"pass\": %s,\n  \"seed\": %u,\n  \"io\": \"%s\",\n  \"clients\": %d,\n"
            "  \"proxies\": %d,\n  \"duration_s\": %d,\n  \"long\": %s,\n"
            "  \"negative_control\": %s,\n",
            tt_report_failing(c, r) ? "false" : "true", c->seed, c->io, c->clients, c->proxies,
            c->duration_s, c->long_run ? "true" : "false", c->negative ? "true" : "false");
    fprintf(f, "  \"ops\": %lld,\n  \"resource_ops\": %lld,\n  \"blind_silent\": %lld,\n", r->ops,
            r->res_ops, r->blind_silent);
    json_counts(f, "grants", r->grants, TT_MULTILOCK + 1, cmd_name);
    fprintf(f, "  \"untold_overlaps\": %lld,\n  \"partitions\": %s,\n  \"relock_workload\": %s,\n",
            r->untold, c->partitions ? "true" : "false", c->relock ? "true" : "false");
    json_counts(f, "replies", r->by_res, TT_R_COUNT, res_name);
    json_counts(f, "overlaps", r->overlaps, TT_OV_COUNT, ov_name);
    fprintf(f,
            "  \"lost_updates\": {\"unfenced\": %lld, \"unfenced_writes\": %lld, "
            "\"fenced\": %lld, \"fenced_writes\": %lld, \"fenced_rejected\": %lld},\n",
            r->unfenced_lost, r->unfenced_writes, r->fenced_lost, r->fenced_writes,
            r->fenced_rejected);
    fprintf(f,
            "  \"max_wait_overrun_ms\": %.1f,\n  \"max_bound_overrun_ms\": %.1f,\n"
            "  \"unanswered\": %lld,\n  \"fifo\": {\"pairs\": %lld, \"inversions\": %lld},\n",
            max_ms(r->max_wait_overrun_us), max_ms(r->max_bound_overrun_us), r->unanswered,
            r->fifo_pairs, r->fifo_inversions);
    fprintf(f,
            "  \"liveness\": {\"idle_checked\": %lld, \"idle_max_gap_ms\": %.1f, "
            "\"idle_starved\": %lld, \"idle_multi_held\": %lld, \"stuck_watchdog\": %lld, "
            "\"stuck_episodes\": %lld, \"stuck_leased\": %lld},\n",
            r->idle_checked, (double)r->idle_max_gap_us / 1000, r->idle_starved, r->idle_multi_held,
            r->stuck_watchdog, r->stuck_episodes, r->stuck_leased);
    fprintf(f,
            "  \"end\": {\"leftover_keys\": %lld, \"semaphore_permits\": %lld, "
            "\"semaphore_leak_bound\": %lld, \"rss_peak_kb\": [%lld, %lld], "
            "\"rss_end_kb\": [%lld, %lld]},\n",
            r->leftover_keys, r->sem_count_end, r->sem_leak_bound, r->rss_peak_kb[0],
            r->rss_peak_kb[1], r->rss_end_kb[0], r->rss_end_kb[1]);
    fprintf(f,
            "  \"scenarios\": {\"ran\": %s, \"fair_fifo_pairs\": %lld, "
            "\"fair_fifo_inversions\": %d, \"late_grant_silent\": %d, "
            "\"lease_lost_told\": %lld, \"lease_lost_silent\": %d, \"partition_untold\": %lld},\n",
            s->ran ? "true" : "false", s->fifo_pairs, s->fifo_inversions, s->late_silent,
            s->told_lost, s->told_silent, s->part_untold);
    fprintf(f,
            "  \"cluster\": {\"enabled\": %s, \"sentinel\": %s, \"sync_replicas\": %d, "
            "\"faults\": %lld, \"outage_max_ms\": %.1f, \"recovery_max_ms\": %.1f},\n",
            c->cluster ? "true" : "false", c->sentinel ? "true" : "false", c->sync_replicas,
            r->cluster_faults, (double)r->cluster_outage_max_us / 1000,
            (double)r->cluster_recovery_max_us / 1000);
    json_faults(f, faults, nfaults, t0);
    json_violations(f, r);
    fprintf(f, "}\n");
    fclose(f);
}
