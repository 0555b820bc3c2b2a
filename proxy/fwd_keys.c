/* Pass-through command table and key positions; see fwd_keys.h. Arities
 * and key positions are Redis 7's (COMMAND INFO). */
#include "proxy/fwd_keys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "proxy/args.h"
#include "proxy/request.h"

/* Shorthands: key range; with a reply shape; numkeys at pos; destination
 * then numkeys; subcommand then key; no key; scripts; local; refused. */
#define K(n, a, f, l, s)                                             \
    {                                                                \
        n, a, f, l, s, PX_FK_RANGE, PX_FA_FORWARD, PX_FS_PLAIN, NULL \
    }
#define KS(n, a, f, l, s, sh)                               \
    {                                                       \
        n, a, f, l, s, PX_FK_RANGE, PX_FA_FORWARD, sh, NULL \
    }
#define NK(n, a, pos, sh)                                       \
    {                                                           \
        n, a, pos, 0, 1, PX_FK_NUMKEYS, PX_FA_FORWARD, sh, NULL \
    }
#define DNK(n, a)                                                           \
    {                                                                       \
        n, a, 1, 0, 1, PX_FK_DEST_NUMKEYS, PX_FA_FORWARD, PX_FS_PLAIN, NULL \
    }
#define SUB(n, a)                                                     \
    {                                                                 \
        n, a, 2, 2, 1, PX_FK_SUBCMD, PX_FA_FORWARD, PX_FS_PLAIN, NULL \
    }
#define NOKEY(n, a)                                                 \
    {                                                               \
        n, a, 0, 0, 0, PX_FK_NONE, PX_FA_FORWARD, PX_FS_PLAIN, NULL \
    }
#define SCR(n, a, ks, f)                                   \
    {                                                      \
        n, a, f, 0, 1, ks, PX_FA_SCRIPT, PX_FS_PLAIN, NULL \
    }
#define LOC(n, a)                                                 \
    {                                                             \
        n, a, 0, 0, 0, PX_FK_NONE, PX_FA_LOCAL, PX_FS_PLAIN, NULL \
    }
#define REF(n, w)                                                \
    {                                                            \
        n, -1, 0, 0, 0, PX_FK_NONE, PX_FA_REFUSE, PX_FS_PLAIN, w \
    }

#define BLOCKS "it blocks, and would hold an upstream connection every client shares"
#define SERVER "it acts on the whole Redis server, which the proxy's clients share"
#define REPL   "replication and monitoring connections must go to Redis directly"
#define SPACE  "it scans the whole keyspace of a pooled (possibly sharded) upstream"
#define REDIR  "the proxy follows MOVED and ASK itself"
#define PATTRN "its BY/GET patterns reach keys the proxy cannot check"

