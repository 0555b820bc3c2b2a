// Microbenchmarks of the lookups on every lock request: the holds table
// (by lock name and owner), and the command table.
#include "engine/hold.h"
#include "proxy/client.h"
#include "proxy/cmd.h"
#include "proxy/metrics.h"
#include "proxy/server.h"
#include "sched/loop.h"

#include <benchmark/benchmark.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace
{

struct table_fixture {
    struct px_server *srv;
    struct px_client *cl;
    std::vector<std::pair<std::string, std::string>> keys;
};

// The server's hold_end hook (struct lk_front): the hold time goes to the
// metrics, as px_server_create sets it.
void bench_hold_end(struct lk_engine *eng, uint64_t held_ms)
{
    px_metrics_hold_end(static_cast<struct px_server *>(eng->owner), held_ms);
}

// A server with only what the holds table needs (loop for timers), and n
// holds of one connection, each with its own name and owner.
table_fixture make_holds(size_t n)
{
    table_fixture f;
    struct sched_loop_opts lo = {SCHED_IO_EPOLL, 64, 4};
    char name[64], owner[PX_OWNER_MAX];

    f.srv = static_cast<struct px_server *>(calloc(1, sizeof(struct px_server)));
    f.srv->engine = px_engine_alloc(f.srv);
    f.srv->engine->front.hold_end = bench_hold_end;
    f.cl = static_cast<struct px_client *>(calloc(1, sizeof(struct px_client)));
    snprintf(f.srv->uuid, sizeof(f.srv->uuid), "0c0f13f8-9eb3-4ed2-a1c1-086b2025cf2f");
    f.srv->opts.watchdog_ms = 30000;
    sched_loop_create(&f.srv->loop, &lo);
    f.srv->engine->loop = f.srv->loop;
    f.srv->engine->uuid = f.srv->uuid;
    f.srv->engine->cfg.watchdog_ms = f.srv->opts.watchdog_ms;
    px_metrics_create(f.srv); /* holds time themselves */
    px_hold_init(f.srv->engine);
    px_locks_client_init(&f.cl->caller, f.srv->engine, 1);
    for (size_t i = 0; i < n; i++) {
        size_t nl = (size_t)snprintf(name, sizeof(name), "orders:%zu", i);
        size_t ol = px_owner_format(f.srv->engine, i + 1, nullptr, nullptr, 0, owner);

        struct px_hold *h = px_hold_use(f.srv->engine, &px_hold_plain, name, nl, owner, ol, true);

        px_hold_granted(h, &px_hold_plain, &f.cl->caller, 1, 30000, true, 0);
        px_hold_put(h);
        f.keys.emplace_back(std::string(name, nl), std::string(owner, ol));
    }
    return f;
}

void free_holds(table_fixture &f)
{
    px_hold_deinit(f.srv->engine);
    px_metrics_destroy(f.srv);
    sched_loop_destroy(f.srv->loop);
    free(f.cl);
    px_engine_free(f.srv->engine);
    free(f.srv);
}

// UNLOCK and LOCK.INFO look their hold up by (name, owner).
void BM_HoldFind(benchmark::State &state)
{
    table_fixture f = make_holds(static_cast<size_t>(state.range(0)));
    size_t i = 0;

    for (auto _ : state) {
        const auto &k = f.keys[i++ % f.keys.size()];

        benchmark::DoNotOptimize(px_hold_find(f.srv->engine, k.first.data(), k.first.size(),
                                              k.second.data(), k.second.size()));
    }
    state.SetItemsProcessed(state.iterations());
    free_holds(f);
}
BENCHMARK(BM_HoldFind)->Arg(1000)->Arg(100000);

// A LOCK creates its hold and records the grant, a full UNLOCK drops it.
void BM_HoldAcquireDrop(benchmark::State &state)
{
    table_fixture f = make_holds(static_cast<size_t>(state.range(0)));
    char owner[PX_OWNER_MAX];
    size_t ol = px_owner_format(f.srv->engine, 999999999, nullptr, nullptr, 0, owner);

    for (auto _ : state) {
        struct px_hold *h = px_hold_use(f.srv->engine, &px_hold_plain, "hot", 3, owner, ol, true);

        px_hold_granted(h, &px_hold_plain, &f.cl->caller, 1, 30000, true, 0);
        px_hold_released(h);
        px_hold_put(h);
    }
    state.SetItemsProcessed(state.iterations());
    free_holds(f);
}
BENCHMARK(BM_HoldAcquireDrop)->Arg(100000);

// Every request resolves its command name once, case-insensitively.
void BM_CmdLookup(benchmark::State &state)
{
    static const char *const names[] = {"LOCK", "unlock", "TryLock", "PING", "LOCK.INFO"};
    size_t i = 0;

    px_cmd_init();
    for (auto _ : state) {
        const char *n = names[i++ % 5];

        benchmark::DoNotOptimize(px_cmd_lookup(n, strlen(n)));
    }
    px_cmd_deinit();
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CmdLookup);

} // namespace
