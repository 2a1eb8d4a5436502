// fencecheck — checker rules that read the history once, in order, one event at a time (issue 16;
// the plan and each rule's survey: docs/streaming-plan.md).
//
// A StreamRule is one checker's rule in one-pass form: it reads the resource's read-back first
// (begin), then every event of the history in history order, each once (observe), and gives its
// CheckerResult when the history ends (finish). Its state is bounded by what is live (keys,
// holders, the anomalies it found) or, where an exact result needs it, by the run's holdings (one
// entry per token issued); never by the number of events. No rule caps its state: a rule that
// would have to forget something to stay bounded keeps it (exact first; docs/streaming-plan.md,
// "Risks").
//
// A rule streamed here is the checker's only implementation: its in-memory Checker
// (checkers.h) is an adapter that feeds it the in-memory history (run_stream_rule), so the golden
// record (tests/check) pins the streamed rule too, and the two can never drift apart.
// check_history_file() runs the streamed rules straight from history.jsonl(.zst) without holding
// the history.
//
// Every checker's rule is streamed (stream_rule_names() lists all twelve, in default_checkers()
// order), and the figures too (analysis.h: FigureStream); analyze_history_file() is analyze() from
// the file. The rules read the resource's accept log packed (packed_log.h: about a tenth of a
// ReadBack's log), so a caller that reads readback.json with its log handed to a PackedLog
// (read_readback_file with a ReadBackLogSink) never holds the log as AcceptedWrites.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checker.h"
#include "fencecheck/harness/history.h"
#include "fencecheck/harness/packed_log.h"
#include "fencecheck/proto/readback.h"

namespace fencecheck::harness {

/// What is known only when the history has ended, handed to StreamRule::finish().
struct StreamEnd {
  std::size_t events = 0;               ///< how many events were observed (indices 0 .. events-1)
  std::vector<std::string> black_box;   ///< black_box_workers() of the whole history, sorted
};

/// One checker's rule in one-pass form. Call order: begin() once, observe() for each event in
/// history order with indices 0, 1, 2, ..., then wants_another_pass() (and, while it says yes,
/// begin_pass() and every event again), finish() once; then the object is spent. The read-back,
/// log and context given to begin() must outlive finish(). Not thread-safe (one object per pass; different
/// objects may run concurrently). Exceptions: std::bad_alloc; std::logic_error from finish() when a
/// pass the rule asked for was skipped (foreign-release, whose later passes decide its suspects;
/// fenced-out, whose second pass confirms its candidate self-fencing rejections;
/// unjustified-rejection, whose second pass tells its rejections at a mark equal to their token
/// from fenced-out's);
/// a rule that cannot decide reports unknown in its result rather than throwing.
class StreamRule {
 public:
  virtual ~StreamRule() = default;
  /// The checker's name (checkers.h), e.g. "token-regression".
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Reads what it needs of the read-back before the history (its per-key parts, the anomalies
  /// the read-back alone proves) and the context. The accept log is `log`, never readback.log
  /// (which the caller may have left empty: read_readback_file with a ReadBackLogSink).
  virtual void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) = 0;
  /// One event, at history index `index`.
  virtual void observe(std::size_t index, const Event& e) = 0;
  /// The result, anomalies normalize()d, in the order the in-memory checker gave them.
  [[nodiscard]] virtual CheckerResult finish(const StreamEnd& end) = 0;
  /// About how many bytes of state the rule holds now (for the bench and memory tests).
  [[nodiscard]] virtual std::size_t state_bytes() const = 0;
  /// Whether the rule must see the history once more before finish(): its first pass found that a
  /// decision taken in one pass could differ from the exact one (stale-write-accepted: a write.ok
  /// received after a write it should have been judged against), or it wants events it can name
  /// only now (cross-key-rejection: the other key's write.oks with the winning token), or it kept
/// too little to decide some things exactly (foreign-release: up to four more passes, only for
/// revisions its first pass could not prove clean). Called once
  /// at the end of each pass, so a rule may take its end-of-pass decisions here; the driver then
  /// calls begin_pass() and observe() for every event again, from index 0.
  [[nodiscard]] virtual bool wants_another_pass() { return false; }
  /// Whether begin() reads the accept log: run_stream_rule() packs readback.log only for a rule
  /// that does (the in-memory checkers would otherwise pack it once per rule).
  [[nodiscard]] virtual bool reads_log() const { return true; }
  /// Starts pass number `pass` (2, 3, ...), after wants_another_pass() said yes.
  virtual void begin_pass(unsigned pass) { (void)pass; }
  /// The event kinds observe() reads on the current pass (after begin() or begin_pass()): bit
  /// `1 << static_cast<unsigned>(kind)` per EventKind. A driver may hand the rule only those (the
  /// file's driver does: most rules read a few kinds of a history's many events, and a call per
  /// rule per event was a tenth of a 10^8-event check); one that hands it every event gets the same
  /// result, since observe() ignores the rest. Every kind by default.
  [[nodiscard]] virtual std::uint64_t kinds() const { return kAllEventKinds; }
  static constexpr std::uint64_t kAllEventKinds = ~std::uint64_t{0};
  /// The bit of `kind` in kinds().
  static constexpr std::uint64_t bit(EventKind kind) { return std::uint64_t{1} << static_cast<unsigned>(kind); }
};

/// The rule of the checker named `name`, or nullptr when that checker is not streamed yet.
[[nodiscard]] std::unique_ptr<StreamRule> make_stream_rule(std::string_view name);
/// The names of the streamed checkers, in default_checkers() order.
[[nodiscard]] std::vector<std::string_view> stream_rule_names();

/// Which of a scenario's workers sent no worker-protocol event, one event at a time: the same
/// rule as black_box_workers() (checker.h), which is built on it. Not thread-safe.
class BlackBoxTracker {
 public:
  /// `workers`: the scenario's worker ids (CheckContext::workers), any order.
  explicit BlackBoxTracker(const std::vector<std::string>& workers);
  /// One event of the history (any order of calls gives the same result: the rule is a set).
  void observe(const Event& e);
  /// Whether every worker has spoken (or was logged as never started): later events change nothing.
  [[nodiscard]] bool settled() const { return silent_.empty(); }
  /// Whether any worker-protocol event was seen (is_worker_protocol_event).
  [[nodiscard]] bool worker_events() const { return worker_events_; }
  /// The silent workers so far, sorted, unique.
  [[nodiscard]] const std::vector<std::string>& silent() const { return silent_; }

