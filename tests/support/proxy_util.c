/* Integration-test helpers: child processes (redis-server, lockproxy) in a
 * per-process temp dir with guaranteed cleanup, hiredis clients with
 * reply assertions, INFO parsing and raw sockets. See proxy_util.h. */
#include "proxy_util.h"

#include <arpa/inet.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define REDIS_BIN      "/usr/bin/redis-server"
#define MAX_CHILDREN   32
#define MAX_LOGS       32
#define LOG_TAIL_LINES 150
#define LOG_TAIL_BYTES (64 * 1024)
#define START_TRIES    3
#define PROXY_START_MS 15000
#define REDIS_START_MS 10000
#define STOP_GRACE_MS  5000
#define CMD_TIMEOUT_MS 10000

static char tmp_dir[64];                 /* "" until pu_tmpdir() */
static pid_t children[MAX_CHILDREN];     /* live children, 0 = free slot */
static char logs[MAX_LOGS][PU_PATH_MAX]; /* logs to print on failure */
static int nlogs;

static void fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void fail_at(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* ---------------------------------------------------------------------
 * Process bookkeeping and exit handling */

static void child_add(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == 0) {
            children[i] = pid;
            return;
        }
    }
    kill(pid, SIGKILL);
    TEST_FAIL("too many child processes");
}

static void child_forget(pid_t pid)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == pid)
            children[i] = 0;
    }
}

/* SIGKILLs a registered child, reaps it into *status and unregisters it. */
static void child_kill(pid_t pid, int *status)
{
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    child_forget(pid);
}

static void log_add(const char *path)
{
    for (int i = 0; i < nlogs; i++) {
        if (strcmp(logs[i], path) == 0)
            return;
    }
    if (nlogs < MAX_LOGS)
        snprintf(logs[nlogs++], PU_PATH_MAX, "%s", path);
}

/* Prints the last LOG_TAIL_LINES lines of path to stderr. */
static void print_log_tail(const char *path)
{
    static char buf[LOG_TAIL_BYTES + 1];
    FILE *f = fopen(path, "r");
    long size, from;
    size_t n;
    int lines = 0;
    char *p;

    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    from = size > LOG_TAIL_BYTES ? size - LOG_TAIL_BYTES : 0;
    fseek(f, from, SEEK_SET);
    n = fread(buf, 1, LOG_TAIL_BYTES, f);
    fclose(f);
    buf[n] = '\0';
    for (p = buf + n; p > buf; p--) {
        if (p[-1] == '\n' && p != buf + n && ++lines > LOG_TAIL_LINES)
            break;
    }
    fprintf(stderr, "----- tail of %s (%ld bytes) -----\n%s----- end of %s -----\n", path, size, p,
            path);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void kill_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] > 0) {
            kill(children[i], SIGCONT);
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    }
}

