// fencecheck — the streamed rules' factories (stream_check.cpp's registry) and what they share.
// Private to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "../internal.h"
#include "../write_map.h"
#include "fencecheck/harness/stream_check.h"

namespace fencecheck::harness::detail {

[[nodiscard]] std::unique_ptr<StreamRule> make_interleaved_segment_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_corrupt_chunk_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_rejection_storm_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_foreign_release_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_token_regression_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_fenced_out_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_lost_acknowledged_write_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_duplicate_effect_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_counter_drift_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_stale_write_accepted_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_cross_key_rejection_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_unaccounted_write_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_unjustified_rejection_rule();
[[nodiscard]] std::unique_ptr<StreamRule> make_ungranted_holding_rule();

/// A 64-bit hash of a key (a lock key, a resource key), for rules that keep a key's fingerprint
/// instead of its string.
[[nodiscard]] inline std::uint64_t key_hash(std::string_view key) { return mix64(std::hash<std::string_view>{}(key)); }
/// The 64-bit fingerprint of a (key, token) from the key's key_hash(). Two different pairs share
/// one with probability about 2^-64; a rule that keeps n of them says what a collision would do.
[[nodiscard]] inline std::uint64_t mark_of(std::uint64_t key, std::int64_t token) {
  return mix64(key ^ mix64(static_cast<std::uint64_t>(token) + 0x9e3779b97f4a7c15ULL));
}

/// Hash of a (string, token) pair, for hash containers keyed by one.
struct PairHash {
  std::size_t operator()(const std::pair<std::string, std::int64_t>& p) const noexcept {
    return ViewTokenHash{}({p.first, p.second});
  }
};

/// Whether the lock service's history shows any grant at all beside the holdings the workers
/// reported (issue 31: a lock the issuer watch does not see, such as python-etcd3's key "/locks/N"
/// beside a watch on "<lock>/", leaves the history without a single lock event). A rule that needs
/// the issuer's side (foreign-release, token-regression) feeds it every event of its first pass
/// and settles its result with it: valid becomes unknown, with the reason, when some worker's
/// acquire.ok reported a holding and no lock.grant is in the history; invalid stays invalid (what
/// the workers' own events prove). State: two counters and the first holding's words. Not
/// thread-safe.
class IssuerCoverage {
 public:
  void observe(const Event& e) {
    if (e.kind == EventKind::kLockGrant) {
      ++grants_;
    } else if (e.kind == EventKind::kAcquireOk && is_worker_protocol_event(e) && holdings_++ == 0) {
      first_ = e.source + " held " + (e.lock_key.empty() ? "lock " + e.lock : e.lock_key) +
               (e.token ? " with token " + std::to_string(*e.token) : std::string());
    }
  }
  /// How many lock.grant events were seen.
  [[nodiscard]] std::size_t grants() const { return grants_; }
  /// Whether workers held the lock while the history shows no grant.
  [[nodiscard]] bool gap() const { return holdings_ > 0 && grants_ == 0; }
  /// Makes a valid `r` unknown when gap(), naming the first holding.
  void settle(CheckerResult& r) const {
    if (r.verdict != Verdict::kValid || !gap()) return;
    r.verdict = Verdict::kUnknown;
    r.error = std::to_string(holdings_) + " acquire.ok(s) reported a holding (the first: " + first_ +
              ") but the lock service's history has no lock.grant: the issuer watch saw none of them (a lock key "
              "outside what it covers?), so the issuer's side was not checked: unknown, never valid";
  }
  [[nodiscard]] std::size_t state_bytes() const { return sizeof(*this) + first_.capacity(); }

