// fencecheck bench — the whole analysis of a history straight from its file (issue 16;
// stream_check.h: analyze_history_file over history.jsonl.zst, one event held at a time: the
// streamed checker rules, the figures, the evidence copies), against the in-memory path
// (load_history_jsonl + analyze) where that still fits in memory.
//
// Usage: bench_stream_check [events] [--dir DIR] [--compare]
//   events     at least this many events (default 10^6; the generator adds fewer than 20)
//   --dir      keep the generated history-<events>.jsonl.zst in DIR and reuse it when present
//              (default: a temporary directory under $FENCECHECK_BENCH_TMP or /tmp, removed at exit)
//   --compare  also load the history into memory and analyze it there (analyze(), the same checkers):
//              exits 1 unless verdict.json of both is the same;
//              about 400 bytes per event, so only for sizes that fit
//
// The history is the checker benchmark's synthetic valid run (synthetic_history.h: holders taking
// turns on 50 keys, 4 writes per holding, every 64th holding paused past its lease and fenced),
// written event by event (never held whole), then compressed as a run's history is (level 1).
// The read-back is built alongside, its accept log packed as it goes (PackedLog, packed_log.h: what
// `fencecheck report` and the end of a run hand the checkers), and its resident size is reported.
//
// Figures, one thread: CPU seconds of analyze_history_file (the streamed rules, the figures and the
// evidence pass; CLOCK_PROCESS_CPUTIME_ID), events per CPU second, passes over the file, the peak
// state (HistoryFileAnalysis::peak_state_bytes), and
// the process's peak RSS (VmHWM) minus what the read-back held before the check began. The goal of
// issue 16: at least 2 M events per CPU second, and 10^8 events under 1 GiB.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "bench_util.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/verdict_json.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/stream_check.h"
#include "synthetic_history.h"

namespace fb = fencecheck::bench;
namespace fh = fencecheck::harness;
namespace fs = std::filesystem;

using fb::clock_s;

