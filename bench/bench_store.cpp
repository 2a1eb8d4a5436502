// fencecheck bench — the store's durable write path over HTTP, fenced (per-key) against unfenced
// (none) at the same durability (append + fdatasync before the 200, group commit), with 1..64
// concurrent clients, side by side with etcd's own durable put through the same kind of client
// (cpp-httplib, one connection per call, JSON body). Every benchmark run opens a fresh store in a
// fresh directory on the real disk ($FENCECHECK_BENCH_TMP) and measures a closed loop for
// FENCECHECK_BENCH_SECONDS. Counters: calls_per_s, p50_us, p99_us, and for the store
// writes_per_fsync (group commit at work: > 1 means writers shared an fdatasync).
//
// Run with --benchmark_enable_random_interleaving=true --benchmark_repetitions=N so fenced and
// unfenced runs alternate and drift on a shared machine hits both alike (scripts/bench.sh does).
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "shared_etcd.h"
#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/resources/store_server.h"
#include "fencecheck/workers/etcd_client.h"

namespace fb = fencecheck::bench;

namespace {

const std::string kChunk(256, 'x');  // the smoke scenarios' chunk size

void BM_StoreDurableWrite(benchmark::State& state) {
  const bool fenced = state.range(0) != 0;
  const int clients = static_cast<int>(state.range(1));
  for (auto _ : state) {
    fb::TempDir dir("fc-bench-store");
    auto store = fencecheck::FencedStore::open(dir.path(), fenced ? fencecheck::FencingMode::kPerKey
                                                                    : fencecheck::FencingMode::kNone);
    fencecheck::StoreServerOptions options;
    options.threads = static_cast<std::size_t>(clients) + 4;
    fencecheck::StoreServer server(*store, options);
    server.start();
    std::vector<std::unique_ptr<fencecheck::StoreClient>> conns;
    for (int i = 0; i < clients; ++i) conns.push_back(std::make_unique<fencecheck::StoreClient>(server.base_url()));
    const auto result = fb::run_closed_loop(clients, fb::window(), [&](int i, std::int64_t n) {
      // Each client its own key (its own high-water mark), one holder's token: every write accepted.
      const auto reply = conns[static_cast<std::size_t>(i)]->write("k" + std::to_string(i), n, 0,
                                                                   fencecheck::FencingToken(7), "c" + std::to_string(i), kChunk);
      return reply.outcome == fencecheck::WriteOutcome::kAccepted;
    });
    const auto stats = store->stats();
    server.stop();
    store->close();
    fb::report_load(state, result);
    state.counters["writes_per_fsync"] =
        benchmark::Counter(stats.fsyncs > 0 ? static_cast<double>(stats.accepted) / static_cast<double>(stats.fsyncs) : 0.0);
  }
}
BENCHMARK(BM_StoreDurableWrite)
    ->ArgNames({"fenced", "clients"})
    ->ArgsProduct({{0, 1}, {1, 4, 16, 64}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_EtcdDurablePut(benchmark::State& state) {
  const int clients = static_cast<int>(state.range(0));
  const fencecheck::EtcdClient client(fb::SharedEtcd::get().etcd.client_url());
  for (auto _ : state) {
    const auto result = fb::run_closed_loop(clients, fb::window(), [&](int i, std::int64_t n) {
      try {
        client.put("bench/k" + std::to_string(i) + "/" + std::to_string(n % 64), kChunk);
        return true;
      } catch (const fencecheck::EtcdError&) {
        return false;
      }
    });
    fb::report_load(state, result);
  }
}
BENCHMARK(BM_EtcdDurablePut)
    ->ArgNames({"clients"})
    ->Arg(1)->Arg(4)->Arg(16)->Arg(64)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
