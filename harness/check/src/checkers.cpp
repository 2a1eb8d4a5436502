#include "fencecheck/harness/checkers.h"

#include <algorithm>
#include <cstdio>
#include <charconv>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "fencecheck/proto/chunk.h"
#include "internal.h"
#include "stream/stream_rules.h"
#include "write_map.h"

namespace fencecheck::harness {

namespace {

using detail::WriteId;
using detail::WriteMap;

/// History indices of the events of one kind, by the write they are about. Built on the first
/// lookup: several checkers consult it only to cite evidence for an anomaly, so a valid history
/// never pays for it there. Each write maps to its first and last event; a second event about
/// the same write (a retry of the same token, rare) is chained through next_. One object per check
/// call; not thread-safe.
class WriteIndex {
 public:
  WriteIndex(const History& h, const HistoryIndex& index, EventKind kind) : h_(h), index_(index), kind_(kind) {}

  /// Calls f(index) for each event about write `id`, ascending.
  template <typename F>
  void for_each(const WriteId& id, F&& f) const {
    build();
    const Chain* c = chains_.find(id);
    if (c == nullptr) return;
    for (std::size_t i = c->first;;) {
      f(i);
      if (i == c->last) break;
      i = next_.find(i)->second;
    }
  }
  /// The first (lowest) index of an event about write `id`, if any.
  [[nodiscard]] std::optional<std::size_t> first(const WriteId& id) const {
    build();
    const Chain* c = chains_.find(id);
    if (c == nullptr) return std::nullopt;
    return c->first;
  }

 private:
  struct Chain {
    std::size_t first = 0, last = 0;
  };
  void build() const {
    if (built_) return;
    built_ = true;
    const std::vector<std::size_t> events = index_.of({kind_});
    chains_.reserve(events.size());
    for (std::size_t i : events) {
      const Event& e = h_[i];
      if (!e.token) continue;
      auto [c, fresh] = chains_.try_emplace({e.source, *e.token, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)}, Chain{i, i});
      if (fresh) continue;
      next_[c->last] = i;
      c->last = i;
    }
  }
  const History& h_;
  const HistoryIndex& index_;
  EventKind kind_;
  mutable bool built_ = false;
  mutable WriteMap<Chain> chains_;
  mutable boost::unordered_flat_map<std::size_t, std::size_t> next_;
};

WriteIndex index_writes(const History& h, const HistoryIndex& index, EventKind kind) { return WriteIndex(h, index, kind); }

using detail::join;
using detail::result_of;
using detail::slot;
using detail::unknown_result;

}  // namespace

// ---------------------------------------------------------------------------------------------