static void on_exit_handler(int status, void *arg)
{
    (void)arg;
    kill_children();
    if (status != 0 && status != TEST_SKIP_CODE) {
        for (int i = 0; i < nlogs; i++)
            print_log_tail(logs[i]);
    }
    if (tmp_dir[0] == '\0')
        return;
    if (getenv("LP_IT_KEEP"))
        fprintf(stderr, "kept temp dir %s\n", tmp_dir);
    else
        nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Removes temp dirs of test processes that died without cleaning up
 * (killed by a ctest timeout): /tmp/lp-it-<pid>-* whose pid is gone. */
static void sweep_stale_tmpdirs(void)
{
    DIR *d = opendir("/tmp");
    struct dirent *de;
    char path[PU_PATH_MAX];
    int pid;

    if (!d)
        return;
    while ((de = readdir(d)) != NULL) {
        if (sscanf(de->d_name, "lp-it-%d-", &pid) != 1 || pid <= 0)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(path, sizeof(path), "/tmp/%.200s", de->d_name);
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

const char *pu_tmpdir(void)
{
    if (tmp_dir[0])
        return tmp_dir;
    sweep_stale_tmpdirs();
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/lp-it-%d-XXXXXX", (int)getpid());
    if (!mkdtemp(tmp_dir))
        TEST_FAIL("mkdtemp: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN);
    on_exit(on_exit_handler, NULL);
    return tmp_dir;
}

long long pu_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long pu_wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int pu_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        TEST_FAIL("cannot find a free port: %s", strerror(errno));
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

void pu_raise_nofile(long want)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        TEST_FAIL("getrlimit: %s", strerror(errno));
    if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur >= want)
        return;
    if (rl.rlim_max != RLIM_INFINITY && (long)rl.rlim_max < want)
        TEST_SKIP("RLIMIT_NOFILE hard limit %ld < %ld", (long)rl.rlim_max, want);
    rl.rlim_cur = (rlim_t)want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        TEST_FAIL("setrlimit(%ld): %s", want, strerror(errno));
}

bool pu_uring_available(void)
{
    struct io_uring_params params;
    long fd;

    memset(&params, 0, sizeof(params));
    fd = syscall(__NR_io_uring_setup, 4, &params);
    if (fd < 0)
        return false;
    close((int)fd);
    return true;
}

/* In the child between fork and exec: only async-signal-safe calls. */
static void child_setup(pid_t parent, int out_fd)
{
    sigset_t none;
    int null_fd;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0)
        dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    /* Test sockets must not leak into servers: a leaked client fd would
     * keep a connection open after the test closes it. */
    close_range(3, ~0U, 0);
    signal(SIGPIPE, SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Forks and execs argv with stdout+stderr appended to log_path. */
static pid_t spawn(const char *const *argv, const char *log_path)
{
    pid_t parent = getpid(), pid;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    if (fd < 0)
        TEST_FAIL("open %s: %s", log_path, strerror(errno));
    log_add(log_path);
    pid = fork();
    if (pid < 0)
        TEST_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        child_setup(parent, fd);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd);
    child_add(pid);
    return pid;
}

/* Reaps pid if it has ended; returns true (and *status) if so. */
static bool reap(pid_t pid, int *status)
{
    pid_t r = waitpid(pid, status, WNOHANG);

    if (r == pid) {
        child_forget(pid);
        return true;
    }
    return false;
}

static void describe_status(int st, char *buf, size_t n)
{
    if (WIFEXITED(st))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, n, "killed by signal %d (%s)%s", WTERMSIG(st), strsignal(WTERMSIG(st)),
                 WCOREDUMP(st) ? ", core dumped" : "");
    else
        snprintf(buf, n, "ended with wait status 0x%x", st);
}

static redisContext *connect_addr(int port, const char *unix_path, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    redisContext *c = unix_path && unix_path[0] ? redisConnectUnixWithTimeout(unix_path, tv)
                                                : redisConnectWithTimeout("127.0.0.1", port, tv);

    if (c && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

static bool answers_ping(int port, const char *unix_path)
{
    redisContext *c = connect_addr(port, unix_path, 500);
    redisReply *r;
    bool ok;

    if (!c)
        return false;
    pu_set_timeout(c, 1000);
    r = redisCommand(c, "PING");
    /* A password-protected redis answers NOAUTH: it is up all the same. */
    ok = r &&
         ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) || pu_is_err(r, "NOAUTH"));
    if (r)
        freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Waits until the child answers PING. Returns 0, or -1 if it ended (with
 * *status) or did not answer within ms. */
static int wait_ready(pid_t pid, int port, const char *unix_path, int ms, int *status)
{
    long long deadline = pu_now_ms() + ms;

    *status = -1;
    while (pu_now_ms() < deadline) {
        if (reap(pid, status))
            return -1;
        if (answers_ping(port, unix_path))
            return 0;
        pu_sleep_ms(20);
    }
    return -1;
}

pid_t pu_spawn_server(const char *const *argv, const char *log_path, int port, int ms)
{
    pid_t pid;
    int st;

    pu_tmpdir();
    pid = spawn(argv, log_path);
    if (wait_ready(pid, port, NULL, ms, &st) == 0)
        return pid;
    if (st == -1)
        child_kill(pid, &st);
    return -1;
}

void pu_kill_server(pid_t pid)
{
    int st;

    if (pid > 0)
        child_kill(pid, &st);
}

/* ---------------------------------------------------------------------
 * redis-server */

static void redis_argv(struct pu_redis *r, const char **argv, char *port_buf, size_t n)
{
    int i = 0;

    snprintf(port_buf, n, "%d", r->port);
    argv[i++] = REDIS_BIN;
    argv[i++] = "--port";
    argv[i++] = port_buf;
    argv[i++] = "--bind";
    argv[i++] = "127.0.0.1";
    argv[i++] = "--save";
    argv[i++] = "";
    argv[i++] = "--appendonly";
    argv[i++] = "no";
    argv[i++] = "--dir";
    argv[i++] = r->dir;
    argv[i++] = "--daemonize";
    argv[i++] = "no";
    if (r->unix_path[0]) {
        argv[i++] = "--unixsocket";
        argv[i++] = r->unix_path;
    }
    for (int j = 0; r->extra[j] && i < PU_MAX_ARGS + 16; j++)
        argv[i++] = r->extra[j];
    argv[i] = NULL;
}

static int redis_spawn(struct pu_redis *r)
{
    const char *argv[PU_MAX_ARGS + 24];
    char port_buf[16];

    redis_argv(r, argv, port_buf, sizeof(port_buf));
    r->pid = spawn(argv, r->log_path);
    if (wait_ready(r->pid, r->port, NULL, REDIS_START_MS, &r->wstatus) == 0)
        return 0;
    if (r->wstatus == -1) { /* still running but not answering */
        child_kill(r->pid, &r->wstatus);
    }
    r->pid = 0;
    return -1;
}

void pu_redis_start(struct pu_redis *r)
{
    bool pick = r->port == 0;

    pu_tmpdir();
    if (access(REDIS_BIN, X_OK) != 0)
        TEST_SKIP("%s not found", REDIS_BIN);
    for (int attempt = 0; attempt < START_TRIES; attempt++) {
        if (pick)
            r->port = pu_free_port();
        if (!r->dir[0]) {
            snprintf(r->dir, sizeof(r->dir), "%s/redis-%d", tmp_dir, r->port);
            mkdir(r->dir, 0700);
            snprintf(r->log_path, sizeof(r->log_path), "%s/redis-%d.log", tmp_dir, r->port);
        }
        if (redis_spawn(r) == 0)
            return;
        if (!pick)
            break;
    }
    print_log_tail(r->log_path);
    TEST_FAIL("redis-server did not start on port %d", r->port);
}

void pu_redis_kill(struct pu_redis *r)
{
    if (r->pid <= 0)
        return;
    child_kill(r->pid, &r->wstatus);
    r->pid = 0;
}

void pu_redis_restart(struct pu_redis *r)
{
    pu_redis_kill(r);
    /* The port may linger briefly; retry a few times on the same port. */
    for (int attempt = 0; attempt < 5; attempt++) {
        if (redis_spawn(r) == 0)
            return;
        pu_sleep_ms(200);
    }
    print_log_tail(r->log_path);
    TEST_FAIL("redis-server did not restart on port %d", r->port);
}

void pu_redis_pause(struct pu_redis *r)
{
    if (r->pid <= 0 || kill(r->pid, SIGSTOP) != 0)
        TEST_FAIL("cannot SIGSTOP redis");
}

void pu_redis_resume(struct pu_redis *r)
{
    if (r->pid <= 0 || kill(r->pid, SIGCONT) != 0)
        TEST_FAIL("cannot SIGCONT redis");
}

/* ---------------------------------------------------------------------
 * lockproxy */

const char *pu_proxy_bin(void)
{
    const char *bin = getenv("LP_PROXY_BIN");

    if (!bin || !bin[0])
        TEST_FAIL("LP_PROXY_BIN is not set (run through ctest)");
    if (access(bin, X_OK) != 0)
        TEST_FAIL("LP_PROXY_BIN=%s is not executable: %s", bin, strerror(errno));
    return bin;
}

static int proxy_spawn(struct pu_proxy *p)
{
    const char *argv[PU_MAX_ARGS + 8];
    char listen[PU_PATH_MAX + 16];
    int i = 0;

    if (p->unix_path[0])
        snprintf(listen, sizeof(listen), "unix://%s", p->unix_path);
    else
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", p->port);
    argv[i++] = pu_proxy_bin();
    argv[i++] = "--listen";
    argv[i++] = listen;
    argv[i++] = "--upstream";
    argv[i++] = p->upstream;
    for (int j = 0; p->extra[j] && i < PU_MAX_ARGS + 6; j++)
        argv[i++] = p->extra[j];
    argv[i] = NULL;
    p->pid = spawn(argv, p->log_path);
    if (wait_ready(p->pid, p->port, p->unix_path, PROXY_START_MS, &p->wstatus) == 0)
        return 0;
    if (p->wstatus == -1) {
        fprintf(stderr, "lockproxy did not answer PING within %d ms\n", PROXY_START_MS);
        child_kill(p->pid, &p->wstatus);
    }
    p->pid = 0;
    return -1;
}

int pu_proxy_try_start(struct pu_proxy *p)
{
    bool pick = p->port == 0 && !p->unix_path[0];
    char how[96];

    pu_tmpdir();
    for (int attempt = 0; attempt < START_TRIES; attempt++) {
        if (pick)
            p->port = pu_free_port();
        if (!p->log_path[0])
            snprintf(p->log_path, sizeof(p->log_path), "%s/proxy-%d-%d.log", tmp_dir, (int)getpid(),
                     p->port);
        if (proxy_spawn(p) == 0)
            return 0;
        describe_status(p->wstatus, how, sizeof(how));
        fprintf(stderr, "lockproxy failed to start (%s)\n", how);
        print_log_tail(p->log_path);
        if (!pick || !WIFEXITED(p->wstatus))
            break;
    }
    return -1;
}

void pu_proxy_start(struct pu_proxy *p)
{
    if (pu_proxy_try_start(p) != 0)
        TEST_FAIL("lockproxy did not start (log %s)", p->log_path);
}

bool pu_proxy_alive(struct pu_proxy *p)
{
    if (p->pid <= 0)
        return false;
    if (reap(p->pid, &p->wstatus)) {
        p->pid = 0;
        return false;
    }
    return true;
}

void pu_proxy_assert_alive(struct pu_proxy *p)
{
    char how[96];

    if (pu_proxy_alive(p))
        return;
    describe_status(p->wstatus, how, sizeof(how));
    TEST_FAIL("lockproxy is gone: %s", how);
}

/* Fails the test if a sanitizer reported anything in the log at path. */
static void check_sanitizer_reports(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[1024];
    bool found = false;

    if (!f)
        return;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, "Sanitizer") || strstr(line, "runtime error:");
    fclose(f);
    if (found)
        TEST_FAIL("sanitizer report in %s", path);
}

int pu_proxy_stop(struct pu_proxy *p)
{
    long long deadline = pu_now_ms() + STOP_GRACE_MS;
    bool ended = false;

    if (!pu_proxy_alive(p))
        return -1;
    kill(p->pid, SIGTERM);
    while (!(ended = reap(p->pid, &p->wstatus)) && pu_now_ms() < deadline)
        pu_sleep_ms(10);
    if (!ended) {
        fprintf(stderr, "lockproxy ignored SIGTERM for %d ms; SIGKILL\n", STOP_GRACE_MS);
        child_kill(p->pid, &p->wstatus);
    }
    p->pid = 0;
    check_sanitizer_reports(p->log_path);
    return p->wstatus;
}

/* ---------------------------------------------------------------------
 * Environments */

static const char *backend_info_name(const char *backend)
{
    return strcmp(backend, "uring") == 0 ? "io_uring" : backend;
}

void pu_env_start(struct pu_env *e, const char *backend, const char *const *extra)
{
    const char *level = getenv("LP_IT_LOG_LEVEL");
    redisContext *c;
    char got[64];
    int i = 0;

    memset(e, 0, sizeof(*e));
    e->backend = backend;
    pu_redis_start(&e->redis);
    snprintf(e->proxy.upstream, sizeof(e->proxy.upstream), "redis://127.0.0.1:%d", e->redis.port);
    e->proxy.extra[i++] = "--io";
    e->proxy.extra[i++] = backend;
    e->proxy.extra[i++] = "--log-level";
    e->proxy.extra[i++] = level && level[0] ? level : "debug";
    for (int j = 0; extra && extra[j] && i < PU_MAX_ARGS - 1; j++)
        e->proxy.extra[i++] = extra[j];
    e->proxy.extra[i] = NULL;
    pu_proxy_start(&e->proxy);
    c = pu_client(e);
    if (!pu_info_str(c, "io_backend", got, sizeof(got)))
        TEST_FAIL("INFO has no io_backend field");
    if (strcmp(got, backend_info_name(backend)) != 0)
        TEST_FAIL("--io %s: INFO io_backend is \"%s\"", backend, got);
    redisFree(c);
}

void pu_env_stop(struct pu_env *e)
{
    pu_proxy_assert_alive(&e->proxy);
    pu_proxy_stop(&e->proxy);
    pu_redis_kill(&e->redis);
}

static bool backend_selected(const char *backend)
{
    const char *only = getenv("LP_IT_BACKENDS");

    return !only || !only[0] || strstr(only, backend) != NULL;
}

void pu_for_each_backend(void (*run)(const char *backend, void *arg), void *arg)
{
    static const char *const backends[] = {"epoll", "uring"};
    int ran = 0;

    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
        if (!backend_selected(backends[i]))
            continue;
        if (strcmp(backends[i], "uring") == 0 && !pu_uring_available()) {
            fprintf(stderr, "SKIP (uring half): io_uring_setup is not permitted here\n");
            continue;
        }
        fprintf(stderr, "-- io backend %s\n", backends[i]);
        run(backends[i], arg);
        ran++;
    }
    if (ran == 0)
        TEST_SKIP("no selected io backend can run here");
}

