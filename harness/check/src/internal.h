// fencecheck — helpers shared by the checkers (checkers.cpp) and the figures (analysis.cpp), so
// that a figure and the anomaly it explains always count the same things. Private to the library.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/history_index.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness::detail {

/// Hash maps and sets keyed by views into the history's (or read-back's) strings, which outlive
/// them: no string copies; a lookup hashes a short string instead of walking an ordered map.
template <typename V>
using ViewMap = boost::unordered_flat_map<std::string_view, V, boost::hash<std::string_view>>;

/// The last two strings an interning table was asked for, with their ids: consecutive events of a
/// history mostly name the same worker and key (a holder's writes), so most asks are answered by
/// one or two short compares instead of a hash and a probe (StringIds, Interner: 5 % of a
/// 10^8-event check went to those). The views must stay valid as long as the table's own (its
/// stable strings). Not thread-safe.
class RecentIds {
 public:
  [[nodiscard]] std::optional<std::uint32_t> find(std::string_view s) const {
    if (held_ > 0 && s == view_[0]) return id_[0];
    if (held_ > 1 && s == view_[1]) return id_[1];
    return std::nullopt;
  }
  void remember(std::string_view s, std::uint32_t id) {
    view_[1] = view_[0];
    id_[1] = id_[0];
    view_[0] = s;
    id_[0] = id;
    held_ = held_ < 2 ? held_ + 1 : 2;
  }

 private:
  std::string_view view_[2];
  std::uint32_t id_[2] = {0, 0};
  unsigned held_ = 0;
};

/// splitmix64's finalizer (Steele, Lea, Flood: "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): every input bit reaches every output bit.
[[nodiscard]] inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Hash of (view, integer), e.g. (lock key, token).
struct ViewTokenHash {
  std::size_t operator()(const std::pair<std::string_view, std::int64_t>& p) const noexcept {
    std::size_t h = boost::hash<std::string_view>{}(p.first);
    boost::hash_combine(h, p.second);
    return h;
  }
};

/// The context's HistoryIndex when it was built from `history`, else one built here (one scan).
/// Holds the history by reference: use it within the check call.
class IndexRef {
 public:
  IndexRef(const History& history, const CheckContext& context) {
    if (context.index && context.index->matches(history)) {
      index_ = context.index.get();
    } else {
      own_.emplace(history);
      index_ = &*own_;
    }
  }
  IndexRef(const IndexRef&) = delete;
  IndexRef& operator=(const IndexRef&) = delete;
  const HistoryIndex* operator->() const { return index_; }
  const HistoryIndex& operator*() const { return *index_; }

 private:
  std::optional<HistoryIndex> own_;
  const HistoryIndex* index_ = nullptr;
};

/// Side-effect events carry the key "<job key>.effect" (catalogue-plan.md, "Events added").
inline constexpr std::string_view kEffectSuffix = ".effect";

/// When an event happened, as far as the history can tell, in ns of the host's CLOCK_MONOTONIC:
/// its sender's emit time (src_ns) when that is plausible, i.e. set and not after the harness
/// received it (workers run on the harness's host, and CLOCK_MONOTONIC is one clock for every
/// process there), else the harness's receive time (t_ns). Receive order is not real-time order:
/// each worker's channel is read by its own thread, and with hundreds of workers on 2 cores an
/// event can arrive after events that happened later. A worker's write.invoke is emitted before
/// the request goes out and its write.ok after the reply came back, so "A's write.ok happened
/// before B's write.invoke" by these times means A completed before B was sent (Herlihy & Wing's
/// real-time order, as Jepsen's histories record it).
inline std::int64_t happened_ns(const Event& e) { return e.src_ns > 0 && e.src_ns <= e.t_ns ? e.src_ns : e.t_ns; }
[[nodiscard]] bool is_effect_key(std::string_view key);
/// "ledger.effect" -> "ledger"; any other key unchanged.
[[nodiscard]] std::string effect_base(std::string_view key);

/// A write the fence refused: write.fail with a token and a high_water above it.
[[nodiscard]] bool is_fenced_rejection(const Event& e);

/// Fenced rejections per (client, token), from the history and the read-back, one rejection at a
/// time: the figures (FigureStream's rejections_per_token) and rejection-storm's streamed rule count
/// with it. State: 32 bytes or so per (client, token) with a rejection (grows with the holdings
/// rejected), and the clients' names (live). Not thread-safe.
class RejectionTally {
 public:
  /// Counts `e` when it is a fenced rejection (is_fenced_rejection), and says whether it was.
  bool observe(const Event& e);
  /// Counts one of the read-back's rejections.
  void add(const RejectedWrite& r);
  /// A client's small dense id, as the tally keys it (for a caller that keys by client too).
  [[nodiscard]] std::uint32_t client_id(std::string_view client);
  [[nodiscard]] const std::string& client_name(std::uint32_t id) const { return names_[id]; }
  /// Every (client, token) counted so far, sorted by client, then token.
  [[nodiscard]] std::vector<TokenRejections> counts() const;
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  struct Counts {
    std::int64_t history = 0, readback = 0;
  };
  std::deque<std::string> names_;  // stable addresses for ids_'s views
  ViewMap<std::uint32_t> ids_;
  boost::unordered_flat_map<std::pair<std::uint32_t, std::int64_t>, Counts,
                            boost::hash<std::pair<std::uint32_t, std::int64_t>>>
      by_;
};

