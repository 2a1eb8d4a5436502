// fencecheck bench — reading a run's history (issue 16): the production parser,
// event_from_json_line (simdjson ondemand, workers/proto/src/event_simdjson.cpp), against its
// reference, detail::event_from_json_line_nlohmann (nlohmann-json, the parser before), on a
// history.jsonl written by the real writer (save_history_jsonl) from the checker benchmark's
// synthetic history (synthetic_history.h), and on its .zst form; and load_history_jsonl whole.
//
// Usage: bench_history_parse [events] [--reps R] [--dir DIR] [--only TEXT]
//   events  at least this many events (default 10^6; the generator adds fewer than 20)
//   --reps  how many times each pass runs; the median is reported (default 3)
//   --dir   keep the generated history-<events>.jsonl(.zst) in DIR and reuse them when present
//           (default: a temporary directory under $FENCECHECK_BENCH_TMP, removed at exit)
//   --only  run only the passes whose name contains TEXT (e.g. "simdjson", for a profiler)
//
// Correctness first: every line of the file, then the unusual lines of
// tests/support/event_parsers.h, go through compare_event_parsers (the differential check of
// tests/proto/event_parse_test.cpp): the same Event field for field, or the same
// std::invalid_argument message. Any difference exits 1 naming the line.
//
// Passes, each on one thread, timed with CLOCK_PROCESS_CPUTIME_ID (CPU seconds of this process)
// and CLOCK_MONOTONIC (wall seconds):
//   split (memory)          the file already in memory, cut at '\n' (memchr): the floor of any parser
//   read+split plain        for_each_history_line on history.jsonl (page cache warm)
//   read+split .zst         for_each_history_line on history.jsonl.zst (zstd decompression)
//   nlohmann (memory)       the reference on every line of the in-memory file
//   simdjson (memory)       event_from_json_line on every line of the in-memory file (it copies
//                           each line into its padded buffer)
//   .zst + nlohmann         for_each_history_line(.zst) and the reference: a reader's cost before
//   .zst + simdjson         the same with event_from_json_line
//   .zst + padded simdjson  the same with event_from_padded_line, as the checkers read a history
//                           (no copy of the line, one Event reused; for_each_history_line pads)
//   load .zst, nlohmann     load_history_jsonl as it was before (for_each_history_line, each line
//                           copied into a std::string, the reference, History::add)
//   load_history_jsonl .zst load_history_jsonl on the .zst: a reader's whole cost now (the History
//                           it builds included)
// Figures: events per CPU second and MB (10^6 bytes of plain JSON lines, '\n' included) per CPU
// second, the median of the runs, with every run's CPU seconds.
// Memory: the whole file (about 140 bytes per event), and while generating it the synthetic
// history (about 400 bytes per event: 4 GB at 10^7); the load pass holds one History more.
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "../tests/support/event_parsers.h"
#include "bench_util.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/proto/event.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;
using fencecheck::Event;

using fb::clock_s;

namespace {

// ---- Timing ------------------------------------------------------------------------------------

/// One pass's runs.
struct Pass {
  std::string name;
  std::vector<double> cpu_s, wall_s;  ///< per run, seconds
  std::int64_t events = 0;            ///< events (lines) a run handles
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

/// The 1-minute load average (/proc/loadavg), as text.
std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

/// A sink the optimiser cannot drop: every pass folds what it parsed into it.
volatile std::uint64_t g_sink = 0;
std::uint64_t fold(const Event& e) {
  return static_cast<std::uint64_t>(e.t_ns) + static_cast<std::uint64_t>(e.kind) + e.source.size() +
         static_cast<std::uint64_t>(e.token.value_or(0)) + e.lock_key.size() + e.detail.size();
}

/// Calls fn(line) for each '\n'-terminated line of `text`, without its '\n' (the writer's lines
/// have no '\r').
template <class Fn>
std::int64_t for_each_line(const std::string& text, Fn&& fn) {
  std::int64_t lines = 0;
  const char* p = text.data();
  const char* end = p + text.size();
  while (p < end) {
    const auto* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
    const char* stop = nl != nullptr ? nl : end;
    fn(std::string_view(p, static_cast<std::size_t>(stop - p)));
    ++lines;
    p = stop + 1;
  }
  return lines;
}

int usage() {
  std::fprintf(stderr, "usage: bench_history_parse [events] [--reps R] [--dir DIR] [--only TEXT]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t target = 1'000'000;
  int reps = 3;
  std::string dir_arg, only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--dir" && i + 1 < argc) {
      dir_arg = argv[++i];
    } else if (!a.empty() && a[0] != '-') {
      target = std::atoll(a.c_str());
    } else {
      return usage();
    }
  }
  if (target <= 0) return usage();

