/* Pass-through: the table of the Redis commands lockproxy forwards, and
 * where their keys are.
 *
 * Each entry is what Redis's command table says of the command: its arity
 * (positive: exactly that many arguments with the name; negative: at least
 * that many) and its keys' positions, first/last/step as in Redis (last
 * -1 is the last argument, -2 the one before), or a key-spec kind for the
 * commands whose keys a count or a keyword locates (EVAL's numkeys,
 * ZUNIONSTORE's destination and numkeys, XREAD's STREAMS). The proxy needs
 * the keys for three things: routing (the slot of the first key on a
 * Cluster), CROSSSLOT (every key in one slot, as Redis Cluster demands),
 * and authorization (every key must match the user's patterns).
 *
 * Refused commands are in the table too, with the reason: blocking
 * commands (they would hold a pipelined connection shared by every
 * client), and commands that make no sense through a proxy (replication,
 * server administration, whole-keyspace commands on a pooled, possibly
 * sharded upstream). A name in neither is unknown: the reply says so.
 *
 * The reply shape says how a RESP2 reply of Redis (the pool speaks RESP2)
 * is written to a RESP3 client so it reads what Redis would have sent it
 * (a map for HGETALL, a set for SMEMBERS, doubles for scores). Commands
 * without a shape keep the RESP2 shape (aggregates as arrays); nulls are
 * always RESP3 nulls for a RESP3 client. */
#ifndef LP_PROXY_FWD_KEYS_H
#define LP_PROXY_FWD_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* How a command's keys are found. */
enum px_fwd_kspec {
    PX_FK_NONE = 0,     /* no keys: any node */
    PX_FK_RANGE,        /* first, last, step */
    PX_FK_NUMKEYS,      /* argv[first] is numkeys, the keys follow it */
    PX_FK_DEST_NUMKEYS, /* argv[1] is a key, argv[2] numkeys, the keys follow */
    PX_FK_STREAMS,      /* after the STREAMS keyword, the first half of the rest */
    PX_FK_SUBCMD,       /* argv[1] a subcommand, argv[2] the key (when argc > 2) */
};

/* What the proxy does with it. */
enum px_fwd_action {
    PX_FA_FORWARD = 0, /* sent upstream */
    PX_FA_SCRIPT,      /* EVAL family and SCRIPT: fwd_script.c keeps the texts */
    PX_FA_LOCAL,       /* answered by the proxy (READONLY, READWRITE) */
    PX_FA_REFUSE,      /* refused with .why */
};

/* How a RESP2 reply becomes RESP3 (see above). */
enum px_fwd_shape {
    PX_FS_PLAIN = 0,
    PX_FS_MAP,        /* flat array of pairs -> map */
    PX_FS_SET,        /* array -> set */
    PX_FS_DOUBLE,     /* bulk (or array of bulks) -> double(s) */
    PX_FS_WITHSCORES, /* with a WITHSCORES argument: flat -> [member, double] pairs */
    PX_FS_ZPOP,       /* ZPOPMIN/ZPOPMAX: pairs with a count, flat with doubles without */
    PX_FS_NULLARR,    /* RESP2 null is the null array (*-1), not the null bulk */
};

struct px_fwd_spec {
    const char *name; /* upper case */
    int arity;        /* Redis's: > 0 exact, < 0 at least -arity */
    int8_t first;     /* first key (or numkeys position for PX_FK_NUMKEYS) */
    int8_t last;      /* last key; < 0 counts from the end */
    int8_t step;      /* between keys */
    uint8_t kspec;    /* enum px_fwd_kspec */
    uint8_t action;   /* enum px_fwd_action */
    uint8_t shape;    /* enum px_fwd_shape */
    const char *why;  /* PX_FA_REFUSE: why, for the error */
};

/* Sorts the table (once, at start-up). */
void px_fwd_keys_init(void);

/* The entry for a command name (any case), or NULL. */
const struct px_fwd_spec *px_fwd_lookup(const char *name, size_t len);

/* True when argc fits the entry's arity. */
bool px_fwd_arity_ok(const struct px_fwd_spec *s, int argc);

/* Where req's keys are: up to two ranges of argv indexes
 * [first[i], last[i]] stepping step[i]. */
struct px_fwd_keyset {
    int n;        /* ranges (0: no keys) */
    int first[2]; /* argv index of the range's first key */
    int last[2];  /* argv index of its last key (inclusive) */
    int step[2];  /* >= 1 */
};

/* Fills ks from req (whose arity was checked). Returns 0, or -EINVAL with
 * the error text (Redis's words) in *why: a numkeys that is not a number,
 * is negative or counts past the arguments, XREAD without STREAMS or with
 * an odd rest. */
int px_fwd_keys(const struct px_fwd_spec *s, const struct px_req *req, struct px_fwd_keyset *ks,
                const char **why);

#ifdef __cplusplus
}
#endif

#endif
