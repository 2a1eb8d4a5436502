// fencecheck bench — the lock service path against a real embedded etcd (one member, loopback,
// default election timeout, so the minimum lease TTL is 2 s):
//   BM_Acquire:  lease grant + Lock + range (the fencing token), as the worker does; uncontended.
//                Counters p50_us / p99_us. Release (DeleteRange + revoke) is outside the timing.
//   BM_Handover: holder A takes the lock with a lease of TTL 2 s and then goes silent (no
//                keepalive: a paused holder); B is already waiting in Lock. Measured: from A's
//                last renewal (its grant) to B's first write accepted by a fenced store. The
//                goal is TTL + 100 ms; the counters over_ttl_*_ms are the part beyond the TTL
//                (etcd's lessor checks expiry every 500 ms, so expect 0..500 ms plus round trips;
//                each round starts at a random phase of that ticker).
#include <algorithm>
#include <future>
#include <random>
#include <thread>
#include <memory>
#include <string>

#include "bench_util.h"
#include "shared_etcd.h"
#include "fencecheck/resources/store.h"
#include "fencecheck/resources/store_client.h"
#include "fencecheck/resources/store_server.h"
#include "fencecheck/locks/etcd/etcd_client.h"

namespace fb = fencecheck::bench;
using namespace std::chrono_literals;

namespace {

/// Lease + Lock + range, as fencecheck-worker acquires. Returns (lock key, token, lease).
struct Held {
  std::string key;
  std::int64_t token = 0;
  std::int64_t lease = 0;
};
Held acquire(const fencecheck::EtcdClient& etcd, const std::string& lock, std::chrono::seconds ttl) {
  const auto grant = etcd.lease_grant(ttl);
  const auto got = etcd.lock(lock, grant.id, 30s);
  if (!got) throw std::runtime_error("lock timed out");
  const auto kv = etcd.range(got->key);
  if (!kv) throw std::runtime_error("lock key vanished (lease expired while waiting)");
  return {got->key, kv->create_revision, grant.id};
}

void BM_Acquire(benchmark::State& state) {
  const fencecheck::EtcdClient etcd(fb::SharedEtcd::get().etcd.client_url());
  std::vector<double> lat;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const Held held = acquire(etcd, "bench-acquire", 10s);
    const auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    state.SetIterationTime(s);
    lat.push_back(s * 1e6);
    etcd.delete_key(held.key);
    etcd.lease_revoke(held.lease);
  }
  state.counters["p50_us"] = fb::quantile(lat, 0.5);
  state.counters["p99_us"] = fb::quantile(lat, 0.99);
}
BENCHMARK(BM_Acquire)->Iterations(200)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_Handover(benchmark::State& state) {
  const fencecheck::EtcdClient etcd(fb::SharedEtcd::get().etcd.client_url());
  fb::TempDir dir("bench-handover");
  auto store = fencecheck::FencedStore::open(dir.path(), fencecheck::FencingMode::kPerKey);
  fencecheck::StoreServer server(*store, {});
  server.start();
  fencecheck::StoreClient writer(server.base_url());
  const std::string chunk(256, 'x');
  std::vector<double> over_ms;
  std::int64_t round = 0;
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> phase_ms(0, 499);
  for (auto _ : state) {
    // etcd checks for expired leases every 500 ms; starting each round right after the previous
    // handover would lock the grant to that ticker's phase (every round then measured TTL + 500
    // ms). A random offset samples the phase instead.
    std::this_thread::sleep_for(std::chrono::milliseconds(phase_ms(rng)));  // outside the manual time
    const std::string lock = fb::numbered("bench-handover-", round++);
    // A: holds the lock with a 2 s lease and never renews it (paused from its grant on).
    const auto a_grant_time = std::chrono::steady_clock::now();
    const Held a = acquire(etcd, lock, 2s);
    const auto ttl = 2s;
    if (writer.write("ledger", round, 0, fencecheck::FencingToken(a.token), "a", chunk).outcome !=
        fencecheck::WriteOutcome::kAccepted)
      state.SkipWithError("A's write was not accepted");
    // B: queues behind A; writes as soon as Lock returns with its token.
    auto b = std::async(std::launch::async, [&] {
      fencecheck::StoreClient bw(server.base_url());
      const Held held = acquire(etcd, lock, 10s);
      const auto reply = bw.write("ledger", round, 1, fencecheck::FencingToken(held.token), "b", chunk);
      const auto done = std::chrono::steady_clock::now();
      etcd.delete_key(held.key);
      etcd.lease_revoke(held.lease);
      return std::make_pair(reply.outcome, done);
    });
    const auto [outcome, done] = b.get();
    if (outcome != fencecheck::WriteOutcome::kAccepted) state.SkipWithError("B's write was not accepted");
    const double s = std::chrono::duration<double>(done - a_grant_time).count();
    state.SetIterationTime(s);
    over_ms.push_back((s - std::chrono::duration<double>(ttl).count()) * 1000.0);
  }
  server.stop();
  state.counters["ttl_ms"] = 2000;
  state.counters["over_ttl_p50_ms"] = fb::quantile(over_ms, 0.5);
  state.counters["over_ttl_max_ms"] = fb::quantile(over_ms, 1.0);
  state.counters["over_ttl_min_ms"] = fb::quantile(over_ms, 0.0);
  state.counters["within_100ms"] = static_cast<double>(std::count_if(over_ms.begin(), over_ms.end(), [](double ms) {
                                     return ms <= 100.0;
                                   })) / static_cast<double>(over_ms.size());
}
BENCHMARK(BM_Handover)->Iterations(10)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
