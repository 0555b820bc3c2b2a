/* Read-write lock commands over Redisson's RReadWriteLock layout (spec
 * section 5): RLOCK, RUNLOCK, WLOCK, WUNLOCK. One hash at the raw name with
 * a "mode" field (read|write), read owner fields "<uuid>:<id>", write owner
 * fields "<uuid>:<id>:write", one {name}:<owner>:rwlock_timeout:<n> key per
 * read hold, and wake-ups on redisson_rwlock:{name} ("0" after a read
 * release, "1", wake everyone, after a write release). */
#ifndef LP_PROXY_LOCKS_RWLOCK_H
#define LP_PROXY_LOCKS_RWLOCK_H

#include "engine/scripts.h"
#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* RLOCK, RUNLOCK, WLOCK, WUNLOCK. */
extern const struct px_cmd_set px_rwlock_cmd_set;

/* The read-write lock's scripts. */
extern const struct px_script_set px_rwlock_script_set;

#ifdef __cplusplus
}
#endif

#endif
