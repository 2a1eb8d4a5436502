// token-regression (checkers.h says what it finds), in one pass:
//   1. each acquire.ok against the largest token among the acquire.oks of the same lock name that
//      came before its worker's latest acquire.invoke (history order), judged per lock name (a
//      worker that reports another name than the scenario's lock is judged against that name's
//      holders, not skipped); the description says who presented the token, and whether the lock
//      service's own history granted that key that token (the issuer's token) or not (the worker's);
//   2. each lock.grant (not a replay) of the lock's keys (the scenario's lock name and the names
//      the workers' acquires named: the name itself and keys under "<name>/") against the largest
//      grant before it;
//   3. at the end, the read-back's high-water marks against the issuer's latest token: the largest
//      of each lock name's latest acquire.ok token and the latest grant (a mark above all of them
//      is above every token any holder now has).
// A valid result is unknown (IssuerCoverage) when workers held the lock and the history has no
// lock.grant at all: the grant rule then had nothing to judge.
// State: per worker its latest acquire.invoke; per lock the acquire.oks that raised its token that
// a later acquire.ok can still look up (at most one per worker, plus the last: live); per key of
// the read-back's high-water marks, the first write.ok with the mark; and every (lock key, token)
// granted, to tell a replay from a grant (holdings: forgetting one would call its replay a
// regression). The last is a 64-bit fingerprint per grant (mark_of), 8 bytes instead of the key's
// string. A grant whose fingerprint was seen before is taken for a replay; when any was, the
// grants are judged again in a second pass (wants_another_pass), from scratch, with the exact
// (lock key, token) of the fingerprints seen twice: a fingerprint seen once was a first grant, so
// the second pass is exact whatever collided. A history without a replayed grant needs one pass.

#include <algorithm>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

class TokenRegressionRule final : public StreamRule {
 public:
  std::string_view name() const override { return "token-regression"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) override {
    readback_ = &readback;
    log_ = &log;
    lock_ = context.lock;
    for (const auto& [key, mark] : readback.high_water) first_ok_.try_emplace(key, MarkWrite{mark, std::nullopt});
  }

  void observe(std::size_t index, const Event& e) override {
    if (pass_ > 1) {  // the grants again, exactly (and those of the regressions' lock keys)
      if (e.kind == EventKind::kLockGrant) {
        grant(index, e);
        issuer_grant(index, e);
      }
      return;
    }
    coverage_.observe(e);
    switch (e.kind) {
      case EventKind::kAcquireInvoke:
        latest_invoke_[e.source] = index;
        note_lock(e);
        break;
      case EventKind::kAcquireOk: acquire(index, e); break;
      case EventKind::kLockGrant: grant(index, e); break;
      case EventKind::kWriteOk:
        if (e.token && !first_ok_.empty()) {
          const auto it = first_ok_.find(std::string_view(e.key));
          if (it != first_ok_.end() && !it->second.first && it->second.mark == *e.token)
            it->second.first = Seen{index, *e.token, e.kind, e.source, {}};
        }
        break;
      default: break;
    }
  }

  /// Another pass when a grant's fingerprint was seen twice (a replay, or two grants colliding),
  /// or to find the lock service's grants of the lock keys an acquire.ok regression names (then
  /// the grants are judged again too, from scratch: the same result without a replay).
  bool wants_another_pass() override {
    if (pass_ == 1) attribute();
    if (pass_ > 1 || (twice_.empty() && issuers_.empty())) return false;
    granted_marks_ = {};
    grants_found_.clear();
    top_grant_.reset();
    last_grant_.reset();
    return true;
  }
  void begin_pass(unsigned pass) override { pass_ = pass; }
  std::uint64_t kinds() const override {  // observe() (and IssuerCoverage: grants, acquire.oks)
    return pass_ == 1 ? bit(EventKind::kAcquireInvoke) | bit(EventKind::kAcquireOk) | bit(EventKind::kLockGrant) |
                            bit(EventKind::kWriteOk)
                      : bit(EventKind::kLockGrant);
  }

