/* Intrusive chained hash map; see hmap.h. */
#include "common/hmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The last n < 8 bytes as one word, in a fixed number of loads (wyhash's
 * way): two overlapping 4-byte reads cover 4..7 bytes, the first, middle
 * and last byte cover 1..3. Every byte is read, so for a given n two tails
 * that differ give different words (n itself is in the seed). A loop over
 * the bytes cost 4-5 instructions each, and most keys (command names,
 * lock names, the owner's last bytes) end in such a tail. */
static uint64_t hash_tail(const unsigned char *s, size_t n)
{
    uint32_t a, b;

    if (n >= 4) {
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        return ((uint64_t)a << 32) | b;
    }
    if (n > 0)
        return ((uint64_t)s[0] << 16) | ((uint64_t)s[n / 2] << 8) | s[n - 1];
    return 0;
}

/* 8 bytes per step (multiply and rotate, in the style of wyhash/xxhash),
 * a final avalanche; byte-at-a-time FNV cost most of a hold lookup. */
uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull), k;

    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&k, s, 8);
        h ^= k * 0x87c37b91114253d5ull;
        h = ((h << 31) | (h >> 33)) * 0x4cf5ad432745937full;
    }
    h ^= hash_tail(s, n) * 0x87c37b91114253d5ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

int hmap_init(struct hmap *m, size_t nbuckets_hint)
{
    size_t n = 16;

    while (n < nbuckets_hint)
        n *= 2;
    m->buckets = calloc(n, sizeof(*m->buckets));
    if (!m->buckets)
        return -ENOMEM;
    m->nbuckets = n;
    m->count = 0;
    return 0;
}

void hmap_deinit(struct hmap *m)
{
    free(m->buckets);
    m->buckets = NULL;
    m->nbuckets = 0;
    m->count = 0;
}

/* Rehashes every node into n buckets. */
static int hmap_resize(struct hmap *m, size_t n)
{
    size_t i;
    struct hmap_node **nb = calloc(n, sizeof(*nb));
    struct hmap_node *node, *next;

    if (!nb)
        return -ENOMEM;
    for (i = 0; i < m->nbuckets; i++) {
        for (node = m->buckets[i]; node; node = next) {
            next = node->next;
            node->next = nb[node->hash & (n - 1)];
            nb[node->hash & (n - 1)] = node;
        }
    }
    free(m->buckets);
    m->buckets = nb;
    m->nbuckets = n;
    return 0;
}

int hmap_insert(struct hmap *m, struct hmap_node *node, uint64_t hash)
{
    struct hmap_node **head = &m->buckets[hash & (m->nbuckets - 1)];

    node->hash = hash;
    node->next = *head;
    *head = node;
    m->count++;
    if (m->count > m->nbuckets)
        return hmap_resize(m, m->nbuckets * 2);
    return 0;
}

bool hmap_shrink(struct hmap *m)
{
    size_t n = m->nbuckets;

    while (n > 16 && m->count < n / 4)
        n /= 2;
    return n < m->nbuckets && hmap_resize(m, n) == 0;
}

void hmap_remove(struct hmap *m, struct hmap_node *node)
{
    struct hmap_node **pp = &m->buckets[node->hash & (m->nbuckets - 1)];

    while (*pp && *pp != node)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = node->next;
        node->next = NULL;
        m->count--;
    }
}

struct hmap_node *hmap_first(const struct hmap *m, uint64_t hash)
{
    struct hmap_node *node = m->buckets[hash & (m->nbuckets - 1)];

    while (node && node->hash != hash)
        node = node->next;
    return node;
}

struct hmap_node *hmap_next(const struct hmap_node *node)
{
    uint64_t hash = node->hash;

    for (node = node->next; node; node = node->next) {
        if (node->hash == hash)
            return (struct hmap_node *)node;
    }
    return NULL;
}
