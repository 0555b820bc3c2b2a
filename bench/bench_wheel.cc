/* Microbenchmarks for the timing wheel and the async semaphore
 * (sched/wheel.h, sched/waitq.h), with the event loop's wheel shape
 * (4 ms ticks, 4096 slots) and a fake clock.
 *
 * BM_WheelAddDel:  schedule + cancel one timer while 1e6 others are live
 *                  (a few thousand probe timers: cache-warm).
 * BM_WheelRearmCold: re-arm (cancel + schedule) a random one of the 1e6
 *                  live timers: cache misses on the timer and its neighbours.
 * BM_WheelLockMix: steady state of 1e6 live lease-renewal timers, each armed
 *                  10 s ahead; 90% are cancelled (unlock) before expiry,
 *                  the clock advances 1 ms every kMixPerMs acquires and the
 *                  wheel runs, firing the other 10%.
 * BM_SemWaitRelease: one wait + one release, with a permit available
 *                  (arg 0) or behind a queue of arg waiters. */
#include "sched/waitq.h"
#include "sched/wheel.h"

#include <benchmark/benchmark.h>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

namespace
{

constexpr uint64_t kTickMs = 4;
constexpr size_t kSlots = 4096;
constexpr size_t kLive = 1000000;

uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

uint64_t g_fired; /* timers fired by any benchmark's wheel */

void count_fire(struct sched_timer *)
{
    g_fired++;
}

/* A wheel plus its timers, built once per process and reused by every
 * repetition of a benchmark (filling 1e6 timers is not what we measure). */
struct wheel_fixture {
    struct sched_wheel wheel;             /* under test */
    std::vector<struct sched_timer> pool; /* owned: timers, some pending */
    uint64_t now = 1000000;               /* fake clock, ms */

