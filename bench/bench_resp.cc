// Microbenchmarks of the RESP paths on every request: parsing a client
// request (proxy/request.c), encoding the replies, and encoding the upstream
// EVALSHA batch.
#include "common/buf.h"
#include "pool/resp.h"
#include "proxy/reply.h"
#include "proxy/request.h"

#include <benchmark/benchmark.h>
#include <cstring>
#include <string>

namespace
{

const char lock_req[] = "*4\r\n$4\r\nLOCK\r\n$12\r\norders:12345\r\n$4\r\nWAIT\r\n$4\r\n5000\r\n";

// One LOCK request fed and parsed, as a client with one request in flight.
void BM_ParseLock(benchmark::State &state)
{
    struct px_parser p;
    struct px_req *req;

    px_parser_init(&p, 64, 65536);
    for (auto _ : state) {
        const char *in = lock_req;
        size_t len = sizeof(lock_req) - 1;

        px_parser_next(&p, &in, &len, &req);
        benchmark::DoNotOptimize(req->argv[1].p);
        px_req_free(req);
    }
    px_parser_deinit(&p);
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ParseLock);

// A pipeline of N requests arriving in one read.
void BM_ParsePipeline(benchmark::State &state)
{
    std::string in;
    struct px_parser p;
    struct px_req *req;
    const int n = static_cast<int>(state.range(0));

    for (int i = 0; i < n; i++)
        in += lock_req;
    px_parser_init(&p, 64, 1 << 20);
    for (auto _ : state) {
        const char *data = in.data();
        size_t len = in.size();

        while (px_parser_next(&p, &data, &len, &req) == 1)
            px_req_free(req);
    }
    px_parser_deinit(&p);
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_ParsePipeline)->Arg(16)->Arg(64);

// The replies of the lock commands: +OK, :1, nil, and the LOCK.INFO array.
void BM_EncodeReplies(benchmark::State &state)
{
    struct buf b;

    buf_init(&b);
    for (auto _ : state) {
        buf_reset(&b);
        px_reply_status(&b, "OK");
        px_reply_int(&b, 1);
        px_reply_nil(&b);
        px_reply_array(&b, 4);
        px_reply_cstr(&b, "ttl_ms");
        px_reply_int(&b, 29873);
        px_reply_cstr(&b, "owner");
        px_reply_cstr(&b, "0c0f13f8-9eb3-4ed2-a1c1-086b2025cf2f:123456");
        benchmark::DoNotOptimize(b.data);
    }
    buf_deinit(&b);
    state.SetItemsProcessed(state.iterations() * 4);
}
BENCHMARK(BM_EncodeReplies);

// The upstream batch: N EVALSHA acquire commands appended to one output
// buffer, as one loop iteration's worth of LOCK requests.
void BM_EncodeEvalshaBatch(benchmark::State &state)
{
    static const char sha[] = "d2ae3a2f6c1a8a3f5e6b1c9d8e7f6a5b4c3d2e1f";
    const char *pre[3] = {"EVALSHA", sha, "1"};
    const size_t prelens[3] = {7, 40, 1};
    const char *args[3] = {"orders:12345", "30000", "0c0f13f8-9eb3-4ed2-a1c1-086b2025cf2f:123456"};
    const size_t lens[3] = {12, 5, 43};
    const int n = static_cast<int>(state.range(0));
    struct buf b;

    buf_init(&b);
    for (auto _ : state) {
        buf_reset(&b);
        for (int i = 0; i < n; i++)
            pool__resp_command_split(&b, 3, pre, prelens, 3, args, lens);
        benchmark::DoNotOptimize(b.data);
    }
    state.SetItemsProcessed(state.iterations() * n);
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(b.len));
    buf_deinit(&b);
}
BENCHMARK(BM_EncodeEvalshaBatch)->Arg(1)->Arg(64)->Arg(256);

} // namespace
