/* Command table: looks up argv[0], checks arity, and runs the handler.
 * Each module exports a px_cmd_set; cmd.c lists the sets (one line each)
 * and indexes them in a hash at start-up. Connection commands (PING, ECHO,
 * QUIT, HELLO, CLIENT, SELECT, COMMAND, INFO) live in cmd.c, lock commands
 * in lock.c. */
#ifndef LP_PROXY_CMD_H
#define LP_PROXY_CMD_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_req;

struct px_cmd {
    const char *name;                            /* upper-case command name */
    int min_args;                                /* including the command itself */
    int max_args;                                /* -1: unbounded */
    void (*fn)(struct px_req *req);              /* handler: completes req now or later */
    bool (*may_block)(const struct px_req *req); /* NULL: never blocks */
    int name_arg;                                /* argv index of the lock/object name, 0: none */
};

struct px_cmd_set {
    const struct px_cmd *cmds; /* borrowed: the module's commands */
    size_t n;                  /* how many */
};

/* Indexes every set. Returns 0 or -ENOMEM. */
int px_cmd_init(void);

/* Registers every command module's script set with eng (before the
 * pool is created: px_scripts_build). */
struct lk_engine;
void px_cmd_register_scripts(struct lk_engine *eng);
void px_cmd_deinit(void);

/* The command named by argv[0], or NULL. */
const struct px_cmd *px_cmd_lookup(const char *name, size_t len);

/* Runs req (RUNNING). The handler completes it now or later with
 * px_req_done(). */
void px_cmd_dispatch(struct px_req *req);

/* True when req may wait (so later requests must not overtake it). */
bool px_cmd_may_block(const struct px_req *req);

#ifdef __cplusplus
}
#endif

#endif