  std::optional<fb::TempDir> temp;
  std::filesystem::path dir;
  if (dir_arg.empty()) {
    temp.emplace("history-parse");
    dir = temp->path();
  } else {
    dir = dir_arg;
    std::filesystem::create_directories(dir);
  }
  const std::filesystem::path plain = dir / ("history-" + std::to_string(target) + ".jsonl");
  std::filesystem::path zst = plain;
  zst += ".zst";
  std::printf("load average at start: %s\n", loadavg().c_str());
  if (!std::filesystem::exists(plain) || !std::filesystem::exists(zst)) {
    const double t0 = clock_s(CLOCK_MONOTONIC);
    {
      const fb::Synthetic s = fb::make_history(target);
      fh::save_history_jsonl(plain, s.history);
    }
    // compress_history replaces its input: compress a copy.
    std::filesystem::path copy = dir / "to-compress.jsonl";
    std::filesystem::copy_file(plain, copy, std::filesystem::copy_options::overwrite_existing);
    const fh::CompressedHistory c = fh::compress_history(copy, 1);
    std::filesystem::rename(c.path, zst);
    std::printf("generated %s and its .zst (level 1) in %.1f s wall\n", plain.c_str(), clock_s(CLOCK_MONOTONIC) - t0);
  }

  // The file in memory.
  std::string text;
  {
    std::ifstream in(plain, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) {
      std::fprintf(stderr, "cannot read %s\n", plain.c_str());
      return 1;
    }
  }
  const auto bytes = static_cast<double>(text.size());
  const auto zst_bytes = static_cast<double>(std::filesystem::file_size(zst));
  const std::int64_t events = for_each_line(text, [](std::string_view) {});
  std::printf("file: %lld events, %.1f MB plain (%.1f bytes/event), %.1f MB .zst (%.2fx)\n",
              static_cast<long long>(events), bytes / 1e6, bytes / static_cast<double>(events), zst_bytes / 1e6,
              bytes / zst_bytes);
  // Stage 1 (finding the structure) is chosen at run time from the CPU; the ondemand iteration
  // (numbers, strings) is compiled into fencecheck_proto for the CPU its flags allow (portable:
  // -march=haswell gained nothing, docs/performance.md).
  std::printf("simdjson %d.%d.%d: stage 1 %s (run-time choice)\n", simdjson::SIMDJSON_VERSION_MAJOR,
              simdjson::SIMDJSON_VERSION_MINOR, simdjson::SIMDJSON_VERSION_REVISION,
              simdjson::get_active_implementation()->name().c_str());

  // Correctness: every line, then the unusual ones.
  {
    const double t0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    std::int64_t number = 0, slow = 0;
    bool bad = false;
    for_each_line(text, [&](std::string_view line) {
      ++number;
      if (bad) return;
      const auto c = fencecheck::testing::compare_event_parsers(line);
      slow += c.fast ? 0 : 1;
      if (!c.difference.empty()) {
        std::fprintf(stderr, "MISMATCH at %s:%lld: %s\n  line: %.*s\n", plain.c_str(), static_cast<long long>(number),
                     c.difference.c_str(), static_cast<int>(line.size()), line.data());
        bad = true;
      }
    });
    if (bad) return 1;
    std::printf("check: %lld lines, event_from_json_line's Event equal to the reference's field for field on every "
                "line (%lld lines left the fast path); %.1f CPU s\n",
                static_cast<long long>(number), static_cast<long long>(slow), clock_s(CLOCK_PROCESS_CPUTIME_ID) - t0);
    int n = 0, unusual_slow = 0;
    for (const std::string& line : fencecheck::testing::unusual_event_lines()) {
      ++n;
      const auto c = fencecheck::testing::compare_event_parsers(line);
      unusual_slow += c.fast ? 0 : 1;
      if (!c.difference.empty()) {
        std::fprintf(stderr, "MISMATCH on unusual line %d: %s\n  line: %s\n", n, c.difference.c_str(), line.c_str());
        return 1;
      }
    }
    std::printf("check: %d unusual lines (malformed, escapes, nulls, repeated and unknown keys, out-of-range "
                "numbers), same Event or same message from both; %d of them left the fast path\n",
                n, unusual_slow);
  }