struct each_env {
    void (*scenario)(struct pu_env *e);
    const char *const *extra;
};

static void each_env_run(const char *backend, void *arg)
{
    const struct each_env *a = arg;
    struct pu_env e;

    pu_env_start(&e, backend, a->extra);
    a->scenario(&e);
    pu_env_stop(&e);
}

void pu_each_backend(void (*scenario)(struct pu_env *e), const char *const *extra)
{
    struct each_env a = {scenario, extra};

    pu_for_each_backend(each_env_run, &a);
}

redisReply *pu_cmd_until_served(redisContext *c, const char *fmt, const char *arg, int max_ms)
{
    long long deadline = pu_now_ms() + max_ms;

    for (;;) {
        redisReply *r = pu_cmd(c, fmt, arg);

        if (!pu_is_err(r, "UPSTREAM"))
            return r;
        freeReplyObject(r);
        if (pu_now_ms() > deadline)
            TEST_FAIL("\"%s\" %s still answered -UPSTREAM after %d ms", fmt, arg, max_ms);
        pu_sleep_ms(50);
    }
}

/* ---------------------------------------------------------------------
 * hiredis clients and reply checks */

void pu_set_timeout(redisContext *c, int ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    redisSetTimeout(c, tv);
}

redisContext *pu_try_connect(int port)
{
    redisContext *c = connect_addr(port, NULL, 2000);

    if (c)
        pu_set_timeout(c, CMD_TIMEOUT_MS);
    return c;
}

