// foreign-release (checkers.h says what it finds), streamed. A release.ok with a revision deleted
// every key whose lock.delete carries that revision (and its own lock_key); each such key's owner
// is the FIRST acquire.ok of (key, token) anywhere in the history, else the first lock.grant of
// (key, token) and the worker whose own events carry that grant's lease, else the key's first
// acquire.ok. A key owned by someone other than the releaser is an anomaly, once per (releaser,
// revision, key), in release.ok order and then key name.
//
// Nearly everything a release needs may arrive after it (the lock.delete at its revision lags
// behind on the lock service's watch; an owner's acquire.ok may be reported late), so the rule
// gathers, as the history goes by, what the in-memory checker looked up and decides every anomaly
// when the history has ended, in the old order (release.oks in history order, keys by name, the
// same first-wins dedupe). State, all of it holdings (one small entry per acquire, grant, lease,
// delete or release; no event of a correct holding's work adds any):
//   - lock keys and workers, interned (StringIds): etcd keys are unique per lease, so the keys
//     themselves grow with holdings;
//   - per (key, token) its first acquire.ok (worker, index, token, and the owner's first job.done
//     or release.invoke of that token after it: see below) and per key its first acquire.ok;
//   - per (key, token) its first lock.grant (index, token, lease) and per key its first grant;
//   - per lease id the first worker whose own events carry it;
//   - the lock.deletes with a revision (index, key, token), chained per revision;
//   - the release.oks with a revision (index, releaser, revision, key, token, the releaser's own
//     token = its latest acquire.ok's, and the first two acquire.oks after it: see below).
// Nothing of it can be dropped: a zookeeper key name comes back after a restart on empty data (so
// a deleted key's records are not pruned), and a release's revision may match a delete at any
// index.
//
// The third holder (the description's "then acquired the lock ... while <owner> was still
// mid-job"): the first acquire.ok after the release by someone other than the owner W, unless W
// finished its holding (a job.done or release.invoke of the owner's token, or without a token)
// after its acquire A and before that acquire.ok. The old checker scanned back from the release to
// A and forward to the end. Streamed, when A is before the release:
//   - "the first acquire.ok after r by someone other than W" is n1 (the first acquire.ok after r)
//     when n1's worker is not W, else n2 (the first acquire.ok after r by someone other than n1's
//     worker). Each release waits for n1 and n2 (the releases waiting for n2 all have the same n1
//     worker, so one acquire.ok by anyone else settles them all: the wait is live);
//   - "W finished between A and that acquire.ok" is "W's first finish of that holding after A
//     comes before it". Each first acquire.ok of a (key, token) waits for its worker's first finish
//     of its token (a finish without a token settles all the worker's waiting holdings).
// Both are exact for any owner decided at the end. An owner whose acquire.ok comes after the
// release (reported late) is rare; for those anomalies the forward scan from the release is done
// in a second pass over the history (wants_another_pass), with owner and token known.
// StreamForeignRelease measures the state: about 400 bytes per holding (capacity included).
//
// The rule itself is valid or invalid; its "unknown" (a valid result while some configured worker
// sent no event: a black box, which this rule cannot judge from other sources) is settle_result()'s,
// the same for the streamed and in-memory drivers.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

bool is_worker(const Event& e) { return e.source != "harness" && e.source != "lock" && e.source != "resource"; }

class ForeignReleaseRule final : public StreamRule {
 public:
  std::string_view name() const override { return "foreign-release"; }

  void begin(const ReadBack&, const CheckContext&) override {}  // no read-back