  // The passes, run round-robin `reps` times so that a neighbour's load spreads over all of them.
  std::vector<Pass> passes;
  std::vector<std::function<std::int64_t()>> bodies;
  const auto add = [&](std::string name, std::function<std::int64_t()> body) {
    if (name.find(only) == std::string::npos) return;
    passes.push_back({std::move(name), {}, {}, 0});
    bodies.push_back(std::move(body));
  };
  add("split (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, [&](std::string_view line) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  const auto read_lines = [&](const std::filesystem::path& path, const std::function<void(std::string_view)>& fn) {
    std::int64_t n = 0;
    fh::for_each_history_line(path, [&](std::string_view line, std::size_t) {
      fn(line);
      ++n;
    });
    return n;
  };
  add("read+split plain", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(plain, [&](std::string_view line) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  add("read+split .zst", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += line.size(); });
    g_sink = g_sink + sum;
    return n;
  });
  add("nlohmann (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, [&](std::string_view line) {
      sum += fold(fencecheck::detail::event_from_json_line_nlohmann(line));
    });
    g_sink = g_sink + sum;
    return n;
  });
  add("simdjson (memory)", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = for_each_line(text, [&](std::string_view line) {
      sum += fold(fencecheck::event_from_json_line(line));
    });
    g_sink = g_sink + sum;
    return n;
  });
  add(".zst + nlohmann", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += fold(fencecheck::detail::event_from_json_line_nlohmann(line)); });
    g_sink = g_sink + sum;
    return n;
  });
  add(".zst + simdjson", [&] {
    std::uint64_t sum = 0;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) { sum += fold(fencecheck::event_from_json_line(line)); });
    g_sink = g_sink + sum;
    return n;
  });
  add(".zst + padded simdjson", [&] {  // the checkers' read: each line parsed where it lies, one Event reused
    std::uint64_t sum = 0;
    fencecheck::Event e;
    const std::int64_t n = read_lines(zst, [&](std::string_view line) {
      fencecheck::event_from_padded_line(line, e);
      sum += fold(e);
    });
    g_sink = g_sink + sum;
    return n;
  });
  add("load .zst, nlohmann", [&] {  // load_history_jsonl as it was before simdjson
    fh::History h;
    fh::for_each_history_line(zst, [&](std::string_view line, std::size_t) {
      if (line.find_first_not_of(" \t") != std::string_view::npos)
        h.add(fencecheck::detail::event_from_json_line_nlohmann(std::string(line)));
    });
    g_sink = g_sink + (h.empty() ? 0 : fold(h[h.size() - 1]));
    return static_cast<std::int64_t>(h.size());
  });
  add("load_history_jsonl .zst", [&] {
    const fh::History h = fh::load_history_jsonl(zst);
    g_sink = g_sink + (h.empty() ? 0 : fold(h[h.size() - 1]));
    return static_cast<std::int64_t>(h.size());
  });
  for (int r = 0; r < reps; ++r) {
    for (std::size_t i = 0; i < passes.size(); ++i) {
      const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
      passes[i].events = bodies[i]();
      passes[i].cpu_s.push_back(clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
      passes[i].wall_s.push_back(clock_s(CLOCK_MONOTONIC) - w0);
    }
  }

  std::printf("\n%d runs per pass, median; MB = 10^6 bytes of plain JSON lines; one thread\n", reps);
  std::printf("%-24s %10s %12s %12s %14s %10s  %s\n", "pass", "events", "CPU s", "wall s", "events/CPU s",
              "MB/CPU s", "CPU s of each run");
  for (const Pass& p : passes) {
    const double cpu = median(p.cpu_s), wall = median(p.wall_s);
    std::string runs;
    for (double c : p.cpu_s) runs += (runs.empty() ? "" : " ") + std::to_string(c).substr(0, 6);
    std::printf("%-24s %10lld %12.3f %12.3f %12.2f M %10.1f  %s\n", p.name.c_str(), static_cast<long long>(p.events), cpu,
                wall, static_cast<double>(p.events) / cpu / 1e6, bytes / 1e6 / cpu, runs.c_str());
    if (p.events != events) {
      std::fprintf(stderr, "pass %s saw %lld lines, the file has %lld\n", p.name.c_str(),
                   static_cast<long long>(p.events), static_cast<long long>(events));
      return 1;
    }
  }
  std::printf("load average at end: %s\n", loadavg().c_str());
  return 0;
}