static struct px_fwd_spec table[] = {
    /* strings */
    K("GET", 2, 1, 1, 1),
    K("SET", -3, 1, 1, 1),
    K("SETNX", 3, 1, 1, 1),
    K("SETEX", 4, 1, 1, 1),
    K("PSETEX", 4, 1, 1, 1),
    K("GETSET", 3, 1, 1, 1),
    K("GETDEL", 2, 1, 1, 1),
    K("GETEX", -2, 1, 1, 1),
    K("MGET", -2, 1, -1, 1),
    K("MSET", -3, 1, -1, 2),
    K("MSETNX", -3, 1, -1, 2),
    K("APPEND", 3, 1, 1, 1),
    K("STRLEN", 2, 1, 1, 1),
    K("INCR", 2, 1, 1, 1),
    K("DECR", 2, 1, 1, 1),
    K("INCRBY", 3, 1, 1, 1),
    K("DECRBY", 3, 1, 1, 1),
    K("INCRBYFLOAT", 3, 1, 1, 1),
    K("GETRANGE", 4, 1, 1, 1),
    K("SETRANGE", 4, 1, 1, 1),
    K("SUBSTR", 4, 1, 1, 1),
    K("LCS", -3, 1, 2, 1),
    /* keyspace */
    K("DEL", -2, 1, -1, 1),
    K("UNLINK", -2, 1, -1, 1),
    K("EXISTS", -2, 1, -1, 1),
    K("TOUCH", -2, 1, -1, 1),
    K("TYPE", 2, 1, 1, 1),
    K("EXPIRE", -3, 1, 1, 1),
    K("PEXPIRE", -3, 1, 1, 1),
    K("EXPIREAT", -3, 1, 1, 1),
    K("PEXPIREAT", -3, 1, 1, 1),
    K("EXPIRETIME", 2, 1, 1, 1),
    K("PEXPIRETIME", 2, 1, 1, 1),
    K("TTL", 2, 1, 1, 1),
    K("PTTL", 2, 1, 1, 1),
    K("PERSIST", 2, 1, 1, 1),
    K("RENAME", 3, 1, 2, 1),
    K("RENAMENX", 3, 1, 2, 1),
    K("DUMP", 2, 1, 1, 1),
    K("RESTORE", -4, 1, 1, 1),
    SUB("OBJECT", -2),
    /* hashes */
    K("HSET", -4, 1, 1, 1),
    K("HSETNX", 4, 1, 1, 1),
    K("HGET", 3, 1, 1, 1),
    K("HMSET", -4, 1, 1, 1),
    K("HMGET", -3, 1, 1, 1),
    K("HDEL", -3, 1, 1, 1),
    K("HLEN", 2, 1, 1, 1),
    K("HSTRLEN", 3, 1, 1, 1),
    K("HEXISTS", 3, 1, 1, 1),
    K("HKEYS", 2, 1, 1, 1),
    K("HVALS", 2, 1, 1, 1),
    KS("HGETALL", 2, 1, 1, 1, PX_FS_MAP),
    K("HINCRBY", 4, 1, 1, 1),
    K("HINCRBYFLOAT", 4, 1, 1, 1),
    K("HRANDFIELD", -2, 1, 1, 1),
    K("HSCAN", -3, 1, 1, 1),
    /* lists */
    K("LPUSH", -3, 1, 1, 1),
    K("RPUSH", -3, 1, 1, 1),
    K("LPUSHX", -3, 1, 1, 1),
    K("RPUSHX", -3, 1, 1, 1),
    K("LPOP", -2, 1, 1, 1),
    K("RPOP", -2, 1, 1, 1),
    K("LLEN", 2, 1, 1, 1),
    K("LRANGE", 4, 1, 1, 1),
    K("LINDEX", 3, 1, 1, 1),
    K("LSET", 4, 1, 1, 1),
    K("LREM", 4, 1, 1, 1),
    K("LTRIM", 4, 1, 1, 1),
    K("LINSERT", 5, 1, 1, 1),
    K("LPOS", -3, 1, 1, 1),
    K("LMOVE", 5, 1, 2, 1),
    K("RPOPLPUSH", 3, 1, 2, 1),
    NK("LMPOP", -4, 1, PX_FS_NULLARR),
    /* sets */
    K("SADD", -3, 1, 1, 1),
    K("SREM", -3, 1, 1, 1),
    KS("SMEMBERS", 2, 1, 1, 1, PX_FS_SET),
    K("SISMEMBER", 3, 1, 1, 1),
    K("SMISMEMBER", -3, 1, 1, 1),
    K("SCARD", 2, 1, 1, 1),
    K("SPOP", -2, 1, 1, 1),
    K("SRANDMEMBER", -2, 1, 1, 1),
    K("SMOVE", 4, 1, 2, 1),
    KS("SINTER", -2, 1, -1, 1, PX_FS_SET),
    KS("SUNION", -2, 1, -1, 1, PX_FS_SET),
    KS("SDIFF", -2, 1, -1, 1, PX_FS_SET),
    K("SINTERSTORE", -3, 1, -1, 1),
    K("SUNIONSTORE", -3, 1, -1, 1),
    K("SDIFFSTORE", -3, 1, -1, 1),
    NK("SINTERCARD", -3, 1, PX_FS_PLAIN),
    K("SSCAN", -3, 1, 1, 1),
    /* sorted sets */
    KS("ZADD", -4, 1, 1, 1, PX_FS_DOUBLE),
    KS("ZINCRBY", 4, 1, 1, 1, PX_FS_DOUBLE),
    KS("ZSCORE", 3, 1, 1, 1, PX_FS_DOUBLE),
    KS("ZMSCORE", -3, 1, 1, 1, PX_FS_DOUBLE),
    K("ZREM", -3, 1, 1, 1),
    K("ZCARD", 2, 1, 1, 1),
    K("ZCOUNT", 4, 1, 1, 1),
    K("ZLEXCOUNT", 4, 1, 1, 1),
    K("ZRANK", -3, 1, 1, 1),
    K("ZREVRANK", -3, 1, 1, 1),
    KS("ZRANGE", -4, 1, 1, 1, PX_FS_WITHSCORES),
    KS("ZREVRANGE", -4, 1, 1, 1, PX_FS_WITHSCORES),
    KS("ZRANGEBYSCORE", -4, 1, 1, 1, PX_FS_WITHSCORES),
    KS("ZREVRANGEBYSCORE", -4, 1, 1, 1, PX_FS_WITHSCORES),
    K("ZRANGEBYLEX", -4, 1, 1, 1),
    K("ZREVRANGEBYLEX", -4, 1, 1, 1),
    K("ZRANGESTORE", -5, 1, 2, 1),
    K("ZREMRANGEBYRANK", 4, 1, 1, 1),
    K("ZREMRANGEBYSCORE", 4, 1, 1, 1),
    K("ZREMRANGEBYLEX", 4, 1, 1, 1),
    KS("ZPOPMIN", -2, 1, 1, 1, PX_FS_ZPOP),
    KS("ZPOPMAX", -2, 1, 1, 1, PX_FS_ZPOP),
    KS("ZRANDMEMBER", -2, 1, 1, 1, PX_FS_WITHSCORES),
    NK("ZUNION", -3, 1, PX_FS_WITHSCORES),
    NK("ZINTER", -3, 1, PX_FS_WITHSCORES),
    NK("ZDIFF", -3, 1, PX_FS_WITHSCORES),
    DNK("ZUNIONSTORE", -4),
    DNK("ZINTERSTORE", -4),
    DNK("ZDIFFSTORE", -4),
    NK("ZINTERCARD", -3, 1, PX_FS_PLAIN),
    NK("ZMPOP", -4, 1, PX_FS_NULLARR),
    K("ZSCAN", -3, 1, 1, 1),
    /* streams */
    K("XADD", -5, 1, 1, 1),
    K("XLEN", 2, 1, 1, 1),
    K("XRANGE", -4, 1, 1, 1),
    K("XREVRANGE", -4, 1, 1, 1),
    K("XDEL", -3, 1, 1, 1),
    K("XTRIM", -4, 1, 1, 1),
    K("XACK", -4, 1, 1, 1),
    K("XPENDING", -3, 1, 1, 1),
    K("XCLAIM", -6, 1, 1, 1),
    K("XAUTOCLAIM", -6, 1, 1, 1),
    K("XSETID", -3, 1, 1, 1),
    {"XREAD", -4, 1, 0, 1, PX_FK_STREAMS, PX_FA_FORWARD, PX_FS_NULLARR, NULL},
    {"XREADGROUP", -7, 1, 0, 1, PX_FK_STREAMS, PX_FA_FORWARD, PX_FS_NULLARR, NULL},
    SUB("XGROUP", -2),
    SUB("XINFO", -2),
    /* bitmaps, HyperLogLog, geo */
    K("SETBIT", 4, 1, 1, 1),
    K("GETBIT", 3, 1, 1, 1),
    K("BITCOUNT", -2, 1, 1, 1),
    K("BITPOS", -3, 1, 1, 1),
    K("BITFIELD", -2, 1, 1, 1),
    K("BITFIELD_RO", -2, 1, 1, 1),
    K("BITOP", -4, 2, -1, 1),
    K("PFADD", -2, 1, 1, 1),
    K("PFCOUNT", -2, 1, -1, 1),
    K("PFMERGE", -2, 1, -1, 1),
    K("GEOADD", -5, 1, 1, 1),
    K("GEODIST", -4, 1, 1, 1),
    K("GEOHASH", -2, 1, 1, 1),
    K("GEOPOS", -2, 1, 1, 1),
    K("GEOSEARCH", -7, 1, 1, 1),
    K("GEOSEARCHSTORE", -8, 1, 2, 1),
    /* scripts and functions */
    SCR("EVAL", -3, PX_FK_NUMKEYS, 2),
    SCR("EVALSHA", -3, PX_FK_NUMKEYS, 2),
    SCR("EVAL_RO", -3, PX_FK_NUMKEYS, 2),
    SCR("EVALSHA_RO", -3, PX_FK_NUMKEYS, 2),
    SCR("SCRIPT", -2, PX_FK_NONE, 0),
    NK("FCALL", -3, 2, PX_FS_PLAIN),
    NK("FCALL_RO", -3, 2, PX_FS_PLAIN),
    NOKEY("TIME", 1),
    /* connection state kept by the proxy */
    LOC("READONLY", 1),
    LOC("READWRITE", 1),
    /* refused */
    REF("BLPOP", BLOCKS),
    REF("BRPOP", BLOCKS),
    REF("BRPOPLPUSH", BLOCKS),
    REF("BLMOVE", BLOCKS),
    REF("BLMPOP", BLOCKS),
    REF("BZPOPMIN", BLOCKS),
    REF("BZPOPMAX", BLOCKS),
    REF("BZMPOP", BLOCKS),
    REF("WAIT", BLOCKS),
    REF("WAITAOF", BLOCKS),
    REF("MONITOR", REPL),
    REF("SYNC", REPL),
    REF("PSYNC", REPL),
    REF("REPLCONF", REPL),
    REF("REPLICAOF", SERVER),
    REF("SLAVEOF", SERVER),
    REF("DEBUG", SERVER),
    REF("CONFIG", SERVER),
    REF("SHUTDOWN", SERVER),
    REF("FLUSHALL", SERVER),
    REF("FLUSHDB", SERVER),
    REF("SAVE", SERVER),
    REF("BGSAVE", SERVER),
    REF("BGREWRITEAOF", SERVER),
    REF("LASTSAVE", SERVER),
    REF("FAILOVER", SERVER),
    REF("CLUSTER", SERVER),
    REF("ACL", SERVER),
    REF("MODULE", SERVER),
    REF("SWAPDB", SERVER),
    REF("SLOWLOG", SERVER),
    REF("LATENCY", SERVER),
    REF("MEMORY", SERVER),
    REF("FUNCTION", SERVER),
    REF("MOVE", SERVER),
    REF("MIGRATE", SERVER),
    REF("COPY", SERVER),
    REF("KEYS", SPACE),
    REF("SCAN", SPACE),
    REF("RANDOMKEY", SPACE),
    REF("DBSIZE", SPACE),
    REF("ASKING", REDIR),
    REF("RESTORE-ASKING", REDIR),
    REF("SORT", PATTRN),
    REF("SORT_RO", PATTRN),
};

