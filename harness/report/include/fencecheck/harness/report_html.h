// fencecheck — report.html: one run's incident drawn as a picture, then the verdict with its
// evidence. Self-contained: one file, inline CSS and inline SVG generated here, no network, no
// external script, style sheet, font or image (docs/report-format.md, "report.html").
//
// What the page shows, top to bottom:
//  - the scenario, whether its expectation was met, the combined verdict and the figures; each
//    black-box worker (<ul id="black-box-workers">, one <li data-worker> each) with "black box:
//    judged from the lock service and the resource";
//  - "Protocol errors" (<section id="protocol-errors">, only when there are any): per line that
//    broke the worker protocol, the worker, line number, problem and the line as received;
//  - "What happened": the notable events as sentences ("w1 measured a pause of 6.00 s", "w1's
//    write with token 2 was rejected: high-water 3"), each linked to its event;
//  - the timeline (<svg id="timeline">), one time axis (seconds since run.start) for every lane:
//      faults      a window per fault (kind, target, measured length);
//      lock        the lock service's view: which token owns the lock when (the lowest live
//                  create_revision), key creations ("grants"), deletes told apart as lease expiry
//                  during work (red), release or other delete;
//      <worker>    one lane per worker (subtitle "black box" and data-black-box="true" for a
//                  worker that sent no events): lease held (a bar per token, from acquire.ok), and after
//                  the lock service deleted its key while the worker still believed it held it, a
//                  hatched "stale" bar; pauses shaded with their measured length; every chunk
//                  written as a mark: accepted, rejected (with token and high-water), outcome
//                  unknown, or accepted below the key's high-water mark (what fencing prevents:
//                  exactly the writes the stale-write-accepted checker names; when that checker
//                  did not judge, none is marked and the timeline says why, <p id="stale-unjudged">);
//      high-water  per resource key: the store's high-water mark over time (a step line), every
//                  write's token as a point, rejections marked;
//  - the verdict: each checker, each anomaly with links to the events that prove it;
//  - the figures, and the event table (every history event, id "ev-<index>").
// Marks carry class names and data-* attributes (data-worker, data-token, data-high-water,
// data-duration-s, ...) so tools and tests can read the picture; a mark for history event N has
// id "mark-N" and links to "#ev-N"; the event row links back.
// A small inline script only annotates the page after layout (data-label-overlaps on the
// timeline); the page reads the same without it.
//
// Thread-safety: pure function of its inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/expectation.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/orchestrator.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// The whole run at a glance, counted while its history file is read once (load_report_history):
/// what happened in each second since the first event, whatever the run's length. Its memory is
/// one entry per second of the run (8 h: 28,800 entries of 24 bytes), never per event.
struct RunOverview {
  /// Counts of one second of the run (receive times).
  struct Second {
    std::uint32_t accepted = 0;  ///< write.ok
    std::uint32_t rejected = 0;  ///< write.fail with a high_water: refused by the fence
    std::uint32_t acquired = 0;  ///< acquire.ok
    std::uint32_t deletes = 0;   ///< lock.delete (releases and expiries)
    std::uint32_t faults = 0;    ///< fault.inject
    std::uint32_t events = 0;    ///< every event
  };
  std::int64_t t0_ns = 0;        ///< the first event's receive time (0 with no events)
  std::vector<Second> seconds;   ///< seconds[s]: the events received in [t0 + s, t0 + s + 1) s
  /// Adds one event. Events come in history order; one without a receive time (t_ns 0) is not
  /// placed. Not thread-safe.
  void observe(const Event& e);
  /// Seconds from the first event to receive time `t_ns`. Pure.
  [[nodiscard]] double rel_s(std::int64_t t_ns) const { return static_cast<double>(t_ns - t0_ns) / 1e9; }
};

