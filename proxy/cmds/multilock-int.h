/* What multilock.c (MULTILOCK), multiunlock.c (MULTIUNLOCK) and
 * multi_names.c (the names of a command: checks, the global order, groups
 * of one slot) share. Private to those three files; the design block is in
 * multilock.c. */
#ifndef LP_PROXY_LOCKS_MULTILOCK_INT_H
#define LP_PROXY_LOCKS_MULTILOCK_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/hold.h"
#include "proxy/cmds/multilock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

#define PX__MULTI_DEFER_MS  2u   /* re-check of a group waiting for settles */
#define PX__MULTI_DEFER_MAX 5000 /* give up a group deferred this long (Redis down) */

/* Scripts of multilock.c's set. */
enum px__multi_script {
    PX__MULTI_ACQUIRE = 0, /* KEYS names; ARGV lease, owner -> {1, counts...} | {0, pttl, i} */
    PX__MULTI_UNLOCK = 1,  /* KEYS names, channels; ARGV owner, leases... -> {-1|0|1, ...} */
    PX__MULTI_COUNT = 2,
};

/* Pool id of one of the scripts. */
unsigned px__multi_script(const struct lk_engine *eng, enum px__multi_script s);

/* One name of a command, with its pair's hold. */
struct multi_name {
    const char *name;     /* borrowed: request argument */
    size_t nlen;          /* name length */
    uint16_t slot;        /* cluster slot (0 on a single Redis) */
    struct px_hold *hold; /* reference, or NULL (MULTIUNLOCK of a pair never seen) */
    int64_t count;        /* the count this attempt's grant gave, 0: not taken by it */
    int result;           /* MULTIUNLOCK: -1 not held, 0 still held, 1 released */
};

/* How many leading arguments after the command are names (up to the
 * first LEASE or WAIT). */
unsigned px__multi_count_names(const struct px_req *req);

/* Checks a name count (1..PX_MULTI_MAX); replies and returns -EINVAL
 * when it is bad. */
int px__multi_check_count(struct px_req *req, unsigned nnames);

/* Fills names[] from argv[1..nnames] (each checked as LOCK's name, and
 * against the caller's ACL), sorted by slot then name; refuses a name
 * given twice. Replies and returns -EINVAL on bad input. */
int px__multi_fill_names(struct px_req *req, struct multi_name *names, unsigned nnames);

/* The end (exclusive) of the group of one slot that starts at from. */
unsigned px__multi_group_end(const struct multi_name *names, unsigned n, unsigned from);

/* True when no settle of the names [from, to) is due or in flight (due
 * ones are pushed): a group waits for them (see multilock.c). */
bool px__multi_settles_idle(struct multi_name *names, unsigned from, unsigned to);

/* The caller's owner field (the connection's, as LOCK without OWNER) into
 * out (PX_OWNER_MAX bytes); returns its length. */
size_t px__multi_owner(struct px_req *req, char *out);

/* MULTIUNLOCK (multiunlock.c). */
void px__multi_cmd_unlock(struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
