/* Holds: the per-(name, owner) ledger and its settles; see hold.h. The
 * watchdog (renewal batches, lease ends) is in watchdog.c.
 *
 * DESIGN
 *
 * States (h->state):
 *
 *   PENDING --granted------------------------------------> HELD
 *   HELD ---- UNLOCK :1 or nil ---------------------------> PENDING
 *   HELD ---- renewal "not held", fixed lease ran out ----> LOST
 *   HELD ---- a re-entry's grant is a fresh acquisition --> LOST -> PENDING
 *   LOST ---- 60 s, UNLOCK, connection closed ------------> PENDING
 *   LOST ---- an acquire, lost before its lease's end ----> PENDING (told)
 *   LOST ---- granted again (a fixed lease's end) --------> HELD
 *   HELD ---- connection closed, --on-disconnect release -> RELEASING
 *   HELD ---- connection closed, --on-disconnect expire --> PENDING
 *   HELD ---- UNLOCK unanswered, lease vouched for -------> RELEASING (last
 *             hold; else HELD, one less); not vouched for -> LOST -> RELEASING
 *   RELEASING -- its release answered, or lease ended ----> DEAD
 *   PENDING or DEAD, nothing referring to it -------------> freed
 *
 * Told holders (issue 18): a hold whose client was told of it is never
 * silently replaced by a fresh one. A re-entry whose grant shows Redis no
 * longer had the hold (count not above the confirmed one), or an acquire
 * that finds a tombstone lost before its lease's end (lost_early), is
 * answered LOCKLOST once (px_hold_lost_before / px_hold_report_lost) and
 * any fresh grant is given back; the told tombstone stays (not lost_early)
 * until the next acquire or UNLOCK, which answers LOCKLOST even when Redis
 * releases something (a request of unknown outcome run late, after the
 * give-back) or counts it down (:0). An UNLOCK Redis did not answer is the
 * proxy's to carry out (px_hold_unlock_failed): "vouched for" means asked
 * before expires_ms, the conservative lease end counted from the send of
 * the last confirmed acquire or renewal, so Redis cannot have expired it
 * yet. Every release Redis confirmed is noted for replay after a change of
 * master (replay.h).
 *
 * A new request about the pair of a RELEASING hold sends the release on
 * its way first; once the release is answered (or given up) the hold
 * leaves the table (in_table) and a new PENDING hold serves requests.
 * Until then an acquire waits for it, or goes after it on the same
 * connection and is tried again: one granted before a release retried
 * after a lost reply would be undone by it.
 *
 * Invariants:
 * - At most one hold per (name, owner) is in the table; DEAD holds and
 *   replaced RELEASING ones are out of it.
 * - count > 0 exactly in HELD; eng->nholds counts HELD holds; a HELD or
 *   LOST hold with a connection is on that connection's list.
 * - inflight counts the requests about the pair whose reply is pending
 *   (acquire attempts, hand-off grants, unlocks). Requests about one name
 *   all go to one pool connection, so Redis runs them in the order they
 *   were sent, and their replies come back in that order.
 * - A settle keeps h->count, the count confirmed to clients; so it is sent
 *   only when inflight is 0 (then count is final: a settle never undoes a
 *   grant a client was told about), and whatever is sent after it runs
 *   after it. px_hold_begin() sends a due settle before the next request.
 *   A RELEASING hold keeps 0 and is settled at once: what is in flight was
 *   sent before, and runs first.
 * - The settle job is IDLE unless a settle is due or in flight; a settle
 *   asked for while one is in flight is sent again after its reply
 *   (settle_again). A hold whose job is not IDLE is not freed.
 * - After a settle the proxy follows Redis: what Redis had above the
 *   confirmed count was rolled back (counted); below it, the hold shrinks,
 *   and at 0 it was released by an unlock whose reply was lost, or lost.
 *
 * Shared owners: connections naming one OWNER token share its holds (one
 * hold per pair). h->cl is the connection that took it first, with its
 * part cl_count; every other connection that acquired some of it has a
 * px_hold_share (in h->side and on its cl->locks.shares). While HELD,
 * count = cl_count + the shares' counts, every part > 0. A grant adds to
 * the granting connection's part; an unlock takes from the unlocking
 * connection's part, else from the oldest; a count Redis lowered trims
 * the newest parts first. A connection that closes gives back its part
 * only: the hold stays HELD for the others (a settle down to the rest,
 * as for a roll-back; a closing h->cl hands h->cl to the oldest share),
 * renewed as before. Only the last part's close releases the pair. A
 * hold that is lost is told to every connection with a part.
 *
 * Who frees what: the table owns its holds; references (ops in progress,
 * renewal batches) keep the memory of a hold that left the table; the
 * settle job lives in the hold's side part. hold_maybe_free() frees a hold
 * once it is PENDING or DEAD, with no reference, nothing in flight and no
 * settle.
 *
 * Memory (issue 23: a held lock's cost): a HELD hold is one block, its
 * name inline (HOLD_BLOCK); the owner string is a counted record shared by
 * every hold naming it (hold_owner_get), not a copy per hold. What only
 * settles and shared owners use (the job, its arguments, gone,
 * unknown_unlocks, settle_again, the other connections' parts) is the
 * side part (struct px_hold_side), allocated when first needed and freed
 * once all of it is back to its defaults (hold_side_trim, from
 * hold_maybe_free). Without memory for it, a settle is given up as one
 * the job queue had no room for (hold_settle_nomem), and a share's count
 * goes to h->cl's part as when the share itself cannot be allocated. */
#include "engine/hold.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/spares.h"
#include "common/util.h"
#include "engine/replay.h"
#include "engine/scripts.h"
#include "engine/wait.h"
#include "pool/pool.h"
#include "sched/loop.h"

static const struct px_job_ops settle_ops, release_ops;
static void hold_want_settle(struct px_hold *h, uint64_t until);
static void hold_settle_nomem(struct px_hold *h);
static void hold_release_unlocked(struct px_hold *h, uint64_t until);

/* name_hash: px_route_hint(name), which acquires and unlocks have anyway;
 * owner_hash: hash_bytes(owner), the owner record's (hold_owner_get). */
