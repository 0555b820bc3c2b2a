/* Helpers for the lockproxy integration tests: start and stop a throw-away
 * redis-server and the proxy under test in a per-process temp dir, talk to
 * either with hiredis (sync API) or raw sockets, and assert on replies.
 *
 * Process rules: every child (redis-server, lockproxy) is registered, gets
 * PR_SET_PDEATHSIG(SIGKILL) and is killed and reaped by an on_exit handler,
 * so no test leaves a server running, whether it passes, fails or crashes.
 * When the test exits with a failure the handler prints the tail of every
 * proxy and redis log first. Only the main thread may start processes (the
 * death signal follows the thread that forked).
 *
 * Assertions fail through TEST_FAIL (exit 1), so call them only from the
 * main thread; worker threads should count problems and let the main thread
 * assert after joining them. */
#ifndef LP_TESTS_INTEGRATION_PROXY_UTIL_H
#define LP_TESTS_INTEGRATION_PROXY_UTIL_H

#include <sys/types.h>

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "harness.h"

#define PU_PATH_MAX  256
#define PU_MAX_ARGS  48
#define PU_OWNER_MAX 128

/* A redis-server child process. */
struct pu_redis {
    pid_t pid;                      /* 0 when not running */
    int wstatus;                    /* wait status once it ended */
    int port;                       /* TCP port; picked on first start */
    char dir[PU_PATH_MAX];          /* its --dir, inside the test temp dir */
    char log_path[PU_PATH_MAX];     /* stdout+stderr, appended across restarts */
    char unix_path[PU_PATH_MAX];    /* --unixsocket path, "" for none */
    const char *extra[PU_MAX_ARGS]; /* extra argv (borrowed), NULL-terminated */
};

/* A lockproxy child process. */
struct pu_proxy {
    pid_t pid;                      /* 0 when not running */
    int wstatus;                    /* wait status once it ended */
    int port;                       /* TCP listen port, 0 with a unix listener */
    char unix_path[PU_PATH_MAX];    /* unix listen path, "" for TCP */
    char log_path[PU_PATH_MAX];     /* stderr+stdout, appended across restarts */
    char upstream[PU_PATH_MAX];     /* --upstream value */
    const char *extra[PU_MAX_ARGS]; /* extra argv (borrowed), NULL-terminated */
};

/* One redis-server and one proxy in front of it. */
struct pu_env {
    struct pu_redis redis;
    struct pu_proxy proxy;
    const char *backend; /* "epoll" or "uring" */
};

/* What an expectation checks in a reply. */
enum pu_kind {
    PU_K_STATUS = 1, /* status reply equal to s */
    PU_K_NIL,        /* nil bulk */
    PU_K_INT,        /* integer equal to i */
    PU_K_ERR,        /* error starting with s */
    PU_K_STR,        /* bulk or status string equal to s */
    PU_K_ANY,        /* any reply, even an error */
};

/* Per-process setup (temp dir, SIGPIPE ignored, exit handler). Idempotent;
 * every other entry point calls it. Returns the temp dir. */
const char *pu_tmpdir(void);

/* Monotonic milliseconds; sleep in milliseconds. */
long long pu_now_ms(void);
void pu_sleep_ms(int ms);

/* Wall-clock milliseconds since the epoch (the clock Redisson's fair lock
 * deadlines and PSEM permit expiries are in). */
long long pu_wall_ms(void);

/* A currently free TCP port on 127.0.0.1 (bind to port 0 and close). */
int pu_free_port(void);

/* Raises RLIMIT_NOFILE to at least want (children inherit it); skips the
 * test if the hard limit is lower. */
void pu_raise_nofile(long want);

/* True if this process may create an io_uring instance. */
bool pu_uring_available(void);

/* Starts redis-server (skips the test if the binary is missing) on r->port,
 * or on a fresh port when it is 0, and waits until it answers PING. */
void pu_redis_start(struct pu_redis *r);

/* SIGKILL and reap; no-op when not running. */
void pu_redis_kill(struct pu_redis *r);

/* Kill (if running) and start again on the same port and dir. */
void pu_redis_restart(struct pu_redis *r);

