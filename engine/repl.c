/* Replicated writes: WAIT behind every writing script; see repl.h. */
#include "engine/repl.h"

#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"
#include "sched/loop.h"

/* One script in flight with its WAIT. */
struct repl_rec {
    struct pool_wait w;    /* the pool writes w.acked before the callback */
    struct lk_engine *eng; /* borrowed */
    const char *name;      /* borrowed: static script name */
    pool_reply_fn *cb;     /* borrowed: the caller's callback */
    void *arg;             /* borrowed: its argument */
};

static void repl_log_short(const struct repl_rec *rr)
{
    uint64_t quiet;

    if (!px_ratelog_allow(&rr->eng->repl_log, sched_loop_now_ms(rr->eng->loop), &quiet))
        return;
    log_msg(LOG_LVL_WARN,
            "write not replicated: %s reached %d of %u replicas within %u ms%s "
            "(%llu similar not logged)",
            rr->name, rr->w.acked < 0 ? 0 : rr->w.acked, rr->w.replicas, rr->w.timeout_ms,
            rr->w.acked < 0 ? " (WAIT gave no answer)" : "", (unsigned long long)quiet);
}

static void repl_on_reply(void *arg, const struct pool_result *res)
{
    const struct pool_reply *r = res->reply;
    int err = res->err;
    struct repl_rec *rr = arg;
    struct lk_engine *eng = rr->eng;
    struct lk_repl_cur saved = eng->repl_cur, *cur = &eng->repl_cur;
    pool_reply_fn *cb = rr->cb;
    void *cb_arg = rr->arg;

    cur->active = err == 0 && r->type != POOL_REPLY_ERROR;
    cur->acked = rr->w.acked;
    cur->short_ = cur->active && (rr->w.acked < 0 || (unsigned)rr->w.acked < rr->w.replicas);
    if (cur->active) {
        rr->eng->stats.sync_writes++;
        if (cur->short_) {
            rr->eng->stats.sync_short++;
            repl_log_short(rr);
        }
    }
    free(rr);
    cb(cb_arg, res);
    eng->repl_cur = saved;
}

int px_repl_eval(struct lk_engine *eng, uint64_t hint, unsigned script, const char *name,
                 int numkeys, int argc, const char *const *argv, const size_t *lens,
                 pool_reply_fn *cb, void *arg)
{
    struct repl_rec *rr = malloc(sizeof(*rr));
    int rc;

    if (!rr)
        return -ENOMEM;
    rr->w.replicas = eng->cfg.sync_replicas;
    rr->w.timeout_ms = eng->cfg.sync_timeout_ms;
    rr->w.acked = -1;
    rr->eng = eng;
    rr->name = name ? name : "script";
    rr->cb = cb;
    rr->arg = arg;
    rc = eng->front.eval(eng, hint, script, numkeys, argc, argv, lens, &rr->w, repl_on_reply, rr);
    if (rc < 0)
        free(rr);
    return rc;
}

bool px_repl_short(const struct lk_engine *eng)
{
    const struct lk_repl_cur *cur = &eng->repl_cur;

    return cur->active && cur->short_;
}

int px_repl_acked(const struct lk_engine *eng)
{
    const struct lk_repl_cur *cur = &eng->repl_cur;

    return cur->active ? cur->acked : -1;
}
