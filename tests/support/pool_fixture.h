/* What the pool-level integration tests (test_pool.c, test_cluster.c,
 * test_sentinel.c) share around a loop and a pool they drive themselves
 * (with loop_fixture.h's runner): a recorder of one request's reply, and a pub/sub listener that
 * counts its events and checks their order. Library lp_testsupport_pool (it links lp_pool). */
#ifndef LP_TESTS_POOL_FIXTURE_H
#define LP_TESTS_POOL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loop_fixture.h"
#include "pool/pool.h"

/* The last reply of a request (pool_reply_fn pf_rec_cb with a struct
 * pf_rec; zero it first). */
struct pf_rec {
    int calls;         /* callbacks seen */
    int err;           /* last err */
    int type;          /* last reply type, 0 without a reply */
    long long integer; /* last integer reply */
    size_t elements;   /* last array size */
    size_t len;        /* last string length (cut to fit str) */
    char str[2048];    /* last string/status/error */
    unsigned replicas; /* last result's WAIT replicas asked for */
    int acks;          /* last result's WAIT answer */
    bool short_;       /* pool_result_short() of the last result */
    uint64_t rtt_us;   /* last result's round trip */
};

void pf_rec_cb(void *arg, const struct pool_result *res);

/* lf_cond: the recorder has seen a callback. */
bool pf_rec_done(void *arg);

/* A pool_sub that counts READY, LOST and MESSAGE events (pf_lsn_cb) and
 * notes any out of order: LOST without a READY before it, READY twice. */
struct pf_lsn {
    struct pool_sub sub; /* registered with the pool */
    int ready;           /* READY events */
    int lost;            /* LOST events */
    int msgs;            /* MESSAGE events */
    int order_bad;       /* a LOST not preceded by READY, or READY twice without LOST */
    char last[64];       /* last message */
};

void pf_lsn_cb(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len);

/* Runs loop until l has seen at least ready, lost and msgs events (fails
 * the test after ms), then checks their order. */
void pf_wait_lsn(struct sched_loop *loop, struct pf_lsn *l, int ready, int lost, int msgs, int ms);

#endif