  CheckerResult finish(const StreamEnd& /*end*/) override {
    if (pass_ == 1) attribute();  // a driver that never asked wants_another_pass()
    for (const Issuer& i : issuers_) not_the_issuers(i);
    std::vector<Anomaly> anomalies = std::move(acquires_found_);
    for (auto& a : grants_found_) anomalies.push_back(std::move(a));
    // 3. The resource's high-water marks against the issuer's latest token: the last acquire.ok's
    //    (of each lock name, the largest). The lock service's latest grant counts too (the larger
    //    of the two), so that a holder whose acquire.ok the history lacks (a black box, a history
    //    cut short) is not taken for a mark above every token issued; with no acquire.ok at all,
    //    the latest grant.
    std::optional<Seen> latest;
    for (const auto& [lock, seen] : last_acquire_)
      if (!latest || seen.token > latest->token) latest = seen;
    if (last_grant_ && (!latest || last_grant_->token > latest->token)) latest = last_grant_;
    if (latest) {
      const bool from_grant = latest->kind == EventKind::kLockGrant;
      for (const auto& [key, mark] : readback_->high_water) {
        if (mark <= latest->token) continue;
        Anomaly a;
        a.name = "token-regression";
        a.key = key;
        a.tokens = {latest->token, mark};
        if (!from_grant) a.clients = {latest->source};
        a.evidence.push_back(latest->index);
        if (const auto& ok = first_ok_.at(key).first) {
          a.evidence.push_back(ok->index);
          a.clients.push_back(ok->source);
        }
        for (const LoggedWrite w : *log_)
          if (w.key == key && w.token == mark) {
            a.readback_seqs.push_back(w.seq);
            a.clients.emplace_back(w.client);
            break;
          }
        a.description = "the resource's high-water mark for " + key + " is " + std::to_string(mark) +
                        ", above the issuer's latest token " + std::to_string(latest->token) + " (" +
                        (from_grant ? "the lock service's grant of " + latest->lock_key : latest->source + "'s acquire.ok") +
                        "): the issuer went backwards, and every holder from now on is below the mark";
        anomalies.push_back(std::move(a));
      }
    }
    CheckerResult r = result_of(name(), std::move(anomalies));
    coverage_.settle(r);
    return r;
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + coverage_.state_bytes() + last_acquire_.size() * (sizeof(Seen) + 48) +
                    latest_invoke_.size() * (sizeof(std::string) + 16) +
                    first_ok_.bucket_count() * (sizeof(std::string_view) + sizeof(MarkWrite) + 1);
    for (const auto& [lock, raises] : raises_) n += lock.capacity() + raises.list.capacity() * sizeof(Raise);
    for (const auto& lock : worker_locks_) n += sizeof(lock) + lock.capacity() + 32;
    n += granted_marks_.size() * (sizeof(std::uint64_t) + 1) + twice_.size() * (sizeof(std::uint64_t) + 1);
    for (const auto& g : granted_) n += sizeof(g) + g.first.capacity();
    for (const auto& a : acquires_found_) n += sizeof(a) + a.description.capacity();
    for (const auto& a : grants_found_) n += sizeof(a) + a.description.capacity();
    for (const auto& i : issuers_) n += sizeof(i) + i.late.lock_key.capacity() + i.top.lock_key.capacity();
    return n;
  }

