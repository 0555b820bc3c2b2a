/* The figures one target run produces: filled by lg_run.c, printed by
 * lg_report.c, drawn by lg_svg.c. */
#ifndef LP_BENCH_LOADGEN_LG_RESULT_H
#define LP_BENCH_LOADGEN_LG_RESULT_H

#include <stdbool.h>
#include <stdint.h>

#include "bench/loadgen/lg_hist.h"
#include "bench/loadgen/lg_opts.h"
#include "bench/loadgen/lg_stats.h"

#ifdef __cplusplus
extern "C" {
#endif

struct lg_result {
    enum lg_target target;                    /* which target */
    bool ran;                                 /* the measured phase completed */
    char error[256];                          /* why it did not run, or what went wrong */
    const char *backend;                      /* borrowed: bench loop backend name */
    unsigned conns;                           /* connections the bench opened */
    double seconds;                           /* measured wall time */
    uint64_t acquisitions;                    /* granted acquires in the measured phase */
    uint64_t attempts;                        /* acquire requests sent (direct: with retries) */
    uint64_t waits;                           /* direct: acquires that had to wait (subscribe) */
    uint64_t subscribes;                      /* direct: SUBSCRIBE commands sent */
    uint64_t unsubscribes;                    /* direct: UNSUBSCRIBE commands sent */
    uint64_t messages;                        /* direct: pub/sub messages received */
    uint64_t latch_timeouts;                  /* direct: latch waits ended by PTTL/re-check */
    uint64_t polls;                           /* twemproxy: retries after a poll delay */
    uint64_t noscripts;                       /* EVALSHA re-sent as EVAL after NOSCRIPT */
    uint64_t redirects;                       /* --cluster: MOVED/ASK/TRYAGAIN followed (run) */
    double rate_asked;                        /* --rate: cycles/s asked, 0: closed loop */
    double rate_achieved;                     /* --rate: cycles/s completed */
    struct lg_hist *lag;                      /* owned: --rate: send time - slot start */
    uint64_t reads;                           /* rwlock: read locks granted (measured) */
    uint64_t writes;                          /* rwlock: write locks granted (measured) */
    uint64_t errors;                          /* error replies and lost connections */
    char first_error[160];                    /* the first of them */
    uint64_t checked;                         /* grants checked for exclusion (whole run) */
    uint64_t violations;                      /* exclusion violations (whole run) */
    char first_violation[160];                /* the first of them */
    unsigned stuck;                           /* clients that did not finish at the end */
    unsigned parked;                          /* waiters closed at the end, holding nothing */
    uint64_t fair_min;                        /* fewest grants of one client (measured phase) */
    uint64_t fair_max;                        /* most grants of one client */
    unsigned starved;                         /* clients with no grant in the measured phase */
    double fair_jain;                         /* Jain index of grants per client (1 = equal) */
    struct lg_hist *hist;                     /* owned: acquisition latency, measured phase */
    bool redis_ok;                            /* the Redis figures below are valid */
    bool redis_local;                         /* that Redis runs on this machine */
    unsigned redis_nodes;                     /* --cluster: masters summed, 0: one Redis */
    char redis_error[160];                    /* why not */
    double redis_cpu_s;                       /* Redis CPU seconds in the measured phase */
    double redis_sys_s;                       /* of which kernel (used_cpu_sys) */
    uint64_t redis_client_cmds;               /* commands clients sent to Redis */
    uint64_t redis_all_calls;                 /* all commandstats calls, incl. inside scripts */
    uint64_t redis_reads;                     /* reads Redis made from client sockets */
    long redis_clients;                       /* at the end of the measured phase: */
    long redis_pubsub_conns;                  /*   connections, subscribed ones, and */
    long redis_pubsub_chans;                  /*   channels (lg_redis_snap) */
    unsigned ndelta;                          /* entries in delta */
    struct lg_cmdstat delta[LG_MAX_CMDSTATS]; /* per-command call deltas */
    bool proxy_cpu_ok;                        /* proxy_cpu_s is valid */
    double proxy_cpu_s;                       /* proxy CPU seconds in the measured phase */
    double proxy_sys_s;                       /* of which kernel (stime) */
    double bench_cpu_s;                       /* bench CPU seconds in the measured phase */
    bool sys_ok;                              /* sys_busy_s is valid */
    double sys_busy_s;                        /* busy CPU seconds of the machine, all CPUs */
    bool cleaned;                             /* the clean-up ran (keys_deleted is valid) */
    uint64_t keys_deleted;                    /* keys the clean-up deleted */
    char clean_note[160];                     /* how the clean-up went, for the report */
};

#ifdef __cplusplus
}
#endif

#endif
