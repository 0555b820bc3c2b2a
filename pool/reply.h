/* The pool's reply type: one Redis reply as the pool's reader (reader.c)
 * builds it, borrowed by every pool callback for the call.
 *
 * The fields and kinds are hiredis's redisReply's, under the pool's own
 * names and with the same type numbers, so that code written against
 * redisReply reads the same and the tests can compare this reader with
 * hiredis's, record by record (tests/unit/pool/test_resp.c). The product
 * itself does not use hiredis (scripts/layering.sh checks).
 *
 * The reader produces the RESP2 kinds (STRING, ARRAY, INTEGER, NIL,
 * STATUS, ERROR); the RESP3 kinds are named for code that shows replies
 * of either protocol. A string (STRING, STATUS, ERROR, DOUBLE's text,
 * VERB, BIGNUM) is str[0..len), NUL-terminated; an aggregate (ARRAY, MAP,
 * SET, ATTR, PUSH) has elements records in element.
 *
 * struct pool_result is what a request came to, as the pool hands it to
 * the request's callback (pool_reply_fn, pool.h). */
#ifndef LP_POOL_REPLY_H
#define LP_POOL_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum pool_reply_type {
    POOL_REPLY_STRING = 1,
    POOL_REPLY_ARRAY = 2,
    POOL_REPLY_INTEGER = 3,
    POOL_REPLY_NIL = 4,
    POOL_REPLY_STATUS = 5,
    POOL_REPLY_ERROR = 6,
    POOL_REPLY_DOUBLE = 7, /* RESP3 from here on */
    POOL_REPLY_BOOL = 8,
    POOL_REPLY_MAP = 9,
    POOL_REPLY_SET = 10,
    POOL_REPLY_ATTR = 11,
    POOL_REPLY_PUSH = 12,
    POOL_REPLY_BIGNUM = 13,
    POOL_REPLY_VERB = 14,
};

struct pool_reply {
    enum pool_reply_type type;   /* one of the above */
    long long integer;           /* INTEGER, BOOL */
    double dval;                 /* DOUBLE */
    size_t len;                  /* string kinds: bytes in str */
    char *str;                   /* string kinds: owned, NUL-terminated; else NULL */
    size_t elements;             /* aggregates: number of elements */
    struct pool_reply **element; /* aggregates: owned elements; else NULL */
};

/* What a request came to, borrowed by its callback for the call. */
struct pool_result {
    /* err == 0: the reply (possibly POOL_REPLY_ERROR). err < 0: NULL
     * (-ECONNRESET, -ETIMEDOUT, -ENOMEM, -EPROTO; cluster: -ENOTCONN, not
     * executed, see pool.h). */
    const struct pool_reply *reply;
    int err;
    /* pool_eval_wait(): the replicas asked for (its w->replicas); 0 for
     * every other request. */
    unsigned replicas;
    /* pool_eval_wait(), a reply that is not an error: the replicas WAIT
     * counted, -1 when WAIT gave no answer (refused, see the log); -1 for
     * every other request and outcome (read it only when replicas > 0). */
    int acks;
    /* pool_eval(), pool_eval_wait(): microseconds from the submit to this
     * callback (WAIT's answer included); 0 for commands. */
    uint64_t rtt_us;
};

/* For a pool_eval_wait() that Redis answered (no error): true when fewer
 * replicas than asked for acknowledged it, or WAIT gave no answer. False
 * for every other request and outcome. */
static inline bool pool_result_short(const struct pool_result *res)
{
    return res->replicas > 0 && res->err == 0 && res->reply->type != POOL_REPLY_ERROR &&
           (res->acks < 0 || (unsigned)res->acks < res->replicas);
}

#ifdef __cplusplus
}
#endif

#endif