    explicit wheel_fixture(size_t n) : pool(n)
    {
        if (sched_wheel_init(&wheel, now, kTickMs, kSlots) != 0)
            std::abort();
        for (auto &t : pool)
            sched_timer_init(&t, count_fire);
    }
    ~wheel_fixture()
    {
        sched_wheel_deinit(&wheel);
    }
    wheel_fixture(const wheel_fixture &) = delete;
    wheel_fixture &operator=(const wheel_fixture &) = delete;
};

void BM_WheelAddDel(benchmark::State &state)
{
    constexpr size_t kProbes = 4096;
    static std::unique_ptr<wheel_fixture> fx;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    std::vector<uint64_t> delay(kProbes);
    size_t i = 0;

    if (!fx) {
        fx = std::make_unique<wheel_fixture>(kLive + kProbes);
        for (size_t k = 0; k < kLive; k++)
            sched_wheel_add(&fx->wheel, &fx->pool[k], fx->now + 1 + xorshift(&rng) % 30000);
    }
    for (auto &d : delay)
        d = 1 + xorshift(&rng) % 30000;
    for (auto _ : state) {
        struct sched_timer *t = &fx->pool[kLive + (i & (kProbes - 1))];

        sched_wheel_add(&fx->wheel, t, fx->now + delay[i & (kProbes - 1)]);
        sched_wheel_del(&fx->wheel, t);
        i++;
    }
    state.counters["live"] = static_cast<double>(fx->wheel.count);
    state.counters["ns_per_op"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * 2,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_WheelAddDel);

void BM_WheelRearmCold(benchmark::State &state)
{
    constexpr size_t kPicks = size_t{1} << 16;
    static std::unique_ptr<wheel_fixture> fx;
    uint64_t rng = 0x853c49e6748fea9bull;
    std::vector<uint32_t> pick(kPicks);
    std::vector<uint64_t> delay(kPicks);
    size_t i = 0;

    if (!fx) {
        fx = std::make_unique<wheel_fixture>(kLive);
        for (auto &t : fx->pool)
            sched_wheel_add(&fx->wheel, &t, fx->now + 1 + xorshift(&rng) % 30000);
    }
    for (size_t k = 0; k < kPicks; k++) {
        pick[k] = static_cast<uint32_t>(xorshift(&rng) % kLive);
        delay[k] = 1 + xorshift(&rng) % 30000;
    }
    for (auto _ : state) {
        sched_wheel_add(&fx->wheel, &fx->pool[pick[i & (kPicks - 1)]],
                        fx->now + delay[i & (kPicks - 1)]);
        i++;
    }
    state.counters["live"] = static_cast<double>(fx->wheel.count);
    state.counters["ns_per_op"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * 2,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_WheelRearmCold);

/* Lock-mix simulation. Acquire number i arms pool[i % pool size] 10 s (plus
 * up to 1 s of jitter) ahead; the lock taken kHoldAcquires acquires ago is
 * released, cancelling its timer, with probability 0.9. With kMixPerMs
 * acquires per fake ms, the live count settles near
 * kHoldAcquires + 0.1 * (10 s of acquires) ~= 1e6. */
constexpr uint64_t kMixPerMs = 180;
constexpr size_t kHoldAcquires = 5000 * kMixPerMs; /* locks held ~5 s */
constexpr size_t kMixPool = size_t{1} << 21;       /* > 11.5 s of acquires */

struct mix_sim {
    wheel_fixture fx{kMixPool};           /* wheel and the pool of lease timers */
    std::vector<uint8_t> keep;            /* per acquire slot: 1 if held to expiry */
    uint64_t acquires = 0;                /* acquires so far */
    uint64_t cancels = 0;                 /* timers cancelled by a release */
    uint64_t rng = 0x9e3779b97f4a7c15ull; /* jitter and keep draws */

    mix_sim() : keep(kMixPool)
    {
        for (auto &k : keep)
            k = xorshift(&rng) % 10 == 0;
    }

    void step()
    {
        size_t j = acquires & (kMixPool - 1);
        size_t r = (acquires - kHoldAcquires) & (kMixPool - 1);

        sched_wheel_add(&fx.wheel, &fx.pool[j], fx.now + 10000 + (xorshift(&rng) & 1023));
        if (acquires >= kHoldAcquires && !keep[r] && sched_timer_is_pending(&fx.pool[r])) {
            sched_wheel_del(&fx.wheel, &fx.pool[r]);
            cancels++;
        }
        if (++acquires % kMixPerMs == 0)
            sched_wheel_run(&fx.wheel, ++fx.now);
    }
};

void BM_WheelLockMix(benchmark::State &state)
{
    static std::unique_ptr<mix_sim> sim;
    uint64_t fired0, cancels0, acquires0;

    if (!sim) {
        sim = std::make_unique<mix_sim>();
        while (sim->acquires < 2 * kMixPool)
            sim->step();
    }
    fired0 = g_fired;
    cancels0 = sim->cancels;
    acquires0 = sim->acquires;
    for (auto _ : state)
        sim->step();
    double acq = static_cast<double>(sim->acquires - acquires0);
    double cancels = static_cast<double>(sim->cancels - cancels0);
    double fired = static_cast<double>(g_fired - fired0);
    state.counters["live"] = static_cast<double>(sim->fx.wheel.count);
    state.counters["cancel_per_acq"] =
        benchmark::Counter(cancels, benchmark::Counter::kAvgIterations);
    state.counters["fire_per_acq"] = benchmark::Counter(fired, benchmark::Counter::kAvgIterations);
    state.counters["ns_per_acquire"] =
        benchmark::Counter(acq, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["ns_per_wheel_op"] = benchmark::Counter(
        acq + cancels + fired, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_WheelLockMix);

void noop_wake(struct sched_waiter *)
{
}

void BM_SemWaitRelease(benchmark::State &state)
{
    const size_t depth = static_cast<size_t>(state.range(0));
    std::vector<struct sched_waiter> waiters(depth + 1);
    struct sched_sem sem;
    size_t i = depth;

    sched_sem_init(&sem, depth == 0 ? 1 : 0, SIZE_MAX);
    for (auto &w : waiters)
        sched_waiter_init(&w, noop_wake);
    for (size_t k = 0; k < depth; k++)
        sched_sem_wait(&sem, &waiters[k]);
    for (auto _ : state) {
        /* The waiter woken last round is idle again: it re-joins the tail. */
        benchmark::DoNotOptimize(sched_sem_wait(&sem, &waiters[i]));
        sched_sem_release(&sem, 1);
        i = i == depth ? 0 : i + 1;
    }
    state.counters["ns_per_op"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * 2,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SemWaitRelease)->Arg(0)->Arg(1024);

} // namespace

/* bench/CMakeLists.txt links benchmark::benchmark, which has no main(). */
