// fencecheck — everything the harness concludes from one run: the checkers' verdicts and the
// figures read off the history (lease expiries during work, pauses, rejected writes, faults,
// rejections per stale token, duplicate effects, counters, progress after the last heal, writes
// of unknown outcome).
// Pure functions of (history, read-back, context); no I/O.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// A lock key deleted by the lock service while its holder was still working: the lease expired
/// (or someone else deleted the key) and no release explains it.
///
/// Found from `lock.delete` events (source "lock": lock_key, token = the key's create_revision,
/// revision = the delete's revision). A delete is explained by a release when some `release.ok`
/// carries the same revision (a worker reports its unlock's header revision, which is the
/// delete's). When the delete has no revision, a `release.ok` for the same lock_key and token
/// explains it instead. An issuer that tells an expiry from a release (detail "expired" or
/// "released" on its lock.delete) is taken at its word (delete_is_expiry). The holder is the worker whose `acquire.ok` has that lock_key and token;
/// a delete nobody held is not counted. A holder that emitted `job.done` for that token before
/// the delete had finished its work, so it is not counted either; nor is a delete its holder had
/// asked for: a `release.invoke` of that lock_key and token sent (its src_ns, else its history
/// position) before the delete was seen, whether or not a release.ok came back (an unlock whose
/// reply was lost, as in a `replies` partition, acted all the same). Nor is the delete of a key
/// whose holder's `acquire.ok`, received after the delete, carries a revision past the delete's:
/// the lock was handed to it after its key was gone (etcd's RWMutex, etcd#16221; etcd 3.4's Lock,
/// etcd#11456), so its lease expired while it waited, not during work (an acquire.ok received
/// late with an earlier revision is the watch lagging, and counts).
///
/// A delete no acquire.ok accounts for counts when the lock service's own history proves an expiry
/// during a holding of a black-box worker (CheckContext::workers that sent no worker-protocol
/// event): the issuer said "expired" (ZooKeeper: its server's log; Redis: its `expired`
/// notification; etcd's watch gives no word, so never on etcd), the key held the lock from its grant until it
/// went (its token the lowest of the lock's live keys at both: never a waiter's key, nor one
/// promoted from waiting, whose holder may never have learned of the grant), and some black box was still
/// running (no worker.exit before the delete). `worker` is that black box when it was the only
/// one running, else "": the lock service does not say which process held a key. Evidence: the
/// lock.grant (if seen) and the lock.delete.
struct LeaseExpiry {
  std::string worker;                    ///< the holder; "" for a black box that cannot be named (below)
  std::string lock;                      ///< lock name (prefix), from the acquire.ok
  std::string lock_key;                  ///< the holder's key under the prefix
  std::int64_t token = 0;                ///< the key's create_revision = the holder's fencing token
  std::optional<std::int64_t> lease_id;  ///< from the acquire.ok (or the delete)
  std::optional<std::int64_t> revision;  ///< the delete's revision
  std::int64_t t_ns = 0;                 ///< when the delete was received
  std::vector<std::size_t> evidence;     ///< acquire.ok, lock.grant (if seen), lock.delete indices
};

/// One `pause` event: the worker's own monotonic ticker saw a gap.
struct PauseObservation {
  std::string worker;
  std::chrono::nanoseconds duration{};
  std::optional<std::int64_t> token;  ///< the token held while paused, when holding
  std::size_t index = 0;              ///< history index
  std::int64_t t_ns = 0;
};

/// Rejected writes for one (key, client): the workers' write.fail events and the resource's own
/// list of rejections (they should agree; both are kept so a disagreement shows).
struct RejectedWriteCount {
  std::string key;
  std::string client;
  std::int64_t history = 0;   ///< write.fail events from this client for this key
  std::int64_t readback = 0;  ///< the resource's rejections for this client and key
};

