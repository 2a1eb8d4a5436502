// ungranted-holding (checkers.h says what it finds): each worker's acquire.ok against the lock
// service's own history of the lock key it names (lock.grant / lock.delete, docs/architecture.md
// "The issuer's own history"), judged in the lock service's order (revisions), never in the order
// the events reached the harness.
//
// A lock key's generation: one grant of the key (its token, the grant's revision) up to its delete
// (the delete's revision). A generation is the holder's from the moment it is the oldest live key
// of its lock (the live key with the smallest token: etcd's v3lock, `etcdctl lock`, python-etcd3's
// one key, ZooKeeper's lowest sequential znode); a generation deleted before that moment (a queued
// waiter whose lease expired: etcd#11456) was never granted the lock.
//
// Pass 1, state bounded by what is live: per live lock key its generation (token, revision,
// whether it became the oldest, how many acquire.oks claimed it, the largest claiming revision),
// per lock its live keys ordered by token, and the acquire.oks whose key has no live generation
// yet (the watch lags the worker). A key becomes a suspect when an acquire.ok finds no live
// generation of it by the time its grant would have to come (the grant came later than the
// acquire's own revision, or never), when a claimed generation is deleted before it became the
// oldest or at a revision at or below a claim's revision, or when two acquire.oks claim one
// generation. A normal history has none, and the rule ends there.
// Pass 2, only with suspects: every generation and every acquire.ok of the suspect keys, kept
// exactly (suspect keys only), judged at the pass's end:
//   - the acquire's generation: with a revision, the latest one granted at or before it (none:
//     never granted before the acquire); else the one whose token is the acquire's; else the last
//     grant to the acquire's own session (lease_id: etcd's lease, Redis's owner) received before
//     it, else that session's first after (a session's holdings come one after another); else the
//     only one; else unknown (the history cannot say which);
//   - invalid when that generation was deleted at a revision at or below the acquire's revision,
//     or deleted before it was ever the oldest key, when the lock service's deletes carry
//     revisions (its own order); invalid when the key was never granted while the watch covered
//     the lock (every lock event carried a revision: etcd's watch, which misses nothing from its
//     start revision on);
//   - unknown, naming the key, when the history lacks what is needed: no lock-service event at all,
//     an acquire.ok without a lock_key, a key outside the lock the watch covered, a kind whose
//     deletes have no revision (ZooKeeper, Redis) where only a revision would settle it.
// Pass 3, only when an ungranted holding presented a token: the rightful holders it fenced. A
// write rejected against a mark equal to the zombie's token, on a key where the zombie's own
// write with that token was accepted before and no other worker wrote with that token (else the
// mark may be theirs), is added to the zombie's anomaly (its writer among the clients, the
// rejection and the zombie's write among the evidence). State: per zombie, per key it wrote.

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

constexpr std::int64_t kNone = -1;  // no revision / no token

class UngrantedHoldingRule final : public StreamRule {
 public:
  std::string_view name() const override { return "ungranted-holding"; }
  bool reads_log() const override { return false; }

  void begin(const ReadBack& /*readback*/, const PackedLog& /*log*/, const CheckContext& context) override {
    lock_ = context.lock;
    while (lock_.size() > 1 && lock_.back() == '/') lock_.pop_back();
  }

  void observe(std::size_t index, const Event& e) override {
    switch (e.kind) {
      case EventKind::kLockGrant: grant(index, e); break;
      case EventKind::kLockDelete: remove(index, e); break;
      case EventKind::kAcquireOk:
        if (pass_ < 3 && is_worker_protocol_event(e)) acquire(index, e);
        break;
      case EventKind::kWriteOk:
      case EventKind::kWriteFail:
        if (pass_ == 3 && e.token) fenced_by_zombie(index, e);
        break;
      default: break;
    }
  }