CheckerResult InterleavedSegmentChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult InterleavedSegmentChecker::check_with(const History& history, const ReadBack& readback,
                                    const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_interleaved_segment_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult CorruptChunkChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult CorruptChunkChecker::check_with(const History& history, const ReadBack& readback,
                                    const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_corrupt_chunk_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult StaleWriteAcceptedChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult StaleWriteAcceptedChecker::check_with(const History& history, const ReadBack& readback,
                                                    const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_stale_write_accepted_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------
// Shared helpers (internal.h)

namespace detail {

bool is_effect_key(std::string_view key) {
  return key.size() > kEffectSuffix.size() && key.substr(key.size() - kEffectSuffix.size()) == kEffectSuffix;
}

std::string effect_base(std::string_view key) {
  return std::string(is_effect_key(key) ? key.substr(0, key.size() - kEffectSuffix.size()) : key);
}

bool is_fenced_rejection(const Event& e) {
  return e.kind == EventKind::kWriteFail && e.token && e.high_water && *e.high_water > *e.token;
}

std::uint32_t RejectionTally::client_id(std::string_view client) {
  if (const auto it = ids_.find(client); it != ids_.end()) return it->second;
  const auto id = static_cast<std::uint32_t>(names_.size());
  ids_.emplace(names_.emplace_back(client), id);
  return id;
}

bool RejectionTally::observe(const Event& e) {
  if (!is_fenced_rejection(e)) return false;
  ++by_[{client_id(e.source), *e.token}].history;
  return true;
}

void RejectionTally::add(const RejectedWrite& r) { ++by_[{client_id(r.client), r.token}].readback; }

std::vector<TokenRejections> RejectionTally::counts() const {
  std::vector<TokenRejections> out;
  out.reserve(by_.size());
  for (const auto& [id, c] : by_) out.push_back(TokenRejections{names_[id.first], id.second, c.history, c.readback});
  std::sort(out.begin(), out.end(), [](const TokenRejections& a, const TokenRejections& b) {
    return std::tie(a.client, a.token) < std::tie(b.client, b.token);
  });
  return out;
}

std::size_t RejectionTally::state_bytes() const {
  std::size_t n = sizeof(*this) + by_.bucket_count() * (sizeof(decltype(by_)::value_type) + 1);
  for (const auto& name : names_) n += sizeof(name) + name.capacity() + 48;
  return n;
}

std::vector<TokenRejections> rejections_per_token(const History& history, const HistoryIndex& index,
                                                  const ReadBack& readback) {
  RejectionTally tally;
  for (std::size_t i : index.of({EventKind::kWriteFail})) tally.observe(history[i]);
  for (const RejectedWrite& r : readback.rejections) tally.add(r);
  return tally.counts();
}

std::string effect_identity(const EffectRecord& e) {
  const std::string prefix = e.client + ":";
  if (!e.client.empty() && e.id.size() > prefix.size() && e.id.compare(0, prefix.size(), prefix) == 0)
    return e.id.substr(prefix.size());
  return e.id;
}

std::vector<EffectDuplicates> effect_duplicates(const ReadBack& readback) {
  std::vector<const EffectRecord*> applied;
  for (const EffectRecord& e : readback.effects)
    if (e.applied) applied.push_back(&e);
  std::stable_sort(applied.begin(), applied.end(), [](const auto* a, const auto* b) { return a->seq < b->seq; });
  std::map<std::pair<std::string, std::string>, EffectDuplicates> by;
  std::map<std::pair<std::string, std::string>, std::int64_t> highest;
  for (const EffectRecord* e : applied) {
    const std::pair<std::string, std::string> id{e->key, effect_identity(*e)};
    EffectDuplicates& d = by[id];
    d.key = id.first;
    d.identity = id.second;
    auto it = highest.find(id);
    if (it != highest.end() && e->token <= it->second) d.duplicates.push_back(e);
    d.applications.push_back(e);
    if (it == highest.end()) highest.emplace(id, e->token);
    else it->second = std::max(it->second, e->token);
  }
  std::vector<EffectDuplicates> out;
  for (auto& [id, d] : by)
    if (!d.duplicates.empty()) out.push_back(std::move(d));
  return out;
}

CounterTally::CounterTally(const ReadBack& readback) {
  for (const auto& [key, value] : readback.counters) slot(key).actual = value;
}

CounterFigure& CounterTally::slot(std::string_view key) {
  auto it = by_.find(key);
  if (it == by_.end()) {
    it = by_.emplace(std::string(key), CounterFigure{}).first;
    it->second.key = it->first;
  }
  return it->second;
}

void CounterTally::observe(const Event& e) {
  if (e.kind != EventKind::kWriteOk && e.kind != EventKind::kWriteInfo) return;
  if (e.chunk || e.key.empty() || is_effect_key(e.key)) return;
  if (e.kind == EventKind::kWriteOk) ++slot(e.key).acknowledged;
  if (e.kind == EventKind::kWriteInfo) ++slot(e.key).unknown;
}

std::vector<CounterFigure> CounterTally::take() && {
  std::vector<CounterFigure> out;
  for (auto& [key, c] : by_) out.push_back(std::move(c));
  return out;
}

std::size_t CounterTally::state_bytes() const {
  std::size_t n = sizeof(*this);
  for (const auto& [key, c] : by_) n += 32 + sizeof(key) + sizeof(c) + 2 * key.capacity();
  return n;
}

std::vector<CounterFigure> counter_figures(const History& history, const HistoryIndex& index, const ReadBack& readback) {
  CounterTally tally(readback);
  for (std::size_t i : index.of({EventKind::kWriteOk, EventKind::kWriteInfo})) tally.observe(history[i]);
  return std::move(tally).take();
}

std::optional<std::chrono::nanoseconds> lease_ttl_of(const History& history, const HistoryIndex& index,
                                                     const CheckContext& context) {
  HistoryTtl ttl;
  if (!context.lease_ttl)
    for (std::size_t i : index.of({EventKind::kAcquireOk, EventKind::kAcquireInvoke})) ttl.observe(history[i]);
  return ttl.lease_ttl(context);
}

bool HistoryTtl::observe(const Event& e) {
  if (e.kind != EventKind::kAcquireOk && e.kind != EventKind::kAcquireInvoke) return false;
  if (!e.ttl_ms || *e.ttl_ms <= 0 || (ms_ && *ms_ >= *e.ttl_ms)) return false;
  ms_ = *e.ttl_ms;
  return true;
}

std::optional<std::chrono::nanoseconds> HistoryTtl::lease_ttl(const CheckContext& context) const {
  if (context.lease_ttl) return std::chrono::nanoseconds(*context.lease_ttl);
  if (!ms_) return std::nullopt;
  return std::chrono::milliseconds(*ms_);
}

std::string acquire_regression_text(const Event& e, const std::string& top_source, std::int64_t top_token) {
  const bool reissued = top_token == *e.token;
  return e.source + " was granted the lock" + (e.lock.empty() ? std::string() : " " + e.lock) + " with token " +
         std::to_string(*e.token) + " after " + top_source + " had already been granted " + std::to_string(top_token) +
         " (" + e.source + " asked only after that grant): " +
         (reissued ? "the issuer handed out the same token twice" : "the issuer's tokens went backwards") +
         (e.detail.empty() ? std::string() : " [" + e.detail + "]");
}

std::string grant_regression_text(const Event& g, const std::string& top_key, std::int64_t top_token) {
  return "the lock service granted " + g.lock_key + " with fencing token " + std::to_string(*g.token) +
         " after it had granted " + top_key + " with " + std::to_string(top_token) +
         ": its token counter went backwards (a reset issuer, or a second issuer beside the first)";
}

std::optional<std::size_t> last_heal(const HistoryIndex& index) {
  for (std::size_t i = index.size(); i-- > 0;)
    if (index.kind(i) == EventKind::kFaultHeal) return i;
  return std::nullopt;
}

}  // namespace detail

namespace {

/// The latest event before `before` from `source` of `kind` (and, when given, with that token).
/// The kind column is read first, so that only events of `kind` are touched on the way back.
std::optional<std::size_t> latest_before(const History& h, const HistoryIndex& index, std::size_t before,
                                         const std::string& source, EventKind kind,
                                         std::optional<std::int64_t> token = std::nullopt) {
  for (std::size_t i = before; i-- > 0;) {
    if (index.kind(i) != kind) continue;
    const Event& e = h[i];
    if (e.source == source && (!token || e.token == token)) return i;
  }
  return std::nullopt;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

CheckerResult CrossKeyRejectionChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult CrossKeyRejectionChecker::check_with(const History& history, const ReadBack& readback,
                              const CheckContext& context) const {
  const detail::IndexRef idx(history, context);
  // Every token accepted per key: the store's log, applied effects, and the history's write.oks.
  struct Accepted {
    std::int64_t token;
    std::optional<std::int64_t> seq;
    std::optional<std::size_t> index;
  };
  // Keyed by views into the history and the read-back; the searches below that need the keys'
  // order (sorted_tokens) keep their own ordered map.
  detail::ViewMap<std::vector<Accepted>> accepted;
  auto oks = index_writes(history, *idx, EventKind::kWriteOk);
  {
    detail::ViewMap<std::vector<std::size_t>> oks_of;  // worker -> its write.oks, ascending
    for (std::size_t i : idx->of({EventKind::kWriteOk})) {
      const Event& e = history[i];
      if (!e.token) continue;
      oks_of[e.source].push_back(i);
      if (!e.key.empty()) accepted[e.key].push_back({*e.token, std::nullopt, i});
    }
    // The write.ok of a logged write, when the history has it, orders it against the rejections.
    // A worker's logged writes are matched to its write.oks in order (a cursor per worker: the
    // next write.ok is almost always the one); a log entry that is not the next goes to the hash
    // index, whose first write.ok of that write it takes.
    detail::ViewMap<std::size_t> cursor;
    for (const AcceptedWrite& w : readback.log) {
      std::optional<std::size_t> index;
      if (auto o = oks_of.find(w.client); o != oks_of.end()) {
        std::size_t& at = cursor[w.client];
        if (at < o->second.size()) {
          const Event& next = history[o->second[at]];
          if (next.token == w.token && next.key == w.key && next.segment == w.segment && next.chunk == w.chunk)
            index = o->second[at++];
        }
      }
      if (!index) index = oks.first({w.client, w.token, w.key, w.segment, w.chunk});
      accepted[w.key].push_back({w.token, w.seq, index});
    }
    for (const EffectRecord& e : readback.effects)
      if (e.applied) accepted[e.key].push_back({e.token, e.seq, std::nullopt});
  }
  // X, its side effects ("X.effect") and, for "X.effect", X: one key as far as the fence goes.
  // Keys are grouped by that base; per base, what a rejection is judged against:
  //   unordered_max: the highest token accepted without a history index (a logged write the
  //     history cannot order, an applied effect): it explains any rejection;
  //   ordered: (history index, running maximum token) by index, so "a token >= H accepted before
  //     index i" is one binary search; max: every accepted token of the base.
  struct Base {
    std::optional<std::int64_t> unordered_max;
    std::vector<std::pair<std::size_t, std::int64_t>> ordered;
    std::optional<std::int64_t> max;
  };
  std::map<std::string, Base> bases;
  // Per key, its accepted tokens sorted: the lowest token >= H of another key is one binary search.
  std::map<std::string, std::vector<std::int64_t>> sorted_tokens;
  for (const auto& [k, list] : accepted) {
    Base& b = bases[detail::effect_base(k)];
    auto& tokens = sorted_tokens[std::string(k)];
    for (const Accepted& x : list) {
      // A logged write matched to its write.ok repeats that write.ok's (token, index) under the
      // same key: it adds nothing to these searches (only its seq, used for evidence).
      if (x.seq && x.index) continue;
      tokens.push_back(x.token);
      b.max = std::max(b.max.value_or(x.token), x.token);
      if (!x.index) b.unordered_max = std::max(b.unordered_max.value_or(x.token), x.token);
      else b.ordered.emplace_back(*x.index, x.token);
    }
    std::sort(tokens.begin(), tokens.end());
  }
  for (auto& [name, b] : bases) {
    std::sort(b.ordered.begin(), b.ordered.end());
    for (std::size_t i = 1; i < b.ordered.size(); ++i)
      b.ordered[i].second = std::max(b.ordered[i].second, b.ordered[i - 1].second);
  }
  auto explained_by_own_key = [&](const std::string& key, std::int64_t mark, std::optional<std::size_t> index) {
    const auto it = bases.find(detail::effect_base(key));
    if (it == bases.end()) return false;
    const Base& b = it->second;
    if (!index) return b.max && *b.max >= mark;
    if (b.unordered_max && *b.unordered_max >= mark) return true;
    // The entries with a history index below *index are the prefix before lower_bound.
    const auto end = std::lower_bound(b.ordered.begin(), b.ordered.end(),
                                      std::make_pair(*index, std::numeric_limits<std::int64_t>::min()));
    return end != b.ordered.begin() && std::prev(end)->second >= mark;
  };

  struct Group {
    Anomaly a;
    std::set<std::int64_t> rejected_tokens;
    std::int64_t history = 0, resource = 0;
    std::string other;  // the key that reached the mark
    std::optional<std::int64_t> other_seq;
  };
  std::map<std::pair<std::string, std::int64_t>, Group> groups;  // (key X, mark H)
  auto consider = [&](const std::string& key, std::int64_t token, std::int64_t mark, const std::string& client,
                      std::optional<std::size_t> index) {
    if (mark <= token) return;
    if (!index && groups.count({key, mark})) {
      // The resource's record of a rejection the history already showed: count it there.
      Group& g = groups[{key, mark}];
      ++g.resource;
      g.a.tokens.push_back(token);
      g.a.clients.push_back(client);
      g.rejected_tokens.insert(token);
      return;
    }
    // The key's own mark explains the rejection when the key (or its side effects) had accepted a
    // token >= the mark before it: before the write.fail in the history; for a rejection known only
    // from the resource, or a logged write the history does not order, at any time.
    if (explained_by_own_key(key, mark, index)) return;
    // The other key that reached the mark: exactly H if any, else the lowest token above it (a
    // tie goes to the first key by name: sorted_tokens is in key order and only a lower wins).
    std::string other;
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    const std::string own_base = detail::effect_base(key);
    for (const auto& [k, tokens] : sorted_tokens) {
      if (detail::effect_base(k) == own_base) continue;
      const auto at = std::lower_bound(tokens.begin(), tokens.end(), mark);
      if (at != tokens.end() && *at < best) best = *at, other = k;
    }
    if (other.empty()) return;  // nobody reached it: cannot attribute the mark to another key
    Group& g = groups[{key, mark}];
    if (g.a.name.empty()) {
      g.a.name = "cross-key-rejection";
      g.a.key = key;
      g.other = other;
      for (const Accepted& x : accepted.at(other)) {
        if (x.token != best) continue;
        if (x.seq && (!g.other_seq || *x.seq < *g.other_seq)) g.other_seq = x.seq;
        if (x.index) {
          g.a.evidence.push_back(*x.index);
          g.a.clients.push_back(history[*x.index].source);
        }
      }
      for (const AcceptedWrite& w : readback.log)
        if (w.key == other && w.token == best && g.other_seq && w.seq == *g.other_seq) g.a.clients.push_back(w.client);
      if (g.other_seq) g.a.readback_seqs.push_back(*g.other_seq);
      g.a.tokens.push_back(best);
    }
    g.a.tokens.push_back(token);
    g.a.tokens.push_back(mark);
    g.a.clients.push_back(client);
    g.rejected_tokens.insert(token);
    if (index) {
      ++g.history;
      g.a.evidence.push_back(*index);
      if (auto inv = latest_before(history, *idx, *index, client, EventKind::kWriteInvoke, token)) g.a.evidence.push_back(*inv);
    } else {
      ++g.resource;
    }
  };
  for (std::size_t i : idx->of({EventKind::kWriteFail}))
    if (detail::is_fenced_rejection(history[i]))
      consider(history[i].key, *history[i].token, *history[i].high_water, history[i].source, i);
  for (const RejectedWrite& r : readback.rejections) consider(r.key, r.token, r.high_water, r.client, std::nullopt);

  std::vector<Anomaly> anomalies;
  for (auto& [id, g] : groups) {
    const auto& [key, mark] = id;
    std::vector<std::int64_t> tokens(g.rejected_tokens.begin(), g.rejected_tokens.end());
    std::ostringstream d;
    d << "writes to " << key << " (token" << (tokens.size() > 1 ? "s " : " ") << join(tokens)
      << ") were rejected against the high-water mark " << mark << ", which only key " << g.other
      << " reached";
    if (g.other_seq) d << " (seq " << *g.other_seq << ")";
    d << "; " << key << " had not accepted a token >= " << mark << ": one mark fences several keys ("
      << g.history << " write.fail event(s), " << g.resource << " rejection(s) recorded by the resource)";
    g.a.description = d.str();
    anomalies.push_back(std::move(g.a));
  }
  return result_of(name(), std::move(anomalies));
}

// ---------------------------------------------------------------------------------------------

CheckerResult RejectionStormChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult RejectionStormChecker::check_with(const History& history, const ReadBack& readback,
                              const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_rejection_storm_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult ForeignReleaseChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult ForeignReleaseChecker::check_with(const History& history, const ReadBack& readback,
                              const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_foreign_release_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult TokenRegressionChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult TokenRegressionChecker::check_with(const History& history, const ReadBack& readback,
                                    const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_token_regression_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult FencedOutChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult FencedOutChecker::check_with(const History& history, const ReadBack& readback,
                                           const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_fenced_out_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult DuplicateEffectChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult DuplicateEffectChecker::check_with(const History& history, const ReadBack& readback,
                                                 const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_duplicate_effect_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult CounterDriftChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult CounterDriftChecker::check_with(const History& history, const ReadBack& readback,
                                              const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_counter_drift_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult LostAcknowledgedWriteChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult LostAcknowledgedWriteChecker::check_with(const History& history, const ReadBack& readback,
                                                      const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_lost_acknowledged_write_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

Checkers default_checkers() {
  Checkers out;
  out.push_back(std::make_unique<InterleavedSegmentChecker>());
  out.push_back(std::make_unique<CorruptChunkChecker>());
  out.push_back(std::make_unique<StaleWriteAcceptedChecker>());
  out.push_back(std::make_unique<CrossKeyRejectionChecker>());
  out.push_back(std::make_unique<RejectionStormChecker>());
  out.push_back(std::make_unique<ForeignReleaseChecker>());
  out.push_back(std::make_unique<TokenRegressionChecker>());
  out.push_back(std::make_unique<FencedOutChecker>());
  out.push_back(std::make_unique<DuplicateEffectChecker>());
  out.push_back(std::make_unique<CounterDriftChecker>());
  out.push_back(std::make_unique<LostAcknowledgedWriteChecker>());
  return out;
}

}  // namespace fencecheck::harness