redisContext *pu_connect(int port)
{
    redisContext *c = pu_try_connect(port);

    if (!c)
        TEST_FAIL("cannot connect to 127.0.0.1:%d", port);
    return c;
}

redisContext *pu_connect_unix(const char *path)
{
    redisContext *c = connect_addr(0, path, 2000);

    if (!c)
        TEST_FAIL("cannot connect to unix:%s", path);
    pu_set_timeout(c, CMD_TIMEOUT_MS);
    return c;
}

redisContext *pu_client(struct pu_env *e)
{
    if (e->proxy.unix_path[0])
        return pu_connect_unix(e->proxy.unix_path);
    return pu_connect(e->proxy.port);
}

redisContext *pu_redis_client(struct pu_env *e)
{
    return pu_connect(e->redis.port);
}

/* Appends s to buf[*len..n) with non-printables escaped. */
static void escape_into(char *buf, size_t n, size_t *len, const char *s, size_t slen)
{
    for (size_t i = 0; i < slen && *len + 5 < n; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch >= 0x20 && ch < 0x7f && ch != '"')
            buf[(*len)++] = (char)ch;
        else
            *len += (size_t)snprintf(buf + *len, n - *len, "\\x%02x", ch);
    }
    buf[*len] = '\0';
}

const char *pu_describe(const redisReply *r, char *buf, size_t n)
{
    static const char *const names[] = {"?", "bulk", "array", "integer", "nil", "status", "error"};
    size_t len;

    if (!r) {
        snprintf(buf, n, "no reply");
        return buf;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(buf, n, "integer %lld", r->integer);
    } else if (r->type == REDIS_REPLY_NIL) {
        snprintf(buf, n, "nil");
    } else if (r->type == REDIS_REPLY_ARRAY) {
        snprintf(buf, n, "array of %zu", r->elements);
    } else if (r->type >= REDIS_REPLY_STRING && r->type <= REDIS_REPLY_ERROR) {
        len = (size_t)snprintf(buf, n, "%s \"", names[r->type]);
        escape_into(buf, n - 1, &len, r->str, r->len > 200 ? 200 : r->len);
        buf[len++] = '"';
        buf[len] = '\0';
    } else {
        snprintf(buf, n, "reply type %d", r->type);
    }
    return buf;
}

