#include "fencecheck/harness/checkers.h"

#include <algorithm>
#include <cstdio>
#include <charconv>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include "fencecheck/proto/chunk.h"
#include "internal.h"
#include "stream/stream_rules.h"

namespace fencecheck::harness {

namespace {

/// For each event of kind `at`: the latest event of kind `from` by the same worker before it (one
/// pass over both kinds). E.g. (write.invoke, write.ok): each write.ok's worker's latest invoke.
/// Events of kind `at` whose worker had none are absent.
boost::unordered_flat_map<std::size_t, std::size_t> latest_per_source(const History& h, const HistoryIndex& index,
                                                                      EventKind from, EventKind at) {
  boost::unordered_flat_map<std::size_t, std::size_t> out;
  detail::ViewMap<std::size_t> latest;  // worker -> its latest `from` so far
  for (std::size_t i : index.of({from, at})) {
    const Event& e = h[i];
    if (e.kind == from) {
      latest[e.source] = i;
    } else if (auto l = latest.find(e.source); l != latest.end()) {
      out.emplace(i, l->second);
    }
  }
  return out;
}

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


}  // namespace detail

namespace {

bool is_worker(const Event& e) { return e.source != "harness" && e.source != "lock" && e.source != "resource"; }

}  // namespace

// ---------------------------------------------------------------------------------------------

CheckerResult CrossKeyRejectionChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult CrossKeyRejectionChecker::check_with(const History& history, const ReadBack& readback,
                              const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_cross_key_rejection_rule();
  return run_stream_rule(*rule, history, readback, context);
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
  const detail::IndexRef idx(history, context);
  (void)readback;
  struct Owner {
    std::string worker;
    std::optional<std::size_t> acquire;  // the acquire.ok
    std::optional<std::int64_t> token;
  };
  // Hash maps over views into the history (lock keys are long and share a prefix: an ordered map
  // of them was most of this checker's time on long histories).
  // lock key -> its acquire.oks, in history order: a key's name can come back (zookeeper's sequence
  // numbers start again on a server restarted on empty data), so an owner is found by (key, token).
  detail::ViewMap<std::vector<Owner>> by_key;
  boost::unordered_flat_map<std::int64_t, std::string_view> lease_owner;  // lease id -> the worker whose events carry it
  detail::ViewMap<std::vector<std::size_t>> grants_of;  // lock key -> its lock.grant events
  boost::unordered_flat_map<std::int64_t, std::vector<std::size_t>> deletes_at;  // revision -> lock.delete indices
  for (std::size_t i :
       idx->of({EventKind::kAcquireOk, EventKind::kAcquireFail, EventKind::kKeepaliveFail, EventKind::kLeaseLost,
                EventKind::kReleaseInvoke, EventKind::kLockGrant, EventKind::kLockDelete})) {
    const Event& e = history[i];
    if (e.kind == EventKind::kAcquireOk && !e.lock_key.empty()) by_key[e.lock_key].push_back(Owner{e.source, i, e.token});
    // Only events about the worker's own lease (a release by name reports the leases of the keys
    // it deleted, which are not its own).
    const bool own_lease = e.kind == EventKind::kAcquireOk || e.kind == EventKind::kAcquireFail ||
                           e.kind == EventKind::kKeepaliveFail || e.kind == EventKind::kLeaseLost ||
                           e.kind == EventKind::kReleaseInvoke;
    if (own_lease && is_worker(e) && e.lease_id) lease_owner.try_emplace(*e.lease_id, e.source);
    if (e.kind == EventKind::kLockGrant && !e.lock_key.empty()) grants_of[e.lock_key].push_back(i);
    if (e.kind == EventKind::kLockDelete && e.revision) deletes_at[*e.revision].push_back(i);
  }
  // The grant of `key` with `token` (any token when unknown): its first such lock.grant.
  auto grant_of = [&](const std::string& key, std::optional<std::int64_t> token) -> std::optional<std::size_t> {
    if (auto g = grants_of.find(key); g != grants_of.end())
      for (std::size_t i : g->second)
        if (!token || history[i].token == token) return i;
    return std::nullopt;
  };
  // Whose key `key` with `token` was: the acquire.ok of that key and token, else the grant's lease's
  // worker, else (token unknown or seen nowhere) the key's first acquire.ok.
  auto owner_of = [&](const std::string& key, std::optional<std::int64_t> token) -> std::optional<Owner> {
    const auto it = by_key.find(key);
    if (it != by_key.end())
      for (const Owner& o : it->second)
        if (!token || o.token == token) return o;
    if (const auto g = grant_of(key, token)) {
      const Event& grant = history[*g];
      if (grant.lease_id)
        if (auto l = lease_owner.find(*grant.lease_id); l != lease_owner.end())
          return Owner{std::string(l->second), std::nullopt, grant.token};
      return Owner{"", std::nullopt, grant.token};  // a key that existed, holder unknown
    }
    if (it != by_key.end()) return it->second.front();
    return std::nullopt;
  };

  // release.ok -> the releaser's latest acquire.ok before it (a release by name reports the
  // deleted key's token, not its own)
  const auto releaser_acquire = latest_per_source(history, *idx, EventKind::kAcquireOk, EventKind::kReleaseOk);
  std::vector<Anomaly> anomalies;
  std::set<std::tuple<std::string, std::int64_t, std::string>> reported;  // (releaser, revision, key)
  for (std::size_t r : idx->of({EventKind::kReleaseOk})) {
    const Event& rel = history[r];
    if (!rel.revision) continue;  // no revision: nothing was deleted
    // The releaser's own token: its latest acquire.ok (a release by name reports the deleted key's).
    std::optional<std::int64_t> own_token;
    if (auto a = releaser_acquire.find(r); a != releaser_acquire.end()) own_token = history[a->second].token;
    std::map<std::string, std::optional<std::int64_t>> keys;  // each key deleted, with its token when told
    std::map<std::string, std::vector<std::size_t>> deletes;
    if (!rel.lock_key.empty()) keys.emplace(rel.lock_key, rel.token);
    if (auto it = deletes_at.find(*rel.revision); it != deletes_at.end())
      for (std::size_t d : it->second) {
        keys.emplace(history[d].lock_key, history[d].token);
        deletes[history[d].lock_key].push_back(d);
      }
    for (const auto& [key, key_token] : keys) {
      std::optional<Owner> owner = owner_of(key, key_token);
      if (!owner) {
        // Neither acquired, granted nor deleted as far as the history shows (e.g. the lock NAME
        // itself, whose keys are named by their own lock.delete events): nothing to attribute.
        if (!deletes.count(key)) continue;
        owner = Owner{"", std::nullopt, history[deletes[key].front()].token};
      }
      if (owner->worker == rel.source) continue;  // its own key
      if (!reported.insert({rel.source, *rel.revision, key}).second) continue;  // one delete, one anomaly
      Anomaly a;
      a.name = "foreign-release";
      a.clients.push_back(rel.source);
      if (!owner->worker.empty()) a.clients.push_back(owner->worker);
      if (own_token) a.tokens.push_back(*own_token);
      if (owner->token) a.tokens.push_back(*owner->token);
      a.evidence.push_back(r);
      if (owner->acquire) a.evidence.push_back(*owner->acquire);
      if (const auto g = grant_of(key, owner->token)) a.evidence.push_back(*g);
      for (std::size_t d : deletes[key]) a.evidence.push_back(d);
      std::ostringstream d;
      d << rel.source << " released the lock by deleting " << key << " (token "
        << (owner->token ? std::to_string(*owner->token) : std::string("?")) << ", created by "
        << (owner->worker.empty() ? std::string("another holder") : owner->worker) << ") at revision " << *rel.revision
        << ": a release without an owner check";
      // The third holder: the first acquire.ok by someone else after the release, while the owner
      // was still mid-job (no job.done / release.invoke of its token yet).
      if (!owner->worker.empty() && owner->acquire) {
        const std::int64_t token = owner->token.value_or(0);
        auto finished = [&](const Event& e) {
          return e.source == owner->worker && (e.kind == EventKind::kJobDone || e.kind == EventKind::kReleaseInvoke) &&
                 (!e.token || *e.token == token);
        };
        bool mid_job = true;  // at the release: no job.done / release.invoke of that holding yet
        for (std::size_t i = *owner->acquire + 1; i < r && mid_job; ++i) mid_job = !finished(history[i]);
        for (std::size_t i = r + 1; mid_job && i < history.size(); ++i) {
          const Event& e = history[i];
          if (finished(e)) break;  // the owner was done with that holding
          if (e.kind == EventKind::kAcquireOk && e.source != owner->worker) {
            a.evidence.push_back(i);
            a.clients.push_back(e.source);
            if (e.token) a.tokens.push_back(*e.token);
            d << "; " << e.source << " then acquired the lock"
              << (e.token ? " (token " + std::to_string(*e.token) + ")" : std::string()) << " while " << owner->worker
              << " was still mid-job";
            break;
          }
        }
      }
      a.description = d.str();
      anomalies.push_back(std::move(a));
    }
  }
  return result_of(name(), std::move(anomalies));
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
