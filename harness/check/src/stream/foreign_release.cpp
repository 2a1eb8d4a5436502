// foreign-release (checkers.h says what it finds), streamed. A release.ok with a revision deleted
// every key whose lock.delete carries that revision (and its own lock_key); each such key's owner
// is the FIRST acquire.ok of (key, token) anywhere in the history, else the first lock.grant of
// (key, token) and the worker whose own events carry that grant's lease, else the key's first
// acquire.ok. A key owned by someone other than the releaser is an anomaly, once per (releaser,
// revision, key), in release.ok order and then key name.
//
// Nearly everything a release needs may arrive after it (the lock.delete at its revision lags
// behind on the lock service's watch; an owner's acquire.ok may be reported late), and none of a
// holding's records can be dropped for certain (a zookeeper key name comes back after a restart on
// empty data; a release's revision may match a delete at any index). Kept whole, they were about
// 400 bytes a holding. So the rule works in passes, the figures' pattern (analysis.h, FigureStream):
//
// Pass 1 (kMark) proves most revisions clean and keeps only what it cannot prove yet:
//   - per (key, token) its first acquire.ok's worker, as a 64-bit fingerprint of the key and the
//     token -> the worker id, marked "repeated" when a second acquire.ok (or another (key, token)
//     with the same fingerprint) hits it: a check through a repeated mark is never trusted;
//   - per revision with a release.ok or a lock.delete still open: the release's worker, key hash
//     and token, the delete's key hash and token (kOpen);
//   - the revisions settled clean: one release.ok and one lock.delete of the same key (or of its
//     only key), whose (key, token) mark is the releaser's: its key's owner is the releaser, so no
//     anomaly, whatever comes later, except another release.ok or lock.delete at that revision,
//     which makes it suspect. A sorted vector of revisions (etcd's grow), 8 bytes each;
//   - the suspect revisions and their keys' hashes: any release or delete at a revision that
//     cannot be proven clean (no token, a mark missing at the end, another owner, a second release
//     or delete, two keys).
// A clean run keeps about 30 bytes a holding (the mark and the settled revision) and needs no
// other pass. The one rule that is not exact by construction: two keys whose 64-bit
// fingerprints collide with the same releaser could hide an anomaly (about n^2 / 2^64: 10^-6 for
// 5 * 10^6 holdings). Everything that could make a revision suspect does, so no other shortcut
// changes a result.
//
// Pass 2 (kGather), only when some revision is suspect: the records the in-memory checker looked
// up, but only for the suspect revisions (their release.oks and lock.deletes) and the keys whose
// hash is a suspect key's (their acquire.oks, grants, owners' finishes), plus, for the suspect
// releases, the first acquire.oks after them (the third holder, below). A suspect revision that
// was settled or met only by hash reveals its keys here; if one was not among the gathered keys,
// the pass runs again with it.
// Pass 3 (kLeases), only when an owner is the worker of a grant's lease: that lease's first
// worker whose own events carry it.
// Then every anomaly is decided, in the old order, and pass 4 (kScan) looks for the third holder
// of an owner whose acquire.ok came after the release.
//
// The third holder (the description's "then acquired the lock ... while <owner> was still
// mid-job"): the first acquire.ok after the release by someone other than the owner W, unless W
// finished its holding (a job.done or release.invoke of the owner's token, or without a token)
// after its acquire A and before that acquire.ok. When A is before the release:
//   - "the first acquire.ok after r by someone other than W" is n1 (the first acquire.ok after r)
//     when n1's worker is not W, else n2 (the first acquire.ok after r by someone other than n1's
//     worker). Each release waits for n1 and n2 (the releases waiting for n2 all have the same n1
//     worker, so one acquire.ok by anyone else settles them all: the wait is live);
//   - "W finished between A and that acquire.ok" is "W's first finish of that holding after A
//     comes before it". Each gathered first acquire.ok of a (key, token) waits for its worker's
//     first finish of its token (a finish without a token settles all the worker's waiting holdings).
// An owner whose acquire.ok comes after the release (reported late) is rare; for those anomalies
// the forward scan from the release is pass 4, with owner and token known.
// StreamForeignRelease measures the state.
//
// The rule itself is valid or invalid; its "unknown" (a valid result while some configured worker
// sent no event: a black box, which this rule cannot judge from other sources) is settle_result()'s,
// the same for the streamed and in-memory drivers.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
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
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

bool is_worker(const Event& e) { return e.source != "harness" && e.source != "lock" && e.source != "resource"; }

class ForeignReleaseRule final : public StreamRule {
 public:
  std::string_view name() const override { return "foreign-release"; }
  bool reads_log() const override { return false; }

