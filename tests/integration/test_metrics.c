/* The --metrics HTTP endpoint: /metrics is valid Prometheus text (every
 * sample "name{labels} value", HELP and TYPE for every family, counters
 * ending in _total, cumulative histogram buckets) and its figures move
 * with traffic; INFO shows the same figures; /healthz follows Redis (200,
 * 503 while it is down, 200 again); bad HTTP never hurts the proxy. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"
#include "harness.h"
#include "ops_util.h"
#include "proxy_util.h"

#define MAX_FAMILIES 128

static char metrics_addr[64];
static int metrics_port;
static const char *metrics_extra[] = {"--metrics", metrics_addr, NULL};

static void pick_metrics_port(void)
{
    metrics_port = pu_free_port();
    snprintf(metrics_addr, sizeof(metrics_addr), "127.0.0.1:%d", metrics_port);
}

struct family {
    char name[128]; /* family name */
    char type[16];  /* TYPE, "" until seen */
    bool help;      /* HELP seen */
};

struct exposition {
    struct family fam[MAX_FAMILIES]; /* families seen */
    int n;                           /* entries in fam */
};

static struct family *family_get(struct exposition *x, const char *name, size_t len)
{
    for (int i = 0; i < x->n; i++) {
        if (strlen(x->fam[i].name) == len && memcmp(x->fam[i].name, name, len) == 0)
            return &x->fam[i];
    }
    if (x->n == MAX_FAMILIES || len >= sizeof(x->fam[0].name))
        TEST_FAIL("too many metric families");
    memset(&x->fam[x->n], 0, sizeof(x->fam[0]));
    memcpy(x->fam[x->n].name, name, len);
    return &x->fam[x->n++];
}

static size_t name_len(const char *s)
{
    size_t i = 0;

    if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return 0;
    while (isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')
        i++;
    return i;
}

/* Checks `{k="v",...}` at s; returns its length. */
static size_t labels_len(const char *s, const char *line)
{
    size_t i = 1;

    if (s[0] != '{')
        return 0;
    for (;;) {
        size_t k = name_len(s + i);

        if (k == 0 || s[i + k] != '=' || s[i + k + 1] != '"')
            TEST_FAIL("bad label in: %s", line);
        i += k + 2;
        while (s[i] && s[i] != '"')
            i += s[i] == '\\' ? 2 : 1;
        if (s[i] != '"')
            TEST_FAIL("unterminated label value in: %s", line);
        i++;
        if (s[i] == '}')
            return i + 1;
        if (s[i] != ',')
            TEST_FAIL("bad label list in: %s", line);
        i++;
    }
}

/* The family a sample belongs to (histogram suffixes removed). */
static struct family *sample_family(struct exposition *x, const char *name, size_t len)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};

    for (size_t i = 0; i < 3; i++) {
        size_t sl = strlen(sfx[i]);

        if (len > sl && memcmp(name + len - sl, sfx[i], sl) == 0) {
            for (int j = 0; j < x->n; j++) {
                if (strlen(x->fam[j].name) == len - sl &&
                    memcmp(x->fam[j].name, name, len - sl) == 0 &&
                    strcmp(x->fam[j].type, "histogram") == 0)
                    return &x->fam[j];
            }
        }
    }
    return family_get(x, name, len);
}

static void check_sample(struct exposition *x, const char *line)
{
    size_t n = name_len(line), l;
    struct family *f;
    char *end;

    if (n == 0)
        TEST_FAIL("bad metric name: %s", line);
    l = labels_len(line + n, line);
    if (line[n + l] != ' ')
        TEST_FAIL("no value separator: %s", line);
    strtod(line + n + l + 1, &end);
    if (end == line + n + l + 1 || *end != '\0')
        TEST_FAIL("bad value: %s", line);
    f = sample_family(x, line, n);
    if (!f->help || !f->type[0])
        TEST_FAIL("sample before its HELP/TYPE: %s", line);
    if (strcmp(f->type, "counter") == 0 && strcmp(f->name + strlen(f->name) - 6, "_total") != 0)
        TEST_FAIL("counter without _total: %s", f->name);
}

static void check_comment(struct exposition *x, const char *line)
{
    char name[128], type[32];

    if (sscanf(line, "# HELP %127s ", name) == 1 && strlen(line) > 8 + strlen(name)) {
        family_get(x, name, strlen(name))->help = true;
    } else if (sscanf(line, "# TYPE %127s %31s", name, type) == 2) {
        if (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "histogram"))
            TEST_FAIL("unknown TYPE: %s", line);
        snprintf(family_get(x, name, strlen(name))->type, sizeof(type), "%s", type);
    } else {
        TEST_FAIL("bad comment line: %s", line);
    }
}