 private:
  std::size_t grants_ = 0, holdings_ = 0;
  std::string first_;
};

/// Small dense ids for the strings a rule meets (worker names, keys: a few hundred), owning a copy
/// of each, since a streamed event's strings do not outlive observe(). Not thread-safe.
class StringIds {
 public:
  /// The id of `s`, given on first sight: 0, 1, 2, ...
  std::uint32_t id(std::string_view s) {
    if (const auto known = recent_.find(s)) return *known;
    if (const auto it = ids_.find(s); it != ids_.end()) {
      recent_.remember(it->first, it->second);
      return it->second;
    }
    const auto next = static_cast<std::uint32_t>(strings_.size());
    const std::string& kept = strings_.emplace_back(s);
    ids_.emplace(kept, next);
    recent_.remember(kept, next);
    return next;
  }
  /// The string of an id given by id().
  [[nodiscard]] const std::string& name(std::uint32_t id) const { return strings_[id]; }
  [[nodiscard]] std::size_t size() const { return strings_.size(); }
  [[nodiscard]] std::size_t state_bytes() const {
    std::size_t n = sizeof(*this) + ids_.size() * (sizeof(std::string_view) + 8);
    for (const auto& s : strings_) n += sizeof(s) + s.capacity();
    return n;
  }

 private:
  std::deque<std::string> strings_;
  ViewMap<std::uint32_t> ids_;
  RecentIds recent_;  // views into strings_
};

/// The write.ok events an anomaly cites as evidence, wanted by write id before the history is
/// read (an anomaly the read-back alone proves) and collected as the history goes by: each
/// write.ok (with a token) about a wanted write adds its index to the anomalies that want it.
/// Memory: the wanted ids (as many as the anomalies cite). Not thread-safe.
class WriteCitations {
 public:
  /// Anomaly number `anomaly` (a position in the rule's anomaly list) cites every write.ok of `id`.
  void want(const WriteId& id, std::size_t anomaly);
  /// Adds `index` to the evidence of each anomaly that wants e's write, when e is a write.ok.
  void observe(std::size_t index, const Event& e, std::vector<Anomaly>& anomalies) const {
    observe(index, e, [&](std::size_t anomaly, std::size_t at) { anomalies[anomaly].evidence.push_back(at); });
  }
  /// Calls cite(anomaly, index) for each `anomaly` number that wants e's write, when e is a write.ok.
  template <typename Cite>
  void observe(std::size_t index, const Event& e, Cite&& cite) const {
    if (wants_ == 0 || e.kind != EventKind::kWriteOk || !e.token) return;
    if (const auto* v = wanted_.find({e.source, *e.token, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)}))
      for (std::size_t a : *v) cite(a, index);
  }
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  std::deque<std::string> strings_;  // the wanted ids' strings (stable addresses for WriteMap's views)
  WriteMap<std::vector<std::size_t>> wanted_;
  std::size_t wants_ = 0;
};

/// Each worker's latest write.invoke with each token, as the history goes by: for a write.ok, the
/// invoke it answers (its worker's latest write.invoke with its token before it, whatever the
/// key). Memory: one entry per (worker, token) that sent a write (holdings), kept because a
/// write.ok may come long after its invoke; or, once want() was called, only the pairs wanted (a
/// second pass finding the invokes a few anomalies cite). Not thread-safe.
class LatestWriteInvokes {
 public:
  /// From now on only the (worker, token) pairs given here are recorded.
  void want(std::string_view worker, std::int64_t token);
  /// Whether want() was called.
  [[nodiscard]] bool wants_some() const { return wanted_only_; }
  /// Records e when it is a write.invoke with a token (of a wanted pair, once want() was called).
  void observe(std::size_t index, const Event& e);
  /// The latest write.invoke observed so far from e's worker with e's token, if any.
  [[nodiscard]] std::optional<std::size_t> of(const Event& e) const {
    return e.token ? of(e.source, *e.token) : std::nullopt;
  }
  /// The latest write.invoke observed so far from `worker` with `token`, if any.
  [[nodiscard]] std::optional<std::size_t> of(std::string_view worker, std::int64_t token) const;
  [[nodiscard]] std::size_t state_bytes() const;

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);  // wanted, not seen yet
  using Tokens = boost::unordered_flat_map<std::int64_t, std::size_t>;
  std::map<std::string, Tokens, std::less<>> by_worker_;
  bool wanted_only_ = false;
};

}  // namespace fencecheck::harness::detail
