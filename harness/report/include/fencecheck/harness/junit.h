// fencecheck — JUnit XML: the run's results in the format CI servers read (Jenkins' JUnit
// plugin, GitLab's unit test reports, and most others).
//
// Shape (the common "Ant JUnit" schema; docs/report-format.md, "junit.xml"):
//   <?xml version="1.0" encoding="UTF-8"?>
//   <testsuites name="fencecheck" tests="2" failures="1" errors="0" skipped="0" time="17.1">
//     <testsuite name="smoke" tests="2" failures="1" errors="0" skipped="0" time="17.1"
//                timestamp="2026-11-30T11:33:19" hostname="ci-7">
//       <testcase name="sigstop-past-lease" classname="fencecheck.smoke" time="8.3">
//         <failure type="interleaved-segment" message="expected a safe run, but ...">
//           reasons, each protocol error's offending line, the black-box workers, every anomaly
//           with its evidence events, the run directory</failure>
//         <system-out>expectation, verdict, figures, black-box workers, run directory and report
//           paths</system-out>
//       </testcase>
//       <testcase ...><error type="environment" message="etcd not found ..."/></testcase>
//       <testcase ...><skipped message="..."/></testcase>
//     </testsuite>
//   </testsuites>
// One <testsuite> per `fencecheck run` (or `fencecheck report`), one <testcase> per scenario.
// A scenario that did not meet its expectation is a <failure>; one the harness could not run
// (environment, internal error) an <error>; one skipped (--skip-unavailable) <skipped>.
//
// Written with pugixml: every attribute and text is escaped by it; text is first made valid
// XML 1.0 (control characters and invalid UTF-8 are spelled out as "\xNN"), so the file always
// parses. Thread-safety: pure functions; write_junit() writes one file (temporary + rename).
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/orchestrator.h"

namespace fencecheck::harness {

/// One <testcase>.
struct JUnitCase {
  enum class Status { kPassed, kFailed, kError, kSkipped };
  std::string name;       ///< the scenario's name
  std::string classname;  ///< "fencecheck.<suite>", e.g. "fencecheck.smoke" ("fencecheck" without a suite directory)
  double time_s = 0;      ///< the scenario's duration, seconds
  Status status = Status::kPassed;
  std::string type;        ///< failure/error type: the anomaly name(s), "expectation-not-met", "environment", "internal"
  std::string message;     ///< failure/error/skipped message: one line (the first reason)
  std::string details;     ///< failure/error element text: every reason, anomaly and evidence event
  std::string system_out;  ///< <system-out>: expectation, verdict, figures, paths
};

/// One <testsuite> inside <testsuites>.
struct JUnitSuite {
  std::string name = "fencecheck";  ///< the suite's name, e.g. "smoke" or "nightly"
  std::string timestamp;            ///< ISO 8601 UTC without zone ("2026-11-30T11:33:19"), as the schema wants; empty: the time of rendering
  std::string hostname;
  std::vector<JUnitCase> cases;
};

/// The suite name for scenarios loaded from `source`: its directory's name ("smoke" for
/// scenarios/smoke/x.yaml), or "fencecheck" when there is none.
[[nodiscard]] std::string junit_suite_name(std::string_view source);

/// The <testcase> for one scenario's result. `analysis` (may be null: the run never got to
/// judging) supplies each anomaly's description and evidence events; `origin_ns` (the history's
/// run.start t_ns, 0 if unknown) makes evidence times relative ("+2.341 s"). `suite` names the
/// classname. Pure.
[[nodiscard]] JUnitCase junit_case(const ScenarioResult& result, const Analysis* analysis, std::int64_t origin_ns,
                                   std::string_view suite);

/// "YYYY-MM-DDTHH:MM:SS" in UTC.
[[nodiscard]] std::string junit_timestamp(std::time_t t);

/// The whole document, UTF-8, with the XML declaration. Pure.
[[nodiscard]] std::string render_junit(const JUnitSuite& suite);

/// Writes render_junit() to path atomically (a temporary file in the same directory, renamed),
/// creating the parent directory. Throws std::runtime_error naming the path.
void write_junit(const std::filesystem::path& path, const JUnitSuite& suite);

}  // namespace fencecheck::harness