bool pu_is_err(const redisReply *r, const char *prefix)
{
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, prefix, strlen(prefix)) == 0;
}

static bool reply_matches(const redisReply *r, enum pu_kind kind, long long i, const char *s)
{
    switch (kind) {
    case PU_K_STATUS:
        return r->type == REDIS_REPLY_STATUS && strcmp(r->str, s) == 0;
    case PU_K_NIL:
        return r->type == REDIS_REPLY_NIL;
    case PU_K_INT:
        return r->type == REDIS_REPLY_INTEGER && r->integer == i;
    case PU_K_ERR:
        return pu_is_err(r, s);
    case PU_K_STR:
        return (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) &&
               r->len == strlen(s) && memcmp(r->str, s, r->len) == 0;
    case PU_K_ANY:
        return true;
    }
    return false;
}

static void describe_expect(enum pu_kind kind, long long i, const char *s, char *buf, size_t n)
{
    switch (kind) {
    case PU_K_STATUS:
        snprintf(buf, n, "status \"%s\"", s);
        break;
    case PU_K_NIL:
        snprintf(buf, n, "nil");
        break;
    case PU_K_INT:
        snprintf(buf, n, "integer %lld", i);
        break;
    case PU_K_ERR:
        snprintf(buf, n, "error starting with \"%s\"", s);
        break;
    case PU_K_STR:
        snprintf(buf, n, "string \"%s\"", s);
        break;
    case PU_K_ANY:
        snprintf(buf, n, "any reply");
        break;
    }
}

void pu_check_at(const char *file, int line, const redisReply *r, enum pu_kind kind, long long i,
                 const char *s, const char *what)
{
    char want[160], got[320];

    if (r && reply_matches(r, kind, i, s))
        return;
    describe_expect(kind, i, s, want, sizeof(want));
    fail_at(file, line, "%s: expected %s, got %s", what, want, pu_describe(r, got, sizeof(got)));
}

static redisReply *vcmd_at(const char *file, int line, redisContext *c, const char *fmt, va_list ap)
{
    redisReply *r = redisvCommand(c, fmt, ap);

    if (!r)
        fail_at(file, line, "\"%s\": connection error: %s", fmt, c->errstr);
    return r;
}