static uint64_t hold_hash_hinted(uint64_t name_hash, uint64_t owner_hash)
{
    return name_hash ^ (owner_hash * 31u);
}

static uint64_t hold_hash(const char *name, size_t nlen, const char *owner, size_t olen)
{
    return hold_hash_hinted(px_route_hint(name, nlen), hash_bytes(owner, olen));
}

size_t px_owner_format(const struct lk_engine *eng, uint64_t id, const char *user,
                       const char *token, size_t tlen, char *out)
{
    int n;

    if (token && user && strcmp(user, PX_OWNER_DEFAULT_USER) != 0) {
        n = snprintf(out, PX_OWNER_MAX, "%s:%s" PX_OWNER_USER_SEP "%.*s", eng->uuid, user,
                     (int)tlen, token);
        return (size_t)n;
    }
    if (token) {
        n = snprintf(out, PX_OWNER_MAX, "%s:%.*s", eng->uuid, (int)tlen, token);
        return (size_t)n;
    }
    /* The hot path: no printf per acquire, and the uuid's fixed length
     * (util_uuid4) makes its copy a few moves, without strlen. */
    n = (int)LK_UUID_LEN;
    memcpy(out, eng->uuid, LK_UUID_LEN);
    out[n++] = ':';
    n += (int)util_u64_to_str(id, out + n);
    out[n] = '\0';
    return (size_t)n;
}

/* ---- the plain kind --------------------------------------------------------- */

static unsigned plain_renew_script(const struct lk_engine *eng)
{
    (void)eng;
    return PX_SCRIPT_RENEW;
}

static int plain_settle(struct lk_engine *eng, const char *name, size_t nlen, const char *owner,
                        size_t olen, const struct px_settle *s, pool_reply_fn *cb, void *arg)
{
    char chan[PX_CHANNEL_MAX], keep[24], ttl[24];
    const char *argv[5] = {name, chan, owner, keep, ttl};
    size_t lens[5] = {nlen, 0, olen, 0, 0};

    lens[1] = px_channel_name(chan, sizeof(chan), "redisson_lock__channel:", name, nlen);
    lens[3] = util_u64_to_str(s->keep, keep);
    lens[4] = util_u64_to_str(s->keep > 0 ? s->ttl_ms : 0, ttl);
    return px_script_eval(eng, px_route_hint(name, nlen), PX_SCRIPT_SETTLE, 2, 5, argv, lens, cb,
                          arg);
}

const struct px_hold_kind px_hold_plain = {"lock", "LOCK", plain_renew_script, plain_settle, true};

/* ---- the table ---------------------------------------------------------------- */

/* hash: hold_hash(name, owner), which the caller may reuse for a create. */
static struct px_hold *hold_lookup(struct lk_engine *eng, const char *name, size_t nlen,
                                   const char *owner, size_t olen, uint64_t hash)
{
    struct hmap_node *n = hmap_first(&eng->holds, hash);

    for (; n; n = hmap_next(n)) {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, node);

        if (h->nlen == nlen && h->olen == olen && memcmp(h->key, name, nlen) == 0 &&
            memcmp(h->owner, owner, olen) == 0)
            return h;
    }
    return NULL;
}

struct px_hold *px_hold_find(struct lk_engine *eng, const char *name, size_t nlen,
                             const char *owner, size_t olen)
{
    struct px_hold *h =
        hold_lookup(eng, name, nlen, owner, olen, hold_hash(name, nlen, owner, olen));

    return h && h->state != PX_HOLD_RELEASING ? h : NULL;
}

bool px_hold_is_held(const struct px_hold *h)
{
    return h->state == PX_HOLD_HELD;
}

/* ---- owners ------------------------------------------------------------------- */

/* One owner string, shared by every hold naming it (a connection's
 * "<uuid>:<id>" by each lock it holds): a copy per hold was 40-odd bytes
 * of each. Counted; freed with the last hold that names it. Records of
 * a connection's owner are blocks of one size (OWNER_BLOCK), kept as
 * spares: an acquire and its unlock otherwise cost a malloc and a free. */
struct hold_owner {
    struct hmap_node node; /* in eng->hold_owners */
    unsigned refs;         /* holds naming it */
    uint32_t len;          /* length of str */
    char str[];            /* owned: the owner, NUL-terminated */
};

#define OWNER_BLOCK 80u /* a jemalloc size class: "<uuid>:" and an id of up to 18 digits */
_Static_assert(sizeof(struct hold_owner) + 37 + 18 + 1 <= OWNER_BLOCK, "owner block");
_Static_assert(PX_OWNER_MAX <= UINT16_MAX, "px_hold.olen");

static _Thread_local struct spares owner_spares;

static size_t owner_size(size_t olen)
{
    return LP_MAX(sizeof(struct hold_owner) + olen + 1, OWNER_BLOCK);
}

/* The record of owner (hash: hash_bytes(owner)), counted once more; its
 * string, or NULL when out of memory. */
static const char *hold_owner_get(struct lk_engine *eng, const char *owner, size_t olen,
                                  uint64_t hash)
{
    struct hmap_node *n = hmap_first(&eng->hold_owners, hash);
    struct hold_owner *o;

    for (; n; n = hmap_next(n)) {
        o = LP_CONTAINER_OF(n, struct hold_owner, node);
        if (o->len == olen && memcmp(o->str, owner, olen) == 0) {
            o->refs++;
            return o->str;
        }
    }
    o = owner_size(olen) == OWNER_BLOCK ? spares_get(&owner_spares) : NULL;
    if (!o && !(o = malloc(owner_size(olen))))
        return NULL;
    o->refs = 1;
    o->len = (uint32_t)olen;
    memcpy(o->str, owner, olen);
    o->str[olen] = '\0';
    (void)hmap_insert(&eng->hold_owners, &o->node, hash); /* in, even if not grown */
    return o->str;
}

static void hold_owner_put(struct lk_engine *eng, const char *str)
{
    struct hold_owner *o = LP_CONTAINER_OF(str, struct hold_owner, str);
    struct hmap *m = &eng->hold_owners;

    LP_BUG_ON(o->refs == 0);
    if (--o->refs > 0)
        return;
    hmap_remove(m, &o->node);
    if (owner_size(o->len) != OWNER_BLOCK || !spares_put(&owner_spares, o))
        free(o);
    if (m->count == 0 && !eng->holds.buckets)
        hmap_deinit(m); /* the last hold outlived px_hold_deinit() */
}

