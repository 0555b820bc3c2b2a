/* The deploy files say what the README promises: the systemd unit waits
 * for readiness (Type=notify) and its Unix socket is usable despite
 * UMask=0077 (unixsocketperm in the config); Kubernetes starts the
 * application only once the sidecar is ready (startup probe on /healthz);
 * the container image is safe by default (protected mode on its 0.0.0.0
 * listener, the upstream from the environment, not the container itself)
 * and actually runs with its own command line and config; the config's
 * and README's lists of what a reload applies are what the code does. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ops_util.h"
#include "proxy/opts.h"
#include "proxy_util.h"

#include <net/if.h>

/* deploy/<name> of this source tree (found from this file's path). */
static void deploy_path(char *out, size_t n, const char *name)
{
    const char *me = __FILE__, *cut = strstr(me, "/tests/integration/");

    if (!cut)
        TEST_SKIP("source tree not found from %s", me);
    snprintf(out, n, "%.*s/deploy/%s", (int)(cut - me), me, name);
}

/* The whole file (malloc'd, NUL-terminated). */
static char *slurp(const char *name)
{
    char path[PU_PATH_MAX];
    FILE *f;
    char *buf;
    long len;

    deploy_path(path, sizeof(path), name);
    f = fopen(path, "r");
    if (!f)
        TEST_FAIL("cannot read %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)len + 1);
    ASSERT_TRUE(buf != NULL);
    ASSERT_EQ(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return buf;
}

/* True when text has a line that is exactly line (after leading blanks). */
static bool has_line(const char *text, const char *line)
{
    const char *p = text;
    size_t n = strlen(line);

    while (p && *p) {
        p += strspn(p, " \t");
        if (strncmp(p, line, n) == 0 && (p[n] == '\n' || p[n] == '\0'))
            return true;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return false;
}

TEST(deploy_systemd_unit_notify_and_socket_mode)
{
    char *unit = slurp("lockproxy.service"), *conf = slurp("lockproxy.conf");

    ASSERT_TRUE(has_line(unit, "Type=notify"));
    ASSERT_TRUE(has_line(unit, "NotifyAccess=main"));
    ASSERT_TRUE(has_line(unit, "WatchdogSec=30s"));
    ASSERT_TRUE(!has_line(unit, "Type=exec") && !has_line(unit, "Type=simple"));
    /* UMask=0077 would leave the socket srwx------: the config sets its mode. */
    ASSERT_TRUE(has_line(unit, "UMask=0077"));
    ASSERT_TRUE(has_line(conf, "unixsocketperm 660"));
    ASSERT_TRUE(has_line(conf, "protected-mode yes"));
    free(unit);
    free(conf);
}

/* The path: of the first httpGet after "<probe>:" in the manifest. */
static void probe_path(const char *yaml, const char *probe, char *out, size_t n)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), "%s:", probe);
    p = strstr(yaml, key);
    if (!p || !(p = strstr(p, "path:")))
        TEST_FAIL("no %s with an httpGet path", probe);
    p += 5 + strspn(p + 5, " ");
    snprintf(out, n, "%.*s", (int)strcspn(p, " \n"), p);
}

TEST(deploy_kubernetes_probes)
{
    char *yaml = slurp("kubernetes.yaml"), path[64];

    probe_path(yaml, "startupProbe", path, sizeof(path));
    ASSERT_TRUE(strcmp(path, "/healthz") == 0); /* the app starts once Redis answers */
    probe_path(yaml, "readinessProbe", path, sizeof(path));
    ASSERT_TRUE(strcmp(path, "/healthz") == 0);
    probe_path(yaml, "livenessProbe", path, sizeof(path));
    ASSERT_TRUE(strcmp(path, "/livez") == 0); /* a Redis outage must not restart it */
    ASSERT_TRUE(strstr(yaml, "unix:///run/lockproxy/lockproxy.sock") != NULL);
    ASSERT_TRUE(strstr(yaml, "--unixsocketperm") != NULL);
    free(yaml);
}

/* The JSON array of the Dockerfile's CMD, as strings (static storage). */
static int docker_cmd(const char *df, char args[][PU_PATH_MAX], int max)
{
    const char *p = strstr(df, "\nCMD [");
    int n = 0;

    ASSERT_TRUE(p != NULL);
    p += 6;
    while (n < max && (p = strchr(p, '"')) && p < strchr(p, ']') + 1) {
        const char *end = strchr(p + 1, '"');

        snprintf(args[n++], PU_PATH_MAX, "%.*s", (int)(end - p - 1), p + 1);
        p = end + 1;
        if (*(p + strspn(p, ", ")) == ']')
            break;
    }
    return n;
}

/* This host's first non-loopback IPv4 address, or "". */
static void outside_ip(char *out, size_t n)
{
    struct ifaddrs *ifs, *i;

    out[0] = '\0';
    if (getifaddrs(&ifs) < 0)
        return;
    for (i = ifs; i && !out[0]; i = i->ifa_next) {
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && !(i->ifa_flags & IFF_LOOPBACK) &&
            (i->ifa_flags & IFF_UP))
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, out, (socklen_t)n);
    }
    freeifaddrs(ifs);
}