  void observe(std::size_t index, const Event& e) override {
    if (pass_ > 1) return scan(index, e);
    switch (e.kind) {
      case EventKind::kAcquireOk:
        acquire_ok(index, e);
        break;
      case EventKind::kJobDone:
      case EventKind::kReleaseInvoke:
        finish_of(index, e);
        break;
      case EventKind::kLockGrant:
        if (!e.lock_key.empty()) {
          const auto g = static_cast<std::uint32_t>(grants_.size());
          if (note_first(first_grant_, key_first_grant_, keys_.id(e.lock_key), e.token, g))
            grants_.push_back(Grant{index, e.token, e.lease_id});
        }
        break;
      case EventKind::kLockDelete:
        if (e.revision) {
          const auto d = static_cast<std::uint32_t>(deletes_.size());
          deletes_.push_back(Delete{index, e.token, keys_.id(e.lock_key), kNoEntry});
          auto [chain, fresh] = deletes_at_.try_emplace(*e.revision, Chain{d, d});
          if (!fresh) {
            deletes_[chain->second.last].next = d;
            chain->second.last = d;
          }
        }
        break;
      case EventKind::kReleaseOk:
        if (e.revision) {
          Release r;
          r.index = index;
          r.source = workers_.id(e.source);
          r.revision = *e.revision;
          r.key = e.lock_key.empty() ? kNoEntry : keys_.id(e.lock_key);
          r.token = e.token;
          if (r.source < latest_token_.size() && latest_token_[r.source].first) r.own_token = latest_token_[r.source].second;
          waiting_n1_.push_back(static_cast<std::uint32_t>(releases_.size()));
          releases_.push_back(r);
        }
        break;
      default:
        break;
    }
    // Only events about the worker's own lease (a release by name reports the leases of the keys
    // it deleted, which are not its own).
    const bool own_lease = e.kind == EventKind::kAcquireOk || e.kind == EventKind::kAcquireFail ||
                           e.kind == EventKind::kKeepaliveFail || e.kind == EventKind::kLeaseLost ||
                           e.kind == EventKind::kReleaseInvoke;
    if (own_lease && is_worker(e) && e.lease_id && !lease_owner_.contains(*e.lease_id))
      lease_owner_.emplace(*e.lease_id, workers_.id(e.source));
  }

  // Asked after the first pass: every anomaly is decided then (decide() fills the mutable
  // results), and a second pass is wanted only for the third holders of late-reported owners.
  bool wants_another_pass() override {
    if (pass_ == 1 && !decided_) decide();
    return pass_ == 1 && !scans_.empty();
  }

  void begin_pass(unsigned pass) override { pass_ = pass; }

  CheckerResult finish(const StreamEnd&) override {
    if (!decided_) decide();
    for (Scan& s : scans_) {
      if (!s.third) continue;
      Anomaly& a = anomalies_[s.anomaly];
      a.evidence.push_back(s.third->index);
      a.clients.push_back(workers_.name(s.third->source));
      if (s.third->token) a.tokens.push_back(*s.third->token);
      a.description += third_holder_text(*s.third, workers_.name(s.owner));
    }
    return result_of(name(), std::move(anomalies_));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + keys_.state_bytes() + workers_.state_bytes();
    n += acquires_.capacity() * sizeof(Acquire) + grants_.capacity() * sizeof(Grant) +
         deletes_.capacity() * sizeof(Delete) + releases_.capacity() * sizeof(Release);
    n += (first_acquire_.size() + first_grant_.size()) * (sizeof(KeyToken) + sizeof(std::uint32_t) + 1);
    n += (key_first_acquire_.capacity() + key_first_grant_.capacity()) * sizeof(std::uint32_t);
    n += lease_owner_.size() * (sizeof(std::int64_t) + sizeof(std::uint32_t) + 1);
    n += deletes_at_.size() * (sizeof(std::int64_t) + sizeof(Chain) + 1);
    n += latest_token_.capacity() * sizeof(latest_token_[0]);
    n += (waiting_n1_.capacity() + waiting_n2_.capacity()) * sizeof(std::uint32_t);
    n += unfinished_.capacity() * sizeof(unfinished_[0]);
    for (const auto& w : unfinished_)
      for (const auto& [token, entries] : w)
        n += sizeof(token) + sizeof(entries) + 1 + entries.capacity() * sizeof(std::uint32_t);
    n += scans_.capacity() * sizeof(Scan);
    for (const Anomaly& a : anomalies_) n += sizeof(a) + a.description.capacity();
    return n;
  }

 private:
  static constexpr std::uint32_t kNoEntry = static_cast<std::uint32_t>(-1);
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  using KeyToken = std::pair<std::uint32_t, std::int64_t>;
  using KeyTokenMap = boost::unordered_flat_map<KeyToken, std::uint32_t, boost::hash<KeyToken>>;