namespace {

int usage() {
  std::fprintf(stderr, "usage: bench_stream_check [events] [--dir DIR] [--compare]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t target = 1'000'000;
  std::string dir_arg;
  bool compare = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir_arg = argv[++i];
    else if (a == "--compare") compare = true;
    else if (!a.empty() && a[0] != '-') target = std::atoll(argv[i]);
    else return usage();
  }
  if (target <= 0) return usage();

  const char* tmp_root = std::getenv("FENCECHECK_BENCH_TMP");
  const fs::path dir = !dir_arg.empty() ? fs::path(dir_arg)
                                        : fs::path(tmp_root != nullptr ? tmp_root : "/tmp") /
                                              ("fencecheck-bench-stream-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path plain = dir / ("history-" + std::to_string(target) + ".jsonl");
  fs::path zst = plain;
  zst += ".zst";

  // The read-back is needed either way; the file is written only when not kept from before.
  fencecheck::ReadBack readback;  // its log stays empty: the entries go to `log`
  fh::PackedLog log;
  const double rss_start = fb::current_rss_mib();
  const bool write = !fs::exists(zst);
  std::int64_t events = 0;
  {
    std::ofstream out;
    if (write) out.open(plain, std::ios::binary | std::ios::trunc);
    const double t0 = clock_s(CLOCK_MONOTONIC);
    fb::generate_history(
        target,
        [&](const fencecheck::Event& e) {
          ++events;
          if (write) out << to_json_line(e) << '\n';
        },
        &readback, [&](const fencecheck::AcceptedWrite& w) { log.push_back(w); });
    if (write) {
      out.close();
      fh::compress_history(plain);
      std::printf("generated %s in %.1f s wall\n", zst.c_str(), clock_s(CLOCK_MONOTONIC) - t0);
    }
  }
  const double rss_readback = fb::current_rss_mib();
  const std::size_t packed_bytes = log.memory_bytes();
  std::printf("history: %lld events, %.1f MB .zst (%.1f bytes/event); read-back: %zu log entries (packed: %.1f MiB, "
              "%.1f bytes/entry; as AcceptedWrites: %.0f MiB), %zu chunks, %zu rejections, %.0f MiB resident\n",
              static_cast<long long>(events), static_cast<double>(fs::file_size(zst)) / 1e6,
              static_cast<double>(fs::file_size(zst)) / static_cast<double>(events), log.size(),
              static_cast<double>(packed_bytes) / 1048576.0, static_cast<double>(packed_bytes) / static_cast<double>(log.size()),
              static_cast<double>(log.size() * sizeof(fencecheck::AcceptedWrite)) / 1048576.0, readback.chunks.size(),
              readback.rejections.size(), rss_readback - rss_start);

  fh::CheckContext context;
  context.lease_ttl = std::chrono::seconds(2);
  const std::vector<std::string_view> names = fh::stream_rule_names();
  const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  const double w0 = clock_s(CLOCK_MONOTONIC);
  const fh::HistoryFileAnalysis run = fh::analyze_history_file(zst, readback, log, context);
  const double cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  const double wall = clock_s(CLOCK_MONOTONIC) - w0;
  const double peak = fb::peak_rss_mib();
  std::printf("streamed rules (%zu):", names.size());
  for (std::string_view n : names) std::printf(" %.*s", static_cast<int>(n.size()), n.data());
  std::printf("\n");
  const fh::Analysis& a = run.analysis;
  std::printf("analyze_history_file: %zu events, %u pass(es), %.2f CPU s (%.2f M events/CPU s), %.2f wall s, "
              "verdict %s, peak state %.1f MiB (%.1f bytes/event), peak RSS %.0f MiB (%.0f MiB above the read-back)\n",
              run.events, run.passes, cpu, static_cast<double>(run.events) / cpu / 1e6, wall,
              std::string(fh::verdict_name(a.verdict)).c_str(), static_cast<double>(run.peak_state_bytes) / 1048576.0,
              static_cast<double>(run.peak_state_bytes) / static_cast<double>(run.events), peak, peak - rss_readback);
  std::printf("  the packed log after the check, its index included: %.1f MiB\n", static_cast<double>(log.memory_bytes()) / 1048576.0);
  for (const fh::CheckerResult& r : a.checkers)
    std::printf("  %-26s %s, %zu anomalies\n", r.name.c_str(), std::string(fh::verdict_name(r.verdict)).c_str(),
                r.anomalies.size());
  std::printf("  state by part (peak MiB, bytes/event):");
  for (const auto& [part, bytes] : run.peak_state_by_rule)
    std::printf(" %s %.1f (%.1f)", part.c_str(), static_cast<double>(bytes) / 1048576.0,
                static_cast<double>(bytes) / static_cast<double>(run.events));
  std::printf("\n");
  std::printf("  figures: %zu expiries during work, %zu pauses, %lld rejected writes, %zu evidence events\n",
              a.figures.expiries_during_work.size(), a.figures.pauses.size(),
              static_cast<long long>(a.figures.rejected_writes_total()), a.evidence_events.size());

  int rc = 0;
  if (compare) {
    const double l0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    const fh::History history = fh::load_history_jsonl(zst);
    for (const fh::LoggedWrite w : log) readback.log.push_back(w.to_accepted_write());
    const fh::Analysis mem = fh::analyze(history, readback, context);
    std::printf("in memory (load_history_jsonl + analyze): %.2f CPU s, peak RSS %.0f MiB\n",
                clock_s(CLOCK_PROCESS_CPUTIME_ID) - l0, fb::peak_rss_mib());
    const fh::ExpectationResult none;
    const bool equal = fh::to_json(mem, none) == fh::to_json(a, none);
    std::printf("streamed == in memory (verdict.json): %s\n", equal ? "yes" : "NO");
    if (!equal) rc = 1;
  }
  if (dir_arg.empty()) fs::remove_all(dir);
  return rc;
}
