// The streamed rules' registry, the in-memory adapter and the one-pass driver over a history file
// (stream_check.h).
#include "fencecheck/harness/stream_check.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "../internal.h"
#include "fencecheck/harness/analysis.h"
#include "fencecheck/harness/checkers.h"
#include "fencecheck/harness/history.h"
#include "stream_rules.h"

namespace fencecheck::harness {

namespace {

struct Entry {
  std::string_view name;
  std::unique_ptr<StreamRule> (*make)();
};

/// The streamed checkers, in default_checkers() order.
constexpr Entry kRules[] = {
    {"interleaved-segment", detail::make_interleaved_segment_rule},
    {"corrupt-chunk", detail::make_corrupt_chunk_rule},
    {"stale-write-accepted", detail::make_stale_write_accepted_rule},
    {"cross-key-rejection", detail::make_cross_key_rejection_rule},
    {"rejection-storm", detail::make_rejection_storm_rule},
    {"foreign-release", detail::make_foreign_release_rule},
    {"token-regression", detail::make_token_regression_rule},
    {"fenced-out", detail::make_fenced_out_rule},
    {"duplicate-effect", detail::make_duplicate_effect_rule},
    {"counter-drift", detail::make_counter_drift_rule},
    {"lost-acknowledged-write", detail::make_lost_acknowledged_write_rule},
    {"unaccounted-write", detail::make_unaccounted_write_rule},
    {"unjustified-rejection", detail::make_unjustified_rejection_rule},
    {"ungranted-holding", detail::make_ungranted_holding_rule},
};

/// How often (in events) check_history_file() samples the rules' state.
constexpr std::size_t kStateSample = 65'536;

}  // namespace

std::unique_ptr<StreamRule> make_stream_rule(std::string_view name) {
  for (const Entry& e : kRules)
    if (e.name == name) return e.make();
  return nullptr;
}

std::vector<std::string_view> stream_rule_names() {
  std::vector<std::string_view> out;
  for (const Entry& e : kRules) out.push_back(e.name);
  return out;
}

CheckerResult run_stream_rule(StreamRule& rule, const History& history, const ReadBack& readback,
                              const CheckContext& context) {
  const PackedLog log = rule.reads_log() ? PackedLog(readback.log) : PackedLog();
  rule.begin(readback, log, context);
  for (unsigned pass = 1;; ++pass) {
    if (pass > 1) rule.begin_pass(pass);
    for (std::size_t i = 0; i < history.size(); ++i) rule.observe(i, history[i]);
    if (!rule.wants_another_pass()) break;
  }
  return rule.finish(StreamEnd{history.size(), black_box_workers(history, context)});
}

namespace {

/// check_history_file(), calling also(index, event) for each event of the first pass as well.
/// `not_plain`, when given, gets how many lines of the first pass the simdjson fast path did not take.
StreamCheckRun run_rules_over_file(const std::filesystem::path& history, const ReadBack& readback,
                                   const PackedLog& log, const CheckContext& context,
                                   const std::vector<std::string_view>& names,
                                   const std::function<void(std::size_t, const Event&)>& also,
                                   std::size_t* not_plain = nullptr) {
  std::vector<std::unique_ptr<StreamRule>> rules;
  for (std::string_view name : names.empty() ? stream_rule_names() : names) {
    auto rule = make_stream_rule(name);
    if (!rule) throw std::invalid_argument("checker " + std::string(name) + " has no streamed rule yet");
    rules.push_back(std::move(rule));
  }
  StreamCheckRun out;
  for (const auto& r : rules) out.peak_state_by_rule.emplace_back(std::string(r->name()), 0);
  auto sample = [&] {
    std::size_t bytes = 0;
    for (std::size_t k = 0; k < rules.size(); ++k) {
      const std::size_t b = rules[k]->state_bytes();
      bytes += b;
      out.peak_state_by_rule[k].second = std::max(out.peak_state_by_rule[k].second, b);
    }
    out.peak_state_bytes = std::max(out.peak_state_bytes, bytes);
  };
  // Rules whose required sources the resource cannot give are not run (run_checkers()'s rule).
  std::vector<std::optional<CheckerResult>> not_run;
  for (const auto& r : rules) {
    not_run.push_back(detail::unavailable_required(r->name(), detail::evidence_use_of(r->name()), context));
    if (!not_run.back()) r->begin(readback, log, context);
  }
  BlackBoxTracker tracker(context.workers);
  // The rules each pass feeds: all of them first, then those that want another pass.
  std::vector<bool> reading(rules.size());
  for (std::size_t k = 0; k < rules.size(); ++k) reading[k] = !not_run[k];
  // Per event kind, the rules that read it on this pass (StreamRule::kinds()), in the rules' order.
  constexpr std::size_t kKinds = static_cast<std::size_t>(EventKind::kProtocolError) + 1;
  std::array<std::vector<StreamRule*>, kKinds> by_kind;
  const auto route = [&] {
    for (auto& list : by_kind) list.clear();
    for (std::size_t k = 0; k < rules.size(); ++k) {
      if (!reading[k]) continue;
      const std::uint64_t wanted = rules[k]->kinds();
      for (std::size_t kind = 0; kind < kKinds; ++kind)
        if ((wanted >> kind) & 1U) by_kind[kind].push_back(rules[k].get());
    }
  };
  for (unsigned pass = 1;; ++pass) {
    out.passes = pass;
    route();
    const std::size_t off_fast_path = for_each_history_event(history, [&](std::size_t index, Event&& e) {
      if (pass == 1) {
        if (!tracker.settled() || !tracker.worker_events()) tracker.observe(e);  // after both: nothing changes
        if (also) also(index, e);
      }
      const auto kind = static_cast<std::size_t>(e.kind);
      if (kind < kKinds)
        for (StreamRule* r : by_kind[kind]) r->observe(index, e);
      if (pass == 1) out.events = index + 1;
      if ((index + 1) % kStateSample == 0) sample();
    });
    if (pass == 1 && not_plain != nullptr) *not_plain = off_fast_path;
    sample();
    bool again = false;
    for (std::size_t k = 0; k < rules.size(); ++k) {
      reading[k] = reading[k] && rules[k]->wants_another_pass();
      if (reading[k]) {
        rules[k]->begin_pass(pass + 1);
        again = true;
      }
    }
    if (!again) break;
  }
  CheckContext ctx = context;
  if (!ctx.black_box) ctx.black_box = tracker.silent();
  out.run.black_box_workers = *ctx.black_box;
  const StreamEnd end{out.events, *ctx.black_box};
  for (std::size_t k = 0; k < rules.size(); ++k) {
    if (not_run[k]) {
      out.run.results.push_back(std::move(*not_run[k]));
      continue;
    }
    CheckerResult r = rules[k]->finish(end);
    detail::settle_result(r, detail::evidence_use_of(rules[k]->name()), ctx, tracker.worker_events());
    out.run.results.push_back(std::move(r));
  }
  detail::order_results(out.run);
  return out;
}

/// The events analyze_history_file() will copy as evidence, caught as the passes go by, so that
/// copying them takes no pass of its own when every one is caught (a run without a rule's anomaly,
/// while they fit in kBudget):
/// - on the first pass, what the figures cite that the first pass already settles: every pause
///   with a duration, write.info, fault.inject and fault.heal, protocol.error, and the first
///   write.ok after the latest heal (detail::evidence_indices);
/// - on the figures' second pass, the lock.deletes, acquire.oks and lock.grants it parses or
///   replays from the kept holdings (the candidates' own: an expiry cites one of each).
/// Most of them are cited (output), but they are held from when they go by, beside the rules'
/// state, and some are not cited at all (a candidate key's acquires and grants that no expiry
/// names, a candidate delete that is no expiry, a heal that matches no inject). They are held
/// packed (pack_event: about 50 bytes an event of a bench history, against about 450 for an
/// Event), in 1 MiB chunks, with a table entry each. One budget for both passes: past kBudget
/// bytes (about 900,000 bench events; a 10^8-event bench run cites 416,663) no more are caught,
/// and the evidence pass copies the rest. A rule's anomalies cite any event: those are copied by
/// that pass. Not thread-safe.
class EvidenceCatch {
 public:
  /// Past this many bytes (state_bytes()) nothing more is caught.
  static constexpr std::size_t kBudget = 64u << 20;