/* ---- the side part ----------------------------------------------------------------- */

/* What only settles and shared owners use; see the design block. */
struct px_hold_side {
    struct px_job job;        /* the settle, when one is due or in flight */
    struct px_hold *h;        /* borrowed: the hold it is part of */
    struct px_settle settle;  /* what the next (or the in-flight) settle asks */
    uint64_t gone;            /* parts of closed connections the next settle gives back */
    struct list shares;       /* struct px_hold_share: the parts of other connections */
    unsigned unknown_unlocks; /* unlocks with a lost reply since the last settle */
    bool settle_again;        /* settle once more when the one in flight is answered */
};

/* The side part of h, allocated now if it has none; NULL when out of
 * memory. */
static struct px_hold_side *hold_side_get(struct px_hold *h)
{
    struct px_hold_side *s = h->side;

    if (s)
        return s;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->h = h;
    px_job_init(&s->job, h->eng, &settle_ops);
    list_init(&s->shares);
    h->side = s;
    return s;
}

/* Frees h's side part once nothing in it differs from its defaults (its
 * settle arguments other than dequeue are set by each send). */
static void hold_side_trim(struct px_hold *h)
{
    struct px_hold_side *s = h->side;

    if (!s || s->job.state != PX_JOB_IDLE || s->settle_again || s->settle.dequeue || s->gone > 0 ||
        s->unknown_unlocks > 0 || !list_empty(&s->shares))
        return;
    h->side = NULL;
    free(s);
}

static enum px_job_state hold_job_state(const struct px_hold *h)
{
    return h->side ? h->side->job.state : PX_JOB_IDLE;
}

static void hold_job_kick(struct px_hold *h)
{
    if (h->side)
        px_job_kick(&h->side->job);
}

/* The other connections' parts (an empty list without a side part). */
static struct list hold_no_shares = {&hold_no_shares, &hold_no_shares};

static struct list *hold_shares(const struct px_hold *h)
{
    return h->side ? &h->side->shares : &hold_no_shares;
}

/* ---- hold blocks ----------------------------------------------------------------- */

/* Holds whose name fits HOLD_SPARE_KEY bytes are blocks of one size,
 * kept as per-thread spares when freed (an acquire and its unlock
 * otherwise cost a malloc and a free). The block is a jemalloc size class
 * (HOLD_BLOCK): 384 bytes with the owner copied in and the settle job
 * inline, 224 since (issue 23). */
#define HOLD_BLOCK     224u
#define HOLD_KEY_AT    offsetof(struct px_hold, key)
#define HOLD_SPARE_KEY (HOLD_BLOCK - HOLD_KEY_AT)
_Static_assert(HOLD_KEY_AT + 28 <= HOLD_BLOCK, "a hold block keeps a 27-byte name");

static _Thread_local struct spares hold_spares;

static size_t hold_size(size_t nlen)
{
    size_t key = nlen + 1;

    return HOLD_KEY_AT + (key <= HOLD_SPARE_KEY ? HOLD_SPARE_KEY : key);
}

static struct px_hold *hold_alloc(size_t nlen)
{
    size_t size = hold_size(nlen);
    struct px_hold *h = size == HOLD_BLOCK ? spares_get(&hold_spares) : NULL;

    if (!h && !(h = malloc(size)))
        return NULL;
    memset(h, 0, HOLD_KEY_AT);
    return h;
}

static void hold_free_block(struct px_hold *h)
{
    if (hold_size(h->nlen) != HOLD_BLOCK || !spares_put(&hold_spares, h))
        free(h);
}

static void hold_free(struct px_hold *h)
{
    free(h->side);
    hold_owner_put(h->eng, h->owner);
    hold_free_block(h);
}

static struct px_hold *hold_create(struct lk_engine *eng, const struct px_hold_kind *kind,
                                   const char *name, size_t nlen, const char *owner, size_t olen,
                                   uint64_t owner_hash, uint64_t hash)
{
    struct px_hold *h;

    LP_BUG_ON(olen > UINT16_MAX); /* owners are formatted into PX_OWNER_MAX bytes */
    h = hold_alloc(nlen);
    if (!h)
        return NULL;
    h->nlen = (uint32_t)nlen; /* under --max-request-bytes' 512 MiB ceiling */
    h->owner = hold_owner_get(eng, owner, olen, owner_hash);
    if (!h->owner) {
        hold_free_block(h);
        return NULL;
    }
    h->olen = (uint16_t)olen;
    h->eng = eng;
    h->kind = kind;
    h->state = PX_HOLD_PENDING;
    h->token = -1;
    memcpy(h->key, name, nlen);
    h->key[nlen] = '\0';
    list_init(&h->client_node);
    list_init(&h->due_node);
    sched_timer_init(&h->timer, px_watchdog_on_timer);
    hmap_insert(&eng->holds, &h->node, hash);
    h->in_table = true;
    return h;
}

/* Out of the table (a newer hold may take its place); memory stays while
 * something refers to it. */
static void hold_remove(struct px_hold *h)
{
    if (h->in_table)
        hmap_remove(&h->eng->holds, &h->node);
    h->in_table = false;
}

static void hold_maybe_free(struct px_hold *h)
{
    hold_side_trim(h);
    if (h->refs > 0 || h->inflight > 0 || hold_job_state(h) != PX_JOB_IDLE)
        return;
    if (h->state != PX_HOLD_PENDING && h->state != PX_HOLD_DEAD)
        return;
    hold_remove(h);
    sched_loop_timer_del(h->eng->loop, &h->timer);
    list_del_init(&h->due_node);
    list_del_init(&h->client_node);
    hold_free(h);
}

struct px_hold *px_hold_use(struct lk_engine *eng, const struct px_hold_kind *kind,
                            const char *name, size_t nlen, const char *owner, size_t olen,
                            bool create)
{
    return px_hold_use_hinted(eng, kind, name, nlen, px_route_hint(name, nlen), owner, olen,
                              create);
}

