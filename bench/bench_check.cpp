// fencecheck bench — the checkers (every default checker plus the figures: analyze()) on synthetic
// histories of 10^4.. events with a matching read-back, one core. A history is many holders taking
// turns on 50 keys, each holding: acquire.invoke, lock.grant, acquire.ok, 4 x (write.invoke,
// write.ok), release.invoke, lock.delete, release.ok, job.done; every 64th holding is paused past its
// lease and its next write is fenced (write.fail), as in a real run. The read-back holds every
// accepted write in its log and the last write of each chunk slot (self-describing chunk bytes).
// Counters: events_per_s (items/s), bytes_per_event (resident memory of the history + read-back,
// divided by its events), peak_rss_mib, and the verdict (0 valid) so a wrong generator shows.
#include "bench_util.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;

namespace {

void BM_Checkers(benchmark::State& state) {
  const double rss_before = fb::current_rss_mib();
  const fb::Synthetic s = fb::make_history(state.range(0));
  const double rss_after = fb::current_rss_mib();
  const auto events = static_cast<double>(s.history.size());
  fh::CheckContext context;
  context.lease_ttl = std::chrono::seconds(2);
  int verdict = -1;
  for (auto _ : state) {
    const fh::Analysis analysis = fh::analyze(s.history, s.readback, context);
    verdict = static_cast<int>(analysis.verdict);
    benchmark::DoNotOptimize(analysis);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(events) * state.iterations());
  state.counters["events"] = events;
  state.counters["bytes_per_event"] = (rss_after - rss_before) * 1024.0 * 1024.0 / events;
  state.counters["peak_rss_mib"] = fb::peak_rss_mib();
  state.counters["verdict"] = verdict;
}
BENCHMARK(BM_Checkers)
    ->ArgName("events")
    ->RangeMultiplier(10)
    ->Range(10'000, 1'000'000)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