  void first_pass(std::size_t index, const Event& e) {
    switch (e.kind) {
      case EventKind::kPause:
        if (e.duration_ns) keep(index, e);
        break;
      case EventKind::kWriteInfo:
      case EventKind::kFaultInject:
      case EventKind::kProtocolError: keep(index, e); break;
      case EventKind::kFaultHeal:
        keep(index, e);
        if (first_ok_after_heal_) at_.erase(*first_ok_after_heal_);  // only the last heal's is cited
        first_ok_after_heal_.reset();
        want_ok_ = true;
        break;
      case EventKind::kWriteOk:
        if (want_ok_) {
          want_ok_ = false;
          if (keep(index, e)) first_ok_after_heal_ = index;
        }
        break;
      default: break;
    }
  }
  void second_pass(std::size_t index, const Event& e) {
    if (e.kind == EventKind::kLockDelete || e.kind == EventKind::kAcquireOk || e.kind == EventKind::kLockGrant)
      keep(index, e);
  }
  /// The event caught at `index`; nullopt when none was.
  std::optional<Event> take(std::size_t index) const {
    const auto it = at_.find(index);
    if (it == at_.end()) return std::nullopt;
    return unpack_event(std::string_view(chunks_[it->second.chunk]).substr(it->second.offset));
  }
  /// The chunks as reserved, whether an event in them is still wanted or not (a dropped write.ok's
  /// bytes stay), and the table's slots.
  [[nodiscard]] std::size_t state_bytes() const {
    return sizeof(*this) + chunk_bytes_ + at_.bucket_count() * (sizeof(std::size_t) + sizeof(Where) + 1);
  }

