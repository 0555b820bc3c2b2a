/* What a new user hit trying lockproxy (issue 12, "Found when tried as a
 * new user"): LOCK.INFO on one's own write lock, raw script errors on a
 * name of another type, error texts that named commands that do not
 * exist or said too little, start-up flag errors, and the README's
 * quickstart transcript, run as written. */
#include <sys/socket.h>
#include <sys/wait.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "proxy_util.h"

#define RUN_MS 5000

static long long info_field(redisContext *c, const char *name, const char *field)
{
    redisReply *r = pu_cmd(c, "LOCK.INFO %s", name);
    long long v = -100;
    size_t i;

    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    for (i = 0; i + 1 < r->elements; i += 2) {
        if (strcmp(r->element[i]->str, field) == 0)
            v = r->element[i + 1]->integer;
    }
    freeReplyObject(r);
    return v;
}

static void scenario_lockinfo_kinds(struct pu_env *e)
{
    redisContext *c = pu_client(e);

    PU_OK(c, "WLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "locked"), 1);
    ASSERT_EQ(info_field(c, "w", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "w", "watchdog"), 1);
    PU_OK(c, "WLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "hold_count"), 2);
    PU_INT(c, 0, "WUNLOCK %s", "w");
    PU_INT(c, 1, "WUNLOCK %s", "w");
    ASSERT_EQ(info_field(c, "w", "hold_count"), 0);
    ASSERT_EQ(info_field(c, "w", "watchdog"), 0);
    PU_OK(c, "RLOCK %s", "r");
    ASSERT_EQ(info_field(c, "r", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "r", "watchdog"), 1);
    PU_OK(c, "WLOCK %s LEASE 60000", "wl");
    ASSERT_EQ(info_field(c, "wl", "hold_count"), 1);
    ASSERT_EQ(info_field(c, "wl", "watchdog"), 0);
    redisFree(c);
}

TEST(lockinfo_counts_write_holds)
{
    pu_each_backend(scenario_lockinfo_kinds, NULL);
}

/* A clean WRONGTYPE naming what the command works on, never a script's
 * sha and line. */
static void expect_clean_wrongtype(redisContext *c, const char *object, const char *fmt,
                                   const char *name)
{
    redisReply *r = pu_cmd(c, fmt, name);
    char want[128];

    snprintf(want, sizeof(want), "WRONGTYPE the name '%s' holds another kind of value, not a %s",
             name, object);
    if (r->type != REDIS_REPLY_ERROR || strcmp(r->str, want) != 0 || strstr(r->str, "script"))
        TEST_FAIL("%s on %s: got %s, want -%s", fmt, name,
                  r->type == REDIS_REPLY_ERROR ? r->str : "?", want);
    freeReplyObject(r);
}

static void scenario_script_errors(struct pu_env *e)
{
    redisContext *c = pu_client(e), *rc = pu_redis_client(e);
    redisReply *r;

    freeReplyObject(pu_cmd(rc, "SET %s %s", "str", "hello"));
    freeReplyObject(pu_cmd(rc, "RPUSH %s %s", "list", "x"));
    PU_INT(c, 1, "SEM.TRYSETPERMITS %s 3", "sem");
    expect_clean_wrongtype(c, "lock", "LOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "TRYLOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "UNLOCK %s", "str");
    expect_clean_wrongtype(c, "lock", "LOCK.INFO %s", "sem");
    expect_clean_wrongtype(c, "lock", "LOCK.INFO %s", "list");
    expect_clean_wrongtype(c, "read-write lock", "RLOCK %s", "str");
    expect_clean_wrongtype(c, "read-write lock", "WLOCK %s", "sem");
    expect_clean_wrongtype(c, "fair lock", "FAIRLOCK %s", "str");
    /* Errors the scripts word themselves stay as they are. */
    PU_ERR(c, "WRONGTYPE the name holds a string, not a lock", "FORCEUNLOCK %s", "str");
    PU_ERR(c, "WRONGTYPE the name holds a list", "SEM.ACQUIRE %s", "list");
    /* Nothing was changed, and the connection still works. */
    r = pu_cmd(rc, "GET %s", "str");
    PU_CHECK(r, PU_K_STR, 0, "hello");
    freeReplyObject(r);
    PU_OK(c, "LOCK %s", "fine");
    redisFree(rc);
    redisFree(c);
}

TEST(script_errors_mapped)
{
    pu_each_backend(scenario_script_errors, NULL);
}

static void scenario_error_texts(struct pu_env *e)
{
    redisContext *c = pu_client(e);

    PU_ERR(c, "NOTINIT semaphore 'nos' has no permits set (use SEM.TRYSETPERMITS first)",
           "SEM.ACQUIRE %s", "nos");
    PU_ERR(c, "NOTINIT semaphore 'nos' has no permits set (use PSEM.TRYSETPERMITS first)",
           "PSEM.ACQUIRE %s", "nos");
    PU_ERR(c, "ERR TRYLOCK takes no WAIT: it never waits (use LOCK name WAIT ms)",
           "TRYLOCK %s WAIT 10", "g");
    PU_ERR(c, "ERR SEM.TRYACQUIRE takes no WAIT: it never waits (use SEM.ACQUIRE name WAIT ms)",
           "SEM.TRYACQUIRE %s WAIT 10", "g");
    PU_ERR(c, "ERR UNLOCK takes no LEASE option", "UNLOCK %s LEASE 10", "g");
    PU_ERR(c, "ERR RLOCK takes no FENCED option", "RLOCK %s FENCED", "g");
    PU_ERR(c, "ERR syntax error near 'SOON'", "LOCK %s SOON 5", "g");
    redisFree(c);
}

TEST(error_texts_name_real_commands)
{
    pu_each_backend(scenario_error_texts, NULL);
}

static void expect_flag_error(const char *flag, const char *value, const char *want)
{
    const char *argv[] = {pu_proxy_bin(), flag, value, NULL};
    char out[4096];
    int st = pu_run_capture(argv, out, sizeof(out), RUN_MS);

    if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(out, want))
        TEST_FAIL("%s %s: want exit 2 and '%s', got status 0x%x: %s", flag, value ? value : "",
                  want, st, out);
}

TEST(flag_errors_say_what_is_wrong)
{
    expect_flag_error("--bogus", NULL, "unknown option '--bogus'");
    expect_flag_error("--bogus", "1", "unknown option '--bogus'");
    expect_flag_error("--listen", NULL, "option '--listen' needs a value");
    expect_flag_error("stray", NULL, "unexpected argument 'stray'");
    expect_flag_error("--upstream", "rediss://", "no HOST:PORT (expected rediss://");
    expect_flag_error("--upstream", "rediss://redis.internal",
                      "no :PORT after the host (expected rediss://[user:password@]HOST:PORT[/db])");
    expect_flag_error("--upstream", "rediss://h:99999",
                      "the port must be a number from 1 to 65535");
    expect_flag_error("--upstream", "redis-sentinel://h:1", "no /NAME");
    expect_flag_error("--upstream", "http://h:1", "unknown scheme");
    expect_flag_error("--listen", "redis://h:1", "redis:// is not for --listen");
}

/* ---- the README's quickstart, run as written -------------------------------- */

#define REDIS_CLI "/usr/bin/redis-cli"

/* Terminal 1: an interactive redis-cli (formatted output: --no-raw). */
struct term {
    pid_t pid;
    int in;  /* its stdin */
    int out; /* its stdout and stderr */
};

static void term_start(struct term *t, int port)
{
    int a[2], b[2];
    char p[16];

    snprintf(p, sizeof(p), "%d", port);
    ASSERT_EQ(pipe(a), 0);
    ASSERT_EQ(pipe(b), 0);
    t->pid = fork();
    ASSERT_TRUE(t->pid >= 0);
    if (t->pid == 0) {
        dup2(a[0], 0);
        dup2(b[1], 1);
        dup2(b[1], 2);
        execl(REDIS_CLI, REDIS_CLI, "--no-raw", "-p", p, (char *)NULL);
        _exit(127);
    }
    close(a[0]);
    close(b[1]);
    t->in = a[1];
    t->out = b[0];
}

/* What arrives until 300 ms pass without output (at most 5 s for the
 * first byte). */
static void term_read(struct term *t, char *out, size_t n)
{
    struct pollfd pfd = {.fd = t->out, .events = POLLIN};
    size_t used = 0;
    ssize_t got;

    out[0] = '\0';
    while (used + 1 < n && poll(&pfd, 1, used ? 300 : 5000) > 0) {
        got = read(t->out, out + used, n - used - 1);
        if (got <= 0)
            break;
        used += (size_t)got;
        out[used] = '\0';
    }
}

static void term_stop(struct term *t)
{
    close(t->in);
    close(t->out);
    kill(t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
}

/* Compares output with the expected lines of the transcript (comments
 * after two blanks and '#' dropped; a line "..." ends the comparison). */
static void expect_output(const char *cmd, const char *out, char **want, int nwant)
{
    const char *p = out;
    int i;

    for (i = 0; i < nwant; i++) {
        size_t len = strcspn(p, "\n");

        if (strcmp(want[i] + strspn(want[i], " "), "...") == 0)
            return;
        if (!*p || strlen(want[i]) != len || strncmp(p, want[i], len) != 0)
            TEST_FAIL("README quickstart, '%s': line %d is '%.*s', the README says '%s'", cmd,
                      i + 1, (int)len, p, want[i]);
        p += len + (p[len] == '\n');
    }
    if (*p)
        TEST_FAIL("README quickstart, '%s': more output than the README shows: %s", cmd, p);
}

/* A transcript line without its comment ("  # ..."), trailing blanks cut. */
static char *strip_comment(char *line)
{
    char *c = strstr(line, "  #");
    size_t n;

    if (c)
        *c = '\0';
    n = strlen(line);
    while (n > 0 && line[n - 1] == ' ')
        line[--n] = '\0';
    return line;
}

/* Runs one command of the transcript: "127.0.0.1:7379> X" in terminal 1,
 * "$ redis-cli -p 7379 X" as a one-shot redis-cli. */
static void run_step(struct term *t, int port, char *cmd, char **want, int nwant)
{
    static char out[16384];
    const char *argv[16];
    char p[16], *save = NULL, *tok;
    int argc = 0;

    if (strncmp(cmd, "127.0.0.1:7379> ", 16) == 0) {
        ASSERT_TRUE(t->pid > 0);
        ASSERT_TRUE(write(t->in, cmd + 16, strlen(cmd + 16)) > 0 && write(t->in, "\n", 1) == 1);
        term_read(t, out, sizeof(out));
        return expect_output(cmd, out, want, nwant);
    }
    if (strcmp(cmd, "$ redis-cli -p 7379") == 0)
        return term_start(t, port);
    if (strncmp(cmd, "$ redis-cli -p 7379 ", 20) != 0)
        return; /* scripts/run.sh: the test started the proxy */
    snprintf(p, sizeof(p), "%d", port);
    argv[argc++] = REDIS_CLI;
    argv[argc++] = "--no-raw";
    argv[argc++] = "-p";
    argv[argc++] = p;
    for (tok = strtok_r(cmd + 20, " ", &save); tok && argc < 15; tok = strtok_r(NULL, " ", &save))
        argv[argc++] = tok;
    argv[argc] = NULL;
    pu_run_capture(argv, out, sizeof(out), 5000);
    expect_output(cmd + 2, out, want, nwant);
}

/* The README next to this file. */
static char *readme(void)
{
    const char *me = __FILE__, *cut = strstr(me, "/tests/integration/");
    char path[PU_PATH_MAX];
    char *buf;
    FILE *f;
    long len;

    if (!cut)
        TEST_SKIP("source tree not found");
    snprintf(path, sizeof(path), "%.*s/README.md", (int)(cut - me), me);
    f = fopen(path, "r");
    ASSERT_TRUE(f != NULL);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)len + 1);
    ASSERT_EQ(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return buf;
}

static void scenario_quickstart(struct pu_env *e)
{
    char *text = readme(), *block, *end, *line, *save = NULL, *cmd = NULL, *want[64];
    struct term t = {0};
    int nwant = 0;

    if (access(REDIS_CLI, X_OK) != 0)
        TEST_SKIP("redis-cli missing");
    block = strstr(text, "## Quickstart with redis-cli");
    ASSERT_TRUE(block && (block = strstr(block, "```console\n")));
    block += 11;
    end = strstr(block, "\n```");
    ASSERT_TRUE(end != NULL);
    end[1] = '\0';
    for (line = strtok_r(block, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "$ ", 2) == 0 || strncmp(line, "127.0.0.1:7379> ", 16) == 0) {
            if (cmd)
                run_step(&t, e->proxy.port, cmd, want, nwant);
            cmd = strip_comment(line);
            nwant = 0;
        } else if (nwant < 64) {
            want[nwant++] = strip_comment(line);
        }
    }
    if (cmd)
        run_step(&t, e->proxy.port, cmd, want, nwant);
    if (t.pid > 0)
        term_stop(&t);
    free(text);
}