TEST(deploy_docker_image_defaults_are_safe)
{
    char *df = slurp("Dockerfile"), args[16][PU_PATH_MAX], conf[PU_PATH_MAX], up[64], ip[64];
    char body[256], line[2048];
    const char *argv[20];
    struct pu_redis r = {0};
    int n, i, k = 0, port = pu_free_port(), mport = pu_free_port(), fd;
    redisContext *c = NULL;
    pid_t pid;

    /* Upstream from the environment, and not this container. */
    ASSERT_TRUE(strstr(df, "ENV LOCKPROXY_UPSTREAM=redis://") != NULL);
    ASSERT_TRUE(!strstr(df, "LOCKPROXY_UPSTREAM=redis://127.") &&
                !strstr(df, "LOCKPROXY_UPSTREAM=redis://localhost"));
    ASSERT_TRUE(strstr(df, "protected-mode no") == NULL);
    ASSERT_TRUE(strstr(df, "GET /healthz") != NULL);
    n = docker_cmd(df, args, 16);
    ASSERT_TRUE(n >= 4);

    /* Run the image's command line: its config, its listeners (on free
     * ports), the upstream from the environment as the image sets it. */
    pu_redis_start(&r);
    deploy_path(conf, sizeof(conf), "lockproxy.conf");
    argv[k++] = pu_proxy_bin();
    for (i = 0; i < n; i++) {
        if (strcmp(args[i], "/etc/lockproxy/lockproxy.conf") == 0)
            snprintf(args[i], PU_PATH_MAX, "%s", conf);
        else if (strcmp(args[i], "0.0.0.0:7379") == 0)
            snprintf(args[i], PU_PATH_MAX, "0.0.0.0:%d", port);
        else if (strcmp(args[i], "0.0.0.0:9121") == 0)
            snprintf(args[i], PU_PATH_MAX, "127.0.0.1:%d", mport);
        argv[k++] = args[i];
    }
    argv[k] = NULL;
    snprintf(up, sizeof(up), "redis://127.0.0.1:%d/0", r.port);
    setenv("LOCKPROXY_UPSTREAM", up, 1);
    ou_path(line, sizeof(line), "docker-cmd.log");
    pid = pu_spawn(argv, line);
    unsetenv("LOCKPROXY_UPSTREAM");
    PU_EVENTUALLY((c = pu_try_connect(port)) != NULL, 10000);
    PU_STR(c, "PONG", "PING");
    PU_OK(c, "LOCK %s", "docker");
    PU_EVENTUALLY(ou_http_get(mport, "/healthz", body, sizeof(body)) == 200, 5000);
    /* From another host: refused until a password is set. */
    outside_ip(ip, sizeof(ip));
    if (ip[0]) {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        inet_pton(AF_INET, ip, &sin.sin_addr);
        ASSERT_EQ(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        pu_raw_send(fd, "FORCEUNLOCK docker\r\n", 20);
        pu_raw_read_line(fd, line, sizeof(line), 3000);
        if (strncmp(line, "-DENIED", 7) != 0)
            TEST_FAIL("the image's default serves other hosts without a password: %s", line);
        close(fd);
    }
    redisFree(c);
    pu_kill(pid);
    pu_redis_kill(&r);
    free(df);
}

TEST(deploy_conf_unix_socket_under_umask_0077)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    char conf[PU_PATH_MAX];
    struct stat st;
    redisContext *c;
    mode_t old;

    pu_redis_start(&r);
    deploy_path(conf, sizeof(conf), "lockproxy.conf");
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:%d", r.port);
    ou_path(p.unix_path, sizeof(p.unix_path), "deploy.sock");
    p.extra[0] = "--config";
    p.extra[1] = conf;
    p.extra[2] = "--metrics";
    p.extra[3] = "off";
    old = umask(077); /* as the unit's UMask=0077 */
    pu_proxy_start(&p);
    umask(old);
    ASSERT_EQ(stat(p.unix_path, &st), 0);
    ASSERT_EQ(st.st_mode & 0777, 0660);
    c = pu_connect_unix(p.unix_path);
    PU_OK(c, "LOCK %s", "via-socket");
    redisFree(c);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

/* ---- the reload lists: deploy/lockproxy.conf and README say what the code does ---- */

/* True when word is a setting (a flag name, also a config key). */
static bool is_key(const char *word)
{
    struct px_opts o;
    char why[256];
    const char *v = "x";
    int rc;

    px_opts_default(&o);
    rc = px_opts_set(&o, word, 1, &v, why, sizeof(why));
    px_opts_deinit(&o);
    return rc != -ENOENT;
}

#define KEYS_MAX 64

struct keyset {
    char k[KEYS_MAX][48];
    int n;
};

static void keyset_add(struct keyset *s, const char *w, size_t len)
{
    int i;

    if (len == 0 || len >= sizeof(s->k[0]) || s->n >= KEYS_MAX)
        return;
    for (i = 0; i < s->n; i++) {
        if (strlen(s->k[i]) == len && strncmp(s->k[i], w, len) == 0)
            return;
    }
    memcpy(s->k[s->n], w, len);
    s->k[s->n++][len] = '\0';
}

/* key is in s, itself or through a "prefix-*" entry. */
static bool keyset_has(const struct keyset *s, const char *key)
{
    int i;

    for (i = 0; i < s->n; i++) {
        size_t len = strlen(s->k[i]);

        if (s->k[i][len - 1] == '*' ? strncmp(key, s->k[i], len - 1) == 0
                                    : strcmp(key, s->k[i]) == 0)
            return true;
    }
    return false;
}

/* Adds the words of text[0..n) made of [a-z*-] that are keys or "x-*". */
static void keyset_scan(struct keyset *s, const char *text, size_t n)
{
    size_t i = 0;

    while (i < n) {
        size_t len = strspn(text + i, "abcdefghijklmnopqrstuvwxyz-*");
        char w[48];

        if (len > 0 && len < sizeof(w)) {
            memcpy(w, text + i, len);
            w[len] = '\0';
            if ((len > 2 && w[len - 1] == '*') || is_key(w))
                keyset_add(s, w, len);
        }
        i += len ? len : 1;
    }
}

/* Checks that listed holds exactly the keys of all a reload applies
 * (reload true), or exactly the others (false). */
static void expect_reload_split(const struct keyset *all, const struct keyset *listed, bool reload,
                                const char *where)
{
    int i;

    ASSERT_TRUE(all->n > 30);
    for (i = 0; i < all->n; i++) {
        const char *k = all->k[i];

        if (strcmp(k, "config") == 0) /* command line only */
            continue;
        if (keyset_has(listed, k) != (px_opts_key_reloadable(k) == reload))
            TEST_FAIL("%s: key '%s' is %s there, but a reload %s it", where, k,
                      keyset_has(listed, k) ? "listed" : "not listed",
                      px_opts_key_reloadable(k) ? "applies" : "does not apply");
    }
}

/* Every key of deploy/lockproxy.conf (each has a line "key value" or
 * "# key value"). */
static void conf_keys(const char *conf, struct keyset *all)
{
    const char *p = conf;

    memset(all, 0, sizeof(*all));
    while (p && *p) {
        size_t len;

        p += strspn(p, "# \t");
        len = strspn(p, "abcdefghijklmnopqrstuvwxyz-");
        if (len > 0 && (p[len] == ' ' || p[len] == '\n')) {
            char w[48];

            if (len < sizeof(w)) {
                memcpy(w, p, len);
                w[len] = '\0';
                if (is_key(w))
                    keyset_add(all, w, len);
            }
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
}

TEST(deploy_conf_and_readme_reload_lists_match_the_code)
{
    char *conf = slurp("lockproxy.conf"), *readme = slurp("../README.md");
    const char *from, *to, *row, *mid, *end;
    struct keyset all, listed;

    conf_keys(conf, &all);

    /* deploy/lockproxy.conf: "... and applies K, K, ... at once". */
    from = strstr(conf, "and applies ");
    to = from ? strstr(from, " at once") : NULL;
    ASSERT_TRUE(from && to);
    memset(&listed, 0, sizeof(listed));
    keyset_scan(&listed, from, (size_t)(to - from));
    expect_reload_split(&all, &listed, true, "deploy/lockproxy.conf's reload comment");

    /* README, Configuration: the row under "| Applied at once on reload |
     * Needs a restart ... |": its first cell the reloadable keys, its
     * second the others. */
    row = strstr(readme, "| Applied at once on reload |");
    ASSERT_TRUE(row && (row = strstr(row, "\n|---")) && (row = strchr(row + 1, '\n')));
    row++;
    end = strchr(row, '\n');
    mid = strstr(row, " | ");
    ASSERT_TRUE(end && mid && mid < end);
    memset(&listed, 0, sizeof(listed));
    keyset_scan(&listed, row, (size_t)(mid - row));
    expect_reload_split(&all, &listed, true, "README's reload table (applied at once)");
    memset(&listed, 0, sizeof(listed));
    keyset_scan(&listed, mid, (size_t)(end - mid));
    expect_reload_split(&all, &listed, false, "README's reload table (needs a restart)");
    free(readme);
    free(conf);
}

TEST_MAIN(TEST_CASE(deploy_systemd_unit_notify_and_socket_mode),
          TEST_CASE(deploy_kubernetes_probes), TEST_CASE(deploy_docker_image_defaults_are_safe),
          TEST_CASE(deploy_conf_unix_socket_under_umask_0077),
          TEST_CASE(deploy_conf_and_readme_reload_lists_match_the_code))
