/* Count-down latches over Redisson's RCountDownLatch layout (spec section
 * 8): LATCH.TRYSETCOUNT, LATCH.COUNTDOWN, LATCH.COUNT and LATCH.AWAIT. The
 * count is a STRING at the raw name; wake-ups travel on
 * redisson_countdownlatch__channel__{name} (braces always added, unlike
 * every other channel). LATCH.AWAIT waits on the wait engine (wait.h). */
#ifndef LP_PROXY_LOCKS_LATCH_H
#define LP_PROXY_LOCKS_LATCH_H

#include "engine/scripts.h"
#include "proxy/cmd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* LATCH.* commands; their scripts. */
extern const struct px_cmd_set px_latch_cmd_set;
extern const struct px_script_set px_latch_script_set;

#ifdef __cplusplus
}
#endif

#endif