  /// The first acquire.ok of a (key, token): its worker, index, token and the worker's first
  /// finish of that token after it (kNone: none so far).
  struct Acquire {
    std::size_t index = 0;
    std::size_t first_finish = kNone;
    std::optional<std::int64_t> token;
    std::uint32_t worker = 0;
  };
  struct Grant {
    std::size_t index = 0;
    std::optional<std::int64_t> token, lease;
  };
  struct Delete {
    std::size_t index = 0;
    std::optional<std::int64_t> token;
    std::uint32_t key = 0;
    std::uint32_t next = kNoEntry;  // the next delete with the same revision
  };
  struct Chain {
    std::uint32_t first = 0, last = 0;
  };
  /// An acquire.ok after a release.
  struct Next {
    std::size_t index = kNone;
    std::optional<std::int64_t> token;
    std::uint32_t source = 0;
  };
  struct Release {
    std::size_t index = 0;
    std::int64_t revision = 0;
    std::optional<std::int64_t> token, own_token;
    std::uint32_t source = 0;
    std::uint32_t key = kNoEntry;
    Next n1, n2;  // the first acquire.ok after it; the first after it by someone else than n1's
  };
  /// An anomaly whose third holder the second pass looks for: from the release on, the first
  /// acquire.ok by someone other than `owner`, unless the owner finishes its `token` first.
  struct Scan {
    std::size_t anomaly = 0;
    std::size_t release = 0;
    std::int64_t token = 0;
    std::uint32_t owner = 0;
    bool done = false;
    std::optional<Next> third;
  };
  struct Owner {
    std::string_view worker;
    std::uint32_t acquire = kNoEntry;  // in acquires_
    std::optional<std::int64_t> token;
  };

  static std::uint32_t at(const std::vector<std::uint32_t>& v, std::uint32_t key) {
    return key < v.size() ? v[key] : kNoEntry;
  }
  /// Records `entry` (an event of `key` with `token`) as the first of its (key, token) in
  /// `by_token` and the first of its key in `by_key`, where it is; whether it was either.
  static bool note_first(KeyTokenMap& by_token, std::vector<std::uint32_t>& by_key, std::uint32_t key,
                         std::optional<std::int64_t> token, std::uint32_t entry) {
    bool first = at(by_key, key) == kNoEntry;
    if (token) first = by_token.try_emplace({key, *token}, entry).second || first;
    if (by_key.size() <= key) by_key.resize(key + 1, kNoEntry);
    if (by_key[key] == kNoEntry) by_key[key] = entry;
    return first;
  }

  void acquire_ok(std::size_t index, const Event& e) {
    const std::uint32_t worker = workers_.id(e.source);
    if (latest_token_.size() <= worker) latest_token_.resize(worker + 1);
    latest_token_[worker] = {true, e.token};
    // The releases waiting for their second acquire.ok (all with the same first's worker), then
    // those waiting for their first.
    const Next next{index, e.token, worker};
    if (!waiting_n2_.empty() && worker != waiting_n1_worker_) {
      for (std::uint32_t r : waiting_n2_) releases_[r].n2 = next;
      waiting_n2_.clear();
    }
    if (!waiting_n1_.empty()) {
      for (std::uint32_t r : waiting_n1_) releases_[r].n1 = next;
      waiting_n2_.insert(waiting_n2_.end(), waiting_n1_.begin(), waiting_n1_.end());
      waiting_n1_.clear();
      waiting_n1_worker_ = worker;
    }
    if (e.lock_key.empty()) return;
    const auto a = static_cast<std::uint32_t>(acquires_.size());
    if (!note_first(first_acquire_, key_first_acquire_, keys_.id(e.lock_key), e.token, a)) return;
    acquires_.push_back(Acquire{index, kNone, e.token, worker});
    if (unfinished_.size() <= worker) unfinished_.resize(worker + 1);
    unfinished_[worker][e.token.value_or(0)].push_back(a);
  }

  /// A job.done or release.invoke: the first finish of its worker's holdings waiting for one.
  void finish_of(std::size_t index, const Event& e) {
    const std::uint32_t worker = workers_.id(e.source);
    if (worker >= unfinished_.size()) return;
    auto& waiting = unfinished_[worker];
    auto settle = [&](const std::vector<std::uint32_t>& entries) {
      for (std::uint32_t a : entries) acquires_[a].first_finish = index;
    };
    if (!e.token) {
      for (const auto& [token, entries] : waiting) settle(entries);
      waiting.clear();
    } else if (auto it = waiting.find(*e.token); it != waiting.end()) {
      settle(it->second);
      waiting.erase(it);
    }
  }

