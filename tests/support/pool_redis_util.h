/* Throw-away redis-server instances for integration tests (hiredis test.sh
 * style): a free port on 127.0.0.1, a temp dir with a unix socket, no
 * persistence. Every started server is killed at exit (atexit) and, should
 * the test process die without running exit handlers, by the kernel
 * (PR_SET_PDEATHSIG), so no test leaves a redis-server behind. */
#ifndef LP_TESTS_INTEGRATION_POOL_REDIS_UTIL_H
#define LP_TESTS_INTEGRATION_POOL_REDIS_UTIL_H

#include <sys/types.h>

#include <stdbool.h>

#include <hiredis/hiredis.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PREDIS_BIN       "/usr/bin/redis-server"
#define PREDIS_MAX_EXTRA 8

struct predis {
    pid_t pid;            /* running server, or -1 */
    const char *conf;     /* borrowed: config file passed first (a sentinel's), or NULL */
    int port;             /* TCP port, kept across restarts */
    char dir[64];         /* owned: temp dir, "" until created */
    char sock[128];       /* unix socket path inside dir */
    const char *password; /* borrowed: --requirepass, or NULL */
    const char *extra[PREDIS_MAX_EXTRA + 1]; /* borrowed: extra args, NULL-terminated */
};

/* True when redis-server is installed. */
bool predis_available(void);

/* Picks a free port and creates the temp dir; does not start a server. */
int predis_init(struct predis *r);

/* Starts (or restarts, same port) the server and waits until it answers.
 * Returns 0 or -errno (-ETIMEDOUT, -ECHILD when it exited). */
int predis_start(struct predis *r);

/* SIGKILLs and reaps the server (no-op when not running). */
void predis_kill(struct predis *r);

/* Sends sig (SIGSTOP, SIGCONT) to the running server. */
void predis_signal(struct predis *r, int sig);

/* Kills the server and removes the temp dir. */
void predis_cleanup(struct predis *r);

/* A blocking side-channel connection, authenticated when a password is
 * set, or NULL. Free with redisFree(). */
redisContext *predis_connect(const struct predis *r);

/* Runs one command on a fresh side-channel connection and returns the
 * integer reply (or -1 on any error). */
long long predis_int(const struct predis *r, const char *fmt, ...);

/* PUBSUB NUMSUB channel: subscribers upstream, or -1. */
long long predis_numsub(const struct predis *r, const char *channel);

#ifdef __cplusplus
}
#endif

#endif
