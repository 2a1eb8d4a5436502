// fencecheck bench — the live checker (live_checker.h) as a stream: N synthetic events
// (synthetic_history.h, generated one at a time, never held) through LiveChecker::observe, in one
// process, reporting CPU time and peak RSS. The figure the streaming goal is stated in (issue 16:
// 10^8 events, peak RSS under 1 GiB, >= 2 M events per CPU second).
//
//   bench_live_checker N generate   only generate the N events (the generator's own cost)
//   bench_live_checker N check      generate them and feed each to a LiveChecker
//
// Prints one JSON line: {"events", "mode", "cpu_s", "events_per_cpu_s", "max_rss_mib",
// "anomalies"}. CPU time is the process's (CLOCK_PROCESS_CPUTIME_ID, one thread), seconds; peak
// RSS is getrusage's ru_maxrss, MiB. The checker's own cost per event is (check - generate) / N.
// The synthetic history is valid: a correct checker reports 0 anomalies.
#include <sys/resource.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "fencecheck/harness/live_checker.h"
#include "synthetic_history.h"

namespace {

double cpu_seconds() { return fencecheck::bench::clock_s(CLOCK_PROCESS_CPUTIME_ID); }

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::strtoll(argv[1], nullptr, 10) : 10'000'000;
  const std::string mode = argc > 2 ? argv[2] : "check";
  if (n <= 0 || (mode != "check" && mode != "generate")) {
    std::fprintf(stderr, "usage: bench_live_checker N [check|generate]\n");
    return 2;
  }
  fencecheck::harness::CheckContext context;
  fencecheck::harness::LiveChecker checker(context);
  std::size_t index = 0;
  std::int64_t kinds = 0;  // keeps the generate-only loop from being optimised away
  const double start = cpu_seconds();
  if (mode == "check") {
    fencecheck::bench::generate_history(
        n, [&](const fencecheck::Event& e) { (void)checker.observe(index++, e); }, nullptr);
  } else {
    fencecheck::bench::generate_history(
        n, [&](const fencecheck::Event& e) { kinds += static_cast<int>(e.kind); ++index; }, nullptr);
  }
  const double cpu = cpu_seconds() - start;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf(
      "{\"events\": %zu, \"mode\": \"%s\", \"cpu_s\": %.3f, \"events_per_cpu_s\": %.0f, \"max_rss_mib\": %.1f, "
      "\"anomalies\": %lld, \"kind_sum\": %lld}\n",
      index, mode.c_str(), cpu, static_cast<double>(index) / cpu, static_cast<double>(ru.ru_maxrss) / 1024.0,
      static_cast<long long>(checker.total()), static_cast<long long>(kinds));
  return checker.total() == 0 ? 0 : 1;
}
