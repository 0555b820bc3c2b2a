/* INFO text: Redis-style "# Section" blocks of "key:value" lines with the
 * proxy's own figures (clients, locks, waiters, upstream state). */
#ifndef LP_PROXY_INFO_H
#define LP_PROXY_INFO_H

#include "common/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct px_server;

/* Appends the INFO text for section (NULL, "all", "default" or
 * "everything" for all; else one section, case-insensitive). */
void px_info_write(struct px_server *srv, const char *section, struct buf *out);

#ifdef __cplusplus
}
#endif

#endif
