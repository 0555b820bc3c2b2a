/* Command-line options of the lockproxy server: defaults, parsing of
 * --flags and of redis:// / unix:// addresses, and the --help text. */
#ifndef LP_PROXY_OPTS_H
#define LP_PROXY_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

enum px_on_disconnect {
    PX_DISCONNECT_RELEASE = 0, /* release a dead connection's locks at once */
    PX_DISCONNECT_EXPIRE = 1,  /* stop renewing; locks expire at lease end */
};

/* An address: TCP host:port, or a unix socket path (host empty). */
struct px_addr {
    char host[256];     /* TCP host, "" for unix */
    int port;           /* TCP port */
    char path[108];     /* unix socket path, "" for TCP */
    char user[128];     /* upstream AUTH user, "" for none */
    char password[256]; /* upstream AUTH password, "" for none */
    int db;             /* upstream SELECT db */
};

struct px_opts {
    struct px_addr listen;         /* where clients connect */
    struct px_addr upstream;       /* the Redis server */
    unsigned pool_size;            /* pipelined upstream connections */
    uint64_t watchdog_ms;          /* lease used (and renewed) without LEASE */
    enum px_on_disconnect on_disc; /* fate of a dead connection's locks */
    enum sched_io io;              /* event loop backend */
    unsigned max_clients;          /* accepted client connections at once */
    enum log_level log_level;      /* most verbose log level */
    unsigned upstream_timeout_ms;  /* oldest upstream reply wait before failing */
    uint64_t linger_ms;            /* idle time before a channel is unsubscribed */
    size_t max_request_bytes;      /* largest request (and unparsed input) per client */
    unsigned max_args;             /* most arguments in one request */
    unsigned max_pipeline;         /* queued requests before reading pauses */
};

/* Fills the defaults. */
void px_opts_default(struct px_opts *o);

/* Parses "redis://[user:password@]host:port[/db]", "host:port" or
 * "unix:///path". Returns 0 or -EINVAL. */
int px_addr_parse(const char *s, struct px_addr *out);

/* Parses argv. Returns 0 to run, 1 when --help/--version was printed (exit
 * 0), or -EINVAL after printing a message naming the bad flag to err. */
int px_opts_parse(struct px_opts *o, int argc, char **argv, FILE *out, FILE *err);

#ifdef __cplusplus
}
#endif

#endif