  bool wants_another_pass() override {
    if (pass_ == 2) {
      judge();
      return !zombies_.empty();  // pass 3: the rightful holders' writes the zombies' tokens fenced
    }
    if (pass_ > 1) return false;
    for (const auto& [key, p] : pending_) suspects_.insert(key);
    pending_ = {};
    if (suspects_.empty()) return false;
    live_ = {};
    groups_ = {};
    return true;
  }
  void begin_pass(unsigned pass) override { pass_ = pass; }
  std::uint64_t kinds() const override {  // observe()'s switch
    return bit(EventKind::kLockGrant) | bit(EventKind::kLockDelete) | bit(EventKind::kAcquireOk) |
           bit(EventKind::kWriteOk) | bit(EventKind::kWriteFail);
  }

  CheckerResult finish(const StreamEnd& /*end*/) override {
    if (pass_ == 2 && !judged_) judge();  // a driver that never asked wants_another_pass()
    std::vector<Anomaly> anomalies = std::move(anomalies_);
    std::vector<std::string> unknowns = std::move(unknowns_);
    for (const Zombie& z : zombies_) {
      if (z.fenced == 0) continue;
      Anomaly& a = anomalies[z.anomaly];
      a.description += "; the resource then rejected " + std::to_string(z.fenced) +
                       " write(s) of the rightful holders against the mark " + std::to_string(z.token) + " that " +
                       workers_.name(z.worker) + "'s writes set (the first: " + z.first_fenced + ")";
    }
    if (holdings_ > 0 && lock_events_ == 0)
      unknowns.insert(unknowns.begin(),
                      std::to_string(holdings_) + " acquire.ok(s) reported a holding (the first: " + first_holding_ +
                          ") but the lock service's history has no lock.grant or lock.delete at all: the issuer watch "
                          "saw none of these holdings (a lock the watch does not cover?), so none is matched");
    if (!anomalies.empty() || unknowns.empty()) return result_of(name(), std::move(anomalies));
    constexpr std::size_t kListed = 3;  // the reason names the first few; the count says the rest
    if (unknowns.size() > kListed) {
      const std::size_t more = unknowns.size() - kListed;
      unknowns.resize(kListed);
      unknowns.push_back("and " + std::to_string(more) + " more the history cannot match");
    }
    return unknown_result(name(), join(unknowns, "; ") + ": unknown, never valid");
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + workers_.state_bytes();
    n += live_.size() * (sizeof(std::uint64_t) + sizeof(Live) + 1);
    for (const auto& [lock, g] : groups_) n += lock.capacity() + sizeof(g) + g.size() * 48;
    n += pending_.size() * (sizeof(std::uint64_t) + sizeof(Pending) + 1) + suspects_.size() * (sizeof(std::uint64_t) + 1);
    for (const auto& [key, s] : suspect_) n += sizeof(key) + sizeof(s) + s.key.capacity() + s.gens.capacity() * sizeof(Gen);
    n += acquires_.capacity() * sizeof(Acquire) + zombies_.capacity() * sizeof(Zombie);
    for (const Zombie& z : zombies_) n += z.keys.size() * 64;
    for (const auto& a : anomalies_) n += sizeof(a) + a.description.capacity();
    for (const auto& u : unknowns_) n += sizeof(u) + u.capacity();
    return n;
  }

 private:
  /// A live generation of a lock key.
  struct Live {
    std::int64_t token = kNone;
    std::string_view group;       // a key of groups_ ("" when the key's lock is not known)
    bool owned = false;           // became the oldest live key of its lock
    bool ordered = false;         // its lock's order is known (owned means something)
    std::uint32_t claims = 0;     // acquire.oks that named it
    std::int64_t claim_revision = kNone;  // the largest revision among them
    std::uint32_t gen = 0;        // pass 2, suspect keys: its index in Suspect::gens
  };
  /// Acquire.oks that named a key before any live generation of it was seen.
  struct Pending {
    std::uint32_t count = 0;
    std::int64_t min_revision = kNone;  // the smallest revision among them
  };
  /// Pass 2: one generation of a suspect key.
  struct Gen {
    std::int64_t token = kNone, revision = kNone, delete_revision = kNone, lease = kNone;
    std::size_t grant = 0, deleted = 0;  // history indices (deleted: when delete_revision or was_deleted)
    bool was_deleted = false, owned = false, ordered = false;
  };
  struct Suspect {
    std::string key;
    std::vector<Gen> gens;
  };
  /// Pass 2: an acquire.ok of a suspect key.
  struct Acquire {
    std::uint64_t key = 0;
    std::size_t index = 0;
    std::uint32_t worker = 0;
    std::int64_t token = kNone, revision = kNone, lease = kNone;
  };

