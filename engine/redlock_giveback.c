/* REDLOCK's give-backs: settling an owner's count on some masters (after
 * a failed or late attempt, the masters left holding after REDUNLOCK or
 * whose REDUNLOCK reply was lost, a lease lost or ended, a closed
 * connection), retried with back-off on each master until it answered,
 * or until nothing can be left to give back. See redlock.c.
 *
 * DESIGN
 *
 * One record per (name, owner) with a give-back pending, per master:
 * due (to be sent again), nflight (sends whose reply is pending) and
 * overtaken (a later request about the pair was sent after the latest
 * give-back). A give-back is the settle script ("a count above keep
 * becomes keep"): sending it twice is harmless, and it never raises a
 * count. A newer give-back of the same pair replaces keep (the count the
 * client is confirmed to hold now) and adds its masters.
 *
 * Order: a give-back must run before any later request about the pair on
 * that master, or it would take back what the later request took. Every
 * send uses the name's route hint, so requests on one master share a
 * connection and run in the order sent. Before a request about the pair
 * goes to master i (px__rl_giveback_before): a due give-back is sent
 * first (if it cannot be, the request is not sent to i either), and an
 * in-flight one is marked overtaken: if its reply is then lost, it is not
 * sent again (it would run after the request). What it may have left is
 * then the later request's to settle (an attempt gives back what its
 * unknown masters may hold; REDUNLOCK settles masters whose reply it
 * lost).
 *
 * End: a master's give-back is done when it answers (any reply: an
 * error reply will not change by sending again). Retries stop at `until`,
 * the lease end from the last moment anything could have been renewed
 * (extended while the pair is held and renewed by this proxy): past it,
 * whatever is left has expired. Back-off: 20 ms doubling to 1 s. At stop
 * nothing is retried; records left are freed with the masters. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "engine/redlock.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "sched/loop.h"

#define GB_BACKOFF_MIN 20u   /* ms */
#define GB_BACKOFF_MAX 1000u /* ms */

/* One master's reply argument. */
struct rl_gb_call {
    struct rl_giveback *gb; /* borrowed */
    unsigned i;             /* master */
};

struct rl_giveback {
    struct hmap_node node;                   /* in rl->givebacks */
    struct list link;                        /* in rl->giveback_list */
    struct px_redlock *rl;                   /* borrowed */
    struct sched_timer timer;                /* next retry of the due masters */
    struct rl_gb_call calls[PX_REDLOCK_MAX]; /* reply arguments */
    unsigned nflight[PX_REDLOCK_MAX];        /* sends whose reply is pending, per master */
    unsigned due;                            /* masters (bits) to send to again */
    unsigned overtaken;                      /* masters (bits): a later request followed */
    unsigned backoff_ms;                     /* next retry delay */
    uint64_t keep;                           /* the count to settle to */
    uint64_t until;                          /* monotonic ms: nothing left after it */
    size_t nlen, olen;                       /* name and owner lengths */
    char *owner;                             /* borrowed: into key */
    char key[];                              /* owned: name NUL owner NUL */
};

static uint64_t gb_hash(const char *name, size_t nlen, const char *owner, size_t olen)
{
    return hash_bytes(name, nlen) ^ (hash_bytes(owner, olen) * 31u);
}

static struct rl_giveback *gb_find(struct px_redlock *rl, const char *name, size_t nlen,
                                   const char *owner, size_t olen)
{
    struct hmap_node *n;

    for (n = hmap_first(&rl->givebacks, gb_hash(name, nlen, owner, olen)); n; n = hmap_next(n)) {
        struct rl_giveback *gb = LP_CONTAINER_OF(n, struct rl_giveback, node);

        if (gb->nlen == nlen && gb->olen == olen && memcmp(gb->key, name, nlen) == 0 &&
            memcmp(gb->owner, owner, olen) == 0)
            return gb;
    }
    return NULL;
}

static bool gb_flying(const struct rl_giveback *gb)
{
    for (unsigned i = 0; i < gb->rl->n; i++) {
        if (gb->nflight[i])
            return true;
    }
    return false;
}