struct px_hold *px_hold_use_hinted(struct lk_engine *eng, const struct px_hold_kind *kind,
                                   const char *name, size_t nlen, uint64_t hint, const char *owner,
                                   size_t olen, bool create)
{
    uint64_t owner_hash = hash_bytes(owner, olen);
    uint64_t hash = hold_hash_hinted(hint, owner_hash);
    struct px_hold *h = hold_lookup(eng, name, nlen, owner, olen, hash);

    if (h && h->state == PX_HOLD_RELEASING) {
        hold_job_kick(h); /* the release goes before the new request */
        if (hold_job_state(h) != PX_JOB_IDLE) {
            /* Until its release is answered (or given up) it stays the
             * pair's hold: a new acquire waits while it is due
             * (px_hold_ready()) and goes after it while it is in flight,
             * and is not granted through it (RELEASING: tried again);
             * one that went first would be undone by the release retried
             * after a lost reply. */
            return create ? px_hold_get(h) : NULL;
        }
        hold_remove(h);
        h = NULL;
    }
    if (!h && create)
        h = hold_create(eng, kind, name, nlen, owner, olen, owner_hash, hash);
    return px_hold_get(h);
}

struct px_hold *px_hold_get(struct px_hold *h)
{
    if (h)
        h->refs++;
    return h;
}

void px_hold_put(struct px_hold *h)
{
    if (!h)
        return;
    LP_BUG_ON(h->refs == 0);
    h->refs--;
    hold_maybe_free(h);
}

/* ---- parts of a shared owner's hold ------------------------------------------------ */

static void share_free(struct px_hold_share *sh)
{
    list_del_init(&sh->hold_node);
    list_del_init(&sh->client_node);
    free(sh);
}

static void hold_drop_shares(struct px_hold *h)
{
    struct list *n;

    while ((n = list_first(hold_shares(h))) != NULL)
        share_free(LP_CONTAINER_OF(n, struct px_hold_share, hold_node));
}

static struct px_hold_share *share_find(const struct px_hold *h, const struct lk_caller *cl)
{
    const struct list *head = hold_shares(h), *n;

    for (n = head->next; n != head; n = n->next) {
        struct px_hold_share *sh = LP_CONTAINER_OF(n, struct px_hold_share, hold_node);

        if (sh->cl == cl)
            return sh;
    }
    return NULL;
}

/* The oldest share becomes h->cl's part (h->cl's own part is 0, or h->cl
 * closed); false when there is none. */
static bool hold_promote_share(struct px_hold *h)
{
    struct list *n = list_first(hold_shares(h));
    struct px_hold_share *sh;

    if (!n)
        return false;
    sh = LP_CONTAINER_OF(n, struct px_hold_share, hold_node);
    list_del_init(&h->client_node);
    h->cl = sh->cl;
    h->cl_count = sh->count;
    list_add_tail(&h->cl->locks.holds, &h->client_node);
    share_free(sh);
    return true;
}

/* A grant of one more to cl. Out of memory for a share: h->cl's part
 * takes it (then cl's close does not give it back; h->cl's does). */
static void hold_part_add(struct px_hold *h, struct lk_caller *cl)
{
    struct px_hold_share *sh;

    if (cl == h->cl) {
        h->cl_count++;
        return;
    }
    sh = share_find(h, cl);
    if (!sh && hold_side_get(h) && (sh = calloc(1, sizeof(*sh))) != NULL) {
        sh->h = h;
        sh->cl = cl;
        list_add_tail(&h->side->shares, &sh->hold_node);
        list_add_tail(&cl->locks.shares, &sh->client_node);
    }
    if (sh)
        sh->count++;
    else
        h->cl_count++;
}

/* Takes n off sh's part (NULL: h->cl's), dropping a part that reaches 0. */
static void hold_part_take(struct px_hold *h, struct px_hold_share *sh, uint64_t n)
{
    if (sh) {
        sh->count -= n;
        if (sh->count == 0)
            share_free(sh);
        return;
    }
    h->cl_count -= n;
    if (h->cl_count == 0)
        hold_promote_share(h);
}

/* The parts sum to at most h->count again (Redis had less than the
 * parts, or a grant counted less): the newest parts lose first. */
static void hold_parts_fit(struct px_hold *h)
{
    uint64_t sum = h->cl_count;
    struct list *head = hold_shares(h), *n;

    for (n = head->next; n != head; n = n->next)
        sum += LP_CONTAINER_OF(n, struct px_hold_share, hold_node)->count;
    while (sum > h->count) {
        struct list *last = head->prev;
        struct px_hold_share *sh =
            last == head ? NULL : LP_CONTAINER_OF(last, struct px_hold_share, hold_node);
        uint64_t take = LP_MIN(sum - h->count, sh ? sh->count : h->cl_count);

        hold_part_take(h, sh, take);
        sum -= take;
    }
}

/* ---- HELD and back ---------------------------------------------------------------- */

/* The front end's hooks (engine->front): hold time, lease-lost pushes. */
static void hold_front_end(struct lk_engine *eng, const struct px_hold *h)
{
    if (eng->front.hold_end)
        eng->front.hold_end(eng, h->held_ms);
}

static void hold_tell_lost(const struct px_hold *h, struct lk_caller *cl)
{
    if (h->eng->front.lease_lost)
        h->eng->front.lease_lost(cl, h->kind->cmd, h->key, h->nlen);
}

/* Leaves HELD or LOST for PENDING: nothing confirmed any more. */
static void hold_unhold(struct px_hold *h)
{
    struct lk_engine *eng = h->eng;

    if (h->state == PX_HOLD_HELD) {
        eng->nholds--;
        hold_front_end(eng, h);
    }
    if (h->state == PX_HOLD_HELD || h->state == PX_HOLD_LOST)
        h->state = PX_HOLD_PENDING;
    sched_loop_timer_del(eng->loop, &h->timer);
    list_del_init(&h->client_node);
    list_del_init(&h->due_node);
    hold_drop_shares(h);
    h->count = 0;
    h->cl_count = 0;
    h->watchdog = false;
    h->verify = false;
    h->unchecked = false;
    h->epoch++;
}

