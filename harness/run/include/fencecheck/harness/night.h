// fencecheck — a night: one invocation of `fencecheck run`, and what it leaves for the on-call
// person (docs/nightly.md, "After a night"; docs/report-format.md, "The night's summary").
//
//   <run_root>/<run dir>/night         the id of the invocation that made the run dir, one line
//   <run_root>/night-<id>.json         the night's summary: every scenario, its verdict, met, exit
//                                      code and run directory, and the night's exit code
//   <run_root>/latest-night.json   ->  the newest night's summary
//   <run_root>/latest-failed       ->  the run directory of the newest night's first failed
//                                      scenario; absent when every scenario of that night met its
//                                      expectation (so its presence alone says "last night failed")
//
// `--keep-nights N` and `--keep-days D` (report.h, RetentionPolicy) keep or remove all run
// directories of one night together, by the `night` file.
#pragma once

#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/orchestrator.h"

namespace fencecheck::harness {

/// A night's id: "<UTC yyyymmddTHHMMSSZ of its start>-<pid>", e.g. "20261202T023000Z-4242": sorts
/// by start time, unique per host at any one second (two harnesses never share a pid at once). Pure.
[[nodiscard]] std::string new_night_id(std::time_t started, long pid);

/// Writes `id` and a newline to <run_dir>/night. Throws std::runtime_error naming the file.
void record_night(const std::filesystem::path& run_dir, const std::string& id);

/// The id in <run_dir>/night: nullopt when there is none (a run made before nights were recorded,
/// or a directory that is not a run) or it is empty or not one line of [A-Za-z0-9_.-]. Never throws.
[[nodiscard]] std::optional<std::string> recorded_night(const std::filesystem::path& run_dir);

/// <run_root>/night-<id>.json. Pure.
[[nodiscard]] std::filesystem::path night_summary_path(const std::filesystem::path& run_root, const std::string& id);

/// True when `result` counts against the night: a nonzero exit code, except a scenario skipped with
/// --skip-unavailable (exit code 3, skipped), as suite_exit_code() counts it. Pure.
[[nodiscard]] bool night_failure(const ScenarioResult& result);

struct NightSummary {
  std::string id;
  std::time_t started = 0;   ///< when the invocation began (UTC seconds)
  std::time_t finished = 0;  ///< when its last scenario ended
  int exit_code = 0;         ///< the invocation's exit code (130: interrupted)
  bool interrupted = false;
  std::vector<ScenarioResult> results;  ///< in run order
};

/// The summary document: {"night", "started", "finished" (ISO 8601 UTC), "exit_code",
/// "interrupted", "scenarios" (count), "met" (count), "failed" (labels of night_failure results),
/// "runs": [ScenarioResult::to_json() + "label" + "run_id" (the run directory's name, "" when the
/// run never got one)]}. Pure.
[[nodiscard]] nlohmann::json night_summary_json(const NightSummary& night);

/// What write_night_summary() left.
struct NightFiles {
  std::filesystem::path summary;                     ///< night-<id>.json
  std::optional<std::filesystem::path> first_failed;  ///< the run dir latest-failed points at
};

/// Writes <run_root>/night-<id>.json atomically (a temporary file renamed into place), points
/// <run_root>/latest-night.json at it, and <run_root>/latest-failed at the run directory of the
/// first failed scenario that has one, or removes latest-failed when none (each link replaced
/// atomically with rename(2), as RunDirectory::create does for `latest`). Throws
/// std::runtime_error naming the file that could not be written.
NightFiles write_night_summary(const std::filesystem::path& run_root, const NightSummary& night);

/// The lines printed after the results table: "night <id>: <met> of <n> met", then per failed
/// scenario "FAILED <label> (exit <code>): <run_dir>/report.html" (or its first reason when it
/// never got a run directory), then "summary: <file>" and, when one failed, "runs/latest-failed ->
/// <run dir>". Pure.
[[nodiscard]] std::string format_night_footer(const NightSummary& night, const NightFiles& files,
                                              const std::filesystem::path& run_root);

}  // namespace fencecheck::harness
