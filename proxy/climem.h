/* Memory held for clients: counted, bounded, and given back.
 *
 * Every client's footprint is its open transaction's queue (MULTI), the
 * input it has not taken yet, the request being parsed, its unsent
 * replies and its held-back pushes. The server keeps the sum
 * (srv->client_mem; INFO clients client_memory, metrics). A request that
 * would be kept past its own answer (queued by MULTI) while the sum plus
 * its size passes --max-client-memory is refused with -OOM naming the flag
 * (the transaction then aborts at EXEC), as Redis refuses writes past
 * maxmemory. Refusing, not closing the biggest client as Redis's
 * maxmemory-clients does: closing a connection releases its locks in the
 * middle of the work they protect, and the biggest client is not
 * necessarily the one asking for more. Input, parse and output memory are
 * counted in the sum but bounded per connection (--max-request-bytes,
 * --client-output-soft/hard-limit, --max-pipeline): requests already
 * running are never refused half-way.
 *
 * Giving back: jemalloc returns freed pages to the system only as it
 * allocates (decay runs on allocation ticks), so an idle proxy kept the
 * memory of a burst for ever. Where jemalloc can, its background thread
 * purges dirty pages as they decay (1 s), off the loop: a purge on the
 * loop stalled every client (0.57 s for 12 MB after a mass release, on a
 * loaded machine). Otherwise a one-second timer purges the arenas' dirty
 * pages once more than PX_CLIMEM_DIRTY_MAX of them, and more than a
 * quarter of the memory in use, are unused. The timer runs either way:
 * it shrinks the hold table once mostly empty, and keeps a timer due
 * every second, for the loop's latency figures. */
#ifndef LP_PROXY_CLIMEM_H
#define LP_PROXY_CLIMEM_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct px_client;
struct px_req;
struct px_server;

/* Unused dirty pages kept before the purge timer gives them back. */
#define PX_CLIMEM_DIRTY_MAX (8u << 20)

/* Starts (turning jemalloc's background purging on where it can) and
 * stops the purge timer. */
void px_climem_start(struct px_server *srv);
void px_climem_stop(struct px_server *srv);

/* Bytes req holds (its struct, arguments and kept reply). */
size_t px_climem_req_bytes(const struct px_req *req);

/* Recounts cl's footprint into the server's sum; a closing client counts
 * nothing. O(1). */
void px_climem_sync(struct px_client *cl);

/* May bytes more be held for clients? False (and counted as a refusal,
 * logged at most once a second) when the sum would pass the bound. */
bool px_climem_admit(struct px_server *srv, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
