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
  // The worker presented the token; whether the issuer granted it is the lock service's history's
  // to say (token-regression's streamed rule adds that), not this sentence's.
  return e.source + " presented token " + std::to_string(*e.token) + " for the lock" +
         (e.lock.empty() ? std::string() : " " + e.lock) + " in its acquire.ok after " + top_source +
         " had presented " + std::to_string(top_token) + " (" + e.source + " asked only after that): " +
         (reissued ? "the same token held twice" : "the tokens presented went backwards") +
         (e.detail.empty() ? std::string() : " [" + e.detail + "]");
}

std::string grant_regression_text(const Event& g, const std::string& top_key, std::int64_t top_token) {
  return "the lock service granted " + g.lock_key + " with fencing token " + std::to_string(*g.token) +
         " after it had granted " + top_key + " with " + std::to_string(top_token) +
         ": its token counter went backwards (a reset issuer, or a second issuer beside the first)";
}

}  // namespace detail

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

CheckerResult UnaccountedWriteChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult UnaccountedWriteChecker::check_with(const History& history, const ReadBack& readback,
                                                  const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_unaccounted_write_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult UnjustifiedRejectionChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult UnjustifiedRejectionChecker::check_with(const History& history, const ReadBack& readback,
                                                      const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_unjustified_rejection_rule();
  return run_stream_rule(*rule, history, readback, context);
}

// ---------------------------------------------------------------------------------------------

CheckerResult UngrantedHoldingChecker::check(const History& history, const ReadBack& readback) const {
  return check_with(history, readback, CheckContext{});
}

CheckerResult UngrantedHoldingChecker::check_with(const History& history, const ReadBack& readback,
                                                  const CheckContext& context) const {
  // The streamed rule is the only implementation (stream_check.h).
  const auto rule = detail::make_ungranted_holding_rule();
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
  out.push_back(std::make_unique<UnaccountedWriteChecker>());
  out.push_back(std::make_unique<UnjustifiedRejectionChecker>());
  out.push_back(std::make_unique<UngrantedHoldingChecker>());
  return out;
}

}  // namespace fencecheck::harness