/* A grant adds one to what clients were told: a count above that is an
 * acquisition nobody was told of (an unknown outcome, or a give-back lost
 * in a failover, whose settle reached a master that is gone) merged into
 * this grant. The hold keeps the told count and settles Redis down to it,
 * or the holder's UNLOCK would answer "still held" for ever. */
static uint64_t hold_told_count(const struct px_hold *h, uint64_t count, bool *extra)
{
    uint64_t told = (h->state == PX_HOLD_HELD ? h->count : 0) + 1;

    *extra = count > told;
    return *extra ? told : count;
}

void px_hold_granted(struct px_hold *h, const struct px_hold_kind *kind, struct lk_caller *cl,
                     uint64_t count, uint64_t lease_ms, bool watchdog, uint64_t sent_ms)
{
    struct lk_engine *eng = h->eng;
    bool extra;

    LP_BUG_ON(h->state == PX_HOLD_RELEASING || h->state == PX_HOLD_DEAD);
    count = hold_told_count(h, count, &extra);
    if (h->state == PX_HOLD_LOST)
        hold_unhold(h);
    if (h->state == PX_HOLD_PENDING) {
        h->state = PX_HOLD_HELD;
        h->cl = cl;
        h->held_ms = sched_loop_now_ms(eng->loop);
        list_add_tail(&cl->locks.holds, &h->client_node);
        eng->nholds++;
    }
    h->kind = kind;
    h->epoch++;
    h->count = count;
    hold_part_add(h, cl);
    hold_parts_fit(h);
    h->lease_ms = lease_ms;
    h->watchdog = watchdog;
    h->expires_ms = sent_ms + lease_ms;
    h->vouch_cap_ms = 0;
    if (hold_job_state(h) ==
        PX_JOB_DUE) /* a held count keeps the extra alive: settle however late */
        h->side->job.until = PX_JOB_NO_END;
    list_del_init(&h->due_node);
    px_hold_arm(h);
    if (extra)
        hold_want_settle(h, PX_JOB_NO_END); /* sent once nothing is in flight */
}

bool px_hold_unlocked_one(struct px_hold *h, const struct lk_caller *cl, uint64_t sent_ms)
{
    struct lk_engine *eng = h->eng;
    struct px_hold_share *sh;

    if (h->state != PX_HOLD_HELD)
        return false;
    if (h->count == 1 && !cl->closing) {
        /* The last count clients were told of, and Redis counts more:
         * an acknowledged unlock a failover lost, or an acquisition of
         * unknown outcome run after its give-back. The release asked for
         * is the proxy's to carry out, as one Redis did not answer. */
        eng->stats.released++;
        eng->stats.unlocks_extra++;
        hold_release_unlocked(h, sched_loop_now_ms(eng->loop) + h->lease_ms +
                                     eng->cfg.upstream_timeout_ms);
        return true;
    }
    h->epoch++;
    /* Redis said "still held": never below 1. An unlock of a connection
     * that closed since was counted in the part its close gave back. */
    if (h->count > 1 && !cl->closing) {
        h->count--;
        sh = cl == h->cl ? NULL : share_find(h, cl); /* NULL: h->cl's, the oldest part */
        if (sh || h->cl_count > 0)
            hold_part_take(h, sh, 1);
    }
    if (!h->kind->unlock_resets_lease)
        return false;
    h->expires_ms = sent_ms + h->lease_ms;
    if (!h->watchdog)
        px_hold_arm(h);
    return false;
}

void px_hold_released(struct px_hold *h)
{
    if (h->state == PX_HOLD_HELD)
        px_replay_note(h->eng, h);
    hold_unhold(h);
    hold_maybe_free(h);
}

/* True if a connection other than cl has a part of h. */
static bool hold_shared_beyond(const struct px_hold *h, const struct lk_caller *cl)
{
    return h->cl != cl || list_first(hold_shares(h)) != NULL;
}

static void hold_mark_lost_except(struct px_hold *h, const struct lk_caller *skip);

bool px_hold_not_held(struct px_hold *h, const struct lk_caller *cl)
{
    bool told = h->state == PX_HOLD_HELD || h->state == PX_HOLD_LOST;

    if (h->state == PX_HOLD_HELD && hold_shared_beyond(h, cl)) {
        /* The other connections of the owner are told too: a tombstone
         * answers their UNLOCK LOCKLOST, and they get the push. */
        hold_mark_lost_except(h, cl);
        return true;
    }
    if (h->state == PX_HOLD_HELD)
        h->eng->stats.leases_lost++;
    hold_unhold(h);
    hold_maybe_free(h);
    return told;
}

bool px_hold_unlock_lost(struct px_hold *h, const struct lk_caller *cl, uint64_t lease_ms)
{
    uint64_t until = sched_loop_now_ms(h->eng->loop) + lease_ms + h->eng->cfg.upstream_timeout_ms;
    bool told = px_hold_not_held(h, cl);

    px_hold_settle(h, until); /* a grant made after the loss, if Redis has one */
    return told;
}

void px_hold_mark_lost(struct px_hold *h)
{
    hold_mark_lost_except(h, NULL);
}

/* px_hold_mark_lost() whose push skips skip (told by its reply). */
static void hold_mark_lost_except(struct px_hold *h, const struct lk_caller *skip)
{
    struct lk_engine *eng = h->eng;

    if (h->state != PX_HOLD_HELD)
        return;
    /* A fixed lease's own end is no surprise to its holder; anything else
     * (a renewed hold, a fixed lease found gone before its end) is. */
    h->lost_early = h->watchdog || sched_loop_now_ms(eng->loop) < h->expires_ms;
    eng->stats.leases_lost++;
    eng->nholds--;
    hold_front_end(eng, h); /* a tombstone is no longer held */
    h->state = PX_HOLD_LOST;
    h->count = 0;
    h->watchdog = false;
    h->verify = false;
    h->unchecked = false;
    list_del_init(&h->due_node);
    sched_loop_timer_in(eng->loop, &h->timer, PX_HOLD_TOMBSTONE_MS);
    if (h->cl != skip)
        hold_tell_lost(h, h->cl);
    while (!list_empty(hold_shares(h))) { /* every connection with a part is told */
        struct px_hold_share *sh =
            LP_CONTAINER_OF(list_first(hold_shares(h)), struct px_hold_share, hold_node);

        if (sh->cl != skip)
            hold_tell_lost(h, sh->cl);
        share_free(sh);
    }
    h->cl_count = 0;
}

