/* --unixsocketperm: the Unix socket lockproxy creates gets the mode asked
 * for whatever the umask (systemd's UMask=0077 would leave it srwx------,
 * and the application could not connect). */
#include <sys/stat.h>
#include <sys/types.h>

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "proxy_util.h"

TEST(unixsocketperm_sets_mode)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    redisContext *c;
    struct stat st;
    mode_t old;

    pu_redis_start(&r);
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:%d", r.port);
    snprintf(p.unix_path, sizeof(p.unix_path), "%.100s/perm.sock", pu_tmpdir());
    p.extra[0] = "--unixsocketperm";
    p.extra[1] = "660";
    old = umask(077); /* as systemd's UMask=0077 */
    pu_proxy_start(&p);
    umask(old);
    ASSERT_EQ(stat(p.unix_path, &st), 0);
    ASSERT_TRUE(S_ISSOCK(st.st_mode));
    ASSERT_EQ(st.st_mode & 07777, 0660);
    c = pu_connect_unix(p.unix_path);
    PU_STR(c, "PONG", "PING");
    redisFree(c);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

/* The sidecar's transport (README, Deploy): clients on a Unix socket, Redis
 * over TCP. A lock taken over it is Redis's, a second client waits on it
 * and gets it at the release, and a client that goes away (an application
 * crash) gives its lock back. */
static void unix_sidecar(const char *backend, void *arg)
{
    struct pu_redis r = {0};
    struct pu_proxy p = {0};
    redisContext *a, *b, *rc;

    (void)arg;
    pu_redis_start(&r);
    snprintf(p.upstream, sizeof(p.upstream), "redis://127.0.0.1:%d", r.port);
    snprintf(p.unix_path, sizeof(p.unix_path), "%.100s/sidecar-%s.sock", pu_tmpdir(), backend);
    snprintf(p.log_path, sizeof(p.log_path), "%.100s/sidecar-%s.log", pu_tmpdir(), backend);
    p.extra[0] = "--io";
    p.extra[1] = backend;
    pu_proxy_start(&p);
    a = pu_connect_unix(p.unix_path);
    b = pu_connect_unix(p.unix_path);
    rc = pu_connect(r.port);
    PU_OK(a, "LOCK %s", "sc");
    ASSERT_EQ(pu_hlen(rc, "sc"), 1);
    PU_NIL(b, "LOCK %s WAIT %d", "sc", 100);
    PU_INT(a, 1, "UNLOCK %s", "sc");
    ASSERT_TRUE(!pu_exists(rc, "sc"));
    PU_OK(b, "LOCK %s WAIT %d", "sc", 0);
    redisFree(b); /* held at the hang-up: released */
    PU_EVENTUALLY(!pu_exists(rc, "sc"), 5000);
    PU_OK(a, "LOCK %s WAIT %d", "sc", 0);
    PU_INT(a, 1, "UNLOCK %s", "sc");
    redisFree(rc);
    redisFree(a);
    pu_proxy_assert_alive(&p);
    pu_proxy_stop(&p);
    pu_redis_kill(&r);
}

TEST(unix_sidecar_lock_unlock)
{
    pu_for_each_backend(unix_sidecar, NULL);
}

TEST_MAIN(TEST_CASE(unixsocketperm_sets_mode), TEST_CASE(unix_sidecar_lock_unlock))