 private:
  /// An event the rule remembers: what the descriptions and evidence name of it.
  struct Seen {
    std::size_t index = 0;
    std::int64_t token = 0;
    EventKind kind = EventKind::kAcquireOk;
    std::string source;
    std::string lock_key;
  };
  /// An acquire.ok that raised its lock's largest token (strictly).
  struct Raise {
    std::size_t index = 0;
    std::int64_t token = 0;
    std::string source;
    std::string lock_key;
  };
  /// The two acquire.oks of a regression (acquires_found_[anomaly]) and, found on pass 2, the lock
  /// service's grant of each one's lock key: when a grant's token differs from the worker's, the
  /// worker's token is not the issuer's (a kazoo worker sending 1 while its znode's czxid was 5),
  /// which the description then says instead of blaming the issuer.
  struct Issuer {
    std::size_t anomaly = 0;
    struct Side {
      std::string source, lock_key;
      std::int64_t token = 0;
      std::optional<std::pair<std::size_t, std::int64_t>> grant;  // (index, token)
    };
    Side late, top;
  };

  /// A lock's raises, ascending by index (and by token), and its size after the last prune.
  struct Raises {
    std::vector<Raise> list;
    std::size_t pruned_at = 0;
  };
  /// A high-water mark of the read-back and the first write.ok with that token for its key.
  struct MarkWrite {
    std::int64_t mark = 0;
    std::optional<Seen> first;
  };

  void acquire(std::size_t x, const Event& e) {
    note_lock(e);
    if (!e.token) return;
    // Consecutive acquire.oks mostly name one lock: its two entries are looked up once (std::map
    // entries stay where they are), and the Seen is assigned in place (no allocation).
    if (!last_lock_ || *last_lock_ != e.lock) {
      const auto a = last_acquire_.try_emplace(e.lock).first;
      last_lock_ = &a->first;
      last_seen_ = &a->second;
      last_raises_ = &raises_[e.lock];
    }
    Seen& seen = *last_seen_;
    seen.index = x;
    seen.token = *e.token;
    seen.kind = e.kind;
    seen.source.assign(e.source);
    seen.lock_key.assign(e.lock_key);
    Raises& lock_raises = *last_raises_;
    std::vector<Raise>& raises = lock_raises.list;
    if (const auto invoke = latest_invoke_.find(e.source); invoke != latest_invoke_.end()) {
      // The largest token among this lock's acquire.oks that completed before the invoke. Tokens
      // must be strictly increasing: an earlier grant's token equal to this one is the same token
      // handed out twice (a reset issuer), as unsafe as a lower one.
      const auto after = std::lower_bound(raises.begin(), raises.end(), invoke->second,
                                          [](const Raise& r, std::size_t index) { return r.index < index; });
      if (after != raises.begin() && std::prev(after)->token >= *e.token) {
        const Raise& t = *std::prev(after);
        Anomaly& a = acquires_found_.emplace_back();
        a.name = "token-regression";
        a.tokens = {*e.token, t.token};
        a.clients = {e.source, t.source};
        a.evidence = {t.index, invoke->second, x};
        a.description = acquire_regression_text(e, t.source, t.token);
        if (!e.lock_key.empty() || !t.lock_key.empty())
          issuers_.push_back(Issuer{acquires_found_.size() - 1, {e.source, e.lock_key, *e.token, {}},
                                    {t.source, t.lock_key, t.token, {}}});
        presented_.push_back(Seen{x, *e.token, e.kind, e.source, e.lock_key});
      }
    }
    if (raises.empty() || *e.token > raises.back().token) {
      raises.push_back(Raise{x, *e.token, e.source, e.lock_key});
      if (raises.size() >= 2 * lock_raises.pruned_at + 64) prune(lock_raises);
    }
  }

  /// Drops the raises no later acquire.ok can look up. A later acquire.ok of worker w names either
  /// w's latest invoke now (then it looks up the last raise before that invoke) or an invoke still
  /// to come (then the last raise now, or a later one). So the raises still needed are, per
  /// worker, the last one before its latest invoke, and the last one: at most workers + 1, however
  /// long a paused worker's invoke waits for its acquire.ok.
  void prune(Raises& lock_raises) {
    std::vector<Raise>& raises = lock_raises.list;
    std::vector<bool> keep(raises.size(), false);
    keep.back() = true;
    for (const auto& [worker, invoke] : latest_invoke_) {
      const auto after = std::lower_bound(raises.begin(), raises.end(), invoke,
                                          [](const Raise& r, std::size_t index) { return r.index < index; });
      if (after != raises.begin()) keep[static_cast<std::size_t>(std::prev(after) - raises.begin())] = true;
    }
    std::size_t kept = 0;
    for (std::size_t k = 0; k < raises.size(); ++k)
      if (keep[k]) raises[kept++] = std::move(raises[k]);
    raises.resize(kept);
    lock_raises.pruned_at = raises.size();
  }