bool px_hold_lost_before(const struct px_hold *h, uint64_t count)
{
    if (h->state == PX_HOLD_LOST)
        return h->lost_early;
    return h->state == PX_HOLD_HELD && count > 0 && count <= h->count;
}

void px_hold_lapse_due(struct px_hold *h)
{
    if (h->state == PX_HOLD_HELD && !h->watchdog &&
        sched_loop_now_ms(h->eng->loop) >= h->expires_ms)
        px_hold_mark_lost(h); /* a fixed lease ran out */
}

void px_hold_report_lost(struct px_hold *h, bool give_back, uint64_t until)
{
    px_hold_mark_lost(h); /* counted and pushed, if it was HELD */
    /* Told: the next acquire is a fresh hold (not lost_early), but the
     * tombstone stays, so an UNLOCK before it still answers LOCKLOST
     * whatever Redis answers: a request of unknown outcome may yet run
     * late and grant the pair afresh, after a give-back's settle. */
    if (h->state == PX_HOLD_LOST) {
        h->lost_early = false;
        h->epoch++;
    }
    if (give_back)
        px_hold_settle(h, until);
}

/* ---- an UNLOCK Redis did not answer -------------------------------------------------- */

/* The :0 told in hand means what Redis's :0 means: the lease runs again
 * from the unlock (asked_ms), as the client counts it. Redis has that
 * lease if the unlock ran; if it did not, the key still ends where it
 * did: the settle (its TTL: expires_ms - now) puts the new lease in
 * place, and until it finds the hold the lease is vouched for up to the
 * old end only. */
static void hold_unlock_kept_lease(struct px_hold *h, uint64_t asked_ms)
{
    uint64_t vouched = px_hold_vouched_until(h);

    if (!h->kind->unlock_resets_lease)
        return;
    h->expires_ms = asked_ms + h->lease_ms;
    h->vouch_cap_ms = vouched < h->expires_ms ? vouched : 0;
    if (!h->watchdog)
        px_hold_arm(h);
}

enum px_unlock_failed px_hold_unlock_failed(struct px_hold *h, const struct lk_caller *cl,
                                            uint64_t asked_ms)
{
    struct px_hold_share *sh;

    struct lk_engine *eng = h->eng;
    /* Any renewal was sent before now: Redis keeps the key no longer. */
    uint64_t until = sched_loop_now_ms(eng->loop) + h->lease_ms + eng->cfg.upstream_timeout_ms;

    if (h->state != PX_HOLD_HELD)
        return PX_UNLOCK_NOT_HELD;
    eng->stats.unlocks_in_hand++;
    if (asked_ms >= px_hold_vouched_until(h)) {
        px_hold_mark_lost(h);
        hold_release_unlocked(h, until);
        return PX_UNLOCK_UNVOUCHED;
    }
    if (h->count > 1) {
        h->count--;
        h->epoch++;
        sh = cl == h->cl ? NULL : share_find(h, cl); /* as px_hold_unlocked_one */
        if (sh || h->cl_count > 0)
            hold_part_take(h, sh, 1);
        hold_unlock_kept_lease(h, asked_ms);
        hold_want_settle(h, PX_JOB_NO_END); /* HELD: down to the count left */
        return PX_UNLOCK_KEPT;
    }
    eng->stats.released++;
    hold_release_unlocked(h, until);
    return PX_UNLOCK_RELEASED;
}

/* ---- requests in flight and settles ------------------------------------------------ */

void px_hold_begin(struct px_hold *h)
{
    hold_job_kick(h); /* a due settle goes first, if nothing is in flight */
    h->inflight++;
}

int px_hold_ready(struct px_hold *h)
{
    hold_job_kick(h);
    if (hold_job_state(h) == PX_JOB_DUE && h->inflight == 0)
        return -ENOTCONN;
    return 0;
}

bool px_hold_settle_idle(struct px_hold *h)
{
    if (hold_job_state(h) == PX_JOB_IDLE)
        return true;
    hold_job_kick(h);
    return false;
}

/* A settle that became ready is sent from the jobs' timer, not from here:
 * the reply being handled has not updated count yet. */
void px_hold_end(struct px_hold *h)
{
    LP_BUG_ON(h->inflight == 0);
    h->inflight--;
    if (h->inflight == 0 && h->side)
        px_job_soon(&h->side->job);
    hold_maybe_free(h);
}

/* No memory for h's side part: the settle asked for is given up, as one
 * the job queue has no room for (jobs.c: counted and logged alike). */
static void hold_settle_nomem(struct px_hold *h)
{
    struct lk_engine *eng = h->eng;
    const struct px_job_ops *ops = h->state == PX_HOLD_RELEASING ? &release_ops : &settle_ops;
    uint64_t quiet;

    eng->jobs.dropped[ops->group]++;
    if (px_ratelog_allow(&eng->drop_log, sched_loop_now_ms(eng->loop), &quiet))
        log_msg(LOG_LVL_WARN, "%s given up: out of memory (%llu similar not logged)", ops->what,
                (unsigned long long)quiet);
    if (h->state == PX_HOLD_RELEASING) {
        h->state = PX_HOLD_DEAD;
        hold_remove(h);
    }
    hold_maybe_free(h);
}

/* Asks for a settle (to the confirmed count, or 0 when RELEASING). */
static void hold_want_settle(struct px_hold *h, uint64_t until)
{
    struct px_hold_side *s = hold_side_get(h);

    if (!s) {
        hold_settle_nomem(h);
    } else if (s->job.state == PX_JOB_INFLIGHT) {
        s->settle_again = true;
    } else if (s->job.state == PX_JOB_DUE) {
        s->job.ops = h->state == PX_HOLD_RELEASING ? &release_ops : &settle_ops;
        if (s->job.until != PX_JOB_NO_END && (until == PX_JOB_NO_END || until > s->job.until))
            s->job.until = until;
    } else {
        s->job.ops = h->state == PX_HOLD_RELEASING ? &release_ops : &settle_ops;
        px_job_submit(&s->job, until);
    }
}