 private:
  static constexpr std::size_t kChunk = 1u << 20;
  struct Where {
    std::uint32_t chunk = 0, offset = 0;
  };
  /// Whether the event at `index` is caught now (false past the budget).
  bool keep(std::size_t index, const Event& e) {
    if (state_bytes() >= kBudget) return false;
    if (at_.contains(index)) return true;
    scratch_.clear();
    const std::size_t n = pack_event(e, scratch_);
    if (chunks_.empty() || chunks_.back().capacity() - chunks_.back().size() < n) {
      chunks_.emplace_back().reserve(std::max(kChunk, n));
      chunk_bytes_ += chunks_.back().capacity();
    }
    std::string& chunk = chunks_.back();
    at_.emplace(index, Where{static_cast<std::uint32_t>(chunks_.size() - 1), static_cast<std::uint32_t>(chunk.size())});
    chunk.append(scratch_);
    return true;
  }
  std::vector<std::string> chunks_;  // the packed events, appended; each reserved once (never moves)
  std::size_t chunk_bytes_ = 0;
  boost::unordered_flat_map<std::size_t, Where> at_;  // history index -> where its packed event starts
  std::string scratch_;
  bool want_ok_ = false;                           // a heal came, and no write.ok since
  std::optional<std::size_t> first_ok_after_heal_;  // that write.ok, when caught
};

}  // namespace

StreamCheckRun check_history_file(const std::filesystem::path& history, const ReadBack& readback,
                                  const CheckContext& context, const std::vector<std::string_view>& names) {
  return check_history_file(history, readback, PackedLog(readback.log), context, names);
}

StreamCheckRun check_history_file(const std::filesystem::path& history, const ReadBack& readback, const PackedLog& log,
                                  const CheckContext& context, const std::vector<std::string_view>& names) {
  return run_rules_over_file(history, readback, log, context, names, nullptr);
}

HistoryFileAnalysis analyze_history_file(const std::filesystem::path& history, const ReadBack& readback,
                                         const CheckContext& context, const std::vector<std::string_view>& names,
                                         const std::function<void(std::size_t, const Event&)>& also, bool keep_holdings) {
  return analyze_history_file(history, readback, PackedLog(readback.log), context, names, also, keep_holdings);
}

HistoryFileAnalysis analyze_history_file(const std::filesystem::path& history, const ReadBack& readback,
                                         const PackedLog& log, const CheckContext& context,
                                         const std::vector<std::string_view>& names,
                                         const std::function<void(std::size_t, const Event&)>& also, bool keep_holdings) {
  std::vector<std::string_view> rules = names;
  if (rules.empty())
    for (const auto& c : default_checkers()) rules.push_back(c->name());
  // The figures and the protocol errors ride along the rules' first pass.
  FigureStream figures(readback, log, context, keep_holdings);
  std::size_t figure_bytes = 0;  // the figures' peak state, sampled as the rules' is
  std::vector<ProtocolError> protocol;
  // Evidence kept as it goes by, so that no pass is needed only to copy it (EvidenceCatch).
  EvidenceCatch caught;
  std::size_t not_plain = 0;
  StreamCheckRun run = run_rules_over_file(history, readback, log, context, rules, [&](std::size_t index, const Event& e) {
    figures.observe(index, e);
    caught.first_pass(index, e);
    if (e.kind == EventKind::kProtocolError) protocol.push_back(ProtocolError{e.target, e.line_no, e.detail, e.line, index});
    if (also) also(index, e);
    if ((index + 1) % kStateSample == 0)
      figure_bytes = std::max(figure_bytes, figures.state_bytes() + caught.state_bytes());
  }, &not_plain);
  HistoryFileAnalysis out;
  Analysis& a = out.analysis;
  a.verdict = run.run.verdict;
  a.checkers = std::move(run.run.results);
  a.black_box_workers = std::move(run.run.black_box_workers);
  // The figures' second pass, for the lease expiries' candidates (FigureStream): on the holdings'
  // events kept on the first pass when they hold every one it uses, else on the file again.
  if (figures.wants_second_pass()) {
    // Each event the second pass hands on (replayed or parsed): caught, and the state sampled.
    std::size_t seen = 0;
    const auto catch_and_sample = [&](std::size_t index, const Event& e) {
      caught.second_pass(index, e);
      if (++seen % 1024 == 0) figure_bytes = std::max(figure_bytes, figures.state_bytes() + caught.state_bytes());
    };
    figure_bytes = std::max(figure_bytes, figures.state_bytes() + caught.state_bytes());  // the keep at the first pass's end
    if (figures.begin_second_pass(not_plain == 0, catch_and_sample)) {
      out.figures_second_pass_kept = true;
    } else {
      // Only the candidates' holdings' lines matter to it: the others (the write lines, most of a
      // run, and in a run with few expiries most holdings' lines too) are not parsed.
      for_each_history_event_if(
          history,
          [&](std::size_t index, std::string_view line) { return figures.second_pass_may_want(index, line); },
          [&](std::size_t index, Event&& e) {
            figures.observe(index, e);
            catch_and_sample(index, e);
          });
      ++run.passes;
      out.figures_second_pass = true;
    }
  }
  figure_bytes = std::max(figure_bytes, figures.state_bytes() + caught.state_bytes());
  out.peak_state_bytes = run.peak_state_bytes + figure_bytes;
  out.peak_state_by_rule = std::move(run.peak_state_by_rule);
  out.peak_state_by_rule.emplace_back("figures", figure_bytes);
  a.figures = figures.finish();
  a.protocol_errors = std::move(protocol);
  if (!a.protocol_errors.empty()) a.verdict = combine(a.verdict, Verdict::kUnknown);
  a.ignored = readback.ignored;
  out.events = run.events;
  out.passes = run.passes;
  // The evidence events: those caught on the way, then one more pass for the others (a sorted
  // list: output-sized), only when there are some.
  std::vector<std::size_t> missing;
  for (const std::size_t index : detail::evidence_indices(a)) {
    if (auto e = caught.take(index)) a.evidence_events.emplace(index, std::move(*e));
    else missing.push_back(index);
  }
  caught = EvidenceCatch();
  if (!missing.empty()) {
    auto next = missing.begin();
    for_each_history_event_if(
        history, [&](std::size_t index, std::string_view) { return next != missing.end() && *next == index; },
        [&](std::size_t index, Event&& e) {
          a.evidence_events.emplace(index, std::move(e));
          ++next;
        });
    ++out.passes;
    out.evidence_pass = true;
  }
  return out;
}

}  // namespace fencecheck::harness
