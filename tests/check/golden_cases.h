// The cases of the checkers' golden record (check_golden_test.cpp) and what is recorded of each.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::golden {

/// Where a case's scenario comes from (CheckContext::of it, and its expectation); none: analyze()
/// without a context and no expectation.
struct ScenarioSource {
  enum class Kind { kNone, kYamlFile, kJsonFile, kYamlText };
  Kind kind = Kind::kNone;
  std::string value;  ///< the file's path, or the YAML text
};

/// One case: a history as history.jsonl's text, a read-back as readback.json's text (nullopt: an
/// empty read-back, as the report fuzz target takes an input without one) and a scenario.
struct Case {
  std::string name;  ///< unique and stable: "<origin>/<base>[/<corruption>]"
  std::string history;
  std::optional<std::string> readback;
  ScenarioSource scenario;
};

/// Every case, in a fixed order: each base case (fixtures, fuzz corpus, synthetic stories) followed
/// by its seeded corruptions. Deterministic: the same list on every machine and compiler (the
/// corruptions draw from std::mt19937_64, whose output the standard fixes, seeded per base by a
/// hash of its name). Reads the files under FENCECHECK_SOURCE_DIR.
[[nodiscard]] std::vector<Case> all_cases();

/// A case loaded as the checkers take it.
struct LoadedCase {
  harness::History history;
  ReadBack readback;                           ///< empty when the case has none
  harness::CheckContext context;               ///< CheckContext::of(*scenario), or empty
  const harness::Scenario* scenario = nullptr; ///< null when the case has none (cached; lives as long as the process)
};

/// This process's scratch directory, for files a test writes (load_case() writes its history file
/// there); made on first use, removed at exit.
[[nodiscard]] const std::filesystem::path& scratch_dir();

/// The case's history, read-back and context, or {"load_error": ...} as run_case() records it.
[[nodiscard]] std::variant<LoadedCase, nlohmann::json> load_case(const Case& c);

/// What today's checkers say on a case, as recorded: {"load_error": "..."} when the history or the
/// read-back does not load (report's wording, without the scratch file's path); else verdict.json
/// (verdict_to_json) without what only repeats other fields or is prose: each anomaly's
/// "description" and "evidence_events", the document's "evidence_events" and "schema_version",
/// and of the expectation only "met" (present when the case has a scenario). Nothing in it depends
/// on the clock or the machine.
[[nodiscard]] nlohmann::json run_case(const Case& c);

/// The first difference between a recorded result and a current one, as "<path>: recorded X, now Y"
/// (objects field by field in key order, arrays element by element, then their lengths); nullopt
/// when they agree. The path is a JSON pointer in which an element with a "name" is followed by
/// it: "/checkers/1[stale-write-accepted]/anomalies". Numbers that are both integers compare exactly; a floating-point number
/// compares with a relative tolerance of 1e-9, because GCC and clang may compute a figure that
/// differs in its last bits.
[[nodiscard]] std::optional<std::string> first_difference(const nlohmann::json& recorded, const nlohmann::json& now,
                                                          const std::string& path = "");

/// Counts over recorded results (run_case's form).
struct Tally {
  std::size_t cases = 0, valid = 0, invalid = 0, unknown = 0, load_errors = 0, anomalies = 0;
};
[[nodiscard]] Tally tally(const std::vector<nlohmann::json>& results);

}  // namespace fencecheck::golden