/// One injected fault, paired with its heal.
struct FaultWindow {
  std::string fault;   ///< "sigstop", ...
  std::string target;  ///< worker id
  std::optional<std::chrono::nanoseconds> planned;  ///< duration_ns of the fault.inject
  std::optional<std::chrono::nanoseconds> actual;   ///< duration_ns of the fault.heal, else heal t_ns - inject t_ns
  std::size_t inject_index = 0;
  std::optional<std::size_t> heal_index;  ///< nullopt: never healed in the history
  std::int64_t inject_t_ns = 0;
  std::optional<std::int64_t> heal_t_ns;
};

/// Fenced rejections of one (client, token): how often a holder had a write rejected with the
/// same token. A correct holder shows at most 1 (then it re-acquires); more is a rejection-storm.
struct TokenRejections {
  std::string client;
  std::int64_t token = 0;
  std::int64_t history = 0;   ///< write.fail events with a high_water (fenced) from this client and token
  std::int64_t readback = 0;  ///< the resource's rejections of this client and token
  [[nodiscard]] std::int64_t count() const { return history > readback ? history : readback; }
};

/// One counter: what the resource holds against what was acknowledged (counter-drift).
struct CounterFigure {
  std::string key;
  std::int64_t acknowledged = 0;       ///< write.ok events for the key without a chunk (increments)
  std::int64_t unknown = 0;            ///< write.info events for the key without a chunk (may or may not count)
  std::optional<std::int64_t> actual;  ///< the read-back's value; nullopt when the resource reported none
};

/// A write whose writer never learned its outcome (a `write.info`: no reply within its timeout,
/// e.g. a lost acknowledgement in a `replies` partition), and what the resource's read-back says
/// became of it. The checkers judge what the resource holds, whatever its writer believed, so an
/// unknown outcome that was in fact applied is judged like any accepted write (stale-write-
/// accepted and interleaved-segment see it in the accept log and the chunks; it is not a
/// write.ok, so lost-acknowledged-write does not expect it to stay). This figure says which it was.
struct UnknownOutcome {
  /// What the read-back shows:
  ///  kApplied:    the accept log has it (same writer, key, segment, chunk and token); without an
  ///               accept log, the chunk slot still holds it; a side effect recorded as applied;
  ///  kRejected:   the resource's rejections list it (the fence refused it);
  ///  kNotApplied: the resource keeps an accept log and rejections and neither lists it (the
  ///               request never reached it), or a side effect recorded but not applied;
  ///  kUnresolved: the read-back cannot tell (no accept log and the slot holds a later write; a
  ///               counter increment, which CounterFigure::unknown accounts for; an effect the
  ///               read-back does not list when it keeps no effects).
  enum class Resolution { kApplied, kRejected, kNotApplied, kUnresolved };
  std::size_t index = 0;  ///< the write.info's history index
  std::string worker;
  std::string key;
  std::optional<std::int64_t> segment, chunk, token;
  Resolution resolution = Resolution::kUnresolved;
  std::optional<std::int64_t> seq;  ///< the accept log's (or the effect's) seq, when applied
  std::string note;                 ///< the resolution in words, for the reports
};

/// "applied", "rejected", "not-applied", "unresolved".
[[nodiscard]] std::string_view resolution_name(UnknownOutcome::Resolution r);

/// Per worker, the longest window of a fault that stopped it (stops_process: sigstop, freeze,
/// self-stop), its actual length (inject to heal), else the planned one: the harness's own measure
/// of that worker's pauses (issue 31 item 6: the report's and the metrics' longest pause where a
/// worker measures none itself). Workers no such fault hit are absent. Pure.
[[nodiscard]] std::map<std::string, std::chrono::nanoseconds> longest_stops(const std::vector<FaultWindow>& faults);

/// Liveness after the last heal (expect.progress_after_heal, fenced-out).
struct ProgressAfterHeal {
  std::size_t heal_index = 0;             ///< the last fault.heal
  std::int64_t heal_t_ns = 0;
  std::chrono::nanoseconds window{};      ///< lease TTL + acquire allowance (TTL 0 when unknown)
  /// Some worker still had work after the heal: it sent a write.invoke, acquire.invoke or
  /// acquire.fail after it. false: everything was done before the heal (progress is moot).
  bool pending = false;
  std::optional<std::size_t> first_write_ok;    ///< the first write.ok after the heal
  std::optional<std::chrono::nanoseconds> delay;  ///< its t_ns - heal_t_ns
  /// Met: nothing pending, or the first accepted write came within the window.
  [[nodiscard]] bool made_progress() const { return !pending || (delay && *delay <= window); }
};

