// fencecheck bench — the checkers (every default checker plus the figures: analyze()) on synthetic
// histories of 10^4.. events with a matching read-back, one core. A history is many holders taking
// turns on 50 keys, each holding: acquire.invoke, lock.grant, acquire.ok, 4 x (write.invoke,
// write.ok), release.invoke, lock.delete, release.ok, job.done; every 64th holding is paused past its
// lease and its next write is fenced (write.fail), as in a real run. The read-back holds every
// accepted write in its log and the last write of each chunk slot (self-describing chunk bytes).
// Counters: items_per_second (events per wall second; the report also divides by the process's CPU
// time, the one-core figure on a shared machine), bytes_per_event (resident memory of the history + read-back,
// divided by its events), peak_rss_mib, the verdict (0 valid) so a wrong generator shows, and
// cpu_ms_<checker> / cpu_ms_figures: one more pass of each checker alone, in CPU milliseconds, with
// the history's index built once as analyze() does (cpu_ms_(history index)): where the time goes;
// the sum is about the analysis's CPU time.
#include <ctime>

#include "bench_util.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;

namespace {

/// This thread's CPU time, ms.
double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

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
  // Per checker, as analyze() runs them: with the history's index built once (its own row).
  const double t_index = thread_cpu_ms();
  context.index = std::make_shared<const fh::HistoryIndex>(s.history);
  state.counters["cpu_ms_(history index)"] = thread_cpu_ms() - t_index;
  for (const auto& checker : fh::default_checkers()) {
    const double t0 = thread_cpu_ms();
    benchmark::DoNotOptimize(checker->check_with(s.history, s.readback, context));
    state.counters["cpu_ms_" + std::string(checker->name())] = thread_cpu_ms() - t0;
  }
  const double t0 = thread_cpu_ms();
  benchmark::DoNotOptimize(fh::compute_figures(s.history, s.readback, context));
  state.counters["cpu_ms_figures"] = thread_cpu_ms() - t0;
}
/// 10^4, 10^5, ... up to $FENCECHECK_BENCH_CHECK_MAX events (default here 10^6; scripts/bench.sh
/// asks for 10^7 when the machine has the memory: a history is held in memory at about 400 bytes
/// per event, 4.2 GiB at 10^7).
void sizes(benchmark::internal::Benchmark* b) {
  const char* max_text = std::getenv("FENCECHECK_BENCH_CHECK_MAX");
  const std::int64_t max = max_text != nullptr ? std::atoll(max_text) : 1'000'000;
  for (std::int64_t n = 10'000; n <= max; n *= 10) b->Arg(n);
}

BENCHMARK(BM_Checkers)
    ->ArgName("events")
    ->Apply(sizes)
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime()
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