/* Validates the whole exposition text line by line. */
static void check_exposition(char *text)
{
    static struct exposition x;
    char *line, *save = NULL;

    x.n = 0;
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            check_comment(&x, line);
        else
            check_sample(&x, line);
    }
    if (x.n < 20)
        TEST_FAIL("only %d metric families", x.n);
}

/* Histogram buckets are cumulative and +Inf equals _count. */
static void check_histogram(const char *text, const char *name)
{
    char series[160];
    double prev = 0, v, inf, count;
    const char *p = text;

    while ((p = strstr(p, name)) != NULL) {
        p += strlen(name);
        if (strncmp(p, "_bucket{le=\"", 12) != 0 || strncmp(p + 12, "+Inf", 4) == 0)
            continue;
        v = strtod(strchr(p, '}') + 2, NULL);
        if (v < prev)
            TEST_FAIL("%s buckets not cumulative", name);
        prev = v;
    }
    snprintf(series, sizeof(series), "%s_bucket{le=\"+Inf\"}", name);
    inf = ou_metric(text, series);
    snprintf(series, sizeof(series), "%s_count", name);
    count = ou_metric(text, series);
    if (inf < prev || inf != count)
        TEST_FAIL("%s: +Inf %g, count %g, last bucket %g", name, inf, count, prev);
}

static char *scrape(void)
{
    char *body = malloc(OU_HTTP_MAX);
    int code;

    ASSERT_NOTNULL(body);
    code = ou_http_get(metrics_port, "/metrics", body, OU_HTTP_MAX);
    if (code != 200)
        TEST_FAIL("GET /metrics: %d", code);
    return body;
}

/* A sample's value; a labelled series that has not been used yet is
 * absent (as with any labelled Prometheus counter) and counts as 0. */
static double scrape_value(const char *series)
{
    char *body = scrape();
    double v = ou_metric(body, series);

    free(body);
    if (v < 0 && !strchr(series, '{'))
        TEST_FAIL("no sample %s", series);
    return v < 0 ? 0 : v;
}

#define LOCK_OK  "lockproxy_commands_total{cmd=\"LOCK\",result=\"ok\"}"
#define TRY_NIL  "lockproxy_commands_total{cmd=\"TRYLOCK\",result=\"nil\"}"
#define WAIT_CNT "lockproxy_lock_wait_seconds_count"
#define HOLD_CNT "lockproxy_lock_hold_seconds_count"
#define UP_CNT   "lockproxy_upstream_latency_seconds_count"

static void scenario_format_and_traffic(struct pu_env *e)
{
    redisContext *c1 = pu_client(e), *c2 = pu_client(e);
    double lock0 = scrape_value(LOCK_OK), wait0 = scrape_value(WAIT_CNT);
    double hold0 = scrape_value(HOLD_CNT), up0 = scrape_value(UP_CNT);
    char *body, info[64];

    PU_OK(c1, "LOCK %s", "m1");
    PU_OK(c1, "LOCK %s", "m2");
    PU_NIL(c2, "TRYLOCK %s", "m1");
    body = scrape();
    check_exposition(body);
    free(body);
    body = scrape();
    ASSERT_EQ(ou_metric(body, LOCK_OK), lock0 + 2);
    ASSERT_TRUE(ou_metric(body, TRY_NIL) >= 1);
    ASSERT_EQ(ou_metric(body, "lockproxy_locks_held"), 2);
    ASSERT_EQ(ou_metric(body, "lockproxy_client_connections"), 2);
    ASSERT_EQ(ou_metric(body, WAIT_CNT), wait0 + 2);
    ASSERT_TRUE(ou_metric(body, UP_CNT) >= up0 + 3);
    ASSERT_EQ(ou_metric(body, "lockproxy_upstream_up"), 1);
    check_histogram(body, "lockproxy_upstream_latency_seconds");
    check_histogram(body, "lockproxy_lock_wait_seconds");
    free(body);
    PU_INT(c1, 1, "UNLOCK %s", "m1");
    PU_INT(c1, 1, "UNLOCK %s", "m2");
    ASSERT_EQ(scrape_value("lockproxy_locks_held"), 0);
    ASSERT_EQ(scrape_value(HOLD_CNT), hold0 + 2);
    /* INFO shows the same figures. */
    ASSERT_TRUE(pu_info_str(c1, "cmdstat_lock", info, sizeof(info)));
    ASSERT_TRUE(strstr(info, "ok=2") != NULL);
    ASSERT_TRUE(pu_info_str(c1, "lock_hold", info, sizeof(info)));
    ASSERT_TRUE(strncmp(info, "count=2", 7) == 0);
    /* Lock scripts that met on a connection went out in batch calls; the
     * metrics count them as INFO does. */
    for (int i = 0; i < 50; i++)
        redisAppendCommand(c1, "TRYLOCK mb%d", i);
    for (int i = 0; i < 50; i++)
        PU_RECV(c1, PU_K_STATUS, 0, "OK");
    for (int i = 0; i < 50; i++)
        redisAppendCommand(c1, "UNLOCK mb%d", i);
    for (int i = 0; i < 50; i++)
        PU_RECV(c1, PU_K_INT, 1, NULL);
    body = scrape();
    ASSERT_TRUE(ou_metric(body, "lockproxy_upstream_script_batches_total") >= 1);
    ASSERT_EQ(ou_metric(body, "lockproxy_upstream_script_batches_total"),
              pu_info_int(c1, "upstream_script_batches"));
    ASSERT_EQ(ou_metric(body, "lockproxy_upstream_batched_scripts_total"),
              pu_info_int(c1, "upstream_batched_scripts"));
    free(body);
    redisFree(c2);
    redisFree(c1);
}