/// The fence's rejections judged against the key's high-water mark at the time of each. The
/// contract (docs/resource-http.md, "The rule your service keeps"; Kleppmann 2016): a token below
/// the mark is rejected, a token equal to or above it is accepted. A rejection whose token is at
/// or above its mark is therefore unjustified: the resource refused a write it had to accept, and
/// such a rejection is no evidence that fencing works. One judge for the unjustified-rejection rule
/// and the figures (Figures::rejected_writes_total() leaves out what it proves unjustified), so
/// that both count the same rejections.
///
/// A rejection in the history is a write.fail with a token and a high_water: the worker sets
/// high_water on every rejection by the fence (0 when the reply did not say the mark) and never on
/// an invalid request's write.fail (workers/include/fencecheck/workers/worker.h). Its mark comes
/// from, in order:
///   1. the reply: high_water >= 1 (tokens are >= 1; 0 means "not said", resource-http.md);
///   2. the accept log, when the reply did not say it and the log is evidence (the context says
///      the resource gives one, or without a context's evidence the log is not empty) and holds
///      an entry of the key: the key's mark at any time is at most the highest token the log
///      shows for it (the mark is the highest token accepted), so a token at or above that is at
///      or above the mark (not a side effect's key: effects are not in the log);
///   3. the resource's record of its rejections: a write.fail still undecided is judged by the
///      record's own mark when the record lists the same (client, key, segment, chunk, token)
///      (segment and chunk -1 for a counter write);
///   otherwise its mark is unknown.
/// A record of the read-back is judged by its own high_water.
/// State: the write.fails whose reply did not say the mark, until the end (resolve()): one entry
/// each, about 100 bytes (none when every reply says its mark, as the store's and the reference
/// service's do). Not thread-safe.
class RejectionMarks {
 public:
  /// Where a rejection's mark came from.
  enum class Source : std::uint8_t { kReply, kAcceptLog, kRecord };
  /// A rejection judged: its mark (for kAcceptLog an upper bound: the highest token the log shows
  /// for the key, `seq` its entry), and whether the token was at or above it.
  struct Judged {
    std::int64_t mark = 0;
    Source source = Source::kReply;
    bool unjustified = false;
    std::optional<std::int64_t> seq;
  };
  /// A write.fail whose reply did not say the mark, as resolve() decided it (judged: nullopt when
  /// no source gives its mark).
  struct Unsaid {
    std::size_t index = 0;
    std::string client, key;
    std::int64_t segment = -1, chunk = -1, token = 0;
    std::optional<Judged> judged;
  };

  /// Whether e is a rejection by the fence (above): a write.fail with a token and a high_water.
  [[nodiscard]] static bool is_rejection(const Event& e) {
    return e.kind == EventKind::kWriteFail && e.token && e.high_water;
  }
  /// A record of the read-back judged by its own mark.
  [[nodiscard]] static Judged judge(const RejectedWrite& r) {
    return Judged{r.high_water, Source::kRecord, r.token >= r.high_water, std::nullopt};
  }
  /// `log_is_evidence`: source 2 may be used (see above).
  explicit RejectionMarks(bool log_is_evidence = false) : log_is_evidence_(log_is_evidence) {}
  /// Judges e (index `index`) when it is a rejection whose reply said the mark; nullopt when it is
  /// no rejection, or when the reply did not say the mark (then it is kept for resolve()).
  std::optional<Judged> observe(std::size_t index, const Event& e);
  /// The kept write.fails, in history order, judged from the log and the read-back's record
  /// (sources 2 and 3). Call once, at the end; the kept entries are handed over.
  [[nodiscard]] std::vector<Unsaid> resolve(const ReadBack& readback, const PackedLog& log);
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  bool log_is_evidence_ = false;
  std::vector<Unsaid> unsaid_;
};

/// Whether the accept log is evidence for a rule or figure (the context says the resource gives
/// one; without the context's evidence, when the log is not empty): the figures' unknown outcomes
/// and RejectionMarks use this one test.
[[nodiscard]] inline bool log_is_evidence(const CheckContext& context, const PackedLog& log) {
  return (!context.evidence || context.evidence->accept_log) && (context.evidence.has_value() || !log.empty());
}

/// The identity of a side effect: its id without a leading "<client>:".
[[nodiscard]] std::string effect_identity(const EffectRecord& e);

/// One side effect applied more than once, per the duplicate-effect rule (checkers.h).
struct EffectDuplicates {
  std::string key;
  std::string identity;
  std::vector<const EffectRecord*> applications;  ///< every applied one, in seq order
  std::vector<const EffectRecord*> duplicates;    ///< those whose token was not above an earlier one's
};
/// Every side effect with at least one duplicate application, sorted by key, identity.
[[nodiscard]] std::vector<EffectDuplicates> effect_duplicates(const ReadBack& readback);

