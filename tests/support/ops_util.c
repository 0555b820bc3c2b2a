/* Operations-test helpers; see ops_util.h. */
#include "ops_util.h"

#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ou_path(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", pu_tmpdir(), name);
}

void ou_write_file(const char *path, const char *fmt, ...)
{
    char tmp[PU_PATH_MAX + 8];
    va_list ap;
    FILE *f;

    /* Write then rename, so a reload never reads a half-written file. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f)
        TEST_FAIL("cannot write %s: %s", tmp, strerror(errno));
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        TEST_FAIL("cannot write %s: %s", path, strerror(errno));
}

void ou_env_start(struct pu_env *e, const char *backend, const char *const *extra)
{
    int i = 0;

    e->backend = backend;
    if (e->redis.pid <= 0)
        pu_redis_start(&e->redis);
    if (!e->proxy.upstream[0])
        snprintf(e->proxy.upstream, sizeof(e->proxy.upstream), "redis://127.0.0.1:%d",
                 e->redis.port);
    e->proxy.extra[i++] = "--io";
    e->proxy.extra[i++] = backend;
    for (int j = 0; extra && extra[j] && i < PU_MAX_ARGS - 1; j++)
        e->proxy.extra[i++] = extra[j];
    e->proxy.extra[i] = NULL;
    pu_proxy_start(&e->proxy);
}

void ou_debug_env_start(struct pu_env *e, const char *backend, const char *level,
                        const char *const *extra)
{
    const char *env_level = getenv("LP_IT_LOG_LEVEL");
    const char *args[PU_MAX_ARGS];
    int i = 0;

    memset(e, 0, sizeof(*e));
    e->redis.extra[0] = "--enable-debug-command";
    e->redis.extra[1] = "yes";
    pu_redis_start(&e->redis);
    args[i++] = "--log-level";
    args[i++] = env_level && env_level[0] ? env_level : level;
    for (int j = 0; extra && extra[j] && i < PU_MAX_ARGS - 1; j++)
        args[i++] = extra[j];
    args[i] = NULL;
    ou_env_start(e, backend, args);
}

struct debug_env {
    void (*scenario)(struct pu_env *e);
    const char *level;
    const char *const *extra;
};

static void debug_env_run(const char *backend, void *arg)
{
    const struct debug_env *a = arg;
    struct pu_env e;

    ou_debug_env_start(&e, backend, a->level, a->extra);
    a->scenario(&e);
    pu_env_stop(&e);
}

void ou_each_backend_debug(void (*scenario)(struct pu_env *e), const char *level,
                           const char *const *extra)
{
    struct debug_env a = {scenario, level, extra};

    pu_for_each_backend(debug_env_run, &a);
}

void ou_second_proxy(const struct pu_env *e, struct pu_proxy *p2)
{
    memset(p2, 0, sizeof(*p2));
    snprintf(p2->upstream, sizeof(p2->upstream), "%s", e->proxy.upstream);
    memcpy(p2->extra, e->proxy.extra, sizeof(p2->extra));
    pu_proxy_start(p2);
}

redisContext *ou_client_auth(struct pu_env *e, const char *user, const char *pass)
{
    redisContext *c = pu_client(e);

    if (user)
        PU_OK(c, "AUTH %s %s", user, pass);
    else
        PU_OK(c, "AUTH %s", pass);
    return c;
}

int ou_http_raw(int port, const char *req, size_t len, char *resp, size_t n, int ms)
{
    int fd = pu_raw_try_connect(port), code = 0;

    resp[0] = '\0';
    if (fd < 0)
        return -1;
    if (len > 0 && send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len) {
        close(fd);
        return 0;
    }
    pu_raw_read_until(fd, resp, n, ms, NULL);
    close(fd);
    if (sscanf(resp, "HTTP/1.1 %d ", &code) != 1)
        code = 0;
    return code;
}

int ou_http_get(int port, const char *path, char *body, size_t n)
{
    char req[512], *resp = malloc(OU_HTTP_MAX), *start;
    int code;

    if (!resp)
        TEST_FAIL("out of memory");
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n",
             path);
    code = ou_http_raw(port, req, strlen(req), resp, OU_HTTP_MAX, 5000);
    start = strstr(resp, "\r\n\r\n");
    snprintf(body, n, "%s", start ? start + 4 : "");
    free(resp);
    return code;
}

int ou_wait_exit(struct pu_proxy *p, int ms)
{
    long long deadline = pu_now_ms() + ms;

    while (pu_proxy_alive(p)) {
        if (pu_now_ms() > deadline)
            return -1;
        pu_sleep_ms(10);
    }
    return p->wstatus;
}

bool ou_file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    bool found = false;

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

double ou_metric(const char *text, const char *series)
{
    size_t n = strlen(series);
    const char *p = text;

    while (p && *p) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}