void px_hold_lower_vouch(struct px_hold *h, uint64_t end_ms)
{
    if (h->state != PX_HOLD_HELD || end_ms >= px_hold_vouched_until(h))
        return;
    h->vouch_cap_ms = end_ms;
}

uint64_t px_hold_vouched_until(const struct px_hold *h)
{
    return h->vouch_cap_ms ? LP_MIN(h->vouch_cap_ms, h->expires_ms) : h->expires_ms;
}

void px_hold_settle(struct px_hold *h, uint64_t until)
{
    if (h->state == PX_HOLD_DEAD || h->state == PX_HOLD_RELEASING)
        return; /* its release settles everything */
    if (h->state == PX_HOLD_HELD)
        until = PX_JOB_NO_END; /* renewed: an extra count would live as long as the hold */
    hold_want_settle(h, until);
}

void px_hold_unlock_unknown(struct px_hold *h)
{
    if (!hold_side_get(h)) {
        hold_settle_nomem(h);
        return;
    }
    h->side->unknown_unlocks++;
    px_hold_settle(h, PX_JOB_NO_END);
}

void px_hold_dequeue(struct px_hold *h, uint64_t wait_ms)
{
    if (h->state == PX_HOLD_DEAD)
        return;
    if (!hold_side_get(h)) {
        hold_settle_nomem(h);
        return;
    }
    h->side->settle.dequeue = true;
    h->side->settle.wait_ms = wait_ms;
    hold_want_settle(h, sched_loop_now_ms(h->eng->loop) + wait_ms);
}

void px_hold_release(struct px_hold *h, uint64_t until)
{
    if (h->state == PX_HOLD_DEAD || h->state == PX_HOLD_RELEASING)
        return;
    hold_unhold(h);
    h->cl = NULL;
    h->state = PX_HOLD_RELEASING;
    hold_want_settle(h, until);
}

/* px_hold_release() of an UNLOCK the proxy carries out (counted as a
 * release, not in disc_releases). */
static void hold_release_unlocked(struct px_hold *h, uint64_t until)
{
    px_hold_release(h, until);
    h->by_unlock = true;
}

static bool settle_ready(const struct px_job *j)
{
    const struct px_hold *h = LP_CONTAINER_OF(j, struct px_hold_side, job)->h;

    return h->inflight == 0 || h->state == PX_HOLD_RELEASING || h->state == PX_HOLD_DEAD;
}

static int settle_send(struct px_job *j, pool_reply_fn *cb, void *arg)
{
    struct px_hold_side *s = LP_CONTAINER_OF(j, struct px_hold_side, job);
    struct px_hold *h = s->h;
    uint64_t now = sched_loop_now_ms(h->eng->loop);
    int rc;

    s->settle.keep = h->state == PX_HOLD_HELD ? h->count : 0;
    s->settle.ttl_ms = h->state == PX_HOLD_HELD && h->expires_ms > now ? h->expires_ms - now : 0;
    /* A renewal sent before the settle runs may be answered after this
     * send, and vouch for up to its own send + lease: a renewed hold's TTL
     * goes back to a whole lease, from when Redis runs the settle. */
    if (s->settle.ttl_ms > 0 && h->watchdog)
        s->settle.ttl_ms = h->lease_ms;
    rc = h->kind->settle(h->eng, h->key, h->nlen, h->owner, h->olen, &s->settle, cb, arg);
    if (rc == 0)
        s->settle.dequeue = false; /* asked for; a later give-up asks again */
    return rc;
}

static void settle_log_rollback(struct px_hold *h, uint64_t n)
{
    uint64_t quiet;

    /* info, not warn: a client leaving with a LOCK in flight is routine;
     * unknown_outcomes_rolled_back counts every one. */
    if (!px_ratelog_allow(&h->eng->settle_log, sched_loop_now_ms(h->eng->loop), &quiet))
        return;
    log_msg(LOG_LVL_INFO,
            "rolled back %llu acquisition(s) of %s '%.*s' by %.*s that no client was told of "
            "(late, unreplicated or lost reply) (%llu similar not logged)",
            (unsigned long long)n, h->kind->name, (int)LP_MIN(h->nlen, 200u), h->key, (int)h->olen,
            h->owner, (unsigned long long)quiet);
}

/* Redis had `had` of the pair; it now has at most keep. Follow it. */
static void hold_settled(struct px_hold *h, uint64_t keep, uint64_t had)
{
    struct lk_engine *eng = h->eng;

    if (h->state == PX_HOLD_RELEASING) {
        if (keep == 0 && had > 0 && !h->by_unlock)
            eng->stats.disc_releases++;
        return;
    }
    if (had > keep) {
        uint64_t gone = LP_MIN(h->side->gone, had - keep); /* closed connections' parts */

        if (gone > 0)
            eng->stats.disc_releases++;
        if (had - keep > gone) {
            eng->stats.rolled_back += had - keep - gone;
            settle_log_rollback(h, had - keep - gone);
        }
    }
    if (had >= keep && keep > 0 && h->state == PX_HOLD_HELD) {
        h->vouch_cap_ms = 0; /* held when the settle ran, its TTL put back */
    } else if (had < keep && h->state == PX_HOLD_HELD) {
        if (had > 0) {
            h->count = had; /* unlocks whose reply was lost did run */
            hold_parts_fit(h);
        } else if (h->side->unknown_unlocks > 0)
            hold_unhold(h); /* released by an unlock whose reply was lost */
        else
            px_hold_mark_lost(h);
    }
    h->side->unknown_unlocks = 0;
    h->side->gone = 0;
}

/* A RELEASING hold whose release (keep 0) was answered or given up is
 * DEAD; an earlier settle that kept a count is followed by the release. */
