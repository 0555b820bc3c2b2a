/* Torture suite: clock, PRNG and the names of commands, replies and
 * faults (shared by the driver, the clients and the checker). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "tt.h"

long long tt_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void tt_sleep_us(long long us)
{
    struct timespec ts;

    if (us <= 0)
        return;
    ts.tv_sec = (time_t)(us / 1000000);
    ts.tv_nsec = (long)(us % 1000000) * 1000;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The state starts from seed passed through the mixer once: seeds that
 * differ by a multiple of the increment (a client's (seed << 16) ^ id for
 * ids 0, 1, 2...) would otherwise give one stream shifted by a step per
 * client, its clients issuing the same commands in lockstep. */
void tt_rng_seed(struct tt_rng *r, unsigned long long seed)
{
    r->s = seed;
    r->s = tt_rng_next(r) + 0x632be59bd9b4e019ull;
}

unsigned long long tt_rng_next(struct tt_rng *r)
{
    unsigned long long z = (r->s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int tt_rng_range(struct tt_rng *r, int lo, int hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int)(tt_rng_next(r) % (unsigned long long)(hi - lo + 1));
}

static const char *const cmd_names[TT_CMD_COUNT] = {
    "LOCK",    "LOCK-FENCED", "RLOCK",      "WLOCK",      "FAIRLOCK",    "SEM.ACQUIRE",
    "UNLOCK",  "RUNLOCK",     "WUNLOCK",    "FAIRUNLOCK", "SEM.RELEASE", "RES.GET",
    "RES.SET", "RES.FREAD",   "RES.FWRITE", "MULTILOCK",  "MULTIUNLOCK", "RELOCK",
};

static const char *const res_names[TT_R_COUNT] = {
    "none",     "OK",       "token", "nil",   "int",       "str",     "LOCKLOST",
    "NOTOWNER", "UPSTREAM", "STALE", "error", "conn-lost", "timeout",
};

static const char *const fault_names[TT_F_COUNT] = {
    "redis-kill",       "redis-sleep", "kill-cmd-conn",     "kill-pubsub-conn",
    "proxy-stop",       "proxy-kill",  "client-stop",       "client-stop-lease",
    "client-reset",     "slow-reader", "partition",         "slot-migrate",
    "cluster-failover", "master-kill", "sentinel-failover", "sentinel-kill",
};

const char *const tt_workload_names[TT_WORKLOAD_NAMES] = {
    "tt:lock:0", "tt:lock:1", "tt:rw:0", "tt:fair:0", "tt:fair:1", TT_SEM_NAME,
};

const char *tt_cmd_name(enum tt_cmd c)
{
    return (unsigned)c < TT_CMD_COUNT ? cmd_names[c] : "?";
}

const char *tt_res_name(enum tt_res r)
{
    return (unsigned)r < TT_R_COUNT ? res_names[r] : "?";
}

const char *tt_fault_name(enum tt_fault_kind k)
{
    return (unsigned)k < TT_F_COUNT ? fault_names[k] : "?";
}

int tt_fault_parse(const char *name)
{
    for (int k = 0; k < TT_F_COUNT; k++) {
        if (strcmp(name, fault_names[k]) == 0)
            return k;
    }
    return -1;
}

bool tt_cmd_is_acquire(enum tt_cmd c)
{
    return c <= TT_SEM_ACQ || c == TT_MULTILOCK;
}

bool tt_cmd_is_release(enum tt_cmd c)
{
    return (c >= TT_UNLOCK && c <= TT_SEM_REL) || c == TT_MULTIUNLOCK;
}
