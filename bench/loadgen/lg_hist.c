/* Log-linear latency histogram; the layout is described in lg_hist.h.
 * Bucket index: values below SUB (128) map to themselves; a larger value
 * with highest set bit e is shifted right by s = e - 7 so that its top 8
 * bits m are in [128, 256), and lands in bucket (s + 1) * 128 + m - 128.
 * The buckets of one shift s cover [128 << s, 256 << s) in steps of 1 << s,
 * which keeps the indices contiguous. */
#include "bench/loadgen/lg_hist.h"

#include <string.h>

#define SUB       (1u << LG_HIST_SUB_BITS)
#define MAX_VALUE ((1ull << LG_HIST_MAX_BITS) - 1)

static unsigned bucket_of(uint64_t v)
{
    unsigned e, s;

    if (v < SUB)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    s = e - LG_HIST_SUB_BITS;
    return ((s + 1) << LG_HIST_SUB_BITS) + (unsigned)((v >> s) - SUB);
}

/* Midpoint of bucket idx. */
static uint64_t bucket_mid(unsigned idx)
{
    unsigned s;
    uint64_t m;

    if (idx < SUB)
        return idx;
    s = (idx >> LG_HIST_SUB_BITS) - 1;
    m = (idx & (SUB - 1)) + SUB;
    return (m << s) + ((1ull << s) >> 1);
}

void lg_hist_reset(struct lg_hist *h)
{
    memset(h, 0, sizeof(*h));
    h->min = UINT64_MAX;
}

void lg_hist_record(struct lg_hist *h, uint64_t v)
{
    if (v > MAX_VALUE)
        v = MAX_VALUE;
    h->bucket[bucket_of(v)]++;
    h->count++;
    h->sum += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
}

uint64_t lg_hist_percentile(const struct lg_hist *h, double pct)
{
    uint64_t rank, seen = 0;

    if (h->count == 0)
        return 0;
    rank = (uint64_t)(pct / 100.0 * (double)h->count + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > h->count)
        rank = h->count;
    for (unsigned i = 0; i < LG_HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= rank) {
            uint64_t mid = bucket_mid(i);

            if (mid > h->max)
                return h->max;
            return mid < h->min ? h->min : mid;
        }
    }
    return h->max;
}

double lg_hist_mean(const struct lg_hist *h)
{
    return h->count ? (double)h->sum / (double)h->count : 0.0;
}
