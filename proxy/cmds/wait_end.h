/* The end of a waiting command, in RESP: the engine's wait ops end
 * through a finish (engine/wait.h, lk_wait_finish_fn) that says how
 * (enum lk_end); this writes the reply that end calls for and ends the
 * request. Every kind uses it unless it has a finish of its own. */
#ifndef LP_PROXY_CMDS_WAIT_END_H
#define LP_PROXY_CMDS_WAIT_END_H

#include "engine/wait.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* The request a wait op of a command serves: px_cmd_wait_init() sets the
 * op's opaque front-end pointer to it. */
static inline struct px_req *px_wait_req(const struct px_wait_op *op)
{
    return (struct px_req *)op->front;
}

/* The default finish (engine->front.wait_finish, set by the server): nil for
 * a timeout, UPSTREAM for a failure or a late grant, Redis's error
 * passed through, NOREPLICAS; then kind->destroy() and px_req_done(). */
void px_wait_finish_resp(struct px_wait_op *op, enum lk_end end, const struct lk_end_info *info);

/* px_wait_init() for req, a command about the name in argv[1]: its
 * connection's caller record; one attempt inside EXEC. */
void px_cmd_wait_init(struct px_wait_op *op, const struct px_wait_kind *kind, struct px_req *req,
                      int64_t wait_ms);

/* px_wait_start(), op being req's command in progress (req->op) until its
 * finish. */
void px_cmd_wait_start(struct px_wait_op *op);

/* Replies for a failed upstream request (err < 0): as
 * px_args_reply_upstream(), but -ENOMEM is "-ERR out of memory". */
void px_wait_reply_upstream(struct px_req *req, int err);

#ifdef __cplusplus
}
#endif

#endif
