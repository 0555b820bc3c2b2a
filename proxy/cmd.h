/* Command table: looks up argv[0], checks arity, and runs the handler.
 * Connection commands (PING, ECHO, QUIT, HELLO, CLIENT, SELECT, COMMAND,
 * INFO) live in cmd.c; lock commands in lock.c. */
#ifndef LP_PROXY_CMD_H
#define LP_PROXY_CMD_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

/* Runs req (RUNNING). The handler completes it now or later with
 * px_req_done(). */
void px_cmd_dispatch(struct px_req *req);

/* True when req may wait (so later requests must not overtake it). */
bool px_cmd_may_block(const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