/// Everything report.html is drawn from. References must outlive the call.
struct ReportData {
  const Scenario* scenario = nullptr;  ///< the plan (may be null: lanes then come from the history alone)
  const History& history;              ///< every event, in receive order (indices are event ids)
  const ReadBack& readback;            ///< the resource's contents (may be empty: the run never read back)
  const Analysis& analysis;            ///< checkers and figures
  const ScenarioResult& result;        ///< expectation text, met, reasons, figures, duration
  std::string generator = "fencecheck run";  ///< what wrote the page ("fencecheck report" when re-rendered)
  /// Events in the whole history when `history` holds only its first ones (a long run's page is
  /// drawn from its first kReportHistoryEvents, load_report_history); 0 or history.size(): whole.
  std::size_t history_events = 0;
  /// The accept log when the caller read it packed (read_readback_file with a ReadBackLogSink:
  /// readback.log is then empty); null: readback.log is the log.
  const PackedLog* log = nullptr;
  /// The whole run at a glance (load_report_history); null: none is drawn.
  const RunOverview* overview = nullptr;
  /// A window page (`fencecheck report --from --to`): `history` is the window's events, the first
  /// of them history event `first_index`, and `analysis` refers to them by window position
  /// (window_analysis()). The page then draws the window and points to report.html for the
  /// verdict and the figures. nullopt: the run's own page.
  std::optional<std::size_t> first_index = std::nullopt;
  /// The command that renders a time window of this run, for the page's list of windows around
  /// each fault and anomaly ("fencecheck report RUN_DIR"); empty: not listed.
  std::string window_command = {};
  /// On a window page, the run's own analysis (history indices of the whole file), which the
  /// overview and the windows list read; null: `analysis` is the run's.
  const Analysis* run_analysis = nullptr;
};

/// How many of a history's first events a page draws (timeline, story, event table): a long run's
/// page stays under 5 MB and opens in a browser within 2 s however many events it has (a drawn
/// event costs about 560 bytes: a timeline mark of ~360 and an event-table row of ~200, measured
/// on the 90 s soak; docs/performance.md). The verdict, anomalies and figures are the whole run's;
/// the events they cite beyond this many are listed from the analysis's copies, "The whole run"
/// draws every event counted per time bucket (RunOverview), and `fencecheck report --from --to`
/// draws any window of the run in full on a page of its own.
inline constexpr std::size_t kReportHistoryEvents = 4'000;

/// A history file's first `limit` events (History indices as in the file) and how many events it
/// has in all, reading it once in bounded memory (for_each_history_event). Throws HistoryError as
/// load_history_jsonl does, for a bad line anywhere in the file.
struct ReportHistory {
  History first;            ///< the first min(limit, events) events
  std::size_t events = 0;   ///< every event of the file
  RunOverview overview;     ///< the whole file's
};
[[nodiscard]] ReportHistory load_report_history(const std::filesystem::path& path, std::size_t limit = kReportHistoryEvents);

/// The events of a history file received in [from, to] (seconds since its first event), at most
/// `limit` of them from the window's start: they are contiguous in the file (receive order), so
/// the window is `events` from history index `first_index`. Throws HistoryError as
/// load_report_history does.
struct ReportWindow {
  History events;
  std::size_t first_index = 0;
  std::size_t file_events = 0;  ///< every event of the file
  bool cut = false;             ///< the window held more than `limit` events: the first `limit` kept
};
[[nodiscard]] ReportWindow load_report_window(const std::filesystem::path& path, double from_s, double to_s,
                                              std::size_t limit = kReportHistoryEvents);

/// `analysis` as a window page of the events [first, first + count) reads it: every history
/// index inside the window becomes its position in the window; what lies outside is dropped (an
/// anomaly's evidence outside the window, a fault or pause outside it). Pure.
[[nodiscard]] Analysis window_analysis(const Analysis& analysis, std::size_t first, std::size_t count);

/// The whole page, UTF-8. Never throws for odd histories (events missing fields are drawn where
/// they can be, or only listed in the event table).
[[nodiscard]] std::string render_report_html(const ReportData& data);

/// Writes render_report_html() to path atomically (temporary file in the same directory, then
/// rename). Throws std::runtime_error naming the path.
void write_report_html(const std::filesystem::path& path, const ReportData& data);

}  // namespace fencecheck::harness
