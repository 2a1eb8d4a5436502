// fencecheck bench — the store's durable write path over HTTP, fenced (per-key) against unfenced
// (none) at the same durability (append + fdatasync before the 200, group commit), with 1..64
// concurrent clients, side by side with etcd's own durable put through the same kind of client
// (StoreClient and EtcdClient: Boost.Beast, one connection per call, JSON body). Every benchmark
// run opens a fresh store in a fresh directory on the real disk ($FENCECHECK_BENCH_TMP) and
// measures a closed loop for FENCECHECK_BENCH_SECONDS / 4 per slice.
//
// Absolute times drift on a shared machine (fdatasync latency alone varies 10x with the neighbours'
// I/O), so each benchmark runs its two systems side by side in alternating short slices and
// reports their ratio.
#include <algorithm>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench_util.h"
#include "shared_etcd.h"
#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/resources/store_server.h"
#include "fencecheck/locks/etcd/etcd_client.h"

namespace fb = fencecheck::bench;

namespace {

const std::string kChunk(256, 'x');  // the smoke scenarios' chunk size

/// One closed-loop slice against a fresh store (fresh directory, fresh log) in `mode`.
/// writes_per_fsync: accepted writes / fdatasyncs (group commit at work when > 1).
fb::LoadResult store_slice(fencecheck::FencingMode mode, int clients, std::chrono::milliseconds duration,
                           double& writes_per_fsync) {
  fb::TempDir dir("bench-store");
  auto store = fencecheck::FencedStore::open(dir.path(), mode);
  fencecheck::StoreServerOptions options;
  options.threads = static_cast<std::size_t>(clients) + 4;
  fencecheck::StoreServer server(*store, options);
  server.start();
  // Each client its own key (its own high-water mark), one holder's token: every write accepted.
  struct Conn {
    std::unique_ptr<fencecheck::StoreClient> client;
    std::string key, id;
  };
  std::vector<Conn> conns;
  for (int i = 0; i < clients; ++i)
    conns.push_back({std::make_unique<fencecheck::StoreClient>(server.base_url()), fb::numbered("k", i), fb::numbered("c", i)});
  auto result = fb::run_closed_loop(clients, duration, [&](int i, std::int64_t n) {
    const Conn& c = conns[static_cast<std::size_t>(i)];
    const auto reply = c.client->write(c.key, n, 0, fencecheck::FencingToken(7), c.id, kChunk);
    return reply.outcome == fencecheck::WriteOutcome::kAccepted;
  });
  const auto stats = store->stats();
  server.stop();
  store->close();
  writes_per_fsync = stats.fsyncs > 0 ? static_cast<double>(stats.accepted) / static_cast<double>(stats.fsyncs) : 0.0;
  return result;
}

/// One closed-loop slice of durable puts (256-byte values) against the shared embedded etcd.
fb::LoadResult etcd_slice(int clients, std::chrono::milliseconds duration) {
  const fencecheck::EtcdClient client(fb::SharedEtcd::get().etcd.client_url());
  return fb::run_closed_loop(clients, duration, [&](int i, std::int64_t n) {
    try {
      client.put(fb::numbered(fb::numbered("bench/k", i) + "/", n % 64), kChunk);
      return true;
    } catch (const fencecheck::EtcdError&) {
      return false;
    }
  });
}

/// The two systems a pair compares.
enum Pair : std::int64_t {
  kUnfencedVsFenced = 0,  ///< A = store fencing none, B = store fencing per-key
  kFencedVsEtcd = 1,      ///< A = store fencing per-key, B = etcd put
  kUnfencedVsFencedAtOnce = 2,  ///< as kUnfencedVsFenced, but A and B run at the same time (two
                                ///< stores, two client sets): the noise of a shared disk cancels
};

/// Side by side: A and B in alternating slices (A B B A A B B A ...: a linear drift of the machine
/// hits both alike), or at the same time (kUnfencedVsFencedAtOnce), FENCECHECK_BENCH_SLICES slices
/// each (default 8) of window()/4. The manual time is the sum of both sides' slices.
/// Counters per side (a_*, b_*): calls_per_s, p50_us, p99_us; for store sides writes_per_fsync;
/// and ratio = b_calls_per_s / a_calls_per_s, the figure the goals are about.
void BM_SideBySide(benchmark::State& state) {
  const auto pair = static_cast<Pair>(state.range(0));
  const int clients = static_cast<int>(state.range(1));
  const char* slices_text = std::getenv("FENCECHECK_BENCH_SLICES");
  const int slices = slices_text != nullptr ? std::max(2, std::atoi(slices_text)) : 8;
  const auto slice = std::max(std::chrono::milliseconds(50), fb::window() / 4);
  if (pair == kFencedVsEtcd) (void)fb::SharedEtcd::get();  // start etcd outside the timed slices
  for (auto _ : state) {
    fb::LoadResult side[2];
    std::mutex merge_mu;
    double wpf_sum[2] = {0, 0};
    std::vector<double> slice_rate[2];  // per slice i, each side's calls per second
    for (auto& v : slice_rate) v.assign(static_cast<std::size_t>(slices), 0.0);
    int current = 0;  // the slice being run (both sides of slice i are a pair)
    auto run = [&](int which) {
      const int i = current;
      double wpf = 0;
      fb::LoadResult r;
      if (which == 0) r = store_slice(pair == kFencedVsEtcd ? fencecheck::FencingMode::kPerKey : fencecheck::FencingMode::kNone, clients, slice, wpf);
      else if (pair != kFencedVsEtcd) r = store_slice(fencecheck::FencingMode::kPerKey, clients, slice, wpf);
      else r = etcd_slice(clients, slice);
      const std::lock_guard lock(merge_mu);
      slice_rate[which][static_cast<std::size_t>(i)] = r.seconds > 0 ? static_cast<double>(r.calls) / r.seconds : 0.0;
      side[which].merge(r);
      wpf_sum[which] += wpf;
    };
    for (int i = 0; i < slices; ++i) {
      current = i;
      const bool a_first = (i % 4 == 0) || (i % 4 == 3);
      if (pair == kUnfencedVsFencedAtOnce) {
        // Both stores at the same time, each with its own directory, server and clients: every
        // disk stall and CPU burst of the neighbours hits both.
        auto other = std::async(std::launch::async, [&] { run(a_first ? 1 : 0); });
        run(a_first ? 0 : 1);
        other.get();
        continue;
      }
      run(a_first ? 0 : 1);
      run(a_first ? 1 : 0);
    }
    state.SetIterationTime(side[0].seconds + side[1].seconds);
    for (int which = 0; which < 2; ++which) {
      const std::string p = which == 0 ? "a_" : "b_";
      const fb::LoadResult& r = side[which];
      state.counters[p + "calls_per_s"] = static_cast<double>(r.calls) / r.seconds;
      state.counters[p + "p50_us"] = fb::quantile(r.latencies_us, 0.50);
      state.counters[p + "p99_us"] = fb::quantile(r.latencies_us, 0.99);
      state.counters[p + "failures"] = static_cast<double>(r.failures);
      const bool store_side = which == 0 || pair != kFencedVsEtcd;
      if (store_side) state.counters[p + "writes_per_fsync"] = wpf_sum[which] / slices;
      if (r.failures > 0) state.SkipWithError("some calls failed");
    }
    const double a_rate = static_cast<double>(side[0].calls) / side[0].seconds;
    const double b_rate = static_cast<double>(side[1].calls) / side[1].seconds;
    state.counters["ratio"] = a_rate > 0 ? b_rate / a_rate : 0.0;
    // The same comparison slice by slice: B_i / A_i for each pair of slices run back to back (or
    // at once), then the quartiles. A disk stall that hits one slice moves the pooled ratio; the
    // median of the paired ratios is robust to it, and the quartiles show the noise.
    std::vector<double> paired;
    for (std::size_t i = 0; i < slice_rate[0].size(); ++i)
      if (slice_rate[0][i] > 0) paired.push_back(slice_rate[1][i] / slice_rate[0][i]);
    state.counters["ratio_median"] = fb::quantile(paired, 0.50);
    state.counters["ratio_q1"] = fb::quantile(paired, 0.25);
    state.counters["ratio_q3"] = fb::quantile(paired, 0.75);
  }
}
BENCHMARK(BM_SideBySide)
    ->ArgNames({"pair", "clients"})
    ->ArgsProduct({{kUnfencedVsFenced, kFencedVsEtcd, kUnfencedVsFencedAtOnce}, {1, 4, 16, 64}})
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

/// The fencing decision's own cost, without the disk: the store in process (no HTTP) on a tmpfs
/// (/dev/shm, where fdatasync costs microseconds), one writer, per-key against none in
/// alternating slices of `kWrites` writes. What is left is CPU: the per-key comparison against
/// everything else a write does. If per-key / none is >= 0.97 here, where the decision is the
/// largest possible share of a write, it is so with a real disk. Counters: ratio (per-key / none
/// writes per second, pooled), ratio_median / q1 / q3 over slice pairs, a_ns_per_write and
/// b_ns_per_write (none, per-key).
void BM_DecisionCostInMemory(benchmark::State& state) {
  constexpr int kSlices = 16;
  constexpr std::int64_t kWrites = 10'000;
  const std::filesystem::path shm = "/dev/shm";
  if (!std::filesystem::is_directory(shm)) {
    state.SkipWithError("no /dev/shm");
    return;
  }
  auto slice = [&](fencecheck::FencingMode mode) {
    fencecheck::testing::TempDir dir("bench-decision", shm);
    auto store = fencecheck::FencedStore::open(dir.path(), mode);
    fencecheck::WriteRequest r{"k", 0, 0, fencecheck::FencingToken(7), "c", kChunk};
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t n = 0; n < kWrites; ++n) {
      r.chunk = n;
      if (store->write(r).status != fencecheck::WriteStatus::kAccepted) throw std::runtime_error("write refused");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    store->close();
    return seconds;
  };
  for (auto _ : state) {
    double total[2] = {0, 0};
    std::vector<double> paired;
    for (int i = 0; i < kSlices; ++i) {
      const bool none_first = (i % 4 == 0) || (i % 4 == 3);
      double t[2];
      t[none_first ? 0 : 1] = slice(none_first ? fencecheck::FencingMode::kNone : fencecheck::FencingMode::kPerKey);
      t[none_first ? 1 : 0] = slice(none_first ? fencecheck::FencingMode::kPerKey : fencecheck::FencingMode::kNone);
      total[0] += t[0];
      total[1] += t[1];
      paired.push_back(t[0] / t[1]);  // rate ratio per-key / none = time none / time per-key
    }
    state.SetIterationTime(total[0] + total[1]);
    state.counters["ratio"] = total[0] / total[1];
    state.counters["ratio_median"] = fb::quantile(paired, 0.50);
    state.counters["ratio_q1"] = fb::quantile(paired, 0.25);
    state.counters["ratio_q3"] = fb::quantile(paired, 0.75);
    state.counters["a_ns_per_write"] = total[0] * 1e9 / (kSlices * kWrites);
    state.counters["b_ns_per_write"] = total[1] * 1e9 / (kSlices * kWrites);
  }
}
BENCHMARK(BM_DecisionCostInMemory)->Iterations(1)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