redisReply *pu_cmd_at(const char *file, int line, redisContext *c, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = vcmd_at(file, line, c, fmt, ap);
    va_end(ap);
    return r;
}

void pu_expect_at(const char *file, int line, redisContext *c, enum pu_kind kind, long long i,
                  const char *s, const char *fmt, ...)
{
    redisReply *r;
    va_list ap;

    va_start(ap, fmt);
    r = vcmd_at(file, line, c, fmt, ap);
    va_end(ap);
    pu_check_at(file, line, r, kind, i, s, fmt);
    freeReplyObject(r);
}

static void flush_at(const char *file, int line, redisContext *c)
{
    int done = 0;

    while (!done) {
        if (redisBufferWrite(c, &done) != REDIS_OK)
            fail_at(file, line, "write failed: %s", c->errstr);
    }
}

void pu_send_at(const char *file, int line, redisContext *c, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = redisvAppendCommand(c, fmt, ap);
    va_end(ap);
    if (rc != REDIS_OK)
        fail_at(file, line, "\"%s\": cannot format: %s", fmt, c->errstr);
    flush_at(file, line, c);
}

redisReply *pu_recv_at(const char *file, int line, redisContext *c)
{
    void *r = NULL;

    if (redisGetReply(c, &r) != REDIS_OK || !r)
        fail_at(file, line, "no reply: %s", c->errstr[0] ? c->errstr : "connection closed");
    return r;
}

void pu_recv_expect_at(const char *file, int line, redisContext *c, enum pu_kind kind, long long i,
                       const char *s)
{
    redisReply *r = pu_recv_at(file, line, c);

    pu_check_at(file, line, r, kind, i, s, "reply");
    freeReplyObject(r);
}

redisReply *pu_poll_reply(redisContext *c, int ms, bool *closed)
{
    long long deadline = pu_now_ms() + ms;
    void *r = NULL;

    *closed = false;
    for (;;) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        long long left;
        int n;

        if (redisGetReplyFromReader(c, &r) != REDIS_OK)
            break;
        if (r)
            return r;
        left = deadline - pu_now_ms();
        n = poll(&pfd, 1, left > 0 ? (int)left : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n > 0 && redisBufferRead(c) != REDIS_OK)
            break;
        if (n == 0 && left <= 0)
            return NULL;
    }
    *closed = true;
    return NULL;
}

redisReply *pu_try_recv_at(const char *file, int line, redisContext *c, int ms)
{
    bool closed;
    redisReply *r = pu_poll_reply(c, ms, &closed);

    if (closed)
        fail_at(file, line, "connection broke while waiting for a reply: %s", c->errstr);
    return r;
}

/* ---------------------------------------------------------------------
 * INFO and Redis-side helpers */

bool pu_info_str(redisContext *c, const char *field, char *buf, size_t n)
{
    redisReply *r = pu_cmd(c, "INFO");
    size_t flen = strlen(field);
    bool found = false;
    const char *p;

    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) {
        char got[320];

        TEST_FAIL("INFO: expected a bulk string, got %s", pu_describe(r, got, sizeof(got)));
    }
    for (p = r->str; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, field, flen) == 0 && p[flen] == ':') {
            size_t vlen = strcspn(p + flen + 1, "\r\n");

            snprintf(buf, n, "%.*s", (int)vlen, p + flen + 1);
            found = true;
            break;
        }
    }
    freeReplyObject(r);
    return found;
}

long long pu_info_int_at(const char *file, int line, redisContext *c, const char *field)
{
    char buf[64], *end;
    long long v;

    if (!pu_info_str(c, field, buf, sizeof(buf)))
        fail_at(file, line, "INFO has no field %s", field);
    v = strtoll(buf, &end, 10);
    if (end == buf || *end)
        fail_at(file, line, "INFO %s is not an integer: \"%s\"", field, buf);
    return v;
}

long long pu_int_reply(redisContext *rc, const char *cmd, const char *key)
{
    redisReply *r = pu_cmd(rc, "%s %s", cmd, key);
    long long v;

    if (r->type != REDIS_REPLY_INTEGER)
        TEST_FAIL("%s %s: not an integer reply (type %d)", cmd, key, r->type);
    v = r->integer;
    freeReplyObject(r);
    return v;
}

long long pu_pttl(redisContext *rc, const char *key)
{
    return pu_int_reply(rc, "PTTL", key);
}

long long pu_cmdstat_calls(redisContext *rc, const char *name)
{
    redisReply *r = pu_cmd(rc, "INFO commandstats");
    char field[64];
    const char *p;
    long long n = 0;

    snprintf(field, sizeof(field), "cmdstat_%s:calls=", name);
    if (r->type != REDIS_REPLY_STRING)
        TEST_FAIL("INFO commandstats: not a string reply");
    p = strstr(r->str, field);
    if (p)
        n = atoll(p + strlen(field));
    freeReplyObject(r);
    return n;
}