 private:
  std::vector<std::string> silent_;
  bool worker_events_ = false;
};

/// Feeds `rule` the in-memory history: begin(readback, PackedLog(readback.log), context), observe() each event
/// (another pass while it wants_another_pass()), finish() with the context's black-box workers
/// (black_box_workers(history, context)). The
/// in-memory checkers of streamed rules are this. Pure apart from the rule's own state.
[[nodiscard]] CheckerResult run_stream_rule(StreamRule& rule, const History& history, const ReadBack& readback,
                                            const CheckContext& context);

/// What check_history_file() found.
struct StreamCheckRun {
  CheckRun run;                       ///< as run_checkers() gives it for the same checkers
  std::size_t events = 0;             ///< events read
  /// The rules' largest total state_bytes(), sampled every 65,536 events and at the end. Not the
  /// packed log nor its index (PackedLog::memory_bytes(), the caller's): before the log was packed
  /// (59a29f5) two rules counted their own index of it here, so figures from before and after
  /// that commit differ by it.
  std::size_t peak_state_bytes = 0;
  /// Each rule's own largest state_bytes() (sampled as above), in the rules' order: where the state goes.
  std::vector<std::pair<std::string, std::size_t>> peak_state_by_rule;
  unsigned passes = 0;                ///< how many times the file was read (1, or more when a rule wanted another pass)
};

/// Runs the streamed rules named `names` (each must be in stream_rule_names(); empty: all of
/// them) over the history file `history` (history.jsonl, plain or zstd, as for_each_history_line
/// reads it) in one pass (another only for the rules that want one: StreamRule::wants_another_pass),
/// holding one event at a time, and post-processes their results exactly
/// as run_checkers() does (required sources, black-box workers, worst first). The result equals
/// run_checkers() of the same checkers on load_history_jsonl(history) (a test checks it on every
/// case of the golden record). Throws what for_each_history_line throws (std::runtime_error
/// naming the file, a missing file), std::invalid_argument naming the file and line for a line
/// that is not an event, and std::invalid_argument for a name that is not streamed.
[[nodiscard]] StreamCheckRun check_history_file(const std::filesystem::path& history, const ReadBack& readback,
                                                const CheckContext& context,
                                                const std::vector<std::string_view>& names = {});
/// check_history_file() with the accept log given packed: readback.log is not read (leave it
/// empty), `log` stands for it. The overload above packs readback.log and calls this one.
[[nodiscard]] StreamCheckRun check_history_file(const std::filesystem::path& history, const ReadBack& readback,
                                                const PackedLog& log, const CheckContext& context,
                                                const std::vector<std::string_view>& names = {});

/// What analyze_history_file() found.
struct HistoryFileAnalysis {
  Analysis analysis;                  ///< as analyze() gives it for the same checkers
  std::size_t events = 0;             ///< events read
  std::size_t peak_state_bytes = 0;   ///< the rules' peak state (StreamCheckRun) plus the figures' at the end
  /// StreamCheckRun::peak_state_by_rule, then ("figures", the figures' state at the end).
  std::vector<std::pair<std::string, std::size_t>> peak_state_by_rule;
  unsigned passes = 0;                ///< reads of the file: 1, one more when a rule wanted one, one more for the figures' second pass when it read the file, one more for the evidence not caught on the way
  bool figures_second_pass = false;   ///< whether the figures' second pass (FigureStream: a candidate lease expiry) read the file again
  bool figures_second_pass_kept = false;  ///< whether it ran on the events kept on the first pass instead (no read of the file)
  bool evidence_pass = false;         ///< whether some evidence event was not caught by the passes before and took a pass of its own
};

/// analyze() of a history file without holding the history: the checkers named `names` (empty:
/// every default checker; each must be streamed, else std::invalid_argument naming it), the
/// figures (FigureStream) and the protocol errors in one pass (another for a rule that wants it;
/// another for the figures' lease-expiry candidates only when the holdings' events kept on the
/// first pass do not hold all they need), then one more pass copying the evidence events that
/// those passes did not catch on the way (the figures' evidence is caught, packed, within one
/// budget of 64 MiB; a rule's anomalies' is not), only when there are some. A healthy etcd run's
/// history is read once (a 10^8-event bench history is). The result equals
/// analyze() of the same checkers on load_history_jsonl(history) with the same read-back and
/// context (a test compares verdict.json of both on every case of the golden record). Memory: the
/// rules' and figures' state (stream_check.h, analysis.h: FigureStream) plus the anomalies, figures
/// and evidence copies (output, caught as the passes go: counted in the "figures" part of
/// peak_state_by_rule), one event at a time. `keep_holdings` (FigureStream's): the figures'
/// second pass runs on the holdings' events kept on the first pass when those hold every event it
/// uses (an etcd run's do, unless a lock key, token or revision is reused: then no read of the
/// file for it), else on the file; false always reads the file (for tests of that pass). `also`, when given, is called with every
/// event of the first pass (index, event), in history order, so a caller's own tally (e.g. the
/// harness's HistoryTally) rides along the same read; exceptions from it pass through. Throws
/// what check_history_file() throws.
[[nodiscard]] HistoryFileAnalysis analyze_history_file(
    const std::filesystem::path& history, const ReadBack& readback, const CheckContext& context,
    const std::vector<std::string_view>& names = {},
    const std::function<void(std::size_t index, const Event& event)>& also = {}, bool keep_holdings = true);
/// analyze_history_file() with the accept log given packed: readback.log is not read (leave it
/// empty, as read_readback_file with a ReadBackLogSink does), `log` stands for it. The overload
/// above packs readback.log and calls this one. Memory adds `log` (PackedLog::memory_bytes(), its
/// index included: built by the first rule that looks a write up) to what is said above.
[[nodiscard]] HistoryFileAnalysis analyze_history_file(
    const std::filesystem::path& history, const ReadBack& readback, const PackedLog& log, const CheckContext& context,
    const std::vector<std::string_view>& names = {},
    const std::function<void(std::size_t index, const Event& event)>& also = {}, bool keep_holdings = true);

}  // namespace fencecheck::harness
