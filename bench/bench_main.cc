// Entry point of lockproxy-microbench: Google Benchmark's main, shared by
// every bench_*.cc file.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
