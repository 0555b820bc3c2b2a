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
    struct pool_wait w;    /* borrowed by the pool until the callback */
    struct lk_engine *eng; /* borrowed */
    const char *name;      /* borrowed: static script name */
    pool_reply_fn *cb;     /* borrowed: the caller's callback */
    void *arg;             /* borrowed: its argument */
};

static void repl_log_short(const struct repl_rec *rr, int acked)
{
    uint64_t quiet;

    if (!px_ratelog_allow(&rr->eng->repl_log, sched_loop_now_ms(rr->eng->loop), &quiet))
        return;
    log_msg(LOG_LVL_WARN,
            "write not replicated: %s reached %d of %u replicas within %u ms%s "
            "(%llu similar not logged)",
            rr->name, acked < 0 ? 0 : acked, rr->w.replicas, rr->w.timeout_ms,
            acked < 0 ? " (WAIT gave no answer)" : "", (unsigned long long)quiet);
}

/* Counts (and logs) the write, then hands the result on as it is: the
 * replicas WAIT counted are in it. */
static void repl_on_reply(void *arg, const struct pool_result *res)
{
    struct repl_rec *rr = arg;
    pool_reply_fn *cb = rr->cb;
    void *cb_arg = rr->arg;

    if (res->err == 0 && res->reply->type != POOL_REPLY_ERROR) {
        rr->eng->stats.sync_writes++;
        if (pool_result_short(res)) {
            rr->eng->stats.sync_short++;
            repl_log_short(rr, res->acks);
        }
    }
    free(rr);
    cb(cb_arg, res);
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
    rr->eng = eng;
    rr->name = name ? name : "script";
    rr->cb = cb;
    rr->arg = arg;
    rc = pool_eval_wait(eng->pool, hint, script, numkeys, argc, argv, lens, &rr->w, repl_on_reply,
                        rr);
    if (rc < 0)
        free(rr);
    return rc;
}