bool pu_exists(redisContext *rc, const char *key)
{
    return pu_int_reply(rc, "EXISTS", key) == 1;
}

long long pu_hlen(redisContext *rc, const char *key)
{
    return pu_int_reply(rc, "HLEN", key);
}

long long pu_dbsize(redisContext *rc)
{
    redisReply *r = pu_cmd(rc, "DBSIZE");
    long long v;

    if (r->type != REDIS_REPLY_INTEGER)
        TEST_FAIL("DBSIZE: not an integer reply (type %d)", r->type);
    v = r->integer;
    freeReplyObject(r);
    r = pu_cmd(rc, "KEYS %s", PU_REGISTRY_PATTERN);
    if (r->type == REDIS_REPLY_ARRAY)
        v -= (long long)r->elements;
    freeReplyObject(r);
    r = pu_cmd(rc, "KEYS %s", PU_RELEASED_PATTERN);
    if (r->type == REDIS_REPLY_ARRAY)
        v -= (long long)r->elements;
    freeReplyObject(r);
    return v;
}

long long pu_get_int(redisContext *rc, const char *key)
{
    redisReply *r = pu_cmd(rc, "GET %s", key);
    long long v = LLONG_MIN;

    if (r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r->type != REDIS_REPLY_NIL)
        TEST_FAIL("GET %s: unexpected reply type %d", key, r->type);
    freeReplyObject(r);
    return v;
}

long long pu_hget_int(redisContext *rc, const char *key, const char *field)
{
    redisReply *r = pu_cmd(rc, "HGET %s %s", key, field);
    long long v = -1;

    if (r->type == REDIS_REPLY_STRING)
        v = strtoll(r->str, NULL, 10);
    else if (r->type != REDIS_REPLY_NIL)
        TEST_FAIL("HGET %s %s: unexpected reply type %d", key, field, r->type);
    freeReplyObject(r);
    return v;
}

void pu_redisson_key(const char *prefix, const char *name, char *buf, size_t n)
{
    int len = snprintf(buf, n, strchr(name, '{') ? "%s%s" : "%s{%s}", prefix, name);

    if (len < 0 || (size_t)len >= n)
        TEST_FAIL("Redisson name %s{%s} does not fit in %zu bytes", prefix, name, n);
}

void pu_channel(const char *name, char *buf, size_t n)
{
    pu_redisson_key("redisson_lock__channel:", name, buf, n);
}

void pu_proxy_uuid(redisContext *c, char *buf, size_t n)
{
    if (!pu_info_str(c, "proxy_uuid", buf, n))
        TEST_FAIL("INFO has no proxy_uuid field");
}

void pu_conn_owner(redisContext *c, char *buf, size_t n)
{
    char uuid[64];
    redisReply *r;

    pu_proxy_uuid(c, uuid, sizeof(uuid));
    r = pu_cmd(c, "CLIENT ID");
    if (r->type != REDIS_REPLY_INTEGER)
        TEST_FAIL("CLIENT ID: not an integer reply (type %d)", r->type);
    snprintf(buf, n, "%s:%lld", uuid, r->integer);
    freeReplyObject(r);
}

redisContext *pu_psubscribe(struct pu_env *e, const char *pattern)
{
    redisContext *sub = pu_redis_client(e);
    redisReply *r = pu_cmd(sub, "PSUBSCRIBE %s", pattern);

    if (r->type != REDIS_REPLY_ARRAY)
        TEST_FAIL("PSUBSCRIBE %s failed", pattern);
    freeReplyObject(r);
    return sub;
}

bool pu_next_message(redisContext *sub, int ms, char *chan, size_t cn, char *payload, size_t pn)
{
    redisReply *r = pu_try_recv(sub, ms);
    size_t base;

    if (!r)
        return false;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
        TEST_FAIL("unexpected pub/sub reply type %d", r->type);
    base = r->elements == 4 ? 2 : 1; /* pmessage has the pattern first */
    snprintf(chan, cn, "%s", r->element[base]->str);
    snprintf(payload, pn, "%s", r->element[base + 1]->str);
    freeReplyObject(r);
    return true;
}

/* Stores one LOCK.INFO field; returns a bit for the field, 0 if unknown. */
static int lockinfo_field(const char *file, int line, struct pu_lockinfo *li, const redisReply *k,
                          const redisReply *v)
{
    static const char *const ints[] = {"locked", "hold_count", "ttl_ms", "watchdog"};
    long long *slots[] = {&li->locked, &li->hold_count, &li->ttl_ms, &li->watchdog};
    char got[320];

    if (k->type != REDIS_REPLY_STRING && k->type != REDIS_REPLY_STATUS)
        fail_at(file, line, "LOCK.INFO: field name is %s", pu_describe(k, got, sizeof(got)));
    for (int i = 0; i < 4; i++) {
        if (strcmp(k->str, ints[i]) != 0)
            continue;
        if (v->type != REDIS_REPLY_INTEGER)
            fail_at(file, line, "LOCK.INFO %s: expected integer, got %s", ints[i],
                    pu_describe(v, got, sizeof(got)));
        *slots[i] = v->integer;
        return 1 << i;
    }
    if (strcmp(k->str, "owner") != 0)
        return 0;
    if (v->type != REDIS_REPLY_STRING && v->type != REDIS_REPLY_STATUS)
        fail_at(file, line, "LOCK.INFO owner: expected string, got %s",
                pu_describe(v, got, sizeof(got)));
    snprintf(li->owner, sizeof(li->owner), "%s", v->str);
    return 1 << 4;
}