  /// Whether `key` is one of the covered lock's keys: the lock name itself or under "<lock>/".
  bool covered(std::string_view key) const {
    if (lock_.empty()) return true;
    return key.substr(0, lock_.size()) == lock_ && (key.size() == lock_.size() || key[lock_.size()] == '/');
  }
  /// The lock a lock event's key belongs to, when known: the scenario's lock, or the event's own.
  std::string_view group_of(const Event& e) const {
    if (!lock_.empty()) return lock_;
    return e.lock;
  }

  /// Pass 3: a zombie's accepted write with its token sets the key's mark; a write of another
  /// worker rejected against exactly that mark, on a key where no other worker wrote with that
  /// token before, was fenced by the zombie's token.
  void fenced_by_zombie(std::size_t index, const Event& e) {
    for (Zombie& z : zombies_) {
      const bool own = workers_.name(z.worker) == e.source;
      if (e.kind == EventKind::kWriteOk) {
        if (*e.token != z.token) continue;
        auto& k = z.keys[e.key];
        if (own && !k.zombie_ok) k.zombie_ok = index;
        if (!own) k.shared = true;
      } else if (!own && e.high_water && *e.high_water == z.token) {
        const auto k = z.keys.find(e.key);
        if (k == z.keys.end() || !k->second.zombie_ok || k->second.shared) continue;
        Anomaly& a = anomalies_[z.anomaly];
        a.evidence.push_back(index);
        a.evidence.push_back(*k->second.zombie_ok);
        a.clients.push_back(e.source);
        a.tokens.push_back(*e.token);
        if (z.fenced++ == 0)
          z.first_fenced = e.source + "'s write of " + e.key + " with token " + std::to_string(*e.token) + ", event " +
                           std::to_string(index);
      }
    }
  }

  void grant(std::size_t index, const Event& g) {
    if (pass_ == 3) return;
    ++lock_events_;
    if (!g.revision) unordered_ = true;
    if (g.lock_key.empty() || !covered(g.lock_key)) return;
    const std::uint64_t k = key_hash(g.lock_key);
    const std::int64_t token = g.token.value_or(kNone);
    if (const auto it = live_.find(k); it != live_.end()) {
      if (it->second.token == token) return;  // a replay of the grant (a restarted watch)
      end_live(it);                           // re-created without a delete seen: the old one ended
    }
    Live l;
    l.token = token;
    l.ordered = token != kNone && !group_of(g).empty();
    Suspect* s = pass_ > 1 ? suspect(k, g.lock_key) : nullptr;
    if (s) {
      l.gen = static_cast<std::uint32_t>(s->gens.size());
      s->gens.push_back(Gen{token, g.revision.value_or(kNone), kNone, g.lease_id.value_or(kNone), index, 0, false, false,
                            l.ordered});
    }
    if (pass_ == 1) {
      if (const auto p = pending_.find(k); p != pending_.end()) {
        // Acquire.oks that came before the grant (the watch lags): theirs, unless one's own
        // revision is below the grant's (granted only after it).
        if (p->second.min_revision != kNone && g.revision && *g.revision > p->second.min_revision) suspects_.insert(k);
        l.claims = p->second.count;
        if (l.claims > 1) suspects_.insert(k);
        pending_.erase(p);
      }
    }
    auto& placed = live_.insert_or_assign(k, l).first->second;
    if (l.ordered) {
      auto& group = groups_[std::string(group_of(g))];
      placed.group = groups_.find(group_of(g))->first;
      group.emplace(token, k);
      if (group.begin()->second == k) own(placed, s);
    }
  }

