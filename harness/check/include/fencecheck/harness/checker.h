// fencecheck — checkers: pure functions of (history, read-back) -> verdict with anomalies.
//
// A checker never touches the system under test and does no I/O; it only reads the history the
// orchestrator recorded and what the resource returned when read back. Verdicts follow Jepsen:
// valid (checked, no violation), invalid (a violation, with evidence), unknown (could not decide:
// the checker threw, or nothing was checked). Combining takes the worst: invalid > unknown > valid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/harness/history.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

enum class Verdict { kValid, kInvalid, kUnknown };

/// "valid", "invalid", "unknown".
[[nodiscard]] std::string_view verdict_name(Verdict v);
[[nodiscard]] std::optional<Verdict> verdict_from_name(std::string_view name);
/// The worse of the two: invalid beats unknown beats valid.
[[nodiscard]] Verdict combine(Verdict a, Verdict b);
/// How bad a verdict is: valid 0, unknown 1, invalid 2.
[[nodiscard]] int severity(Verdict v);

/// One violation, with the evidence that shows it.
struct Anomaly {
  std::string name;                    ///< a known anomaly name, e.g. "interleaved-segment"
  std::string description;             ///< one human sentence naming what happened
  std::string key;                     ///< resource key ("" when not about one key)
  std::optional<std::int64_t> segment; ///< segment, when the anomaly is about one
  std::vector<std::int64_t> tokens;    ///< every token involved, sorted, unique
  std::vector<std::string> clients;    ///< every writer involved, sorted, unique
  std::vector<std::size_t> evidence;   ///< history indices, sorted, unique
  std::vector<std::int64_t> readback_seqs;  ///< the read-back's seq numbers involved, sorted, unique
};

struct CheckerResult {
  std::string name;  ///< the checker's name
  Verdict verdict = Verdict::kUnknown;
  std::vector<Anomaly> anomalies;
  std::string error;  ///< why the verdict is unknown (the exception's message), else empty
};

/// A checker. Implementations are pure and stateless: check() may run concurrently.
class Checker {
 public:
  virtual ~Checker() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual CheckerResult check(const History& history, const ReadBack& readback) const = 0;
};

using Checkers = std::vector<std::unique_ptr<Checker>>;

/// Every checker's result plus the combined verdict.
struct CheckRun {
  Verdict verdict = Verdict::kUnknown;
  std::vector<CheckerResult> results;  ///< worst first (stable: ties keep the checkers' order)
};

/// Runs each checker; an exception becomes that checker's unknown verdict with the message in
/// `error`. The combined verdict is the worst of all; with no checkers it is unknown (nothing was
/// checked, which must never read as safe).
[[nodiscard]] CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback);

/// Sorts and de-duplicates an anomaly's tokens, clients, evidence and seqs (checkers call it).
void normalize(Anomaly& a);

}  // namespace fencecheck::harness