TEST(metrics_format_and_traffic)
{
    pick_metrics_port();
    pu_each_backend(scenario_format_and_traffic, metrics_extra);
}

static int healthz(void)
{
    char body[256];

    return ou_http_get(metrics_port, "/healthz", body, sizeof(body));
}

TEST(metrics_healthz_follows_redis)
{
    struct pu_env e;
    char body[256];

    pick_metrics_port();
    pu_env_start(&e, "epoll", metrics_extra);
    PU_EVENTUALLY(healthz() == 200, 5000); /* the pool connects after start-up */
    ASSERT_EQ(ou_http_get(metrics_port, "/healthz", body, sizeof(body)), 200);
    ASSERT_STREQ(body, "ok\n");
    pu_redis_kill(&e.redis);
    PU_EVENTUALLY(healthz() == 503, 5000);
    ASSERT_EQ(ou_http_get(metrics_port, "/livez", body, sizeof(body)), 200);
    ASSERT_EQ(scrape_value("lockproxy_upstream_up"), 0);
    pu_redis_restart(&e.redis);
    PU_EVENTUALLY(healthz() == 200, 8000);
    pu_env_stop(&e);
}

/* Sends raw bytes; returns the status code answered. */
static int raw(const char *req)
{
    static char resp[8192];

    return ou_http_raw(metrics_port, req, strlen(req), resp, sizeof(resp), 7000);
}

static void scenario_bad_http(struct pu_env *e)
{
    static char big[6000];
    char resp[8192];
    int fds[80];

    ASSERT_EQ(raw("garbage\r\n\r\n"), 400);
    ASSERT_EQ(raw("\r\n\r\n"), 400);
    ASSERT_EQ(raw("GET /metrics SPDY/3\r\n\r\n"), 400);
    ASSERT_EQ(raw("GET metrics HTTP/1.1\r\n\r\n"), 400);
    ASSERT_EQ(raw("POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"), 405);
    ASSERT_EQ(raw("GET /nope HTTP/1.1\r\n\r\n"), 404);
    ASSERT_EQ(raw("GET /metrics?x=1 HTTP/1.0\n\n"), 200);
    ASSERT_EQ(ou_http_raw(metrics_port, "GET /x\0 HTTP/1.1\r\n\r\n", 21, resp, sizeof(resp), 3000),
              400);
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "GET /", 5);
    ASSERT_EQ(raw(big), 431);
    ASSERT_EQ(
        ou_http_raw(metrics_port, "HEAD /healthz HTTP/1.1\r\n\r\n", 26, resp, sizeof(resp), 3000),
        200);
    ASSERT_TRUE(strstr(resp, "Content-Length: 3\r\n") && !strstr(resp, "ok\n"));
    /* A peer that sends nothing gets 408 after the request timeout. */
    ASSERT_EQ(ou_http_raw(metrics_port, "", 0, resp, sizeof(resp), 8000), 408);
    /* More idle connections than allowed: the extra ones are closed, the
     * endpoint keeps answering once they go away. */
    for (int i = 0; i < 80; i++)
        fds[i] = pu_raw_connect(metrics_port);
    ASSERT_TRUE(pu_raw_wait_closed(fds[79], 3000));
    for (int i = 0; i < 80; i++)
        close(fds[i]);
    PU_EVENTUALLY(healthz() == 200, 3000);
    pu_proxy_assert_alive(&e->proxy);
}

