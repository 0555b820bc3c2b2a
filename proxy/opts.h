/* Options of the lockproxy server: defaults, the settings every flag and
 * config-file key maps to (px_opts_set), parsing of --flags and of
 * redis:// / redis-sentinel:// / unix:// addresses, and the --help text. Config files are read
 * by config.c through the same px_opts_set. */
#ifndef LP_PROXY_OPTS_H
#define LP_PROXY_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "engine/config.h"
#include "sched/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_auth;

#define PX_CONFIG_PATH_MAX 1024u /* longest --config path */
#define PX_PATH_MAX        1024u /* longest certificate, key or CA file path */
#define PX_LISTEN_MAX      8u    /* most --listen addresses */
/* The default --max-args: the longest request a command takes, MULTILOCK
 * with its 64 names (PX_MULTI_MAX), LEASE ms and WAIT ms (multilock.c
 * checks that the two agree). */
#define PX_DEFAULT_MAX_ARGS 69u

/* Client certificates on TLS listeners (Redis's tls-auth-clients); the
 * values are those of enum sched_tls_verify. */
enum px_tls_auth {
    PX_TLS_AUTH_NO = 0,       /* no client certificate is asked for */
    PX_TLS_AUTH_OPTIONAL = 1, /* one is asked for and verified if sent */
    PX_TLS_AUTH_YES = 2,      /* one signed by the CA is required (the default) */
};

#define PX_SENTINELS_MAX   1024u /* bytes of a redis-sentinel:// host list */
#define PX_MASTER_NAME_MAX 128u  /* bytes of a sentinel master name, NUL included */

/* An address: TCP host:port, a unix socket path (host empty), or, for the
 * upstream, a Redis Cluster's seeds or a Sentinel-monitored master
 * (sentinels set, host empty). */
struct px_addr {
    bool tls;           /* tls://HOST:PORT (listen) or rediss:// (upstream) */
    char host[256];     /* TCP host, "" for unix */
    int port;           /* TCP port */
    char path[108];     /* unix socket path, "" for TCP */
    char user[128];     /* upstream AUTH user, "" for none */
    char password[256]; /* upstream AUTH password, "" for none */
    int db;             /* upstream SELECT db */
    bool cluster;       /* redis-cluster://: host and port are the first seed */
    char seeds[1024];   /* redis-cluster:// seeds "host:port[,host:port...]", else "" */
    char sentinels[PX_SENTINELS_MAX];     /* "host:port,host:port", "" unless redis-sentinel:// */
    char master_name[PX_MASTER_NAME_MAX]; /* redis-sentinel://: the monitored master's name */
};

struct px_opts {
    struct px_addr listen[PX_LISTEN_MAX]; /* where clients connect (nlisten of them) */
    unsigned nlisten;                     /* addresses in listen, >= 1 */
    unsigned layer;                       /* being applied: 0 defaults, 1 config file, 2 flags,
                                             3 LOCKPROXY_* environment */
    unsigned listen_layer;                /* the layer listen came from (a later one replaces it) */
    struct px_addr upstream;              /* the Redis server (or its sentinels) */
    char sentinel_user[128];              /* the sentinels' AUTH user, "" for none */
    char sentinel_password[256];          /* the sentinels' AUTH password, "" for no AUTH */
    unsigned pool_size;                   /* pipelined upstream connections */
    unsigned script_batch;                /* most scripts per runner call (pool/batch.c) */
    uint64_t watchdog_ms;                 /* lease used (and renewed) without LEASE */
    enum px_on_disconnect on_disc;        /* fate of a dead connection's locks */
    enum sched_io io;                     /* event loop backend */
    unsigned max_clients;                 /* accepted client connections at once */
    enum log_level log_level;             /* most verbose log level */
    unsigned upstream_timeout_ms;         /* oldest upstream reply wait before failing */
    uint64_t linger_ms;                   /* idle time before a channel is unsubscribed */
    size_t max_request_bytes;             /* largest request (and unparsed input) per client */
    unsigned max_args;                    /* most arguments in one request */
    unsigned max_pipeline;         /* requests outstanding per client before reading pauses */
    size_t out_soft;               /* unsent reply bytes that pause a client's reading, 0 off */
    size_t out_hard;               /* unsent reply bytes that close a client, 0 off */
    size_t max_client_memory;      /* bytes held for all clients before MULTI refuses, 0 off */
    unsigned latency_threshold_ms; /* loop iterations / late timers counted and logged, 0 off */
    unsigned timeout_s;            /* idle seconds before a client is closed, 0 off */
    unsigned auth_timeout_s;       /* seconds to AUTH (when auth is on), 0 off */
    unsigned keepalive_s;          /* TCP keepalive idle seconds on clients, 0 off */
    unsigned unix_perm;            /* mode of created Unix sockets, 0: as the umask leaves it */
    int protected_mode;            /* 1: without auth, only loopback and Unix clients (protect.c) */
    int passthrough;               /* 1: forward ordinary Redis commands (fwd.h) */
    struct px_addr metrics;        /* --metrics HTTP address; port 0 and no path: off */
    char tls_cert_file[PX_PATH_MAX];       /* TLS listeners' certificate chain (PEM), "" none */
    char tls_key_file[PX_PATH_MAX];        /* its private key, "" for in the certificate file */
    char tls_ca_cert_file[PX_PATH_MAX];    /* CAs of client certificates, "" none */
    enum px_tls_auth tls_auth_clients;     /* client certificates on TLS listeners */
    unsigned tls_handshake_timeout_ms;     /* close a TLS client not through its handshake */
    char up_tls_cert_file[PX_PATH_MAX];    /* upstream client certificate, "" none */
    char up_tls_key_file[PX_PATH_MAX];     /* its private key */
    char up_tls_ca_cert_file[PX_PATH_MAX]; /* CAs of the upstream, "" the system store */
    char up_tls_server_name[256];          /* name the upstream certificate must carry, "" host */
    int cluster_pubsub;                    /* --cluster-pubsub: enum pool_pubsub_mode (0 auto) */
    unsigned sync_replicas;                /* --sync-replicas: WAIT for N replicas, 0 off */
    unsigned sync_timeout_ms;              /* --sync-timeout: WAIT's timeout */
    struct px_auth *auth;                  /* owned reference: requirepass and users, NULL: none */
    char config[PX_CONFIG_PATH_MAX];       /* --config file, "" for none */
    int argc;                              /* command line, re-applied over the file on reload */
    char **argv; /* borrowed: main()'s argv, lives as long as the process */

