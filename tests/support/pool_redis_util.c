/* Throw-away redis-server instances for integration tests; see
 * pool_redis_util.h. */
#include "pool_redis_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PREDIS_MAX_PIDS 16
#define PREDIS_WAIT_MS  5000
#define PREDIS_MAX_ARGS 40

/* What the exit handler must undo: servers to kill, dirs to remove. */
struct predis_slot {
    pid_t pid;    /* running server, or 0 */
    char dir[64]; /* temp dir, or "" */
};

static struct predis_slot predis_slots[PREDIS_MAX_PIDS];
static bool predis_atexit_done;

static void predis_rm_dir(const char *dir)
{
    static const char *files[] = {"redis.sock", "redis.log",     "dump.rdb",
                                  "nodes.conf", "sentinel.conf", "cli.log"};
    char path[192];
    size_t i;

    for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* Exit handler: also runs when a failed assertion calls exit(). */
static void predis_undo_all(void)
{
    int i;

    for (i = 0; i < PREDIS_MAX_PIDS; i++) {
        if (predis_slots[i].pid > 0) {
            kill(predis_slots[i].pid, SIGKILL);
            waitpid(predis_slots[i].pid, NULL, 0);
        }
        if (predis_slots[i].dir[0])
            predis_rm_dir(predis_slots[i].dir);
        memset(&predis_slots[i], 0, sizeof(predis_slots[i]));
    }
}

/* The slot holding dir (or a free one when dir is NULL). */
static struct predis_slot *predis_slot(const char *dir)
{
    int i;

    if (!predis_atexit_done) {
        atexit(predis_undo_all);
        predis_atexit_done = true;
    }
    for (i = 0; i < PREDIS_MAX_PIDS; i++) {
        if (dir ? strcmp(predis_slots[i].dir, dir) == 0 : !predis_slots[i].dir[0])
            return &predis_slots[i];
    }
    return NULL;
}

static void predis_set_pid(const struct predis *r, pid_t pid)
{
    struct predis_slot *slot = predis_slot(r->dir);

    if (slot)
        slot->pid = pid;
}

bool predis_available(void)
{
    return access(PREDIS_BIN, X_OK) == 0;
}

static int free_port(void)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    if (fd < 0)
        return -errno;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    close(fd);
    return port > 0 ? port : -EADDRNOTAVAIL;
}

int predis_init(struct predis *r)
{
    struct predis_slot *slot;

    memset(r, 0, sizeof(*r));
    r->pid = -1;
    r->port = free_port();
    if (r->port < 0)
        return r->port;
    snprintf(r->dir, sizeof(r->dir), "/tmp/lp-predis-XXXXXX");
    if (!mkdtemp(r->dir)) {
        r->dir[0] = '\0';
        return -errno;
    }
    snprintf(r->sock, sizeof(r->sock), "%s/redis.sock", r->dir);
    slot = predis_slot(NULL);
    if (slot)
        snprintf(slot->dir, sizeof(slot->dir), "%s", r->dir);
    return 0;
}

static int build_argv(const struct predis *r, const char **argv, char *port)
{
    static const char *fixed[] = {"--bind",
                                  "127.0.0.1",
                                  "--save",
                                  "",
                                  "--appendonly",
                                  "no",
                                  "--enable-debug-command",
                                  "yes",
                                  "--unixsocketperm",
                                  "700",
                                  "--loglevel",
                                  "warning",
                                  "--daemonize",
                                  "no"};
    int n = 0;
    size_t i;

    snprintf(port, 16, "%d", r->port);
    argv[n++] = PREDIS_BIN;
    if (r->conf)
        argv[n++] = r->conf; /* a config file must come first */
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--dir";
    argv[n++] = r->dir;
    argv[n++] = "--unixsocket";
    argv[n++] = r->sock;
    for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        argv[n++] = fixed[i];
    if (r->password) {
        argv[n++] = "--requirepass";
        argv[n++] = r->password;
    }
    for (i = 0; r->extra[i] && i < PREDIS_MAX_EXTRA; i++)
        argv[n++] = r->extra[i];
    argv[n] = NULL;
    return n;
}