static void gb_free(struct rl_giveback *gb)
{
    sched_loop_timer_del(gb->rl->eng->loop, &gb->timer);
    hmap_remove(&gb->rl->givebacks, &gb->node);
    list_del_init(&gb->link);
    free(gb);
}

static void gb_maybe_free(struct rl_giveback *gb)
{
    if (gb->due == 0 && !gb_flying(gb))
        gb_free(gb);
}

static void gb_on_reply(void *arg, const struct pool_result *res);

/* Sends the give-back to master i; 0 or the send error (then it is due). */
static int gb_send(struct rl_giveback *gb, unsigned i)
{
    struct px_redlock *rl = gb->rl;
    char chan[PX_CHANNEL_MAX], k[24];
    /* settle.lua: no TTL to put back (0), then the publish command. */
    const char *argv[6] = {gb->key, chan, gb->owner, k, "0", "publish"};
    size_t lens[6] = {gb->nlen, 0, gb->olen, 0, 1, 7};
    int rc;

    lens[1] = px__rl_lock_channel(gb->key, gb->nlen, chan, sizeof(chan));
    lens[3] = util_u64_to_str(gb->keep, k);
    rc = px__rl_eval(rl, i, px_route_hint(gb->key, gb->nlen), PX_SCRIPT_SETTLE, 2, 6, argv, lens,
                     gb_on_reply, &gb->calls[i]);
    if (rc < 0) {
        gb->due |= 1u << i;
        return rc;
    }
    gb->due &= ~(1u << i);
    gb->overtaken &= ~(1u << i);
    gb->nflight[i]++;
    return 0;
}

/* Arms the retry of the due masters, or gives up past until. */
static void gb_arm(struct rl_giveback *gb)
{
    struct px_redlock *rl = gb->rl;
    uint64_t now = sched_loop_now_ms(rl->eng->loop);

    if (gb->due == 0 || sched_timer_is_pending(&gb->timer))
        return;
    if (rl->stopping || now >= gb->until) {
        if (!rl->stopping)
            log_msg(LOG_LVL_DEBUG, "redlock: give-back of '%.*s' ended with its lease",
                    (int)LP_MIN(gb->nlen, 200u), gb->key);
        gb->due = 0;
        return;
    }
    sched_loop_timer_in(rl->eng->loop, &gb->timer, LP_MIN(gb->backoff_ms, gb->until - now));
    gb->backoff_ms = LP_MIN(gb->backoff_ms * 2, GB_BACKOFF_MAX);
}

static void gb_on_reply(void *arg, const struct pool_result *res)
{
    int err = res->err;
    struct rl_gb_call *c = arg;
    struct rl_giveback *gb = c->gb;
    unsigned bit = 1u << c->i;

    gb->nflight[c->i]--;
    if (gb->nflight[c->i] == 0 && err < 0 && !(gb->overtaken & bit))
        gb->due |= bit; /* the latest send's reply was lost: send again */
    if (err == 0)
        gb->backoff_ms = GB_BACKOFF_MIN;
    gb_arm(gb);
    gb_maybe_free(gb);
}

/* The retry: masters still due (none in flight there) are sent to again;
 * while this proxy still holds and renews the pair, its lease goes on. */
static void gb_on_timer(struct sched_timer *t)
{
    struct rl_giveback *gb = LP_CONTAINER_OF(t, struct rl_giveback, timer);
    struct px_redlock *rl = gb->rl;
    uint64_t now = sched_loop_now_ms(rl->eng->loop);
    struct rl_hold *h = px__rl_hold_find(rl, gb->key, gb->nlen, gb->owner, gb->olen);
    unsigned i;

    if (h && h->state == RL_HELD && h->watchdog)
        gb->until = LP_MAX(gb->until, now + h->lease_ms);
    for (i = 0; i < rl->n && now < gb->until; i++) {
        if ((gb->due & (1u << i)) && gb->nflight[i] == 0 && gb_send(gb, i) == 0)
            rl->giveback_retries++;
    }
    gb_arm(gb);
    gb_maybe_free(gb);
}