  void remove(std::size_t index, const Event& d) {
    if (pass_ == 3) return;
    ++lock_events_;
    if (!d.revision) unordered_ = true;
    if (d.lock_key.empty() || !covered(d.lock_key)) return;
    const std::uint64_t k = key_hash(d.lock_key);
    const auto it = live_.find(k);
    if (it == live_.end()) {
      // A key whose grant the history does not show (granted before the watch began, or a
      // replayed delete): it existed up to this delete (its token, from prev_kv, says which
      // grant). The acquire.oks waiting for it are its, unless one's revision is at or after it.
      if (pass_ == 1) {
        if (const auto p = pending_.find(k); p != pending_.end()) {
          if (p->second.count > 1 || (p->second.min_revision != kNone && d.revision && *d.revision <= p->second.min_revision))
            suspects_.insert(k);
          pending_.erase(p);
        }
      } else if (auto* s = suspect(k, d.lock_key)) {
        s->gens.push_back(Gen{d.token.value_or(kNone), kNone, d.revision.value_or(kNone), d.lease_id.value_or(kNone), index,
                              index, true, true, false});
      }
      return;
    }
    Live& l = it->second;
    if (pass_ == 1) {
      const bool before_owned = l.ordered && !l.owned && d.revision;
      const bool at_or_below_claim = l.claim_revision != kNone && d.revision && *d.revision <= l.claim_revision;
      if (l.claims > 0 && (before_owned || at_or_below_claim)) suspects_.insert(it->first);
    } else if (auto* s = suspect_of(it->first)) {
      Gen& gen = s->gens[l.gen];
      gen.was_deleted = true;
      gen.deleted = index;
      gen.delete_revision = d.revision.value_or(kNone);
    }
    end_live(it);
  }

  /// Drops a live generation; the next oldest of its lock becomes the holder.
  void end_live(boost::unordered_flat_map<std::uint64_t, Live>::iterator it) {
    const Live l = it->second;
    const std::uint64_t k = it->first;
    live_.erase(it);
    if (!l.ordered) return;
    const auto g = groups_.find(l.group);
    if (g == groups_.end()) return;
    auto& group = g->second;
    const bool was_first = !group.empty() && group.begin()->second == k;
    for (auto [a, b] = group.equal_range(l.token); a != b; ++a)
      if (a->second == k) {
        group.erase(a);
        break;
      }
    if (was_first && !group.empty()) {
      const auto next = live_.find(group.begin()->second);
      if (next != live_.end()) own(next->second, suspect_of(next->first));
    }
    if (group.empty()) groups_.erase(g);
  }

  void own(Live& l, Suspect* s) {
    l.owned = true;
    if (s) s->gens[l.gen].owned = true;
  }

  void acquire(std::size_t index, const Event& e) {
    if (pass_ == 1) {
      if (holdings_++ == 0)
        first_holding_ = e.source + " held " + (e.lock_key.empty() ? "lock " + e.lock : e.lock_key) +
                         (e.token ? " with token " + std::to_string(*e.token) : std::string());
      if (e.lock_key.empty()) {
        if (no_key_++ == 0)
          unknowns_.push_back(e.source + "'s acquire.ok (event " + std::to_string(index) +
                              ") names no lock_key, so it cannot be matched with the lock service's history");
        return;
      }
      if (!covered(e.lock_key)) {
        if (outside_++ == 0)
          unknowns_.push_back(e.source + "'s acquire.ok (event " + std::to_string(index) + ") names the lock key " +
                              e.lock_key + ", outside the lock " + lock_ +
                              " the issuer watch covered (the key itself and keys under \"" + lock_ +
                              "/\"), so it cannot be matched");
        return;
      }
      const std::uint64_t k = key_hash(e.lock_key);
      const std::int64_t revision = e.revision.value_or(kNone);
      if (const auto it = live_.find(k); it != live_.end()) {
        Live& l = it->second;
        if (++l.claims > 1) suspects_.insert(k);
        l.claim_revision = std::max(l.claim_revision, revision);
        return;
      }
      Pending& p = pending_[k];
      ++p.count;
      if (revision != kNone) p.min_revision = p.min_revision == kNone ? revision : std::min(p.min_revision, revision);
      return;
    }
    if (e.lock_key.empty() || !covered(e.lock_key)) return;
    const std::uint64_t k = key_hash(e.lock_key);
    if (suspect(k, e.lock_key) != nullptr)
      acquires_.push_back(Acquire{k, index, workers_.id(e.source), e.token.value_or(kNone), e.revision.value_or(kNone),
                                  e.lease_id.value_or(kNone)});
  }

