// fencecheck — checkers: pure functions of (history, read-back) -> verdict with anomalies.
//
// A checker never touches the system under test and does no I/O; it only reads the history the
// orchestrator recorded and what the resource returned when read back. Verdicts follow Jepsen:
// valid (checked, no violation), invalid (a violation, with evidence), unknown (could not decide:
// the checker threw, or nothing was checked). Combining takes the worst: invalid > unknown > valid.
//
// Some checkers need a little of the plan besides the history (fenced-out: the lease TTL; the
// checkers of side effects and counters: the job kind). They get it as a CheckContext, built from
// the scenario by CheckContext::of(); without one they fall back to what the history says.
//
// A worker that sent no events of its own (a black box: black_box_workers()) is judged only from
// the lock service's history, the resource's read-back and the harness's records; a checker that
// cannot judge it from those never says valid (run_checkers(); docs/architecture.md, "Black-box
// workers and protocol errors").
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fencecheck/harness/history.h"
#include "fencecheck/harness/history_index.h"
#include "fencecheck/harness/scenario.h"
#include "fencecheck/proto/readback.h"
#include "fencecheck/resources/resource_kind.h"

namespace fencecheck::harness {

/// How long one acquire may take after a heal (lease grant + lock + the first write) in the
/// liveness rules: fenced-out and expect.progress_after_heal allow lease TTL + this.
inline constexpr std::chrono::seconds kDefaultAcquireAllowance{2};

/// What checkers may know about the plan (value type; pure data, share freely).
struct CheckContext {
  /// The lease TTL the workers ask for. nullopt: unknown; checkers then use the largest ttl_ms of
  /// the workers' acquire.ok / acquire.invoke events.
  std::optional<std::chrono::milliseconds> lease_ttl;
  /// The lock name (etcd key prefix); "" when unknown (then every lock in the history counts).
  std::string lock;
  /// The job's kind; nullopt when unknown (then the checkers of counters and side effects judge
  /// whatever the read-back holds, and never say unknown for a missing section).
  std::optional<JobKind> job_kind;
  /// See kDefaultAcquireAllowance. >= 0.
  std::chrono::nanoseconds acquire_allowance = kDefaultAcquireAllowance;
  /// What the resource's read-back can tell (its kind's evidence, resource_kind.h); nullopt when
  /// unknown (then every part the read-back holds counts). A checker that requires a part the
  /// resource cannot give is not run: run_checkers() gives it unknown with the reason.
  std::optional<resources::Evidence> evidence;
  /// The resource kind's name ("store", "postgres", "http"), for messages; "" when unknown.
  std::string resource_kind;
  /// The lock-service kind ("etcd", "zookeeper", "redis", "redlock", "none"); "" when unknown. Kind none
  /// (a lock fencecheck does not manage) has no issuer history: the lock-service evidence is not
  /// there, so a checker that reads it (foreign-release, token-regression, unaccounted-write) answers unknown where it
  /// would say valid, with the reason kNoIssuerHistory; an invalid it proves from other sources stands.
  std::string lock_service_kind;
  /// The history's shared index (history_index.h), built once by analyze() for all checkers.
  /// Null, or built from another history (HistoryIndex::matches): each checker builds its own.
  std::shared_ptr<const HistoryIndex> index;
  /// The scenario's worker ids, in plan order; empty when unknown (then no worker is taken for a
  /// black box: black_box_workers() judges only the ids listed here).
  std::vector<std::string> workers;
  /// The workers of `workers` that sent no worker-protocol event (black_box_workers()), sorted.
  /// nullopt: not computed yet; run_checkers() fills it once for every checker, and a checker
  /// called alone computes it from `workers` and the history. Set it only to what
  /// black_box_workers() returns for this history.
  std::optional<std::vector<std::string>> black_box;
  /// What the chunks' bytes are (the scenario's job.payload). opaque: the system's own bytes, so a
  /// checker that judges the bytes themselves (EvidenceUse::needs_chunk_bytes: corrupt-chunk) is
  /// not run, unknown with kOpaquePayloadReason, and interleaved-segment takes each chunk's
  /// provenance from the resource's token and writer columns alone (it never decodes the bytes).
  PayloadMode payload = PayloadMode::kSelfDescribing;

  /// The context of a scenario: its lease TTL, lock name, job kind, worker ids, payload mode and its
  /// resource kind's evidence. Pure.
  [[nodiscard]] static CheckContext of(const Scenario& scenario);
};

/// A worker-protocol event: one of the kinds a worker reports about its own operations
/// (is_worker_event(): acquire.*, keepalive.fail, lease.lost, write.*, pause, release.*,
/// job.done). `hello` is not one: it says which protocol a worker speaks, nothing about what it
/// did; `log` is free text. Pure and thread-safe; never throws.
[[nodiscard]] bool is_worker_protocol_event(const Event& e);

/// The black-box workers: each id of `workers` from which the history holds no worker-protocol
/// event (is_worker_protocol_event with that source), sorted, unique; a worker the harness logged
/// as never started ("<id> never started: ...", its start_after trigger never came) did nothing
/// and is not one. Such a worker is judged only
/// from the lock service's own history, the resource's read-back and the harness's own records
/// (fault windows, worker.exit). The one place that decides it: run_checkers(), analyze() and the
/// checkers that need it all call this. `index`, when given, must have been built from `history`
/// (then only the kind column and the worker events' sources are read); stops scanning as soon
/// as every worker has spoken. Pure and thread-safe (reads only); throws only std::bad_alloc.
[[nodiscard]] std::vector<std::string> black_box_workers(const History& history, const std::vector<std::string>& workers,
                                                         const HistoryIndex* index = nullptr);
/// The context's black-box workers: context.black_box when set, else black_box_workers() of its
/// `workers` (using its index when it matches the history). Pure and thread-safe.
[[nodiscard]] std::vector<std::string> black_box_workers(const History& history, const CheckContext& context);

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
  std::string error;  ///< why the verdict is unknown (the exception's message, the evidence it lacked), else empty
  /// The evidence the verdict rests on, as source names (kEvidence* below), in that order; filled
  /// by run_checkers() from the checker's evidence_use() and the context.
  std::vector<std::string> evidence;
};

