// fencecheck tests — the orphans of a test-only kind (tests/resources and tests/locks'
// test_only_kind_test.cpp): one per line of a file in the run directory, so that a test decides
// what `fencecheck cleanup`'s sweep finds. A line "stuck" is an orphan that could not be stopped.
// Works for either axis's OrphanReport (said, not_stopped). Not thread-safe.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace fencecheck::testing {

/// The report of kind `kind` for `file`: "<kind>: stopped orphan <line>" (+ " (forced)" with
/// force) per line, "<kind>: an orphan could not be stopped" per "stuck" line, counted in
/// not_stopped. No file: nothing found.
template <class Report>
Report listed_orphans(const std::filesystem::path& file, const std::string& kind, bool force) {
  Report out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line == "stuck") {
      out.said.push_back(kind + ": an orphan could not be stopped");
      ++out.not_stopped;
    } else {
      out.said.push_back(kind + ": stopped orphan " + line + (force ? " (forced)" : ""));
    }
  }
  return out;
}

}  // namespace fencecheck::testing