  /// The first grant of `key` with `token` (any token when unknown), kNoEntry when none.
  std::uint32_t grant_of(std::uint32_t key, std::optional<std::int64_t> token) const {
    if (!token) return at(key_first_grant_, key);
    const auto it = first_grant_.find({key, *token});
    return it == first_grant_.end() ? kNoEntry : it->second;
  }

  Owner owner_from(std::uint32_t a) const {
    return Owner{workers_.name(acquires_[a].worker), a, acquires_[a].token};
  }

  /// Whose key `key` with `token` was: the acquire.ok of that key and token, else the grant's
  /// lease's worker, else (token unknown or seen nowhere) the key's first acquire.ok.
  std::optional<Owner> owner_of(std::uint32_t key, std::optional<std::int64_t> token) const {
    if (!token) {
      if (const std::uint32_t a = at(key_first_acquire_, key); a != kNoEntry) return owner_from(a);
    } else if (const auto it = first_acquire_.find({key, *token}); it != first_acquire_.end()) {
      return owner_from(it->second);
    }
    if (const std::uint32_t g = grant_of(key, token); g != kNoEntry) {
      const Grant& grant = grants_[g];
      if (grant.lease)
        if (const auto l = lease_owner_.find(*grant.lease); l != lease_owner_.end())
          return Owner{workers_.name(l->second), kNoEntry, grant.token};
      return Owner{"", kNoEntry, grant.token};  // a key that existed, holder unknown
    }
    if (const std::uint32_t a = at(key_first_acquire_, key); a != kNoEntry) return owner_from(a);
    return std::nullopt;
  }

  std::string third_holder_text(const Next& n, std::string_view owner) const {
    return "; " + workers_.name(n.source) + " then acquired the lock" +
           (n.token ? " (token " + std::to_string(*n.token) + ")" : std::string()) + " while " + std::string(owner) +
           " was still mid-job";
  }

  /// Every anomaly, in release.ok order then key name; the third holder too when the owner's
  /// acquire.ok came before the release, else a Scan for the second pass.
  void decide() const {
    decided_ = true;
    std::set<std::tuple<std::uint32_t, std::int64_t, std::uint32_t>> reported;  // (releaser, revision, key)
    for (const Release& rel : releases_) {
      const std::string& releaser = workers_.name(rel.source);
      // each key deleted, by name, with its token when told; and its deletes at the revision
      std::map<std::string_view, std::pair<std::uint32_t, std::optional<std::int64_t>>> keys;
      // key -> the first delete's token and every delete's index
      std::map<std::uint32_t, std::pair<std::optional<std::int64_t>, std::vector<std::size_t>>> deletes;
      if (rel.key != kNoEntry) keys.emplace(keys_.name(rel.key), std::pair{rel.key, rel.token});
      if (const auto it = deletes_at_.find(rel.revision); it != deletes_at_.end())
        for (std::uint32_t d = it->second.first; d != kNoEntry; d = deletes_[d].next) {
          keys.emplace(keys_.name(deletes_[d].key), std::pair{deletes_[d].key, deletes_[d].token});
          const auto it_key = deletes.try_emplace(deletes_[d].key, deletes_[d].token, std::vector<std::size_t>{}).first;
          it_key->second.second.push_back(deletes_[d].index);
        }
      for (const auto& [key_name, kt] : keys) {
        const auto& [key, key_token] = kt;
        std::optional<Owner> owner = owner_of(key, key_token);
        const auto dels = deletes.find(key);
        if (!owner) {
          // Neither acquired, granted nor deleted as far as the history shows (e.g. the lock NAME
          // itself, whose keys are named by their own lock.delete events): nothing to attribute.
          if (dels == deletes.end()) continue;
          owner = Owner{"", kNoEntry, dels->second.first};
        }
        if (owner->worker == releaser) continue;  // its own key
        if (!reported.insert({rel.source, rel.revision, key}).second) continue;  // one delete, one anomaly
        Anomaly a;
        a.name = "foreign-release";
        a.clients.push_back(releaser);
        if (!owner->worker.empty()) a.clients.emplace_back(owner->worker);
        if (rel.own_token) a.tokens.push_back(*rel.own_token);
        if (owner->token) a.tokens.push_back(*owner->token);
        a.evidence.push_back(rel.index);
        if (owner->acquire != kNoEntry) a.evidence.push_back(acquires_[owner->acquire].index);
        if (const std::uint32_t g = grant_of(key, owner->token); g != kNoEntry) a.evidence.push_back(grants_[g].index);
        if (dels != deletes.end())
          for (std::size_t d : dels->second.second) a.evidence.push_back(d);
        std::ostringstream d;
        d << releaser << " released the lock by deleting " << key_name << " (token "
          << (owner->token ? std::to_string(*owner->token) : std::string("?")) << ", created by "
          << (owner->worker.empty() ? std::string("another holder") : std::string(owner->worker)) << ") at revision "
          << rel.revision << ": a release without an owner check";
        if (!owner->worker.empty() && owner->acquire != kNoEntry) {
          const Acquire& acq = acquires_[owner->acquire];
          if (acq.index < rel.index) {
            // The first acquire.ok after the release by someone else than the owner, if the owner
            // had not finished that holding (since its acquire) before it.
            const Next& n = rel.n1.index != kNone && rel.n1.source != acq.worker ? rel.n1 : rel.n2;
            if (n.index != kNone && (acq.first_finish == kNone || acq.first_finish > n.index)) {
              a.evidence.push_back(n.index);
              a.clients.push_back(workers_.name(n.source));
              if (n.token) a.tokens.push_back(*n.token);
              d << third_holder_text(n, owner->worker);
            }
          } else {
            scans_.push_back(Scan{anomalies_.size(), rel.index, acq.token.value_or(0), acq.worker, false, std::nullopt});
          }
        }
        a.description = d.str();
        anomalies_.push_back(std::move(a));
      }
    }
  }