struct Figures {
  std::vector<LeaseExpiry> expiries_during_work;  ///< in history order of the deletes
  /// Deletes that may have been a black box's lease expiry during work but that no evidence
  /// decides: the key held the lock when it went, a black box was still running, no release.ok
  /// explains it and the issuer said neither "expired" nor "released" (etcd: its watch does not
  /// say why a key went, and its lessor's expiry count cannot name the lease). Greater than 0:
  /// expiries_during_work is a lower bound, and the reports show the figure as not measured.
  std::int64_t expiries_undecided = 0;
  std::vector<PauseObservation> pauses;           ///< every pause event, in history order
  std::map<std::string, PauseObservation> longest_pause;  ///< per worker
  std::vector<RejectedWriteCount> rejected_writes;  ///< sorted by key, then client
  std::int64_t rejected_writes_history = 0;         ///< the write.fail events with a high_water (the fence's)
  /// write.fail events without a high_water: invalid requests (docs/worker-protocol.md), no rejection
  /// by the fence; not in rejected_writes_history nor rejected_writes.
  std::int64_t invalid_requests_history = 0;
  std::int64_t rejected_writes_readback = 0;        ///< all of the resource's rejections
  /// Of rejected_writes_history, the rejections whose token was at or above the key's mark (the
  /// unjustified-rejection rule's judge, and fenced-out's self-fencing ones): the fence refused a
  /// write it had to accept, which is no evidence that fencing works.
  std::int64_t rejected_writes_unjustified_history = 0;
  /// Of rejected_writes_readback, those whose token was at or above the mark recorded with them.
  std::int64_t rejected_writes_unjustified_readback = 0;
  std::vector<FaultWindow> faults;                  ///< in injection order
  std::vector<TokenRejections> rejections_per_token;  ///< sorted by client, then token
  std::int64_t max_rejections_per_token = 0;          ///< the largest count() above (0 when none)
  std::int64_t effects_applied = 0;                   ///< the read-back's applied side effects
  /// Applications of a side effect that a holder with an equal or higher token had already applied
  /// (the duplicate-effect rule, checkers.h); what fencecheck_duplicate_effects_total counts.
  std::int64_t duplicate_effects = 0;
  /// duplicate_effects per resource key (the key the effects belong to); keys without one are absent.
  std::map<std::string, std::int64_t> duplicate_effects_by_key;
  std::vector<CounterFigure> counters;                ///< sorted by key
  std::optional<ProgressAfterHeal> progress_after_heal;  ///< nullopt: no fault was healed
  std::vector<UnknownOutcome> unknown_outcomes;       ///< every write.info, in history order

  /// The number of rejected writes the run shows as evidence of fencing: the larger of the two
  /// sources (a worker killed before reporting its write.fail does not hide a rejection the
  /// resource recorded), each without its unjustified rejections (a rejection at or above the mark
  /// proves the fence broken, not working). A rejection whose mark is unknown still counts (the
  /// unjustified-rejection checker is then unknown).
  [[nodiscard]] std::int64_t rejected_writes_total() const {
    const std::int64_t history = rejected_writes_history - rejected_writes_unjustified_history;
    const std::int64_t readback = rejected_writes_readback - rejected_writes_unjustified_readback;
    return history > readback ? history : readback;
  }
};

/// Reads the figures off a history and read-back. Pure; never throws for odd input (events with
/// missing fields are skipped where they cannot be attributed). The context supplies the lease
/// TTL for progress_after_heal's window (else the workers' ttl_ms, else 0).
[[nodiscard]] Figures compute_figures(const History& history, const ReadBack& readback,
                                      const CheckContext& context);