/// Counter figures, one event at a time: every key of the read-back's counters and every key with
/// an acknowledged or unknown increment (write.ok / write.info without a chunk, not a side effect),
/// sorted by key. The figures (FigureStream) and counter-drift's streamed rule count with it.
/// State: one CounterFigure per key (live). Not thread-safe.
class CounterTally {
 public:
  /// Starts with every key of the read-back's counters and its value.
  explicit CounterTally(const ReadBack& readback);
  /// Counts `e` when it is an increment: a write.ok (acknowledged) or write.info (unknown) without
  /// a chunk, on a non-empty key that is not a side effect's.
  void observe(const Event& e);
  /// Every key's figure, sorted by key.
  [[nodiscard]] std::vector<CounterFigure> take() &&;
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  CounterFigure& slot(std::string_view key);
  std::map<std::string, CounterFigure, std::less<>> by_;
};

/// The lease TTL to judge liveness with, one event at a time: the context's, else the largest
/// ttl_ms of the workers' acquire.ok / acquire.invoke events, else nullopt (fenced-out's window and
/// the progress-after-heal figure's). Not thread-safe.
class HistoryTtl {
 public:
  /// Counts e when it is an acquire.ok or acquire.invoke with a positive ttl_ms; true when the
  /// largest ttl_ms grew.
  bool observe(const Event& e);
  /// The context's TTL when it has one, else the largest ttl_ms counted so far, else nullopt.
  [[nodiscard]] std::optional<std::chrono::nanoseconds> lease_ttl(const CheckContext& context) const;

 private:
  std::optional<std::int64_t> ms_;
};

/// "w1", "w1 and w2", "w1, w2 and w3" (messages naming workers or checkers).
[[nodiscard]] std::string and_list(const std::vector<std::string>& items);

/// token-regression's description of acquire.ok `e` granted `e.token` after `top_source` had been
/// granted `top_token` (>= it) (naming who presented each token, not the issuer: the worker's
/// acquire.ok is the worker's word), and of grant `g` after the lock service had granted `top_key` with
/// `top_token`: one wording for the checker and the live checker (live_checker.h).
[[nodiscard]] std::string acquire_regression_text(const Event& e, const std::string& top_source, std::int64_t top_token);
[[nodiscard]] std::string grant_regression_text(const Event& g, const std::string& top_key, std::int64_t top_token);

/// "<key> segment <segment> chunk <chunk>", how the checkers name a chunk slot.
[[nodiscard]] inline std::string slot(const std::string& key, std::int64_t segment, std::int64_t chunk) {
  return key + " segment " + std::to_string(segment) + " chunk " + std::to_string(chunk);
}

/// The items printed with `sep` between them.
template <typename T>
[[nodiscard]] std::string join(const std::vector<T>& items, const std::string& sep = ", ") {
  std::ostringstream o;
  for (std::size_t i = 0; i < items.size(); ++i) o << (i ? sep : "") << items[i];
  return o.str();
}

/// A checker's result from its anomalies (normalize()d): invalid with any, else valid.
[[nodiscard]] inline CheckerResult result_of(std::string_view name, std::vector<Anomaly> anomalies) {
  CheckerResult r;
  r.name = std::string(name);
  for (auto& a : anomalies) normalize(a);
  r.verdict = anomalies.empty() ? Verdict::kValid : Verdict::kInvalid;
  r.anomalies = std::move(anomalies);
  return r;
}

/// A checker's unknown result: it could not judge, for the reason `why`.
[[nodiscard]] inline CheckerResult unknown_result(std::string_view name, std::string why) {
  CheckerResult r;
  r.name = std::string(name);
  r.verdict = Verdict::kUnknown;
  r.error = std::move(why);
  return r;
}

/// The evidence table of the checker named `name` (Checker::evidence_use()'s; checker.cpp).
[[nodiscard]] EvidenceUse evidence_use_of(std::string_view name);
/// run_checkers()'s result for a checker whose required sources the context says the resource
/// cannot give (unknown, "needs ..."), or that needs the chunks' bytes when the payload is opaque
/// (unknown, kOpaquePayloadReason), or nullopt when it can run.
[[nodiscard]] std::optional<CheckerResult> unavailable_required(std::string_view name, const EvidenceUse& use,
                                                              const CheckContext& context);
/// run_checkers()'s post-processing of one checker's result: normalizes its anomalies, makes a
/// valid verdict unknown when the context's black-box workers cannot be judged from `use`, and
/// lists the sources read that were there. `worker_events`: some worker-protocol event is in the
/// history.
void settle_result(CheckerResult& r, const EvidenceUse& use, const CheckContext& context, bool worker_events);
/// Orders a run's results worst first (stable) and combines their verdicts (none: unknown).
void order_results(CheckRun& run);

/// The history indices whose events an Analysis copies into evidence_events: every anomaly's
/// evidence, the expiries', pauses', unknown outcomes', faults' and progress figure's events and
/// the protocol errors; sorted, unique. analyze() and analyze_history_file() both use it.
[[nodiscard]] std::vector<std::size_t> evidence_indices(const Analysis& a);

}  // namespace fencecheck::harness::detail
