/* sd_notify by hand; see notify.h. The protocol is one datagram of
 * "KEY=value" lines; no credentials or file descriptors are passed, so a
 * plain sendto() is all it takes. */
#include "proxy/notify.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int px_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sun;
    size_t n = path ? strlen(path) : 0;
    socklen_t len;
    ssize_t sent;
    int fd, err;

    if (n == 0)
        return 0;
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sun.sun_path))
        return -EINVAL;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, path, n);
    if (path[0] == '@')
        sun.sun_path[0] = '\0'; /* abstract: the length bounds the name */
    len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sun, len);
    err = errno;
    close(fd);
    return sent < 0 ? -err : 1;
}