/* Child side: die with the parent, log to the temp dir, exec. */
static void predis_exec(const struct predis *r, pid_t parent)
{
    const char *argv[PREDIS_MAX_ARGS];
    char port[16], log[128];
    int fd;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    build_argv(r, argv, port);
    snprintf(log, sizeof(log), "%s/redis.log", r->dir);
    fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execv(PREDIS_BIN, (char *const *)argv);
    _exit(127);
}

static bool predis_pings(const struct predis *r)
{
    struct timeval tv = {0, 200000};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    redisReply *rep;
    bool ok = false;

    if (!c || c->err) {
        if (c)
            redisFree(c);
        return false;
    }
    rep = redisCommand(c, "PING");
    ok = rep != NULL; /* +PONG, or -NOAUTH with a password: either way it is up */
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return ok;
}

static int predis_wait(struct predis *r)
{
    int waited;

    for (waited = 0; waited < PREDIS_WAIT_MS; waited += 10) {
        if (waitpid(r->pid, NULL, WNOHANG) == r->pid) {
            predis_set_pid(r, 0);
            r->pid = -1;
            return -ECHILD;
        }
        if (predis_pings(r))
            return 0;
        usleep(10000);
    }
    return -ETIMEDOUT;
}

int predis_start(struct predis *r)
{
    pid_t parent = getpid(), pid;
    int rc;

    if (r->pid > 0)
        return -EALREADY;
    if (!r->dir[0] && (rc = predis_init(r)) < 0)
        return rc;
    pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0)
        predis_exec(r, parent);
    r->pid = pid;
    predis_set_pid(r, pid);
    rc = predis_wait(r);
    if (rc < 0)
        predis_kill(r);
    return rc;
}

void predis_kill(struct predis *r)
{
    if (r->pid <= 0)
        return;
    kill(r->pid, SIGKILL);
    waitpid(r->pid, NULL, 0);
    predis_set_pid(r, 0);
    r->pid = -1;
}

void predis_signal(struct predis *r, int sig)
{
    if (r->pid > 0)
        kill(r->pid, sig);
}

void predis_cleanup(struct predis *r)
{
    struct predis_slot *slot;

    predis_kill(r);
    if (!r->dir[0])
        return;
    predis_rm_dir(r->dir);
    slot = predis_slot(r->dir);
    if (slot)
        memset(slot, 0, sizeof(*slot));
    r->dir[0] = '\0';
}

redisContext *predis_connect(const struct predis *r)
{
    struct timeval tv = {2, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", r->port, tv);
    redisReply *rep;

    if (!c || c->err) {
        if (c)
            redisFree(c);
        return NULL;
    }
    redisSetTimeout(c, tv);
    if (!r->password)
        return c;
    rep = redisCommand(c, "AUTH %s", r->password);
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
        if (rep)
            freeReplyObject(rep);
        redisFree(c);
        return NULL;
    }
    freeReplyObject(rep);
    return c;
}

long long predis_int(const struct predis *r, const char *fmt, ...)
{
    redisContext *c = predis_connect(r);
    redisReply *rep;
    long long v = -1;
    va_list ap;

    if (!c)
        return -1;
    va_start(ap, fmt);
    rep = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (rep && rep->type == REDIS_REPLY_INTEGER)
        v = rep->integer;
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return v;
}

long long predis_numsub(const struct predis *r, const char *channel)
{
    redisContext *c = predis_connect(r);
    redisReply *rep;
    long long v = -1;

    if (!c)
        return -1;
    rep = redisCommand(c, "PUBSUB NUMSUB %s", channel);
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[1]->type == REDIS_REPLY_INTEGER)
        v = rep->element[1]->integer;
    if (rep)
        freeReplyObject(rep);
    redisFree(c);
    return v;
}
