/* REDLOCK's masters: one pool per --redlock-upstream URL, the lock
 * channels subscribed on every master (each master's messages are
 * delivered into the REDLOCK waitset of the channel), start and stop, and
 * INFO redlock. See redlock.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/redlock.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "engine/waitset.h"

/* ---- masters ----------------------------------------------------------------- */

int px__rl_eval(struct px_redlock *rl, unsigned i, uint64_t hint, unsigned script, int numkeys,
                int argc, const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    return pool_eval(rl->pools[i], hint, script, numkeys, argc, argv, lens, cb, arg);
}

size_t px__rl_lock_channel(const char *name, size_t nlen, char *out, size_t cap)
{
    return px_channel_name(out, cap, PX_LOCK_CHANNEL_PREFIX, name, nlen);
}

/* ---- channels ------------------------------------------------------------------ */

/* A master's message on a lock channel wakes the REDLOCK waiters of it. */
static void rl_on_sub(struct pool_sub *s, enum pool_sub_event ev, const char *msg, size_t len)
{
    struct rl_sub *rs = LP_CONTAINER_OF(s, struct rl_sub, sub);
    struct rl_chan *c = rs->chan;
    struct px_waitset *set;

    if (ev != POOL_SUB_MESSAGE)
        return; /* a lost message costs a re-poll at the holder's lease end */
    set = px_waitset_find(c->rl->eng, c->key, c->len);
    if (set)
        px_waitset_deliver(set, msg, len);
}

/* The channel record of name, subscribed on every master, with a
 * reference; NULL on -ENOMEM. */
struct rl_chan *px__rl_chan_get(struct px_redlock *rl, const char *name, size_t nlen)
{
    char key[PX_CHANNEL_MAX + RL_PREFIX_LEN];
    size_t len;
    uint64_t hash;
    struct hmap_node *n;
    struct rl_chan *c;
    unsigned i;

    memcpy(key, RL_SET_PREFIX, RL_PREFIX_LEN);
    len = RL_PREFIX_LEN + px__rl_lock_channel(name, nlen, key + RL_PREFIX_LEN, PX_CHANNEL_MAX);
    hash = hash_bytes(key, len);
    for (n = hmap_first(&rl->chans, hash); n; n = hmap_next(n)) {
        c = LP_CONTAINER_OF(n, struct rl_chan, node);
        if (c->len == len && memcmp(c->key, key, len) == 0) {
            c->refs++;
            return c;
        }
    }
    c = calloc(1, sizeof(*c) + len + 1);
    if (!c)
        return NULL;
    c->rl = rl;
    c->refs = 1;
    c->len = len;
    memcpy(c->key, key, len);
    (void)hmap_insert(&rl->chans, &c->node, hash); /* -ENOMEM: in, but not grown */
    for (i = 0; i < rl->n; i++) {
        c->subs[i].chan = c;
        c->subs[i].started = pool_sub_start(rl->pools[i], &c->subs[i].sub, c->key + RL_PREFIX_LEN,
                                            len - RL_PREFIX_LEN, rl_on_sub) == 0;
    }
    return c;
}

void px__rl_chan_put(struct px_redlock *rl, struct rl_chan *c)
{
    unsigned i;

    if (!c || --c->refs > 0)
        return;
    for (i = 0; i < rl->n; i++) {
        if (c->subs[i].started)
            pool_sub_stop(rl->pools[i], &c->subs[i].sub);
    }
    hmap_remove(&rl->chans, &c->node);
    free(c);
}

/* ---- start and stop --------------------------------------------------------------- */