static void settle_done(struct px_job *j, const struct pool_reply *r)
{
    struct px_hold *h = LP_CONTAINER_OF(j, struct px_hold_side, job)->h;
    uint64_t keep = h->side->settle.keep;

    if (r->type == POOL_REPLY_INTEGER && r->integer >= 0)
        hold_settled(h, keep, (uint64_t)r->integer);
    else
        log_msg(LOG_LVL_WARN, "settling %s '%.*s' failed: %.*s", h->kind->name,
                (int)LP_MIN(h->nlen, 200u), h->key, r->type == POOL_REPLY_ERROR ? (int)r->len : 9,
                r->type == POOL_REPLY_ERROR ? r->str : "bad reply");
    if (h->state == PX_HOLD_RELEASING && keep == 0) {
        if (r->type == POOL_REPLY_INTEGER)
            px_replay_note(h->eng, h);
        h->state = PX_HOLD_DEAD;
        hold_remove(h);
    } else if (h->side->settle_again || h->state == PX_HOLD_RELEASING) {
        h->side->settle_again = false;
        hold_want_settle(h, h->state == PX_HOLD_RELEASING
                                ? h->expires_ms + h->eng->cfg.upstream_timeout_ms
                                : PX_JOB_NO_END);
    }
    hold_maybe_free(h);
}

static void settle_dropped(struct px_job *j, enum px_job_drop why)
{
    struct px_hold *h = LP_CONTAINER_OF(j, struct px_hold_side, job)->h;

    (void)why;
    h->side->settle_again = false;
    if (h->state == PX_HOLD_RELEASING) {
        h->state = PX_HOLD_DEAD;
        hold_remove(h);
    }
    hold_maybe_free(h);
}

/* Settles set a count, so a lost reply is retried. A RELEASING hold's
 * settle is counted as a disconnect release, any other as a roll-back. */
static const struct px_job_ops settle_ops = {
    .what = "roll-back of an unconfirmed acquisition",
    .group = PX_JOB_ROLLBACK,
    .idempotent = true,
    .ready = settle_ready,
    .send = settle_send,
    .done = settle_done,
    .dropped = settle_dropped,
};

static const struct px_job_ops release_ops = {
    .what = "release of a closed connection's lock",
    .group = PX_JOB_RELEASE,
    .idempotent = true,
    .ready = settle_ready,
    .send = settle_send,
    .done = settle_done,
    .dropped = settle_dropped,
};

/* ---- the connection ------------------------------------------------------------ */

/* A closing connection's part (n of h->count) goes back: the rest of
 * the hold stays HELD for the connections that still have parts. With
 * --on-disconnect expire the part is left to them (nobody else could
 * release it, and their renewal keeps it alive). */
static void hold_give_back_part(struct px_hold *h, uint64_t n)
{
    if (h->cl->eng->cfg.on_disc != PX_DISCONNECT_RELEASE) {
        h->cl_count += n;
        return;
    }
    h->count -= n;
    if (hold_side_get(h))
        h->side->gone += n;
    h->epoch++;
    hold_want_settle(h, PX_JOB_NO_END); /* sent once nothing is in flight */
}

static void hold_client_gone_shares(struct lk_caller *cl, unsigned *budget)
{
    struct list *n;

    for (; *budget > 0 && (n = list_first(&cl->locks.shares)) != NULL; (*budget)--) {
        struct px_hold_share *sh = LP_CONTAINER_OF(n, struct px_hold_share, client_node);
        struct px_hold *h = sh->h;
        uint64_t part = sh->count;

        share_free(sh);
        if (h->state == PX_HOLD_HELD)
            hold_give_back_part(h, part);
    }
}

bool px_hold_client_gone(struct lk_caller *cl, unsigned *budget)
{
    struct lk_engine *eng = cl->eng;
    struct list *n;

    hold_client_gone_shares(cl, budget);
    /* Every branch takes h off cl->locks.holds (a promoted share moves it
     * to the share's connection). */
    for (; *budget > 0 && (n = list_first(&cl->locks.holds)) != NULL; (*budget)--) {
        struct px_hold *h = LP_CONTAINER_OF(n, struct px_hold, client_node);
        uint64_t part = h->cl_count;

        if (h->state == PX_HOLD_HELD && hold_promote_share(h)) {
            hold_give_back_part(h, part); /* others of the owner hold the rest */
            continue;
        }
        if (h->state == PX_HOLD_HELD && eng->cfg.on_disc == PX_DISCONNECT_RELEASE) {
            /* expires_ms counts from the send; Redis started the lease when
             * it ran the request, up to an upstream timeout later. */
            px_hold_release(h, h->expires_ms + eng->cfg.upstream_timeout_ms);
            continue;
        }
        /* Left to expire: a due settle would now keep 0 and release early. */
        if (h->state == PX_HOLD_HELD && h->side)
            px_job_cancel(&h->side->job);
        if (h->side)
            h->side->settle_again = false;
        hold_unhold(h);
        h->cl = NULL;
        hold_maybe_free(h);
    }
    return list_empty(&cl->locks.holds) && list_empty(&cl->locks.shares);
}

int px_hold_init(struct lk_engine *eng)
{
    int rc = hmap_init(&eng->holds, 1024);

    if (rc < 0)
        return rc;
    rc = hmap_init(&eng->hold_owners, 64);
    if (rc < 0)
        goto err_holds;
    rc = px_watchdog_init(eng);
    if (rc < 0)
        goto err_owners;
    return 0;
err_owners:
    hmap_deinit(&eng->hold_owners);
err_holds:
    hmap_deinit(&eng->holds);
    return rc;
}

void px_hold_deinit(struct lk_engine *eng)
{
    size_t i;

    px_watchdog_deinit(eng);
    for (i = 0; i < eng->holds.nbuckets; i++) {
        while (eng->holds.buckets[i]) {
            struct px_hold *h = LP_CONTAINER_OF(eng->holds.buckets[i], struct px_hold, node);

            hold_unhold(h);
            if (h->side)
                px_job_cancel(&h->side->job);
            hold_remove(h);
            h->state = PX_HOLD_DEAD;
            h->refs = 0;
            h->inflight = 0;
            hold_maybe_free(h);
        }
    }
    hmap_deinit(&eng->holds);
    if (eng->hold_owners.count == 0) /* else the last hold's free does (hold_owner_put) */
        hmap_deinit(&eng->hold_owners);
}