void pu_lockinfo_at(const char *file, int line, redisContext *c, struct pu_lockinfo *li,
                    const char *fmt, ...)
{
    redisReply *r;
    va_list ap;
    char got[320];
    int seen = 0;

    va_start(ap, fmt);
    r = vcmd_at(file, line, c, fmt, ap);
    va_end(ap);
    memset(li, 0, sizeof(*li));
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2 != 0)
        fail_at(file, line, "%s: expected a flat field/value array, got %s", fmt,
                pu_describe(r, got, sizeof(got)));
    for (size_t i = 0; i < r->elements; i += 2)
        seen |= lockinfo_field(file, line, li, r->element[i], r->element[i + 1]);
    freeReplyObject(r);
    if (seen != 0x1f)
        fail_at(file, line,
                "%s: fields missing (seen mask 0x%x; want locked, hold_count, "
                "ttl_ms, watchdog, owner)",
                fmt, seen);
}

/* ---------------------------------------------------------------------
 * Raw sockets and captured runs */

int pu_raw_try_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

int pu_raw_connect(int port)
{
    int fd = pu_raw_try_connect(port);

    if (fd < 0)
        TEST_FAIL("raw connect to %d: %s", port, strerror(errno));
    return fd;
}

bool pu_raw_send(int fd, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
            return false;
        if (w < 0)
            TEST_FAIL("raw send: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
    return true;
}

/* Waits until fd is readable (or at EOF / in error), but not past the
 * monotonic deadline; false when the deadline came first. */
static bool readable_by(int fd, long long deadline)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    long long left = deadline - pu_now_ms();

    return left > 0 && poll(&pfd, 1, (int)left) > 0;
}

size_t pu_raw_read_until(int fd, char *buf, size_t n, int ms, const char *stop)
{
    long long deadline = pu_now_ms() + ms;
    size_t len = 0;

    buf[0] = '\0';
    while (len + 1 < n && !(stop && strstr(buf, stop))) {
        ssize_t r;

        if (!readable_by(fd, deadline))
            break;
        r = recv(fd, buf + len, n - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        buf[len] = '\0';
    }
    return len;
}

size_t pu_raw_read_line(int fd, char *buf, size_t n, int ms)
{
    return pu_raw_read_until(fd, buf, n, ms, "\r\n");
}

bool pu_raw_wait_closed(int fd, int ms)
{
    long long deadline = pu_now_ms() + ms;
    char sink[4096];

    for (;;) {
        ssize_t r;

        if (!readable_by(fd, deadline))
            return false;
        r = recv(fd, sink, sizeof(sink), 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return true;
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            return true;
    }
}

pid_t pu_spawn(const char *const *argv, const char *log_path)
{
    pu_tmpdir();
    return spawn(argv, log_path);
}

void pu_kill(pid_t pid)
{
    int st;

    if (pid > 0)
        child_kill(pid, &st);
}

/* Reads the child's output into out until EOF or the deadline. */
static void read_output(int fd, char *out, size_t n, long long deadline)
{
    size_t len = 0;
    char sink[1024];

    for (;;) {
        ssize_t r;

        if (!readable_by(fd, deadline))
            break;
        if (len + 1 < n)
            r = read(fd, out + len, n - 1 - len);
        else
            r = read(fd, sink, sizeof(sink));
        if (r <= 0)
            break;
        if (len + 1 < n)
            len += (size_t)r;
    }
    out[len] = '\0';
}

int pu_run_capture(const char *const *argv, char *out, size_t n, int ms)
{
    long long deadline = pu_now_ms() + ms;
    pid_t parent = getpid(), pid;
    int pipefd[2], st = -1;

    pu_tmpdir();
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        TEST_FAIL("pipe: %s", strerror(errno));
    pid = fork();
    if (pid < 0)
        TEST_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        child_setup(parent, pipefd[1]);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    child_add(pid);
    close(pipefd[1]);
    read_output(pipefd[0], out, n, deadline);
    close(pipefd[0]);
    while (!reap(pid, &st)) {
        if (pu_now_ms() > deadline) {
            child_kill(pid, &st);
            break;
        }
        pu_sleep_ms(5);
    }
    return st;
}