/// Evidence source names (CheckerResult::evidence, verdict.json "evidence").
inline constexpr std::string_view kEvidenceWorkerEvents = "worker-events";   ///< the workers' own events (worker protocol)
inline constexpr std::string_view kEvidenceHistory = "history";              ///< the harness's own records (faults, worker exits)
inline constexpr std::string_view kEvidenceLockService = "lock-service";     ///< the issuer's own grants and deletes
/// Why a checker that reads kEvidenceLockService is unknown under lock-service kind none.
inline constexpr std::string_view kNoIssuerHistory = "the scenario's lock service is kind none: no issuer history";
inline constexpr std::string_view kEvidenceChunks = "resource.chunks";       ///< each chunk slot's bytes as stored
/// Why a checker that judges the chunks' own bytes is unknown with `job.payload: opaque`.
inline constexpr std::string_view kOpaquePayloadReason = "payload: opaque: the bytes are the system's own";
inline constexpr std::string_view kEvidenceLog = "resource.accept-log";      ///< accepted writes in the resource's order
inline constexpr std::string_view kEvidenceRejections = "resource.rejections";  ///< writes the fence refused
inline constexpr std::string_view kEvidenceHighWater = "resource.high-water";   ///< each key's mark
inline constexpr std::string_view kEvidenceEffects = "resource.effects";     ///< side effects and counters

/// What a checker reads, and what it cannot decide without.
struct EvidenceUse {
  std::vector<std::string_view> reads;     ///< every source it looks at when present
  std::vector<std::string_view> required;  ///< sources without which its verdict is unknown
  /// The sources, all of them needed, from which it judges a black-box worker (one that sent no
  /// worker-protocol event, black_box_workers()) without that worker's own events: e.g.
  /// stale-write-accepted from resource.accept-log. Empty: it needs the workers' own events, so
  /// with any black-box worker it cannot say valid (run_checkers() makes a valid verdict unknown,
  /// naming the silent workers; an anomaly it proved from the other workers stays invalid).
  std::vector<std::string_view> black_box_from;
  /// It judges the chunks' own bytes (the self-describing format, fencecheck/proto/chunk.h) and
  /// nothing else: with CheckContext::payload opaque it is not run, and run_checkers() gives it
  /// unknown with kOpaquePayloadReason (never valid, never invalid). corrupt-chunk only.
  bool needs_chunk_bytes = false;
};

/// A checker. Implementations are pure and stateless: check() and check_with() may run
/// concurrently.
class Checker {
 public:
  virtual ~Checker() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// The sources this checker reads and requires, and what judges a black-box worker
  /// (checker.cpp's table by name; for a name not in it: reads worker-events and history,
  /// requires nothing, needs the workers' own events).
  [[nodiscard]] virtual EvidenceUse evidence_use() const;
  /// Checks without a context (as with CheckContext{}).
  [[nodiscard]] virtual CheckerResult check(const History& history, const ReadBack& readback) const = 0;
  /// Checks with the scenario's context. The default ignores the context and calls check();
  /// checkers that use the context override this and make check() call it with CheckContext{}.
  [[nodiscard]] virtual CheckerResult check_with(const History& history, const ReadBack& readback,
                                                 const CheckContext& context) const {
    (void)context;
    return check(history, readback);
  }
};

using Checkers = std::vector<std::unique_ptr<Checker>>;

/// Every checker's result plus the combined verdict.
struct CheckRun {
  Verdict verdict = Verdict::kUnknown;
  std::vector<CheckerResult> results;  ///< worst first (stable: ties keep the checkers' order)
  std::vector<std::string> black_box_workers;  ///< black_box_workers() of the context, sorted
};

/// Runs each checker; an exception becomes that checker's unknown verdict with the message in
/// `error`. With the context's payload opaque, a checker that needs the chunks' bytes
/// (EvidenceUse::needs_chunk_bytes) is not run: unknown, `error` kOpaquePayloadReason. With the
/// context's evidence known, a checker whose required sources the resource
/// cannot give is not run: unknown, `error` naming what is missing (never valid on evidence it
/// lacks). With black-box workers (black_box_workers() of the context's `workers`), a checker
/// that cannot judge them (EvidenceUse::black_box_from empty, or one of its sources missing) is
/// still run, but a valid verdict becomes unknown with `error` naming the silent workers and what
/// it lacked; invalid (an anomaly proven from what was there) stays invalid. Each result's
/// `evidence` lists the sources it read that were there (worker-events only when some worker
/// event is in the history). The combined verdict is the worst of all; with no checkers it is
/// unknown (nothing was checked, which must never read as safe).
[[nodiscard]] CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback);
/// The same, handing each checker the context (Checker::check_with).
[[nodiscard]] CheckRun run_checkers(const Checkers& checkers, const History& history, const ReadBack& readback,
                                    const CheckContext& context);

/// Sorts and de-duplicates an anomaly's tokens, clients, evidence and seqs (checkers call it).
void normalize(Anomaly& a);

}  // namespace fencecheck::harness