static struct rl_giveback *gb_new(struct px_redlock *rl, const char *name, size_t nlen,
                                  const char *owner, size_t olen)
{
    struct rl_giveback *gb = calloc(1, sizeof(*gb) + nlen + olen + 2);

    if (!gb)
        return NULL;
    gb->rl = rl;
    gb->nlen = nlen;
    gb->olen = olen;
    memcpy(gb->key, name, nlen);
    gb->owner = gb->key + nlen + 1;
    memcpy(gb->owner, owner, olen);
    gb->backoff_ms = GB_BACKOFF_MIN;
    sched_timer_init(&gb->timer, gb_on_timer);
    for (unsigned i = 0; i < PX_REDLOCK_MAX; i++) {
        gb->calls[i].gb = gb;
        gb->calls[i].i = i;
    }
    /* -ENOMEM only when growing failed: the node is in the map all the same */
    (void)hmap_insert(&rl->givebacks, &gb->node, gb_hash(name, nlen, owner, olen));
    list_add_tail(&rl->giveback_list, &gb->link);
    return gb;
}

void px__rl_settle(struct px_redlock *rl, const char *name, size_t nlen, const char *owner,
                   size_t olen, uint64_t keep, unsigned mask, uint64_t lease_ms)
{
    uint64_t now = sched_loop_now_ms(rl->eng->loop);
    struct rl_giveback *gb;
    unsigned i;

    if (rl->stopping)
        return;
    gb = gb_find(rl, name, nlen, owner, olen);
    if (gb)
        gb->keep = keep; /* what is still due goes to the count confirmed now */
    if (mask == 0)
        return;
    if (!gb)
        gb = gb_new(rl, name, nlen, owner, olen);
    if (!gb) {
        log_msg(LOG_LVL_WARN, "redlock: out of memory: give-back of '%.*s' not sent",
                (int)LP_MIN(nlen, 200u), name);
        return;
    }
    gb->keep = keep;
    gb->until = LP_MAX(gb->until, now + lease_ms);
    for (i = 0; i < rl->n; i++) {
        if (mask & (1u << i))
            (void)gb_send(gb, i);
    }
    gb_arm(gb);
    gb_maybe_free(gb);
}

bool px__rl_giveback_before(struct px_redlock *rl, const char *name, size_t nlen, const char *owner,
                            size_t olen, unsigned i)
{
    struct rl_giveback *gb = gb_find(rl, name, nlen, owner, olen);

    if (!gb)
        return true;
    if (gb->due & (1u << i)) {
        if (gb_send(gb, i) < 0)
            return false;
        rl->giveback_retries++;
    }
    if (gb->nflight[i])
        gb->overtaken |= 1u << i;
    return true;
}

/* Busy: a give-back in flight, or due to a master that is up (one due to
 * a master that is down would only hold up the stop). */
bool px__rl_giveback_busy(const struct px_redlock *rl)
{
    const struct list *n;
    struct pool_stats st;

    for (n = rl->giveback_list.next; n != &rl->giveback_list; n = n->next) {
        const struct rl_giveback *gb = LP_CONTAINER_OF(n, struct rl_giveback, link);

        for (unsigned i = 0; i < rl->n; i++) {
            if (gb->nflight[i])
                return true;
            if (gb->due & (1u << i)) {
                pool_get_stats(rl->pools[i], &st);
                if (strcmp(st.state, "up") == 0)
                    return true;
            }
        }
    }
    return false;
}

void px__rl_giveback_stop(struct px_redlock *rl)
{
    struct list *n;

    rl->stopping = true;
    for (n = rl->giveback_list.next; n != &rl->giveback_list; n = n->next) {
        struct rl_giveback *gb = LP_CONTAINER_OF(n, struct rl_giveback, link);

        sched_loop_timer_del(rl->eng->loop, &gb->timer);
        gb->due = 0;
    }
}

void px__rl_giveback_free_all(struct px_redlock *rl)
{
    struct list *n;

    while ((n = list_first(&rl->giveback_list)) != NULL)
        gb_free(LP_CONTAINER_OF(n, struct rl_giveback, link));
}
