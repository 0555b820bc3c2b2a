/* Intrusive chained hash map.
 *
 * The map stores nodes embedded in caller objects and knows nothing of keys:
 * callers hash their key (hash_bytes), walk the candidates with the same
 * hash (hmap_first/hmap_next) and compare keys themselves. Buckets double
 * when the load factor passes 1; the map shrinks only when asked
 * (hmap_shrink). The map owns only its bucket array; nodes are borrowed. */
#ifndef LP_COMMON_HMAP_H
#define LP_COMMON_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct hmap_node {
    struct hmap_node *next; /* borrowed: next node in the bucket chain */
    uint64_t hash;          /* full hash of the owner's key */
};

struct hmap {
    struct hmap_node **buckets; /* owned: nbuckets chain heads */
    size_t nbuckets;            /* power of two */
    size_t count;               /* nodes in the map */
};

/* 64-bit hash of a byte string (FNV-1a with a final avalanche). */
uint64_t hash_bytes(const void *p, size_t n);

/* Returns 0 or -ENOMEM. */
int hmap_init(struct hmap *m, size_t nbuckets_hint);
void hmap_deinit(struct hmap *m);

/* Inserts node with the given hash (duplicates are the caller's concern).
 * Returns 0, or -ENOMEM only if growing failed (the node is still inserted). */
int hmap_insert(struct hmap *m, struct hmap_node *node, uint64_t hash);

/* Halves the buckets (repeatedly, down to 16) while under a quarter are
 * used, rehashing every node: for a map that was large once, called where
 * nothing is iterating it. False when it kept its size (not sparse, or no
 * memory for the smaller array). */
bool hmap_shrink(struct hmap *m);

/* Removes a node that is in the map. */
void hmap_remove(struct hmap *m, struct hmap_node *node);

/* First node with this hash, or NULL. */
struct hmap_node *hmap_first(const struct hmap *m, uint64_t hash);

/* Next node after node with the same hash, or NULL. */
struct hmap_node *hmap_next(const struct hmap_node *node);

#ifdef __cplusplus
}
#endif

#endif