    /* REDLOCK's independent masters (--redlock-upstream): 0, or odd >= 3. */
    struct px_addr redlock[PX_REDLOCK_MAX];
    unsigned nredlock;
};

/* Fills the defaults. */
void px_opts_default(struct px_opts *o);

/* Drops the auth reference. The options are the defaults' shape again
 * only after px_opts_default(). */
void px_opts_deinit(struct px_opts *o);

/* Applies one setting: key is a flag name without "--" (also the config
 * file key), vals its values (one, or a user's rules for "user"). Returns
 * 0, -ENOENT for an unknown key, -EINVAL with the reason in why, or
 * -ENOMEM. */
int px_opts_set(struct px_opts *o, const char *key, int nvals, const char *const *vals, char *why,
                size_t n);

/* The key an unknown key most likely meant (a known key it extends,
 * contains, or is within two edits of), or NULL: for "did you mean". */
const char *px_opts_key_suggest(const char *name);

/* True when key may be changed by a reload (SIGHUP) without a restart. */
bool px_opts_key_reloadable(const char *key);

/* Applies LOCKPROXY_<KEY> environment variables (every key but config;
 * KEY is the flag's name in upper case with '_' for '-'), as one more
 * layer between the config file and the flags. Returns 0 or -EINVAL with
 * a message naming the variable. */
int px_opts_parse_env(struct px_opts *o, char *msg, size_t n);

/* Parses argv flags into o. Returns 0 to run, 1 when --help or --version
 * was given (nothing printed), or -EINVAL / -ENOMEM with a message naming
 * the flag in msg. */
int px_opts_parse_flags(struct px_opts *o, int argc, char **argv, char *msg, size_t n);

/* Prints the --help text (help) or the version to out. */
void px_opts_usage(FILE *out, bool help);

/* 1 when argv asks for --help (or -h), 2 for --version (the first one
 * given wins), else 0. */
int px_opts_wants_help(int argc, char **argv);

/* Names of the settings a reload cannot change (restart needed) whose
 * values differ between a and b; at most max. Returns how many. */
size_t px_opts_diff_restart(const struct px_opts *a, const struct px_opts *b, const char **out,
                            size_t max);

/* Parses "redis://[user:password@]host:port[/db]", the same with
 * "rediss://" (TLS), "host:port", "tls://host:port", "unix:///path",
 * "redis-cluster://[user:password@]host:port[,host:port ...]" (seeds of a
 * Redis Cluster; no /db) or "redis-sentinel://[user:password@]host:port
 * [,host:port ...]/name[/db]" (the credentials and db are the master's).
 * Returns 0 or -EINVAL. */
int px_addr_parse(const char *s, struct px_addr *out);

/* Checks what no single setting can (a TLS listener needs a certificate,
 * tls-auth-clients a CA, ...). Returns 0 or -EINVAL with the reason in msg. */
int px_opts_check(const struct px_opts *o, char *msg, size_t n);

/* Parses argv. Returns 0 to run, 1 when --help/--version was printed (exit
 * 0), or -EINVAL after printing a message naming the bad flag to err.
 * --config is recorded, not read (see px_config_load). */
int px_opts_parse(struct px_opts *o, int argc, char **argv, FILE *out, FILE *err);

#ifdef __cplusplus
}
#endif

#endif