/* SIGSTOP / SIGCONT the server. */
void pu_redis_pause(struct pu_redis *r);
void pu_redis_resume(struct pu_redis *r);

/* Starts another server (argv[0] an absolute path, e.g. nutcracker) as a
 * registered child with stdout+stderr appended to log_path, and waits up
 * to ms for it to answer PING on 127.0.0.1:port. Returns its pid, or -1
 * if it ended or did not answer (it is killed then). */
pid_t pu_spawn_server(const char *const *argv, const char *log_path, int port, int ms);

/* SIGKILL and reap a server of pu_spawn_server(); no-op for pid <= 0. */
void pu_kill_server(pid_t pid);

/* Path of the proxy binary ($LP_PROXY_BIN); fails the test if unset or
 * not executable. */
const char *pu_proxy_bin(void);

/* Starts the proxy with --listen (TCP on p->port or a fresh port, or unix
 * when p->unix_path is set), --upstream p->upstream and p->extra, waits up
 * to 15 s for it to answer PING. Returns 0, or -1 if it exited first (the
 * log is printed). */
int pu_proxy_try_start(struct pu_proxy *p);

/* pu_proxy_try_start that fails the test on error. */
void pu_proxy_start(struct pu_proxy *p);

/* True while the proxy process exists (has not exited or crashed). */
bool pu_proxy_alive(struct pu_proxy *p);

/* SIGTERM, then SIGKILL after 5 s. Returns the wait status, or -1 if it
 * was not running. Fails the test if its log holds a sanitizer report. */
int pu_proxy_stop(struct pu_proxy *p);

/* Fails the test if the proxy is gone (describing how it ended). */
void pu_proxy_assert_alive(struct pu_proxy *p);

/* Redis on a fresh port, then the proxy with --io backend, --log-level
 * debug (override with LP_IT_LOG_LEVEL) and extra (NULL-terminated, may be
 * NULL). Checks INFO io_backend. */
void pu_env_start(struct pu_env *e, const char *backend, const char *const *extra);

/* Asserts the proxy is still alive, then stops it and kills redis. */
void pu_env_stop(struct pu_env *e);

/* Runs scenario once per io backend (epoll, then uring), each with a fresh
 * redis and proxy started with extra. The uring half is skipped when this
 * process cannot use io_uring. LP_IT_BACKENDS="epoll" (or "uring")
 * restricts the set. */
void pu_each_backend(void (*scenario)(struct pu_env *e), const char *const *extra);

/* Calls run(backend, arg) for each io backend LP_IT_BACKENDS selects
 * ("uring" only where io_uring_setup is permitted); skips the test when
 * none can run. pu_each_backend and the tests' own environments use it. */
void pu_for_each_backend(void (*run)(const char *backend, void *arg), void *arg);

/* fmt (one %s: arg) on c until it answers anything but an UPSTREAM error
 * (the proxy reconnected, a partition healed); fails after max_ms. */
redisReply *pu_cmd_until_served(redisContext *c, const char *fmt, const char *arg, int max_ms);

/* Connects with a 10 s command timeout; fails the test on error. */
redisContext *pu_connect(int port);
redisContext *pu_connect_unix(const char *path);

/* Like pu_connect but returns NULL on connection failure. */
redisContext *pu_try_connect(int port);

/* Client of the proxy / of redis directly. */
redisContext *pu_client(struct pu_env *e);
redisContext *pu_redis_client(struct pu_env *e);

/* Sets the command timeout of c in milliseconds. */
void pu_set_timeout(redisContext *c, int ms);

/* Runs a command (hiredis format); fails the test if the connection
 * breaks. The caller frees the reply. */
redisReply *pu_cmd_at(const char *file, int line, redisContext *c, const char *fmt, ...);
#define pu_cmd(c, ...) pu_cmd_at(__FILE__, __LINE__, (c), __VA_ARGS__)

/* Checks r against (kind, i, s); fails the test describing r and what. */
void pu_check_at(const char *file, int line, const redisReply *r, enum pu_kind kind, long long i,
                 const char *s, const char *what);

/* Runs a command and checks its reply. */
void pu_expect_at(const char *file, int line, redisContext *c, enum pu_kind kind, long long i,
                  const char *s, const char *fmt, ...);