  /// Whether `key` is one of the scenario's lock's keys: "<lock>/..." (etcd, zookeeper) or the lock
  /// name itself (redis, python-etcd3); every key when the lock is not known.
  bool ours(std::string_view key) const {
    const auto under = [&](std::string_view lock) {
      return key.starts_with(lock) && (key.size() == lock.size() || key[lock.size()] == '/');
    };
    return lock_.empty() || key.empty() || under(lock_) ||
           std::any_of(worker_locks_.begin(), worker_locks_.end(), [&](const std::string& l) { return under(l); });
  }
  /// Notes the lock name a worker's acquire names (pass 1): its keys count as this lock's too.
  void note_lock(const Event& e) {
    if (pass_ == 1 && !e.lock.empty() && e.lock != lock_ && !worker_locks_.contains(e.lock)) worker_locks_.emplace(e.lock);
  }

  /// Says, for each acquire.ok anomaly of pass 1, whose token it presented: the lock service's
  /// grant of its key with that token (granted_marks_, every grant of pass 1), or none.
  void attribute() {
    for (std::size_t k = 0; k < presented_.size() && k < acquires_found_.size(); ++k) {
      const Seen& p = presented_[k];
      std::string& text = acquires_found_[k].description;
      const std::string token = std::to_string(p.token);
      if (!p.lock_key.empty() && granted_marks_.contains(mark_of(key_hash(p.lock_key), p.token)))
        text += "; the lock service's own history granted " + p.lock_key + " with token " + token +
                ": the issuer handed that token out";
      else if (!p.lock_key.empty() && ours(p.lock_key) && coverage_.grants() > 0) {
        text += "; no grant in the lock service's history gives " + p.lock_key + " token " + token +
                ": the token is " + p.source + "'s own, not one the issuer granted";
        own_token_said_.emplace(k, std::pair<std::string, std::int64_t>(p.lock_key, p.token));
      }
      else
        text += "; the lock service's history has no grant of " + (p.lock_key.empty() ? "its key" : p.lock_key) +
                " to compare with: whether the issuer or " + p.source + " chose token " + token + " is not known";
    }
    presented_.clear();
  }

  void grant(std::size_t i, const Event& g) {
    if (!g.token) return;
    // This lock's keys: "<lock>/..." (etcd, zookeeper) or the lock name itself (redis).
    if (!ours(g.lock_key)) return;
    const std::uint64_t mark = mark_of(key_hash(g.lock_key), *g.token);
    if (pass_ == 1) {
      if (!granted_marks_.insert(mark).second) {  // a replay, not a grant (or a collision: pass 2)
        twice_.insert(mark);
        return;
      }
    } else if (twice_.contains(mark) && !granted_.emplace(g.lock_key, *g.token).second) {
      return;  // a replay, not a grant
    }
    last_grant_ = Seen{i, *g.token, g.kind, g.source, g.lock_key};
    // Another key with the same token is the same token granted twice: a reset issuer.
    if (top_grant_ &&
        (*g.token < top_grant_->token || (*g.token == top_grant_->token && g.lock_key != top_grant_->lock_key))) {
      Anomaly& a = grants_found_.emplace_back();
      a.name = "token-regression";
      a.tokens = {*g.token, top_grant_->token};
      a.evidence = {top_grant_->index, i};
      a.description = grant_regression_text(g, top_grant_->lock_key, top_grant_->token);
    }
    if (!top_grant_ || *g.token > top_grant_->token) top_grant_ = last_grant_;
  }

