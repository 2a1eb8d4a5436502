// fencecheck — the run directory: everything one scenario run leaves for people and tools.
//
//   <run_root>/<UTC yyyymmddTHHMMSSZ>-<scenario>[-N]/
//     scenario.json   the validated plan, defaults filled in
//     history.jsonl   every event, one JSON object per line, in receive order (written as it
//                     happens, so a killed harness leaves the history up to that point)
//     readback.json   the resource's contents after the run
//     verdict.json    checker verdicts, anomalies with their evidence, figures, expectation
//     metrics.prom    Prometheus text format (node_exporter textfile collector)
//     faults.ledger   every fault injected and healed (fencecheck cleanup reads it)
//     harness.log     the orchestrator's log; logs/<process>.log each child's stderr
//     night           the id of the `fencecheck run` invocation that made it (night.h)
//   <run_root>/latest -> the newest run directory
//   <run_root>/night-<id>.json, latest-night.json, latest-failed: each night's summary (night.h)
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace fencecheck::harness {

/// Where run ids are claimed machine-wide: /run/fencecheck/run-ids when /run is writable (root),
/// else <temp dir>/fencecheck-run-ids-<uid>. One empty file per live run, named by its id. Never throws
/// (std::filesystem::temp_directory_path's error aside).
[[nodiscard]] std::filesystem::path run_ids_directory();

class RunDirectory {
 public:
  /// Creates a fresh, unique run directory (never reusing an existing one: a suffix -2, -3, ...
  /// is added) and points <run_root>/latest at it. Throws std::runtime_error naming the path.
  /// The run id is also unique on the machine, across run roots: it is claimed first as a file
  /// of run_ids_directory() (O_EXCL), removed when the last copy of the returned object goes.
  /// Two runs of one scenario started in the same second from two run roots (ctest, two nightly
  /// jobs) used to get the same id, and so the same namespaces and cgroups.
  /// The directory stays locked (flock(2), exclusive) while any copy of the returned object
  /// lives, so that another harness's `--keep` never removes a run that is still going.
  static RunDirectory create(const std::filesystem::path& run_root, const std::string& scenario);

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  /// The directory's name, unique on this machine (see create()): names the run's locks,
  /// namespaces, cgroups and the workers' directories.
  [[nodiscard]] const std::string& run_id() const { return run_id_; }
  /// logs/<name>.log (the logs/ directory exists).
  [[nodiscard]] std::filesystem::path log_path(const std::string& name) const;
  /// Writes name (pretty JSON) atomically: a temporary file renamed into place.
  void write_json(const std::string& name, const nlohmann::json& doc) const;
  /// Writes name atomically (a temporary file renamed into place), its content written by `write`
  /// straight to the file (a document too large to build in memory first, e.g.
  /// write_readback_json()); a newline is added after it. Throws std::runtime_error naming the
  /// file when it cannot be written, and whatever `write` throws; either way the temporary file is
  /// removed and `name` is left as it was. write_json() is this with the document's dump.
  void write_with(const std::string& name, const std::function<void(std::ostream&)>& write) const;

  /// True when a live RunDirectory (of this or another process) holds the run directory at path.
  /// False for a finished or killed run (the kernel drops a dead process's lock), or when path
  /// cannot be opened. Never throws.
  [[nodiscard]] static bool in_use(const std::filesystem::path& path) noexcept;

  /// Adds harness.log as a sink of spdlog's default logger until the returned guard is destroyed.
  [[nodiscard]] std::shared_ptr<void> attach_log() const;

 private:
  std::filesystem::path path_;
  std::string run_id_;
  std::shared_ptr<int> lock_fd_;  ///< the directory, flock'ed exclusively; closed with the last copy
  std::shared_ptr<const std::filesystem::path> id_marker_;  ///< the id's claim; removed with the last copy
};

}  // namespace fencecheck::harness
