// fencecheck — what `fencecheck run` checks on its command line before anything starts.
//
// The project's rule for bad input (README, "Exit codes"): found before any process, directory or
// port is taken, with a message naming the flag, the path and what is wrong. Each check returns
// that message (nullopt: fine) and leaves nothing behind: a probe file or directory it creates to
// test writability is removed again. access(2) is not used for writability: it says yes to root
// for places such as /proc that take no new entry, so the checks create a real one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/scenario.h"

namespace fencecheck::harness {

/// A program the bin directory must hold, and why ("needed by scenarios with a reference worker").
struct NeededProgram {
  std::string name;  ///< "fencecheck-worker", "fencecheck-store"
  std::string why;
};

/// The programs a suite needs from the bin directory, each once, in first-need order:
/// "fencecheck-worker" when a scenario has a reference worker (a worker without `command:`), then
/// what each scenario's resource kind says it runs (ResourceKind::programs: kind store
/// "fencecheck-store"). Pure.
[[nodiscard]] std::vector<NeededProgram> needed_programs(const std::vector<Scenario>& scenarios);

/// `--bin-dir DIR` (explicit = true) or the default, the directory of the running fencecheck:
/// DIR must be a directory holding each of `programs` as an executable regular file. The message
/// names the flag (or "beside fencecheck"), DIR and every program missing or not executable, e.g.
/// "--bin-dir /opt/x: not a directory" or "--bin-dir /opt/x: no fencecheck-worker in it (needed by
/// scenarios with a reference worker)". Never throws.
[[nodiscard]] std::optional<std::string> check_bin_dir(const std::filesystem::path& dir, bool explicit_flag,
                                                       const std::vector<NeededProgram>& programs);

/// `--run-root DIR`: DIR, or when it does not exist yet the nearest ancestor that does (where
/// RunDirectory::create will create it), must be a directory in which this process can create a
/// directory: a probe directory is created there and removed. Catches a path below a regular
/// file ("/etc/passwd/runs"), below /proc or /sys, a read-only file system, missing permissions.
/// Message: "--run-root PATH: <why>". Never throws; creates nothing that stays.
[[nodiscard]] std::optional<std::string> check_run_root(const std::filesystem::path& run_root);

/// `--junit FILE`: FILE must not be a directory, and its directory must exist (it is never created:
/// a typo must not become a directory tree made as root) and take a new file (a probe file is
/// created and removed). The one exception is FILE directly in the run root when that does not
/// exist yet: `fencecheck run` creates the run root before the first scenario (check_run_root
/// vouches for it). Message: "--junit FILE: <why>". Never throws; creates nothing that stays.
[[nodiscard]] std::optional<std::string> check_junit_path(const std::filesystem::path& junit,
                                                          const std::filesystem::path& run_root);

}  // namespace fencecheck::harness