  /// Second pass: each Scan, from its release on.
  void scan(std::size_t index, const Event& e) {
    if (e.kind != EventKind::kAcquireOk && e.kind != EventKind::kJobDone && e.kind != EventKind::kReleaseInvoke) return;
    for (Scan& s : scans_) {
      if (s.done || index <= s.release) continue;
      const bool by_owner = e.source == workers_.name(s.owner);
      if (by_owner && e.kind != EventKind::kAcquireOk && (!e.token || *e.token == s.token)) {
        s.done = true;  // the owner was done with that holding
      } else if (e.kind == EventKind::kAcquireOk && !by_owner) {
        s.done = true;
        s.third = Next{index, e.token, workers_.id(e.source)};
      }
    }
  }

  unsigned pass_ = 1;
  mutable bool decided_ = false;
  StringIds keys_, workers_;
  std::vector<Acquire> acquires_;
  KeyTokenMap first_acquire_;                    // (key, token) -> its first acquire.ok, in acquires_
  std::vector<std::uint32_t> key_first_acquire_;  // key -> its first acquire.ok
  std::vector<Grant> grants_;                    // the first grant of each (key, token) or key
  KeyTokenMap first_grant_;                      // (key, token) -> its first lock.grant, in grants_
  std::vector<std::uint32_t> key_first_grant_;    // key -> its first lock.grant
  boost::unordered_flat_map<std::int64_t, std::uint32_t> lease_owner_;  // lease id -> worker
  std::vector<Delete> deletes_;
  boost::unordered_flat_map<std::int64_t, Chain> deletes_at_;  // revision -> its deletes, in history order
  std::vector<Release> releases_;
  std::vector<std::pair<bool, std::optional<std::int64_t>>> latest_token_;  // worker -> its latest acquire.ok's token
  std::vector<std::uint32_t> waiting_n1_, waiting_n2_;  // releases waiting for n1 / for n2
  std::uint32_t waiting_n1_worker_ = 0;                 // the n1 worker of every release in waiting_n2_
  /// worker -> token -> its first acquire.oks of (key, token) still waiting for a finish
  std::vector<boost::unordered_flat_map<std::int64_t, std::vector<std::uint32_t>>> unfinished_;
  // decide()'s results: the anomalies, and those whose third holder the second pass looks for
  mutable std::vector<Anomaly> anomalies_;
  mutable std::vector<Scan> scans_;
};

}  // namespace

std::unique_ptr<StreamRule> make_foreign_release_rule() { return std::make_unique<ForeignReleaseRule>(); }

}  // namespace fencecheck::harness::detail