  /// Pass 2: a grant of a lock key a regression names (its first grant: a replay repeats it).
  void issuer_grant(std::size_t i, const Event& g) {
    if (!g.token) return;
    for (Issuer& r : issuers_)
      for (Issuer::Side* side : {&r.late, &r.top})
        if (!side->grant && !side->lock_key.empty() && side->lock_key == g.lock_key) side->grant.emplace(i, *g.token);
  }

  /// Adds to a regression's description, when a worker's token differs from the lock service's
  /// grant of its lock key: the worker's token is not the issuer's, naming both.
  void not_the_issuers(const Issuer& r) {
    std::string why;
    Anomaly& a = acquires_found_[r.anomaly];
    const auto said = own_token_said_.find(r.anomaly);
    for (const Issuer::Side* side : {&r.late, &r.top}) {
      if (!side->grant || side->grant->second == side->token) continue;
      a.evidence.push_back(side->grant->first);
      a.tokens.push_back(side->grant->second);
      const std::string granted = std::to_string(side->grant->second);
      if (said != own_token_said_.end() && said->second.first == side->lock_key && said->second.second == side->token) {
        // attribute() has said this token is the worker's own: add only what the issuer granted.
        a.description += " (the lock service granted " + side->lock_key + " with token " + granted + ")";
        continue;
      }
      why += std::string(why.empty() ? "" : "; ") + side->source + "'s acquire.ok says token " +
             std::to_string(side->token) + " for lock key " + side->lock_key +
             ", but the lock service granted that key with token " + granted;
    }
    if (why.empty()) return;
    a.description += "; " + why + ": the worker's token is not the issuer's (the worker sends a token of its own, "
                     "not the lock service's)";
  }

  const ReadBack* readback_ = nullptr;
  const PackedLog* log_ = nullptr;
  std::string lock_;
  std::map<std::string, std::size_t, std::less<>> latest_invoke_;
  std::map<std::string, Raises, std::less<>> raises_;
  std::map<std::string, Seen, std::less<>> last_acquire_;  // per lock name, its latest acquire.ok
  std::vector<Seen> presented_;
  // the lock names the workers' acquires named beside the scenario's (a few: one per lock in use)
  std::set<std::string, std::less<>> worker_locks_;  // pass 1: acquires_found_[k]'s acquire.ok, until attribute()
  // acquire(): the lock name of the latest acquire.ok with a token and its entries (null: none yet).
  const std::string* last_lock_ = nullptr;
  Seen* last_seen_ = nullptr;
  Raises* last_raises_ = nullptr;
  /// acquires_found_[k] whose presented (lock key, token) attribute() called the worker's own:
  /// not_the_issuers() does not say it again.
  std::map<std::size_t, std::pair<std::string, std::int64_t>> own_token_said_;
  IssuerCoverage coverage_;
  unsigned pass_ = 1;
  boost::unordered_flat_set<std::uint64_t> granted_marks_;  // pass 1: every grant's mark_of(key, token)
  boost::unordered_flat_set<std::uint64_t> twice_;          // pass 1: the marks seen more than once
  // pass 2: the (lock key, token)s granted whose mark is in twice_
  boost::unordered_flat_set<std::pair<std::string, std::int64_t>, PairHash> granted_;
  std::optional<Seen> top_grant_, last_grant_;
  detail::ViewMap<MarkWrite> first_ok_;  // keyed by views of readback.high_water's keys (it outlives the rule)
  std::vector<Anomaly> acquires_found_, grants_found_;
  std::vector<Issuer> issuers_;  // one per acquire.ok regression (acquires_found_)
};

}  // namespace

std::unique_ptr<StreamRule> make_token_regression_rule() { return std::make_unique<TokenRegressionRule>(); }

}  // namespace fencecheck::harness::detail