TEST(readme_quickstart_transcript_is_true)
{
    pu_each_backend(scenario_quickstart, NULL);
}

/* ---- a client that half-closes after its requests (README's nc example) ---- */

/* `printf 'PING\r\nECHO "hello world"\r\n' | nc -q1 127.0.0.1 7379`: nc
 * sends, then shuts its side down (EOF) and reads. Redis answers what it
 * read before the EOF; so must the proxy, every time (the EOF often
 * arrives in the same read as the requests). */
static void scenario_half_close(struct pu_env *e)
{
    static const char req[] = "PING\r\nECHO \"hello world\"\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n";
    static const char want[] = "+PONG\r\n$11\r\nhello world\r\n$2\r\nhi\r\n";
    char buf[256];
    int i;

    for (i = 0; i < 30; i++) {
        int fd = pu_raw_connect(e->proxy.port);
        size_t n;

        ASSERT_TRUE(pu_raw_send(fd, req, sizeof(req) - 1));
        ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
        n = pu_raw_read_until(fd, buf, sizeof(buf), 5000, NULL);
        if (n != sizeof(want) - 1 || memcmp(buf, want, n) != 0)
            TEST_FAIL("attempt %d: after the client's EOF got %zu bytes '%.*s', want '%s'", i, n,
                      (int)n, buf, want);
        close(fd);
    }
}

TEST(half_closed_client_gets_its_replies)
{
    pu_each_backend(scenario_half_close, NULL);
}

TEST_MAIN(TEST_CASE(readme_quickstart_transcript_is_true), TEST_CASE(lockinfo_counts_write_holds),
          TEST_CASE(script_errors_mapped), TEST_CASE(error_texts_name_real_commands),
          TEST_CASE(flag_errors_say_what_is_wrong), TEST_CASE(half_closed_client_gets_its_replies))
