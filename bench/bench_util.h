// fencecheck bench — helpers shared by the benchmark programs: latency percentiles, peak resident
// memory, a temporary directory, and a closed-loop load generator (N client threads, each issuing
// one call after the other for a fixed wall time).
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../tests/support/temp_dir.h"

#include <benchmark/benchmark.h>

namespace fencecheck::bench {

/// The clock's time in seconds (clock_gettime(2)): CLOCK_PROCESS_CPUTIME_ID for CPU seconds,
/// CLOCK_MONOTONIC for wall time. Thread-safe.
inline double clock_s(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

/// The q-quantile (0..1) of `samples` by nearest rank; 0 for an empty set. Sorts its copy.
inline double quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const auto rank = static_cast<std::size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(rank, samples.size() - 1)];
}

/// prefix followed by n in decimal ("k" and 3 -> "k3"). Built by appending, which also keeps GCC 12's
/// -Wrestrict false positive on `"k" + std::to_string(n)` out of the build log.
inline std::string numbered(std::string prefix, std::int64_t n) {
  prefix += std::to_string(n);
  return prefix;
}

/// Peak resident set size of this process so far, MiB (getrusage ru_maxrss).
inline double peak_rss_mib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

/// Current resident set size, MiB (/proc/self/statm); 0 when unreadable.
inline double current_rss_mib() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0.0;
  long pages_total = 0, pages_resident = 0;
  const int got = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  if (got != 2) return 0.0;
  return static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

/// A fresh directory under $FENCECHECK_BENCH_TMP (a real disk, so that fsync means something;
/// scripts/bench.sh sets it), else the system temp dir; removed at scope exit.
class TempDir : public fencecheck::testing::TempDir {
 public:
  explicit TempDir(const std::string& tag) : fencecheck::testing::TempDir(tag, root()) {}

 private:
  static std::filesystem::path root() {
    const char* base = std::getenv("FENCECHECK_BENCH_TMP");
    return base != nullptr ? std::filesystem::path(base) : std::filesystem::path();
  }
};

/// What a closed-loop load run measured.
struct LoadResult {
  std::int64_t calls = 0;      ///< calls that succeeded
  std::int64_t failures = 0;   ///< calls that returned false
  double seconds = 0;          ///< wall time of the run
  std::vector<double> latencies_us;  ///< every successful call's latency, microseconds

  /// Adds another run's calls, time and latencies to this one.
  void merge(const LoadResult& other) {
    calls += other.calls;
    failures += other.failures;
    seconds += other.seconds;
    latencies_us.insert(latencies_us.end(), other.latencies_us.begin(), other.latencies_us.end());
  }
};

/// Runs `clients` threads for `duration`; thread i calls `call(i, n)` (n = its call number, from 0)
/// back to back and times each call (steady_clock). `call` returns false for a failed call. The
/// clock starts once every thread is ready. `call` must be safe to run from `clients` threads at
/// once with distinct i.
inline LoadResult run_closed_loop(int clients, std::chrono::milliseconds duration,
                                  const std::function<bool(int client, std::int64_t n)>& call) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::mutex mu;
  LoadResult result;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(clients));
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      std::vector<double> lat;
      lat.reserve(4096);
      std::int64_t ok = 0, failed = 0;
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      for (std::int64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool good = call(i, n);
        const auto t1 = std::chrono::steady_clock::now();
        if (good) {
          ++ok;
          lat.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        } else {
          ++failed;
        }
      }
      std::lock_guard lock(mu);
      result.calls += ok;
      result.failures += failed;
      result.latencies_us.insert(result.latencies_us.end(), lat.begin(), lat.end());
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true);
  std::this_thread::sleep_for(duration);  // the measurement window itself, not a synchronisation
  stop.store(true);
  for (auto& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

/// The measurement window per benchmark run: $FENCECHECK_BENCH_SECONDS (default 1.5 s); a side-by-side
/// slice is a quarter of it.
inline std::chrono::milliseconds window() {
  const char* s = std::getenv("FENCECHECK_BENCH_SECONDS");
  const double seconds = s != nullptr ? std::atof(s) : 1.5;
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

}  // namespace fencecheck::bench