  /// Pass 2: the suspect entry of key hash `k` (created on first sight), or nullptr when `k` is no suspect.
  Suspect* suspect(std::uint64_t k, std::string_view key) {
    if (!suspects_.contains(k)) return nullptr;
    Suspect& s = suspect_[k];
    if (s.key.empty()) s.key = std::string(key);
    return &s;
  }
  Suspect* suspect_of(std::uint64_t k) {
    if (pass_ == 1) return nullptr;
    const auto it = suspect_.find(k);
    return it == suspect_.end() ? nullptr : &it->second;
  }

  /// Follows ungranted holding `a` (anomaly number `anomaly`) into pass 3, when it presented a token.
  void follow(const Acquire& a, std::size_t anomaly) {
    if (a.token == kNone) return;
    Zombie& z = zombies_.emplace_back();
    z.worker = a.worker;
    z.token = a.token;
    z.anomaly = anomaly;
  }

  /// Pass 2's end: each suspect key's acquire.oks against its generations (anomalies_, unknowns_,
  /// and a Zombie per ungranted holding with a token, for pass 3).
  void judge() {
    judged_ = true;
    std::vector<Anomaly>& anomalies = anomalies_;
    std::vector<std::string>& unknowns = unknowns_;
    for (const Acquire& a : acquires_) {
      const Suspect& s = suspect_.at(a.key);
      const std::string& worker = workers_.name(a.worker);
      const std::string who = worker + "'s acquire.ok of " + s.key + " (event " + std::to_string(a.index) +
                              (a.token != kNone ? ", token " + std::to_string(a.token) : std::string()) +
                              (a.revision != kNone ? ", revision " + std::to_string(a.revision) : std::string()) + ")";
      const Gen* gen = nullptr;
      if (a.revision != kNone) {
        for (const Gen& g : s.gens)
          if (g.revision != kNone && g.revision <= a.revision && (!gen || g.revision > gen->revision)) gen = &g;
        // A generation known only by its delete (its grant came before the watch): it existed
        // before its delete, so it is the acquire's when nothing granted later is.
        if (!gen)
          for (const Gen& g : s.gens)
            if (g.revision == kNone && (!gen || g.delete_revision > gen->delete_revision)) gen = &g;
      } else {
        for (const Gen& g : s.gens)
          if (g.token != kNone && g.token == a.token) gen = &g;
        // The grant made to the acquire's own session (lease, Redis owner): a session's holdings
        // come one after another, so the last of its grants received before the acquire.ok, else
        // its first after.
        if (!gen && a.lease != kNone) {
          const Gen *before = nullptr, *after = nullptr;
          for (const Gen& g : s.gens) {
            if (g.lease != a.lease) continue;
            if (g.grant < a.index) before = &g;
            else if (!after) after = &g;
          }
          gen = before ? before : after;
        }
        if (!gen && s.gens.size() == 1) gen = &s.gens.front();
        if (!gen && s.gens.size() > 1) {
          unknowns.push_back(who + ": the lock service granted " + s.key + " " + std::to_string(s.gens.size()) +
                             " times and the acquire.ok carries neither a revision nor one of those grants' tokens or "
                             "leases, so which grant it was cannot be told");
          continue;
        }
      }
      if (!gen) {
        if (!unordered_ && lock_events_ > 0) {
          Anomaly& an = anomalies.emplace_back();
          an.name = "ungranted-holding";
          an.clients = {worker};
          if (a.token != kNone) an.tokens = {a.token};
          an.evidence = {a.index};
          std::string when = s.gens.empty() ? "never granted " + s.key + " while its watch covered the lock"
                                            : "granted " + s.key + " only after the acquire's own revision (event " +
                                                  std::to_string(s.gens.front().grant) + ", revision " +
                                                  std::to_string(s.gens.front().revision) + ")";
          for (const Gen& g : s.gens) an.evidence.push_back(g.grant);
          an.description = who + " reports a holding the lock service's own history does not show: it " + when +
                           "; " + worker + " held a lock key the issuer never gave it";
          follow(a, anomalies.size() - 1);
        } else {
          unknowns.push_back(who + ": the lock service's history has no grant of " + s.key +
                             (unordered_ ? ", and its events carry no revisions (the kind's history is not complete "
                                           "enough to say it was never granted)"
                                         : ""));
        }
        continue;
      }
      const bool deleted_before = gen->was_deleted && a.revision != kNone && gen->delete_revision != kNone &&
                                  gen->delete_revision <= a.revision;
      const bool never_owned = gen->was_deleted && gen->ordered && !gen->owned && gen->delete_revision != kNone;
      if (deleted_before || never_owned) {
        Anomaly& an = anomalies.emplace_back();
        an.name = "ungranted-holding";
        an.clients = {worker};
        if (a.token != kNone) an.tokens.push_back(a.token);
        if (gen->token != kNone) an.tokens.push_back(gen->token);
        an.evidence = {gen->grant, gen->deleted, a.index};
        const std::string token = gen->token != kNone ? ", token " + std::to_string(gen->token) : std::string();
        const std::string deleted =
            "deleted it at revision " + std::to_string(gen->delete_revision) + " (event " + std::to_string(gen->deleted) + ")";
        const std::string grant_text =
            gen->revision == kNone
                ? "the lock service granted " + s.key + " before its watch began" + token + " and " + deleted
                : "the lock service granted " + s.key + " (event " + std::to_string(gen->grant) + token + ", revision " +
                      std::to_string(gen->revision) + ") and " + deleted;
        an.description =
            who + " reports a holding the lock service never granted: " + grant_text +
            (deleted_before ? ", at or before the acquire's own revision " + std::to_string(a.revision)
                            : ", while older keys of the lock still existed: the key was a queued waiter that never "
                              "held the lock (a waiter whose lease expired: etcd#11456)") +
            "; " + worker + " went on as the holder of a key that no longer existed";
        follow(a, anomalies.size() - 1);
        continue;
      }
      if (gen->was_deleted && a.revision == kNone && a.index > gen->deleted) {
        unknowns.push_back(who + " came after the lock service deleted " + s.key + " (event " +
                           std::to_string(gen->deleted) +
                           ") and carries no revision to place it in the lock service's order, so whether it was "
                           "granted before that delete cannot be told");
      }
    }
  }

