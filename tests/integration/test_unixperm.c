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

TEST_MAIN(TEST_CASE(unixsocketperm_sets_mode))
