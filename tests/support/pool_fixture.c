/* The pool-level tests' shared fixture; see pool_fixture.h. */
#include "pool_fixture.h"

#include <stdint.h>
#include <string.h>

#include "common/compiler.h"
#include "harness.h"

void pf_rec_cb(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct pf_rec *x = arg;

    x->calls++;
    x->err = err;
    x->replicas = res->replicas;
    x->acks = res->acks;
    x->short_ = pool_result_short(res);
    x->rtt_us = res->rtt_us;
    x->type = r ? r->type : 0;
    x->integer = r ? r->integer : 0;
    x->elements = r ? r->elements : 0;
    x->len = 0;
    if (r && r->str) {
        x->len = LP_MIN(r->len, sizeof(x->str) - 1);
        memcpy(x->str, r->str, x->len);
    }
    x->str[x->len] = '\0';
}

bool pf_rec_done(void *arg)
{
    return ((struct pf_rec *)arg)->calls > 0;
}

void pf_lsn_cb(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct pf_lsn *l = LP_CONTAINER_OF(s, struct pf_lsn, sub);

    if (ev == POOL_SUB_READY) {
        l->order_bad += l->ready != l->lost;
        l->ready++;
    } else if (ev == POOL_SUB_LOST) {
        l->order_bad += l->ready != l->lost + 1;
        l->lost++;
    } else {
        l->msgs++;
        len = LP_MIN(len, sizeof(l->last) - 1);
        memcpy(l->last, msg, len);
        l->last[len] = '\0';
    }
}

struct lsn_wait {
    struct pf_lsn *l;      /* the listener */
    int ready, lost, msgs; /* at least these events */
};

static bool lsn_reached(void *arg)
{
    const struct lsn_wait *w = arg;

    return w->l->ready >= w->ready && w->l->lost >= w->lost && w->l->msgs >= w->msgs;
}

void pf_wait_lsn(struct sched_loop *loop, struct pf_lsn *l, int ready, int lost, int msgs, int ms)
{
    struct lsn_wait w = {l, ready, lost, msgs};

    if (!lf_run_until(loop, lsn_reached, &w, ms))
        TEST_FAIL("listener: ready %d lost %d msgs %d, wanted %d %d %d", l->ready, l->lost, l->msgs,
                  ready, lost, msgs);
    ASSERT_EQ(l->order_bad, 0);
}