static int spec_cmp(const void *a, const void *b)
{
    return strcasecmp(((const struct px_fwd_spec *)a)->name, ((const struct px_fwd_spec *)b)->name);
}

void px_fwd_keys_init(void)
{
    qsort(table, LP_ARRAY_SIZE(table), sizeof(table[0]), spec_cmp);
}

const struct px_fwd_spec *px_fwd_lookup(const char *name, size_t len)
{
    size_t lo = 0, hi = LP_ARRAY_SIZE(table);

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const char *n = table[mid].name;
        size_t nlen = strlen(n);
        int c = strncasecmp(name, n, LP_MIN(len, nlen));

        if (c == 0)
            c = len < nlen ? -1 : len > nlen;
        if (c == 0)
            return &table[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

bool px_fwd_arity_ok(const struct px_fwd_spec *s, int argc)
{
    return s->arity >= 0 ? argc == s->arity : argc >= -s->arity;
}

/* A non-negative decimal numkeys at argv[i], else -1. */
static long numkeys_at(const struct px_req *req, int i)
{
    const struct px_arg *a = &req->argv[i];
    long v = 0;
    size_t k;

    if (a->len == 0 || a->len > 9)
        return -1;
    for (k = 0; k < a->len; k++) {
        if (a->p[k] < '0' || a->p[k] > '9')
            return -1;
        v = v * 10 + (a->p[k] - '0');
    }
    return v;
}

static void range_add(struct px_fwd_keyset *ks, int first, int last, int step)
{
    if (first > last)
        return;
    ks->first[ks->n] = first;
    ks->last[ks->n] = last;
    ks->step[ks->n] = step;
    ks->n++;
}

/* numkeys at argv[pos], keys right after it. */
static int keys_numkeys(const struct px_req *req, int pos, bool zero_ok, struct px_fwd_keyset *ks,
                        const char **why)
{
    long n = numkeys_at(req, pos);

    if (n < 0 || (n == 0 && !zero_ok)) {
        *why = n < 0 ? "ERR numkeys should be a non-negative integer"
                     : "ERR numkeys should be greater than 0";
        return -EINVAL;
    }
    if (n > req->argc - pos - 1) {
        *why = "ERR Number of keys can't be greater than number of args";
        return -EINVAL;
    }
    range_add(ks, pos + 1, pos + (int)n, 1);
    return 0;
}

static int keys_streams(const struct px_req *req, struct px_fwd_keyset *ks, const char **why)
{
    int i, rest;

    for (i = 1; i < req->argc; i++) {
        if (px_args_is(&req->argv[i], "STREAMS"))
            break;
    }
    rest = req->argc - i - 1;
    if (i >= req->argc || rest <= 0 || rest % 2) {
        *why = "ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be "
               "specified.";
        return -EINVAL;
    }
    range_add(ks, i + 1, i + rest / 2, 1);
    return 0;
}

int px_fwd_keys(const struct px_fwd_spec *s, const struct px_req *req, struct px_fwd_keyset *ks,
                const char **why)
{
    int last;

    ks->n = 0;
    switch (s->kspec) {
    case PX_FK_RANGE:
        last = s->last < 0 ? req->argc + s->last : s->last;
        range_add(ks, s->first, LP_MIN(last, req->argc - 1), s->step);
        return 0;
    case PX_FK_NUMKEYS:
        return keys_numkeys(req, s->first, s->action == PX_FA_SCRIPT || s->first == 2, ks, why);
    case PX_FK_DEST_NUMKEYS:
        range_add(ks, 1, 1, 1);
        return keys_numkeys(req, 2, false, ks, why);
    case PX_FK_STREAMS:
        return keys_streams(req, ks, why);
    case PX_FK_SUBCMD:
        if (req->argc > 2)
            range_add(ks, 2, 2, 1);
        return 0;
    default:
        return 0;
    }
}
