// fencecheck — fencecheck-worker's command line (CLI11), kept in the library so it is testable.
#pragma once

#include <optional>
#include <string>

#include "fencecheck/workers/worker.h"

namespace fencecheck {

/// The outcome of parsing fencecheck-worker's arguments.
struct WorkerCli {
  std::optional<WorkerOptions> options;  ///< set when the worker should run
  std::string log_level = "info";        ///< --log-level for the stderr log (trace..off)
  int exit_code = 0;   ///< when !options: 0 after --help, 2 (kWorkerBadArgs) on a bad command line
  std::string output;  ///< when !options: the help text or the error message to print
};

/// Parses argv (argv[0] is the program name). Checks flag syntax and types (CLI11) and then
/// validate(); never throws. Flags: see WorkerOptions (each field names its flag) plus --log-level.
[[nodiscard]] WorkerCli parse_worker_cli(int argc, const char* const* argv);

}  // namespace fencecheck