int px_redlock_start(struct lk_engine *eng)
{
    const struct pool_script *scripts;
    struct px_redlock *rl;
    size_t nscripts = px_scripts_build(eng, &scripts);
    unsigned i;
    int rc;

    if (eng->cfg.nredlock == 0)
        return 0;
    rl = calloc(1, sizeof(*rl));
    if (!rl || hmap_init(&rl->chans, 64) < 0 || hmap_init(&rl->holds, 64) < 0 ||
        hmap_init(&rl->givebacks, 64) < 0) {
        if (rl) {
            hmap_deinit(&rl->chans);
            hmap_deinit(&rl->holds);
        }
        free(rl);
        return -ENOMEM;
    }
    list_init(&rl->giveback_list);
    rl->eng = eng;
    rl->n = eng->cfg.nredlock;
    rl->majority = rl->n / 2 + 1;
    eng->redlock = rl;
    for (i = 0; i < rl->n; i++) {
        const struct pool_opts *u = &eng->cfg.redlock[i];
        rc = pool_create(&rl->pools[i], eng->loop, u, scripts, nscripts);
        if (rc == 0)
            rc = pool_start(rl->pools[i]);
        if (rc < 0) {
            log_msg(LOG_LVL_ERROR, "redlock master %s:%d: %s", u->host, u->port, strerror(-rc));
            return rc;
        }
    }
    log_msg(LOG_LVL_INFO, "redlock: %u masters, a grant needs %u", rl->n, rl->majority);
    return 0;
}

void px_redlock_info(struct lk_engine *eng, struct buf *out)
{
    struct px_redlock *rl = eng->redlock;
    struct pool_stats st;
    unsigned i, up = 0;

    if (!rl)
        return;
    for (i = 0; i < rl->n; i++) {
        pool_get_stats(rl->pools[i], &st);
        up += strcmp(st.state, "up") == 0;
    }
    buf_appendf(out,
                "# Redlock\r\nredlock_masters:%u\r\nredlock_majority:%u\r\n"
                "redlock_masters_up:%u\r\nredlock_holds:%zu\r\nredlock_quorum_refusals:%llu\r\n"
                "redlock_givebacks_pending:%zu\r\nredlock_giveback_retries:%llu\r\n",
                rl->n, rl->majority, up, rl->holds.count, (unsigned long long)rl->quorum_refusals,
                rl->givebacks.count, (unsigned long long)rl->giveback_retries);
    for (i = 0; i < rl->n; i++) {
        pool_get_stats(rl->pools[i], &st);
        buf_appendf(out, "redlock_master_%u:%s:%d,%s\r\n", i, eng->cfg.redlock[i].host,
                    eng->cfg.redlock[i].port, st.state);
    }
    buf_appendf(out, "\r\n");
}

bool px_redlock_connecting(const struct lk_engine *eng)
{
    struct pool_stats st;
    unsigned i;

    for (i = 0; eng->redlock && i < eng->redlock->n; i++) {
        pool_get_stats(eng->redlock->pools[i], &st);
        if (strcmp(st.state, "connecting") == 0)
            return true;
    }
    return false;
}

bool px_redlock_busy(const struct lk_engine *eng)
{
    struct pool_stats st;
    unsigned i;

    if (eng->redlock && px__rl_giveback_busy(eng->redlock))
        return true;
    for (i = 0; eng->redlock && i < eng->redlock->n; i++) {
        pool_get_stats(eng->redlock->pools[i], &st);
        if (st.inflight > 0)
            return true;
    }
    return false;
}

void px_redlock_stop(struct lk_engine *eng)
{
    unsigned i;

    if (eng->redlock)
        px__rl_giveback_stop(eng->redlock);
    for (i = 0; eng->redlock && i < eng->redlock->n; i++)
        pool_stop(eng->redlock->pools[i]);
}

bool px_redlock_stopped(const struct lk_engine *eng)
{
    unsigned i;

    for (i = 0; eng->redlock && i < eng->redlock->n; i++) {
        if (!pool_is_stopped(eng->redlock->pools[i]))
            return false;
    }
    return true;
}

void px_redlock_destroy(struct lk_engine *eng)
{
    struct px_redlock *rl = eng->redlock;
    unsigned i;

    if (!rl)
        return;
    for (i = 0; i < rl->n; i++) {
        if (rl->pools[i] && pool_is_stopped(rl->pools[i]))
            pool_destroy(rl->pools[i]);
    }
    px__rl_giveback_free_all(rl);
    hmap_deinit(&rl->chans);
    hmap_deinit(&rl->holds);
    hmap_deinit(&rl->givebacks);
    free(rl);
    eng->redlock = NULL;
}