/// The same with CheckContext{}.
[[nodiscard]] Figures compute_figures(const History& history, const ReadBack& readback);

/// compute_figures() one event at a time (issue 16: the figures streamed over the history, for a
/// history read from its file; compute_figures() is this over an in-memory history, so both give
/// the same figures). Call observe() for each event in history order with indices 0, 1, 2, ...;
/// then, when wants_second_pass(), begin_second_pass() and (when it returns false) observe() every
/// event again with the same indices; then finish() once. `readback` and `context` must outlive finish(). State: what is
/// live (workers, keys, open faults), the figures themselves, and for the lease expiries the
/// lock.deletes not yet explained by a release.ok (a release.ok may come after its delete) and
/// the release.ok revisions still waiting for their delete. Only when some delete is never
/// explained (a candidate expiry) is the second pass needed: it gathers the holder, grant,
/// job.done and releases of those candidates' lock keys alone (stream/figures.cpp), from the
/// holdings' events kept on the first pass (keep_holdings) when those hold all of them. Not
/// thread-safe; throws only std::bad_alloc.
class FigureStream {
 public:
  /// `log` stands for readback.log (not read). Both, and `context`, must outlive the object.
  /// `keep_holdings`: keep the first pass's holdings events (packed: a holding's until its delete
  /// is settled, then about 24 bytes of notes for it; a candidate's and any event without a token
  /// to the end; figures.cpp's HoldingsKeep, up to 320 MiB) so that the second pass may run on
  /// them, not on the history again (begin_second_pass() says whether it did; it does not when a
  /// candidate's key, token or revision was dropped, or past the budget: with redis's watch, whose
  /// deletes carry no revision, a long run's holdings are never dropped). Without it, the second
  /// pass always takes the history again: the in-memory reference (compute_figures) does that.
  FigureStream(const ReadBack& readback, const PackedLog& log, const CheckContext& context, bool keep_holdings = false);
  ~FigureStream();
  FigureStream(const FigureStream&) = delete;
  FigureStream& operator=(const FigureStream&) = delete;
  /// One event, at history index `index`.
  void observe(std::size_t index, const Event& e);
  /// After the first pass: whether finish() needs the history once more (some lock.delete is a
  /// candidate lease expiry). False during or after the second pass.
  [[nodiscard]] bool wants_second_pass() const;
  /// Starts the second pass. Returns true when it ran at once on the events kept on the first
  /// pass (keep_holdings, when they hold every event it uses): `also` saw each of them, in history
  /// order, and the pass is over. Returns false otherwise: observe() then takes every event again,
  /// from index 0 (only events of kSecondPassKinds matter to it: a driver may skip the rest
  /// unparsed, at their indices).
  /// `every_line_plain`: the first pass's reader parsed every line on the simdjson fast path
  /// (for_each_history_event returned 0), so second_pass_may_want() may stop at a key's first
  /// occurrence (scan_line_field's first_only).
  bool begin_second_pass(bool every_line_plain = false, const std::function<void(std::size_t, const Event&)>& also = {});
  /// During the second pass, whether the history line at `index` may matter to it; a driver may
  /// skip the lines it calls false unparsed (analyze_history_file does). Looks at the line's kind,
  /// and at its lock_key, token or revision against the candidate expiries' (scan_line_field,
  /// history.h): in a run with few expiries, most holdings' lines are skipped too. Never false
  /// for a line that matters. Pure.
  [[nodiscard]] bool second_pass_may_want(std::size_t index, std::string_view line) const;
  /// The only kinds the second pass looks at: the holdings' own events.
  static constexpr EventKind kSecondPassKinds[] = {EventKind::kAcquireOk,     EventKind::kLockGrant,
                                                   EventKind::kJobDone,       EventKind::kReleaseOk,
                                                   EventKind::kReleaseInvoke, EventKind::kLockDelete};
  /// The figures; the object is spent afterwards.
  [[nodiscard]] Figures finish();
  /// About how many bytes of state it holds now, figures included (for the bench and memory tests).
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/// Whether a `lock.delete` can be a lease expiry (LeaseExpiry says the rest): the issuer's own word
/// when it gives one (detail "expired": yes, whatever release was reported for that key later;
/// "released": no; lock_service_kind.h), else whether no release explains it
/// (`explained_by_release`: a release.ok with the delete's revision, or without one with its
/// lock_key and token). Pure. The live metrics apply the same rule.
[[nodiscard]] bool delete_is_expiry(const Event& lock_delete, bool explained_by_release);

/// One line a worker sent that broke the worker protocol, as the orchestrator recorded it in a
/// `protocol.error` event (source "harness", target = the worker). Value type.
struct ProtocolError {
  std::string worker;                   ///< the event's target ("" when it names none)
  std::optional<std::int64_t> line_no;  ///< 1-based line number on the worker's channel
  std::string detail;                   ///< the orchestrator's text: worker, line number, field and problem
  std::string line;                     ///< the offending line, verbatim (as recorded: at most 4 KiB)
  std::size_t index = 0;                ///< the protocol.error event's history index
};

/// Every protocol.error event of the history, in history order. Pure and thread-safe; never throws
/// but std::bad_alloc.
[[nodiscard]] std::vector<ProtocolError> protocol_errors(const History& history);

/// The sentence an unmet expectation gives for a protocol error, e.g. "w1's event line 7 broke the
/// worker protocol: write.ok has no field 'token' — the run cannot be judged safe". The problem
/// is the error's detail; a leading "<worker> ... line <n>: " that repeats what the sentence
/// already says is left out. Pure and thread-safe; never throws but std::bad_alloc.
[[nodiscard]] std::string protocol_error_reason(const ProtocolError& error);

/// What the reports say of a black-box worker (after its id): "black box: judged from the lock
/// service and the resource".
inline constexpr std::string_view kBlackBoxNote = "black box: judged from the lock service and the resource";

/// A run's conclusion. Self-contained: `evidence_events` holds a copy of every history event an
/// anomaly or figure cites, so the verdict document stands alone.
struct Analysis {
  /// The worst of the checkers' verdicts; at least unknown when the history has a protocol error
  /// (a worker whose line broke the protocol may have done what no event shows).
  Verdict verdict = Verdict::kUnknown;
  std::vector<CheckerResult> checkers;    ///< worst first
  Figures figures;
  std::map<std::size_t, Event> evidence_events;
  /// The scenario's workers that sent no worker-protocol event (black_box_workers(), checker.h),
  /// sorted: judged only from the lock service, the resource and the harness's records. Empty
  /// without a context that lists the workers.
  std::vector<std::string> black_box_workers;
  /// Every protocol.error in the history (protocol_errors()); any makes the verdict at least
  /// unknown and the expectation not met (evaluate()).
  std::vector<ProtocolError> protocol_errors;
  /// Rows of keys the run did not write, dropped from the read-back before any checker saw them
  /// (the read-back's own ReadBack::ignored, copied; issue 34): reported, never judged.
  IgnoredRows ignored;

  /// Every anomaly with this name across the checkers.
  [[nodiscard]] std::vector<const Anomaly*> anomalies_named(std::string_view name) const;
  /// Number of anomalies across all checkers.
  [[nodiscard]] std::size_t anomaly_count() const;
};

/// Runs the checkers (Checker::check_with) and computes the figures, with the scenario's context
/// (CheckContext::of(scenario)): what the orchestrator and `fencecheck report` call. Also names
/// the black-box workers and collects the protocol errors (each makes the verdict at least
/// unknown; their events are kept in evidence_events).
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback, const Checkers& checkers,
                               const CheckContext& context);
/// The same with default_checkers().
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback, const CheckContext& context);
/// Without a context (CheckContext{}): checkers fall back to what the history says.
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback, const Checkers& checkers);
/// The same with default_checkers().
[[nodiscard]] Analysis analyze(const History& history, const ReadBack& readback);

}  // namespace fencecheck::harness