TEST(metrics_bad_http)
{
    pick_metrics_port();
    pu_each_backend(scenario_bad_http, metrics_extra);
}

/* ---- names users scrape ------------------------------------------------------ */

/* The names every INFO field and every /metrics family carry, with the
 * section / TYPE, in output order: "info <section> <field>" and
 * "metric <family> <type>" lines (families sorted: Prometheus gives
 * their order no meaning). Users' dashboards and scripts read them
 * by name, so they are frozen in stats_names.txt (next to this file; it
 * was written from the output before INFO and /metrics were generated
 * from the stats tables). LP_STATS_NAMES_OUT=<path> writes what this
 * build shows, to review a deliberate change. */
static int cmp_line(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void names_of(redisContext *c, struct buf *out)
{
    static char fams[MAX_FAMILIES][176];
    redisReply *r = redisCommand(c, "INFO everything");
    char section[64] = "", *body, *line, *save = NULL;
    int nfam = 0;

    ASSERT_TRUE(r && r->type == REDIS_REPLY_STRING);
    for (line = strtok_r(r->str, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');

        if (line[0] == '#')
            snprintf(section, sizeof(section), "%s", line + 2);
        else if (colon && strcmp(section, "Commandstats") != 0) /* one line per command */
            buf_appendf(out, "info %s %.*s\n", section, (int)(colon - line), line);
    }
    freeReplyObject(r);
    body = scrape();
    for (line = strtok_r(body, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], type[32];

        if (sscanf(line, "# TYPE %127s %31s", name, type) == 2 && nfam < MAX_FAMILIES)
            snprintf(fams[nfam++], sizeof(fams[0]), "metric %s %s", name, type);
    }
    free(body);
    qsort(fams, (size_t)nfam, sizeof(fams[0]), cmp_line);
    for (int i = 0; i < nfam; i++)
        buf_appendf(out, "%s\n", fams[i]);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *s = calloc(1, 65536);
    size_t n;

    ASSERT_NOTNULL(f);
    ASSERT_NOTNULL(s);
    n = fread(s, 1, 65535, f);
    ASSERT_TRUE(n < 65535);
    fclose(f);
    return s;
}

/* Prints the first line where want and got differ. */
static void diff_first(const char *want, const char *got)
{
    const char *w = want, *g = got;
    int line = 1;

    while (*want && *want == *got) {
        if (*want == '\n') {
            line++;
            w = want + 1;
            g = got + 1;
        }
        want++;
        got++;
    }
    if (!*want && !*got)
        return;
    TEST_FAIL("stats_names.txt line %d: want \"%.*s\", got \"%.*s\"", line, (int)strcspn(w, "\n"),
              w, (int)strcspn(g, "\n"), g);
}

TEST(metrics_names_stable)
{
    static const char *const extra[] = {"--metrics", metrics_addr, "--sync-replicas", "0", NULL};
    char golden[1024], *want;
    const char *dump = getenv("LP_STATS_NAMES_OUT");
    struct buf got;
    struct pu_env e;
    redisContext *c;

    pick_metrics_port();
    pu_env_start(&e, "epoll", extra);
    c = pu_client(&e);
    PU_OK(c, "LOCK %s", "names1"); /* commandstats and latencystats lines */
    PU_INT(c, 1, "UNLOCK %s", "names1");
    buf_init(&got);
    names_of(c, &got);
    ASSERT_EQ(buf_append(&got, "", 1), 0); /* NUL-terminated */
    if (dump) {
        FILE *f = fopen(dump, "w");

        ASSERT_NOTNULL(f);
        fwrite(got.data, 1, got.len - 1, f);
        fclose(f);
    }
    snprintf(golden, sizeof(golden), "%.*s/stats_names.txt",
             (int)(strrchr(__FILE__, '/') - __FILE__), __FILE__);
    want = slurp(golden);
    diff_first(want, got.data);
    free(want);
    buf_deinit(&got);
    redisFree(c);
    pu_env_stop(&e);
}

TEST_MAIN(TEST_CASE(metrics_format_and_traffic), TEST_CASE(metrics_healthz_follows_redis),
          TEST_CASE(metrics_bad_http), TEST_CASE(metrics_names_stable))
