// fencecheck — verdict.json: the run's conclusion as one self-contained JSON document.
//
// Schema (schema_version 1; field names are stable, snake_case; see docs/scenario-format.md,
// "verdict.json"):
// {
//   "schema_version": 1,
//   "verdict": "valid" | "invalid" | "unknown",          // combined: the worst checker verdict
//   "expectation": {"met": bool, "reasons": [string]},
//   "black_box_workers": [str],      // workers that sent no worker-protocol event, sorted
//   "protocol_errors": [             // lines that broke the worker protocol, in history order
//     {"worker": str, "line_no": int|null, "detail": str, "line": str, "index": int, "reason": str}],
//   "checkers": [                                          // worst first
//     {"name": str, "verdict": str, "error": str,           // error: "" unless the checker failed
//      "evidence": [str],                                   // the sources it used (checker.h kEvidence*)
//      "anomalies": [
//        {"name": str, "description": str, "key": str, "segment": int|null,
//         "tokens": [int], "clients": [str], "evidence": [int], "readback_seqs": [int],
//         "evidence_events": [ {"index": int, <the event's own fields, as in history.jsonl>} ]}]}],
//   "figures": {
//     "lease_expiries_during_work": int,
//     "lease_expiries_undecided": int (deletes of a black box's holding without the issuer's word:
//                                      > 0 makes lease_expiries_during_work a lower bound),
//     "expiries_during_work": [{"worker","lock","lock_key","token","lease_id"|null,"revision"|null,
//                               "t_ns","evidence":[int]}],
//     "pauses": [{"worker","duration_ns","token"|null,"index","t_ns"}],
//     "longest_pause_ns": {"<worker>": int},
//     "rejected_writes_total": int, "rejected_writes_history": int, "rejected_writes_readback": int,
//     "rejected_writes_unjustified_history": int, "rejected_writes_unjustified_readback": int,
//     "invalid_requests_history": int (write.fails without a high_water: invalid requests, not rejections),
//     "rejected_writes": [{"key","client","history","readback"}],
//     "faults": [{"fault","target","planned_ns"|null,"actual_ns"|null,"inject_index",
//                 "heal_index"|null,"inject_t_ns","heal_t_ns"|null}],
//     "rejections_per_token": [{"client","token","history","readback","count"}],
//     "max_rejections_per_token": int,
//     "effects_applied": int, "duplicate_effects": int,
//     "counters": [{"key","expected","unknown","actual"|null}],   // expected = acknowledged increments
//     "progress_after_heal": null | {"heal_index","heal_t_ns","window_ns","pending",
//                                    "first_write_ok"|null,"delay_ns"|null,"made_progress"},
//     "unknown_outcomes": [{"index","worker","key","segment"|null,"chunk"|null,"token"|null,
//                           "resolution": "applied"|"rejected"|"not-applied"|"unresolved",
//                           "seq"|null,"note"}]   // every write.info, what the read-back says of it
//   },
//   "evidence_events": [ {"index": int, <event fields>} ]  // every event cited anywhere, by index
// }
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/expectation.h"

namespace fencecheck::harness {

inline constexpr int kVerdictSchemaVersion = 1;

/// The whole verdict.json document.
[[nodiscard]] nlohmann::json to_json(const Analysis& analysis, const ExpectationResult& expectation);
/// The same document, taking the evidence copies from the full history (identical to the above
/// for an Analysis made by analyze() from this history), plus "lock": the lock name the run used,
/// from the history's run.start (absent when it has none).
[[nodiscard]] nlohmann::json verdict_to_json(const Analysis& analysis, const ExpectationResult& expectation,
                                             const History& history);
/// The same document for an Analysis that already holds its evidence copies (analyze() and
/// analyze_history_file() make them), plus "lock" when `lock` is not empty (the run's lock name,
/// e.g. HistoryTally::lock()): what the orchestrator and `fencecheck report` write without holding
/// the history.
[[nodiscard]] nlohmann::json verdict_to_json(const Analysis& analysis, const ExpectationResult& expectation,
                                             std::string_view lock);
/// Pieces, for reports that embed them. `events` supplies the evidence copies (may be empty).
[[nodiscard]] nlohmann::json to_json(const Anomaly& anomaly, const std::map<std::size_t, Event>& events);
[[nodiscard]] nlohmann::json to_json(const Figures& figures);

}  // namespace fencecheck::harness