#define PU_OK(c, ...)           pu_expect_at(__FILE__, __LINE__, (c), PU_K_STATUS, 0, "OK", __VA_ARGS__)
#define PU_NIL(c, ...)          pu_expect_at(__FILE__, __LINE__, (c), PU_K_NIL, 0, NULL, __VA_ARGS__)
#define PU_INT(c, v, ...)       pu_expect_at(__FILE__, __LINE__, (c), PU_K_INT, (v), NULL, __VA_ARGS__)
#define PU_ERR(c, pfx, ...)     pu_expect_at(__FILE__, __LINE__, (c), PU_K_ERR, 0, (pfx), __VA_ARGS__)
#define PU_STR(c, s, ...)       pu_expect_at(__FILE__, __LINE__, (c), PU_K_STR, 0, (s), __VA_ARGS__)
#define PU_CHECK(r, kind, i, s) pu_check_at(__FILE__, __LINE__, (r), (kind), (i), (s), "reply")

/* Appends a command to c's output buffer and flushes it all. */
void pu_send_at(const char *file, int line, redisContext *c, const char *fmt, ...);
#define pu_send(c, ...) pu_send_at(__FILE__, __LINE__, (c), __VA_ARGS__)

/* Blocks for the next reply (within the command timeout); fails on error. */
redisReply *pu_recv_at(const char *file, int line, redisContext *c);
#define pu_recv(c) pu_recv_at(__FILE__, __LINE__, (c))

/* Reads the next reply of a pipeline and checks it as PU_CHECK does. */
void pu_recv_expect_at(const char *file, int line, redisContext *c, enum pu_kind kind, long long i,
                       const char *s);
#define PU_RECV(c, kind, i, s) pu_recv_expect_at(__FILE__, __LINE__, (c), (kind), (i), (s))

/* The next reply if one arrives within ms, else NULL; fails if the
 * connection breaks. Leaves c usable either way. */
redisReply *pu_try_recv_at(const char *file, int line, redisContext *c, int ms);
#define pu_try_recv(c, ms) pu_try_recv_at(__FILE__, __LINE__, (c), (ms))

/* Like pu_try_recv, but returns NULL (without failing) when the peer closed
 * or the connection broke; *closed says which happened. */
redisReply *pu_poll_reply(redisContext *c, int ms, bool *closed);

/* Human-readable one-line description of a reply, for messages. */
const char *pu_describe(const redisReply *r, char *buf, size_t n);

/* True if r is an error whose text starts with prefix. */
bool pu_is_err(const redisReply *r, const char *prefix);

/* INFO field lookups on any connection (proxy or redis). pu_info_str
 * copies the value into buf and returns false if the field is absent. */
bool pu_info_str(redisContext *c, const char *field, char *buf, size_t n);
long long pu_info_int_at(const char *file, int line, redisContext *c, const char *field);
#define pu_info_int(c, f) pu_info_int_at(__FILE__, __LINE__, (c), (f))

/* Runs "<cmd> <key>" (e.g. "LLEN q"); fails the test unless the reply is
 * an integer, which it returns. */
long long pu_int_reply(redisContext *rc, const char *cmd, const char *key);

/* Direct-redis helpers. pu_hget_int returns -1 when the field is absent;
 * pu_get_int (GET as an integer, which may be negative) returns LLONG_MIN
 * when the key is. Both fail the test on a reply of another type. */
long long pu_pttl(redisContext *rc, const char *key);
bool pu_exists(redisContext *rc, const char *key);
long long pu_hget_int(redisContext *rc, const char *key, const char *field);
long long pu_get_int(redisContext *rc, const char *key);
long long pu_hlen(redisContext *rc, const char *key);
/* Keys in the database, less the proxies' registry (PU_REGISTRY_PATTERN:
 * the liveness and ledger lists of proxies that keep semaphore ledgers,
 * engine/sem_reap.h), which lives as long as its proxy, and the
 * SEM.RELEASE numbering records (PU_RELEASED_PATTERN, 120 s of life:
 * proxy/cmds/sem.c). */