  void begin(const ReadBack&, const PackedLog&, const CheckContext&) override {}  // no read-back

  void observe(std::size_t index, const Event& e) override {
    switch (phase_) {
      case Phase::kMark:
        coverage_.observe(e);
        return mark(e);
      case Phase::kGather:
        return gather(index, e);
      case Phase::kLeases:
        return lease(e);
      case Phase::kScan:
        return scan(index, e);
    }
  }

  // Asked at the end of each pass: which pass comes next, if any (the header comment says why).
  bool wants_another_pass() override {
    switch (phase_) {
      case Phase::kMark:
        end_marks();
        if (suspect_.empty()) return finished();
        return start(Phase::kGather);
      case Phase::kGather:
        if (gather_new_keys()) return start(Phase::kGather);
        if (want_leases()) return start(Phase::kLeases);
        [[fallthrough]];
      case Phase::kLeases:
        decide();
        if (!scans_.empty()) return start(Phase::kScan);
        return finished();
      case Phase::kScan:
        return finished();
    }
    return false;
  }

  void begin_pass(unsigned) override {}

  CheckerResult finish(const StreamEnd&) override {
    // A driver that never asked wants_another_pass() (a rule fed by hand): the first pass's end.
    while (!done_ && phase_ == Phase::kMark)
      if (wants_another_pass()) throw std::logic_error("foreign-release: finish() before the passes it asked for");
    for (Scan& s : scans_) {
      if (!s.third) continue;
      Anomaly& a = anomalies_[s.anomaly];
      a.evidence.push_back(s.third->index);
      a.clients.push_back(workers_.name(s.third->source));
      if (s.third->token) a.tokens.push_back(*s.third->token);
      a.description += third_holder_text(*s.third, workers_.name(s.owner));
    }
    CheckerResult r = result_of(name(), std::move(anomalies_));
    coverage_.settle(r);
    return r;
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + keys_.state_bytes() + workers_.state_bytes() + coverage_.state_bytes();
    // pass 1
    n += marks_.size() * (sizeof(std::uint64_t) + sizeof(std::uint32_t) + 1);
    n += open_.size() * (sizeof(std::int64_t) + sizeof(Open) + 1);
    n += settled_.capacity() * sizeof(std::int64_t) + settled_late_.size() * (sizeof(std::int64_t) + 1);
    n += suspect_.size() * (sizeof(std::int64_t) + 1) + suspect_keys_.size() * (sizeof(std::uint64_t) + 1);
    // the gathering passes
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
  enum class Phase { kMark, kGather, kLeases, kScan };
  static constexpr std::uint32_t kNoEntry = static_cast<std::uint32_t>(-1);
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  static constexpr std::uint32_t kRepeated = 0x8000'0000U;  // in a mark's worker id
  using KeyToken = std::pair<std::uint32_t, std::int64_t>;
  using KeyTokenMap = boost::unordered_flat_map<KeyToken, std::uint32_t, boost::hash<KeyToken>>;

  // ---- pass 1 ----
  /// A revision with a release.ok or lock.delete not settled yet.
  struct Open {
    std::uint64_t release_key = 0, delete_key = 0;  // key hashes
    std::int64_t release_token = 0, delete_token = 0;
    std::uint32_t releaser = 0;
    std::uint8_t flags = 0;
  };
  enum : std::uint8_t {
    kRelease = 1,
    kReleaseKey = 2,
    kReleaseToken = 4,
    kDelete = 8,
    kDeleteToken = 16,
  };
  enum class Check { kClean, kSuspect, kWait };

  void mark(const Event& e) {
    switch (e.kind) {
      case EventKind::kAcquireOk:
        if (!e.lock_key.empty() && e.token) {
          const std::uint32_t worker = workers_.id(e.source);
          if (worker >= kRepeated) throw std::length_error("foreign-release: more than 2^31 workers");
          const auto [it, fresh] = marks_.try_emplace(mark_of(key_hash(e.lock_key), *e.token), worker);
          if (!fresh) it->second |= kRepeated;
        }
        break;
      case EventKind::kReleaseOk:
      case EventKind::kLockDelete:
        if (e.revision) at_revision(e);
        break;
      default:
        break;
    }
  }

  /// A release.ok or lock.delete at a revision.
  void at_revision(const Event& e) {
    const std::int64_t rev = *e.revision;
    const bool release = e.kind == EventKind::kReleaseOk;
    const bool has_key = !release || !e.lock_key.empty();  // a delete's empty key is a key named ""
    const std::uint64_t key = has_key ? key_hash(e.lock_key) : 0;
    if (suspect_.contains(rev)) {
      if (has_key) suspect_keys_.insert(key);
      return;
    }
    if (is_settled(rev)) {  // a second release or delete at a settled revision: its first key is found by pass 2
      suspect_.insert(rev);
      if (has_key) suspect_keys_.insert(key);
      return;
    }
    Open& o = open_[rev];
    if (o.flags & (release ? kRelease : kDelete)) {  // a second one
      suspect(rev, o);
      if (has_key) suspect_keys_.insert(key);
      open_.erase(rev);
      return;
    }
    if (release) {
      o.flags |= kRelease;
      o.releaser = workers_.id(e.source);
      if (has_key) o.flags |= kReleaseKey, o.release_key = key;
      if (e.token) o.flags |= kReleaseToken, o.release_token = *e.token;
    } else {
      o.flags |= kDelete;
      o.delete_key = key;
      if (e.token) o.flags |= kDeleteToken, o.delete_token = *e.token;
    }
    if ((o.flags & (kRelease | kDelete)) != (kRelease | kDelete)) return;
    switch (check(o)) {
      case Check::kSuspect:
        suspect(rev, o);
        open_.erase(rev);
        break;
      case Check::kClean:
        if (!(o.flags & kReleaseKey) || o.release_key == o.delete_key) {  // one key: settled
          settle(rev);
          open_.erase(rev);
        }
        break;
      case Check::kWait:
        break;  // a mark may still come (a late acquire.ok): decided at the end of the pass
    }
  }

  /// Whether the releaser owns the key of (key, token) by the marks so far.
  Check check_key(std::uint64_t key, bool has_token, std::int64_t token, std::uint32_t releaser) const {
    if (!has_token) return Check::kSuspect;
    const auto it = marks_.find(mark_of(key, token));
    if (it == marks_.end()) return Check::kWait;
    return it->second == releaser ? Check::kClean : Check::kSuspect;  // a repeated mark never equals
  }

  /// Whether a revision's release owns every key it deleted, by the marks so far.
  Check check(const Open& o) const {
    Check out = Check::kClean;
    auto add = [&](Check c) {
      if (c == Check::kSuspect || out == Check::kSuspect) out = Check::kSuspect;
      else if (c == Check::kWait) out = Check::kWait;
    };
    if (o.flags & kReleaseKey) add(check_key(o.release_key, o.flags & kReleaseToken, o.release_token, o.releaser));
    if ((o.flags & kDelete) && (!(o.flags & kReleaseKey) || o.delete_key != o.release_key))
      add(check_key(o.delete_key, o.flags & kDeleteToken, o.delete_token, o.releaser));
    return out;
  }

  void suspect(std::int64_t rev, const Open& o) {
    suspect_.insert(rev);
    if (o.flags & kReleaseKey) suspect_keys_.insert(o.release_key);
    if (o.flags & kDelete) suspect_keys_.insert(o.delete_key);
  }

  void settle(std::int64_t rev) {
    if (settled_.empty() || rev > settled_.back()) settled_.push_back(rev);
    else settled_late_.insert(rev);
  }
  bool is_settled(std::int64_t rev) const {
    if (!settled_.empty() && rev <= settled_.back() && std::binary_search(settled_.begin(), settled_.end(), rev))
      return true;
    return !settled_late_.empty() && settled_late_.contains(rev);
  }

  /// The end of pass 1: every mark is in, so each open revision with a release is clean or suspect.
  void end_marks() {
    for (const auto& [rev, o] : open_)
      if ((o.flags & kRelease) && check(o) != Check::kClean) suspect(rev, o);
    open_ = {};
    marks_ = {};
    settled_ = {};
    settled_late_ = {};
  }

  bool start(Phase p) {
    phase_ = p;
    return true;
  }
  bool finished() {
    done_ = true;
    return false;
  }

  // ---- pass 2: the records of the suspect revisions and keys ----
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
  /// An anomaly whose third holder the last pass looks for: from the release on, the first
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

  bool wanted_key(std::string_view key) const { return suspect_keys_.contains(key_hash(key)); }

  void gather(std::size_t index, const Event& e) {
    switch (e.kind) {
      case EventKind::kAcquireOk:
        acquire_ok(index, e);
        break;
      case EventKind::kJobDone:
      case EventKind::kReleaseInvoke:
        finish_of(index, e);
        break;
      case EventKind::kLockGrant:
        if (!e.lock_key.empty() && wanted_key(e.lock_key)) {
          const auto g = static_cast<std::uint32_t>(grants_.size());
          if (note_first(first_grant_, key_first_grant_, keys_.id(e.lock_key), e.token, g))
            grants_.push_back(Grant{index, e.token, e.lease_id});
        }
        break;
      case EventKind::kLockDelete:
        if (e.revision && suspect_.contains(*e.revision)) {
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
        if (e.revision && suspect_.contains(*e.revision)) {
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
  }

  /// After a gathering pass: whether a suspect revision deleted a key not gathered (a revision
  /// settled in pass 1 whose first key pass 1 did not keep); if so, its hash joins the suspect
  /// keys and the gathered records are dropped for the pass to run again.
  bool gather_new_keys() {
    bool any = false;
    auto need = [&](std::uint32_t key) { any = suspect_keys_.insert(key_hash(keys_.name(key))).second || any; };
    for (const Release& r : releases_)
      if (r.key != kNoEntry) need(r.key);
    for (const Delete& d : deletes_) need(d.key);
    if (!any) return false;
    acquires_.clear();
    first_acquire_.clear();
    key_first_acquire_.clear();
    grants_.clear();
    first_grant_.clear();
    key_first_grant_.clear();
    deletes_.clear();
    deletes_at_.clear();
    releases_.clear();
    latest_token_.clear();
    waiting_n1_.clear();
    waiting_n2_.clear();
    unfinished_.clear();
    return true;
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
  static std::uint32_t at(const std::vector<std::uint32_t>& v, std::uint32_t key) {
    return key < v.size() ? v[key] : kNoEntry;
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
    if (e.lock_key.empty() || !wanted_key(e.lock_key)) return;
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
    auto settle_all = [&](const std::vector<std::uint32_t>& entries) {
      for (std::uint32_t a : entries) acquires_[a].first_finish = index;
    };
    if (!e.token) {
      for (const auto& [token, entries] : waiting) settle_all(entries);
      waiting.clear();
    } else if (auto it = waiting.find(*e.token); it != waiting.end()) {
      settle_all(it->second);
      waiting.erase(it);
    }
  }

  // ---- pass 3: the leases whose worker owns a key ----
  /// The leases of the grants an owner is found by (no acquire.ok of the key and token); whether any.
  bool want_leases() {
    for (const Release& rel : releases_)
      for (const auto& [name, kt] : keys_of(rel)) {
        const auto& [key, token] = kt;
        if (acquire_of(key, token) != kNoEntry) continue;
        if (const std::uint32_t g = grant_of(key, token); g != kNoEntry && grants_[g].lease)
          wanted_leases_.insert(*grants_[g].lease);
      }
    return !wanted_leases_.empty();
  }

  /// Only events about the worker's own lease (a release by name reports the leases of the keys it
  /// deleted, which are not its own).
  void lease(const Event& e) {
    const bool own_lease = e.kind == EventKind::kAcquireOk || e.kind == EventKind::kAcquireFail ||
                           e.kind == EventKind::kKeepaliveFail || e.kind == EventKind::kLeaseLost ||
                           e.kind == EventKind::kReleaseInvoke;
    if (own_lease && is_worker(e) && e.lease_id && wanted_leases_.contains(*e.lease_id))
      lease_owner_.try_emplace(*e.lease_id, workers_.id(e.source));
  }

  // ---- deciding ----
  /// The first grant of `key` with `token` (any token when unknown), kNoEntry when none.
  std::uint32_t grant_of(std::uint32_t key, std::optional<std::int64_t> token) const {
    if (!token) return at(key_first_grant_, key);
    const auto it = first_grant_.find({key, *token});
    return it == first_grant_.end() ? kNoEntry : it->second;
  }
  /// The first acquire.ok of `key` with `token` (the key's first when the token is unknown).
  std::uint32_t acquire_of(std::uint32_t key, std::optional<std::int64_t> token) const {
    if (!token) return at(key_first_acquire_, key);
    const auto it = first_acquire_.find({key, *token});
    return it == first_acquire_.end() ? kNoEntry : it->second;
  }

  Owner owner_from(std::uint32_t a) const {
    return Owner{workers_.name(acquires_[a].worker), a, acquires_[a].token};
  }

  /// Whose key `key` with `token` was: the acquire.ok of that key and token, else the grant's
  /// lease's worker, else (token unknown or seen nowhere) the key's first acquire.ok.
  std::optional<Owner> owner_of(std::uint32_t key, std::optional<std::int64_t> token) const {
    if (const std::uint32_t a = acquire_of(key, token); a != kNoEntry) return owner_from(a);
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

  /// Each key a release deleted, by name, with its token when told: its own lock_key, then those
  /// of the lock.deletes at its revision (the first delete's token for a key).
  std::map<std::string_view, std::pair<std::uint32_t, std::optional<std::int64_t>>> keys_of(const Release& rel) const {
    std::map<std::string_view, std::pair<std::uint32_t, std::optional<std::int64_t>>> keys;
    if (rel.key != kNoEntry) keys.emplace(keys_.name(rel.key), std::pair{rel.key, rel.token});
    if (const auto it = deletes_at_.find(rel.revision); it != deletes_at_.end())
      for (std::uint32_t d = it->second.first; d != kNoEntry; d = deletes_[d].next)
        keys.emplace(keys_.name(deletes_[d].key), std::pair{deletes_[d].key, deletes_[d].token});
    return keys;
  }

  std::string third_holder_text(const Next& n, std::string_view owner) const {
    return "; " + workers_.name(n.source) + " then acquired the lock" +
           (n.token ? " (token " + std::to_string(*n.token) + ")" : std::string()) + " while " + std::string(owner) +
           " was still mid-job";
  }

  /// Every anomaly, in release.ok order then key name; the third holder too when the owner's
  /// acquire.ok came before the release, else a Scan for the last pass.
  void decide() {
    std::set<std::tuple<std::uint32_t, std::int64_t, std::uint32_t>> reported;  // (releaser, revision, key)
    for (const Release& rel : releases_) {
      const std::string& releaser = workers_.name(rel.source);
      // key -> the first delete's token and every delete's index
      std::map<std::uint32_t, std::pair<std::optional<std::int64_t>, std::vector<std::size_t>>> deletes;
      if (const auto it = deletes_at_.find(rel.revision); it != deletes_at_.end())
        for (std::uint32_t d = it->second.first; d != kNoEntry; d = deletes_[d].next) {
          const auto it_key = deletes.try_emplace(deletes_[d].key, deletes_[d].token, std::vector<std::size_t>{}).first;
          it_key->second.second.push_back(deletes_[d].index);
        }
      for (const auto& [key_name, kt] : keys_of(rel)) {
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

  // ---- pass 4 ----
  /// Each Scan, from its release on.
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

  Phase phase_ = Phase::kMark;
  bool done_ = false;  // no pass is wanted any more
  IssuerCoverage coverage_;  // pass 1: did the watch see any grant beside the holdings?
  StringIds workers_;
  // pass 1
  boost::unordered_flat_map<std::uint64_t, std::uint32_t> marks_;  // mark_of(key, token) -> first acquirer (| kRepeated)
  boost::unordered_flat_map<std::int64_t, Open> open_;            // revision -> what came at it, not settled yet
  std::vector<std::int64_t> settled_;                             // settled clean, ascending
  boost::unordered_flat_set<std::int64_t> settled_late_;          // settled clean below settled_'s last
  boost::unordered_flat_set<std::int64_t> suspect_;               // revisions the later passes decide
  boost::unordered_flat_set<std::uint64_t> suspect_keys_;         // the hashes of their keys
  // the gathering passes
  StringIds keys_;
  std::vector<Acquire> acquires_;
  KeyTokenMap first_acquire_;                    // (key, token) -> its first acquire.ok, in acquires_
  std::vector<std::uint32_t> key_first_acquire_;  // key -> its first acquire.ok
  std::vector<Grant> grants_;                    // the first grant of each (key, token) or key
  KeyTokenMap first_grant_;                      // (key, token) -> its first lock.grant, in grants_
  std::vector<std::uint32_t> key_first_grant_;    // key -> its first lock.grant
  boost::unordered_flat_set<std::int64_t> wanted_leases_;
  boost::unordered_flat_map<std::int64_t, std::uint32_t> lease_owner_;  // lease id -> worker
  std::vector<Delete> deletes_;
  boost::unordered_flat_map<std::int64_t, Chain> deletes_at_;  // revision -> its deletes, in history order
  std::vector<Release> releases_;
  std::vector<std::pair<bool, std::optional<std::int64_t>>> latest_token_;  // worker -> its latest acquire.ok's token
  std::vector<std::uint32_t> waiting_n1_, waiting_n2_;  // releases waiting for n1 / for n2
  std::uint32_t waiting_n1_worker_ = 0;                 // the n1 worker of every release in waiting_n2_
  /// worker -> token -> its first acquire.oks of (key, token) still waiting for a finish
  std::vector<boost::unordered_flat_map<std::int64_t, std::vector<std::uint32_t>>> unfinished_;
  // decide()'s results: the anomalies, and those whose third holder the last pass looks for
  std::vector<Anomaly> anomalies_;
  std::vector<Scan> scans_;
};

}  // namespace

std::unique_ptr<StreamRule> make_foreign_release_rule() { return std::make_unique<ForeignReleaseRule>(); }

}  // namespace fencecheck::harness::detail