  /// An ungranted holding (pass 3): its worker, the token it presented, its anomaly, and per
  /// resource key its first accepted write with that token and whether another worker wrote
  /// with the same token (then a rejection at that mark may be that worker's doing).
  struct ZombieKey {
    std::optional<std::size_t> zombie_ok;
    bool shared = false;
  };
  struct Zombie {
    std::uint32_t worker = 0;
    std::int64_t token = 0;
    std::size_t anomaly = 0;
    std::map<std::string, ZombieKey, std::less<>> keys;
    std::size_t fenced = 0;
    std::string first_fenced;
  };

  std::string lock_;
  unsigned pass_ = 1;
  bool judged_ = false;
  std::vector<Anomaly> anomalies_;
  std::vector<Zombie> zombies_;
  std::size_t lock_events_ = 0, holdings_ = 0, no_key_ = 0, outside_ = 0;
  bool unordered_ = false;  // some lock event had no revision (ZooKeeper's deletes, Redis)
  std::string first_holding_;
  std::vector<std::string> unknowns_;
  boost::unordered_flat_map<std::uint64_t, Live> live_;
  // per lock, its live keys by token (oldest first); a multimap: two keys may share a token only
  // in a broken issuer's history
  std::map<std::string, std::multimap<std::int64_t, std::uint64_t>, std::less<>> groups_;
  boost::unordered_flat_map<std::uint64_t, Pending> pending_;
  boost::unordered_flat_set<std::uint64_t> suspects_;
  // pass 2
  boost::unordered_flat_map<std::uint64_t, Suspect> suspect_;
  std::vector<Acquire> acquires_;
  StringIds workers_;
};

}  // namespace

std::unique_ptr<StreamRule> make_ungranted_holding_rule() { return std::make_unique<UngrantedHoldingRule>(); }

}  // namespace fencecheck::harness::detail