#define PU_REGISTRY_PATTERN "{lp-proxies}:*"
#define PU_RELEASED_PATTERN "*:lp-released:*"
long long pu_dbsize(redisContext *rc);

/* Calls of one command so far, from Redis's INFO commandstats (name in
 * lower case, e.g. "evalsha"); 0 when it never ran. */
long long pu_cmdstat_calls(redisContext *rc, const char *name);

/* Redisson's name of an object's aux key or channel: "<prefix>{name}",
 * or "<prefix>name" when name has a '{' of its own (a hash tag, kept as
 * is); prefix "" gives the "{name}" key prefix. Fails the test if it does
 * not fit in n bytes. */
void pu_redisson_key(const char *prefix, const char *name, char *buf, size_t n);

/* The Redisson wake channel of a lock name (as pu_redisson_key). */
void pu_channel(const char *name, char *buf, size_t n);

/* The owner field this proxy connection writes: "<proxy-uuid>:<client-id>". */
void pu_conn_owner(redisContext *c, char *buf, size_t n);

/* The proxy's INFO proxy_uuid. */
void pu_proxy_uuid(redisContext *c, char *buf, size_t n);

/* A direct Redis connection that PSUBSCRIBEs to pattern (glob). */
redisContext *pu_psubscribe(struct pu_env *e, const char *pattern);

/* Waits up to ms for the next message on a subscribed connection and
 * copies its channel and payload; false on timeout. */
bool pu_next_message(redisContext *sub, int ms, char *chan, size_t cn, char *payload, size_t pn);

/* Parsed LOCK.INFO reply. */
struct pu_lockinfo {
    long long locked;
    long long hold_count;
    long long ttl_ms;
    long long watchdog;
    char owner[PU_OWNER_MAX];
};

/* Runs LOCK.INFO (hiredis format, e.g. "LOCK.INFO %s") and parses it;
 * fails the test if a field is missing or mistyped. */
void pu_lockinfo_at(const char *file, int line, redisContext *c, struct pu_lockinfo *li,
                    const char *fmt, ...);
#define pu_lockinfo(c, li, ...) pu_lockinfo_at(__FILE__, __LINE__, (c), (li), __VA_ARGS__)

/* Polls cond every 5 ms; fails the test if it is still false after ms. */
#define PU_EVENTUALLY(cond, ms)                                             \
    do {                                                                    \
        long long pu_dl_ = pu_now_ms() + (ms);                              \
        while (!(cond)) {                                                   \
            if (pu_now_ms() > pu_dl_)                                       \
                TEST_FAIL("still false after %d ms: %s", (int)(ms), #cond); \
            pu_sleep_ms(5);                                                 \
        }                                                                   \
    } while (0)

/* Raw TCP sockets, for bytes hiredis would refuse to send. pu_raw_connect
 * fails the test when it cannot connect; pu_raw_try_connect returns -1
 * (errno set) instead. */
int pu_raw_connect(int port);
int pu_raw_try_connect(int port);
/* Sends all of buf; false if the peer closed or reset first. */
bool pu_raw_send(int fd, const void *buf, size_t n);

/* Reads into buf (n bytes, NUL-terminated) until what has arrived holds
 * stop (stop NULL: never), the peer closes, buf is full, or ms pass.
 * Returns the bytes read. */
size_t pu_raw_read_until(int fd, char *buf, size_t n, int ms, const char *stop);

/* pu_raw_read_until a full first reply line ("...\r\n"). */
size_t pu_raw_read_line(int fd, char *buf, size_t n, int ms);

/* True if the peer closes (EOF or reset) within ms; discards data. */
bool pu_raw_wait_closed(int fd, int ms);

/* Starts argv (a server the test drives itself) with stdout+stderr
 * appended to log_path; registered like the other children (killed at
 * exit, log printed on failure). Returns its pid. */
pid_t pu_spawn(const char *const *argv, const char *log_path);

/* SIGKILLs and reaps a child of pu_spawn (no-op for pid <= 0). */
void pu_kill(pid_t pid);

/* Runs argv[0] with argv, captures stdout+stderr (truncated to n-1 bytes)
 * and returns the wait status; kills it after ms. */
int pu_run_capture(const char *const *argv, char *out, size_t n, int ms);

#endif
