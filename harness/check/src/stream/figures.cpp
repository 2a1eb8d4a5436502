// fencecheck — the figures (analysis.h: Figures) read off the history in one pass, one event at a
// time (issue 16; docs/streaming-plan.md §2). compute_figures() is FigureStream over the in-memory
// history, so the golden record (tests/check), which records every figure, pins this code.
//
// State, figure by figure (live = bounded by workers, keys, open faults; holdings = one small entry
// per token issued; output = one entry per item reported):
// - pauses (output) and the longest per worker (live);
// - rejected writes per (key, client) (live) and rejections per (client, token) (RejectionTally:
//   holdings rejected); those at or above their mark (RejectionMarks: the write.fails whose reply
//   did not say the mark, until the end; none when every reply says it);
// - faults: the windows in injection order (output) and per (fault, target) a FIFO of the injects
//   not healed yet (live: open faults). A heal goes to the earliest open inject of its (fault,
//   target): the same matching as taking, for each inject in order, the first later heal not
//   taken (each heal taken by the earliest inject still open, by induction on the injects);
// - progress after the last heal: reset at each heal (live); its window is the lease TTL, known
//   at the end (HistoryTtl);
// - counters (CounterTally: live, per key); effects: the read-back only;
// - writes of unknown outcome: resolved against the read-back when the write.info is seen (the
//   read-back is read first), the same rules as before (output);
// - lease expiries during work, in two passes. A lock.delete may be explained by a release.ok
//   seen later (watch lag), its holder may be an acquire.ok seen later, its holder's
//   release.invoke is compared by the sender's clock and may come later in history order. The
//   first pass keeps only what is not settled: each delete until a release.ok carries its
//   revision (before or after it: then it is not an expiry, whatever follows, unless the issuer
//   said "expired"), and each release.ok revision until its delete comes. What is left at the end
//   are the candidates: the expiries, deletes without a revision (redis), and a second delete of
//   a revision whose release the first one took. Only when there are candidates, a second pass
//   gathers for their lock keys, tokens and revisions alone what the decision needs: the
//   acquire.oks and first grant of each key (and token), the first job.done of each (worker,
//   token), the earliest release.invoke of each (key, token), and the release.oks' revisions and
//   keys (the second pass sees every release.ok whose revision or lock key is a candidate's,
//   which is every one the decision looks at, so the candidates are decided exactly as a
//   single pass with every holding's records did; 80,000 random histories gave the same figures
//   as that version). State: the deletes in flight and the expiries, not the holdings (measured
//   5.7 bytes per holding with one expiry in 50 holdings; it was 240 with every holding kept).
//   With keep_holdings (analyze_history_file's), HoldingsKeep below adds the open holdings' events
//   (about 650 bytes each), the candidates', and about 24 bytes per holding dropped, so that the
//   second pass need not read the file.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/functional/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "fencecheck/harness/analysis.h"
#include "stream_rules.h"

namespace fencecheck::harness {

namespace {

using R = UnknownOutcome::Resolution;

/// What the read-back shows of write.info `e` (history index `i`): UnknownOutcome's rules.
/// `log` is rb's accept log, looked up by write id (its first entry), so each write.info costs one
/// lookup, not a scan of the log.
UnknownOutcome unknown_outcome(std::size_t i, const Event& e, const ReadBack& rb, const resources::Evidence& ev,
                               bool has_log, const PackedLog& log) {
  UnknownOutcome u{i, e.source, e.key, e.segment, e.chunk, e.token, R::kUnresolved, std::nullopt, {}};
  const std::string tok = e.token ? std::to_string(*e.token) : std::string("?");
  if (detail::is_effect_key(e.key) && e.segment) {
    // The worker's effect id is "seg<N>"; a client may prefix its name ("w1:seg2").
    const std::string base = detail::effect_base(e.key);
    const std::string id = "seg" + std::to_string(*e.segment);
    const EffectRecord* found = nullptr;
    for (const auto& r : rb.effects)
      if (r.key == base && r.client == e.source && e.token && r.token == *e.token &&
          (r.id == id || r.id == e.source + ":" + id))
        found = &r;
    if (found && found->applied) {
      u.resolution = R::kApplied;
      u.seq = found->seq;
      u.note = "the resource applied effect " + id + " (seq " + std::to_string(found->seq) + ") although " + e.source +
               " never learned it did";
    } else if (found) {
      u.resolution = R::kNotApplied;
      u.note = "the resource recorded effect " + id + " but did not apply it (refused by the fence, or a duplicate)";
    } else if (ev.effects && !rb.effects.empty()) {
      u.resolution = R::kNotApplied;
      u.note = "the resource has no record of effect " + id + " with token " + tok + ": the request never reached it";
    } else {
      u.note = "the read-back lists no side effects: cannot tell";
    }
  } else if (e.segment && e.chunk && *e.chunk >= 0 && e.token) {
    auto same = [&](const auto& w) {
      return w.client == e.source && w.key == e.key && w.segment == *e.segment && w.chunk == *e.chunk && w.token == *e.token;
    };
    const std::string what = "segment " + std::to_string(*e.segment) + " chunk " + std::to_string(*e.chunk) + " with token " + tok;
    std::optional<LoggedWrite> logged;
    if (const auto p = log.find(e.source, *e.token, e.key, *e.segment, *e.chunk)) logged = log[p->first];
    const StoredChunk* slot = nullptr;
    for (const auto& c : rb.chunks)
      if (same(c)) slot = &c;
    const RejectedWrite* refused = nullptr;
    for (const auto& r : rb.rejections)
      if (same(r)) refused = &r;
    if (logged || slot) {
      u.resolution = R::kApplied;
      u.seq = logged ? logged->seq : slot->seq;
      u.note = "the resource accepted " + what + " (seq " + std::to_string(*u.seq) + ") although " + e.source +
               " never learned it did";
    } else if (refused) {
      u.resolution = R::kRejected;
      u.note = "the resource refused " + what + " (high-water mark " + std::to_string(refused->high_water) + ")";
    } else if (has_log && ev.rejections) {
      u.resolution = R::kNotApplied;
      u.note = "the resource neither accepted nor refused " + what + ": the request never reached it";
    } else {
      u.note = "the resource keeps no accept log and the slot holds another write: cannot tell whether " + what +
               " was applied";
    }
  } else {
    u.note = e.key.empty() ? std::string("not a resource write: cannot tell")
                           : "a counter increment: the counter's figure counts it as unknown";
  }
  return u;
}

}  // namespace

/// The holdings' events of the first pass, kept so that the second pass (the candidates' records,
/// gather_for_candidates) can run on them instead of reading the file again. Whatever it drops,
/// it remembers enough to tell at the end whether a dropped event is one the second pass uses, and
/// then it is not used (the caller reads the file, as without it). So what it keeps and drops is a
/// matter of memory, never of the answer:
/// - Every event of the second pass's kinds with a token goes to its token's bucket, packed
///   (pack_event); one without a token is kept loose, never dropped.
/// - A bucket is dropped when it holds a lock.delete and none of its deletes is unsettled (a
///   release.ok carried its revision, or the issuer said "released"): the holding is over. What
///   it dropped is written down: its token, its lock keys (as 64-bit hashes) and its release.oks'
///   revisions, 8 bytes each (about 24 bytes a holding).
/// - An event of a token dropped recently (the job.done after its release.ok) is dropped the same
///   way; a delete never is on arrival (it may be a candidate).
/// At the end usable() compares what was dropped with the candidates: none of their lock keys,
/// tokens or revisions may be among the dropped ones (and no job.done with a token dropped when a
/// candidate has no token). Held at the end: the candidates' buckets, the holdings still open,
/// every event without a token, and the notes. That is small for a lock service whose deletes a
/// release.ok's revision settles (etcd: a 10^8-event bench history), not for one whose deletes
/// carry no revision (redis's watch: no bucket is ever dropped, every holding is kept whole, about
/// 650 bytes, until the budget runs out), and a lock key reused by a later holding (redis's fixed
/// key) sends the second pass to the file whenever an earlier holding of it was dropped.
/// Past kBudget bytes (its buckets' table included) it gives up (keeps nothing more, frees what it
/// held) and the file is read. Not thread-safe.
class HoldingsKeep {
 public:
  static constexpr std::size_t kBudget = 320u << 20;

  explicit HoldingsKeep(bool on) : on_(on) {}

  /// The event at `index`, when it is of the second pass's kinds: kept or dropped.
  void take(std::size_t index, const Event& e) {
    if (!on_) return;
    if (!e.token) return keep_loose(index, e);
    if (e.kind != EventKind::kLockDelete && recently_dropped_.contains(*e.token)) return note_dropped(e);
    const auto [it, fresh] = buckets_.try_emplace(*e.token);
    Bucket& b = it->second;
    if (fresh) b.bytes.reserve(kBucketBytes);  // one allocation for a holding's events, not one per doubling
    const std::size_t before = fresh ? 0 : bucket_bytes(b);
    append(b.bytes, index, e);
    if (e.kind == EventKind::kLockDelete) ++b.deletes;
    if (e.kind == EventKind::kJobDone) b.done = true;
    if (!e.lock_key.empty()) b.keys.add(last_key_hash(e.lock_key));
    if (e.kind == EventKind::kReleaseOk && e.revision) b.revisions.add(static_cast<std::uint64_t>(*e.revision));
    bytes_ += bucket_bytes(b) - before;
    check_budget();
  }
  /// A lock.delete of `token` (taken just before) stays unsettled, for now.
  void opened(const std::optional<std::int64_t>& token) {
    if (!on_ || !token) return;
    if (const auto it = buckets_.find(*token); it != buckets_.end()) ++it->second.open;
  }
  /// An unsettled lock.delete of `token` is settled now (a release.ok carried its revision).
  void settled(const std::optional<std::int64_t>& token) {
    if (!on_ || !token) return;
    if (const auto it = buckets_.find(*token); it != buckets_.end()) {
      if (it->second.open > 0) --it->second.open;
      maybe_drop(it);
    }
  }
  /// A lock.delete of `token` (taken just before) was settled when it came.
  void closed(const std::optional<std::int64_t>& token) {
    if (!on_ || !token) return;
    if (const auto it = buckets_.find(*token); it != buckets_.end()) maybe_drop(it);
  }

  /// Whether every event the second pass will use was kept, for candidates with these lock keys,
  /// tokens and revisions (`every_token`: some candidate has no token, so every job.done with a
  /// token is used).
  [[nodiscard]] bool usable(const boost::unordered_flat_set<std::string_view>& keys,
                            const boost::unordered_flat_set<std::int64_t>& tokens,
                            const boost::unordered_flat_set<std::int64_t>& revisions, bool every_token) const {
    if (!on_ || over_budget_) return false;
    if (every_token && dropped_done_) return false;
    boost::unordered_flat_set<std::uint64_t> key_hashes;
    for (const std::string_view k : keys) key_hashes.insert(key_hash(k));
    for (const std::uint64_t h : dropped_keys_)
      if (key_hashes.contains(h)) return false;
    for (const std::uint64_t t : dropped_tokens_)
      if (tokens.contains(static_cast<std::int64_t>(t))) return false;
    for (const std::uint64_t r : dropped_revisions_)
      if (revisions.contains(static_cast<std::int64_t>(r))) return false;
    return true;
  }
  /// Calls f(index, event) for every event kept, in history order. The keep is spent afterwards.
  template <typename F>
  void replay(F&& f) {
    std::vector<std::pair<std::size_t, std::string_view>> all;
    const auto list = [&](const std::string& bytes) {
      for (std::size_t at = 0; at < bytes.size();) {
        std::uint64_t index = 0;
        std::uint32_t size = 0;
        std::memcpy(&index, bytes.data() + at, sizeof index);
        std::memcpy(&size, bytes.data() + at + sizeof index, sizeof size);
        at += kHeader;
        all.emplace_back(static_cast<std::size_t>(index), std::string_view(bytes).substr(at, size));
        at += size;
      }
    };
    for (const auto& [token, b] : buckets_) list(b.bytes);
    list(loose_.bytes);
    bytes_ += all.capacity() * sizeof(all[0]);  // held beside the buckets while they are replayed
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [index, bytes] : all) f(index, unpack_event(bytes));
  }
  /// The packed events, the notes, the buckets' table (its slots hold a Bucket each, used or
  /// not: a flat table keeps its slots after erases) and the recent tokens.
  [[nodiscard]] std::size_t state_bytes() const { return sizeof(*this) + bytes_ + table_bytes(); }

 private:
  /// A few distinct numbers, the first held inline (a bucket has one lock key, and at most one
  /// release.ok revision, but for a history that reuses them).
  struct Few {
    std::uint64_t first = 0;
    bool any = false;
    std::vector<std::uint64_t> more;
    void add(std::uint64_t x) {
      if (!any) {
        first = x;
        any = true;
      } else if (x != first && std::find(more.begin(), more.end(), x) == more.end()) {
        more.push_back(x);
      }
    }
    template <typename F>
    void for_each(F&& f) const {
      if (any) f(first);
      for (const std::uint64_t x : more) f(x);
    }
  };
  /// Each event: its history index (8 bytes), its packed size (4), then pack_event's bytes.
  static constexpr std::size_t kHeader = sizeof(std::uint64_t) + sizeof(std::uint32_t);
  struct Bucket {
    std::string bytes;       // its events, in history order
    Few keys, revisions;     // lock keys (hashed), release.oks' revisions
    unsigned deletes = 0, open = 0;  // its lock.deletes, and how many of them are unsettled
    bool done = false;               // it holds a job.done
  };
  using Buckets = boost::unordered_flat_map<std::int64_t, Bucket>;
  /// A holding's six events of a bench history, packed with their headers: about 450 bytes.
  static constexpr std::size_t kBucketBytes = 512;
  static constexpr std::size_t kRecent = 4096;  // dropped tokens remembered for their late events (a job.done)

  static std::uint64_t key_hash(std::string_view k) { return detail::mix64(boost::hash<std::string_view>{}(k)); }
  /// key_hash, remembering the last key: a holding's events follow one another with one key.
  std::uint64_t last_key_hash(const std::string& k) {
    if (k != last_key_) {
      last_key_ = k;
      last_key_hash_ = key_hash(k);
    }
    return last_key_hash_;
  }
  static void append(std::string& bytes, std::size_t index, const Event& e) {
    const std::size_t at = bytes.size();
    bytes.resize(at + kHeader);
    const std::uint32_t size = static_cast<std::uint32_t>(pack_event(e, bytes));
    const std::uint64_t where = index;
    std::memcpy(bytes.data() + at, &where, sizeof where);
    std::memcpy(bytes.data() + at + sizeof where, &size, sizeof size);
  }
  void keep_loose(std::size_t index, const Event& e) {
    const std::size_t before = loose_.bytes.capacity();
    append(loose_.bytes, index, e);
    bytes_ += loose_.bytes.capacity() - before;
    check_budget();
  }
  /// An event of a token dropped already, dropped too (written down as the bucket's were).
  void note_dropped(const Event& e) {
    if (!e.lock_key.empty()) remember(dropped_keys_, key_hash(e.lock_key));
    if (e.kind == EventKind::kReleaseOk && e.revision) remember(dropped_revisions_, static_cast<std::uint64_t>(*e.revision));
    if (e.kind == EventKind::kJobDone) dropped_done_ = true;
    check_budget();
  }
  void maybe_drop(Buckets::iterator it) {
    Bucket& b = it->second;
    if (b.deletes == 0 || b.open > 0) return;
    const std::int64_t token = it->first;
    remember(dropped_tokens_, static_cast<std::uint64_t>(token));
    b.keys.for_each([&](std::uint64_t k) { remember(dropped_keys_, k); });
    b.revisions.for_each([&](std::uint64_t r) { remember(dropped_revisions_, r); });
    dropped_done_ = dropped_done_ || b.done;  // a job.done that came before the delete was settled
    bytes_ -= bucket_bytes(b);
    buckets_.erase(it);
    if (recently_dropped_.insert(token).second) {  // a token dropped twice stays once in the window
      recent_order_.push_back(token);
      if (recent_order_.size() > kRecent) {
        recently_dropped_.erase(recent_order_.front());
        recent_order_.pop_front();
      }
    }
    check_budget();
  }
  /// What a bucket holds outside its slot in the table.
  static std::size_t bucket_bytes(const Bucket& b) {
    return b.bytes.capacity() + (b.keys.more.capacity() + b.revisions.more.capacity()) * sizeof(std::uint64_t);
  }
  [[nodiscard]] std::size_t table_bytes() const {
    return buckets_.bucket_count() * (sizeof(Buckets::value_type) + 1) +
           recently_dropped_.bucket_count() * (sizeof(std::int64_t) + 1) + recent_order_.size() * sizeof(std::int64_t);
  }
  void remember(std::deque<std::uint64_t>& list, std::uint64_t x) {
    list.push_back(x);
    bytes_ += sizeof(std::uint64_t);
  }
  void check_budget() {
    if (bytes_ + table_bytes() <= kBudget && !over_budget_) return;
    // Given up: the file will be read. Nothing more is kept, and what was is freed.
    over_budget_ = true;
    on_ = false;
    buckets_ = {};
    loose_ = {};
    dropped_keys_ = {};
    dropped_tokens_ = {};
    dropped_revisions_ = {};
    recently_dropped_ = {};
    recent_order_ = {};
    bytes_ = 0;
  }

  bool on_ = false;
  bool over_budget_ = false;
  bool dropped_done_ = false;  // a job.done with a token was dropped
  Buckets buckets_;
  Bucket loose_;  // events without a token: never dropped
  std::deque<std::uint64_t> dropped_keys_, dropped_tokens_, dropped_revisions_;
  boost::unordered_flat_set<std::int64_t> recently_dropped_;
  std::deque<std::int64_t> recent_order_;
  std::size_t bytes_ = 0;  // packed events, their positions and what was dropped
  std::string last_key_;
  std::uint64_t last_key_hash_ = key_hash("");
};

struct FigureStream::State {
  const ReadBack& readback;
  const CheckContext& context;
  Figures f;

  // Rejected writes per (key, client); rejections per (client, token); counters; the TTL.
  std::map<std::pair<std::string, std::string>, RejectedWriteCount> rejected;
  detail::RejectionTally rejections;
  detail::RejectionMarks marks;  // which rejections were at or above their mark (the unjustified-rejection rule's judge)
  detail::CounterTally counters;
  detail::HistoryTtl ttl;

  // Faults: per (fault, target), the positions in f.faults of the injects not healed yet, oldest first.
  std::map<std::pair<std::string, std::string>, std::deque<std::size_t>> open_faults;

  // Unknown outcomes: the evidence the resource keeps.
  resources::Evidence evidence;
  bool has_log = false;
  const PackedLog& log;

  // Lease expiries (see the file's comment), in two passes. The first keeps only the deletes not
  // settled yet and the release.ok revisions still waiting for their delete; the second (only when
  // some delete is still unsettled: a candidate expiry) gathers, for the candidates' lock keys,
  // tokens and revisions only, what the decision needs.
  enum class Word : std::uint8_t { kNone, kExpired, kReleased, kOther };  // the issuer's word on a delete
  static constexpr std::uint32_t kNoAcquire = UINT32_MAX;
  struct Delete {
    std::size_t index = 0;
    std::optional<std::int64_t> token, revision, lease_id;
    std::int64_t t_ns = 0;
    std::string lock_key_name, lock_name;  // owned: most deletes are dropped before the second pass
    std::uint32_t lock_key = 0, lock = 0;  // interned at the second pass
    std::uint32_t before = kNoAcquire;     // the latest matching acquire.ok before the delete (second pass)
    Word word = Word::kNone;
    /// The key held the lock from its grant until it was deleted, by the lock service's own order:
    /// its token was the lowest of its lock's live keys when it was created and when it went. A
    /// waiter's key is not (one promoted later is not either: whether its holder ever learned of
    /// the grant is not in the lock service's history; etcd#16221). False when unknown.
    bool held = false;
  };
  /// The live keys of one lock (one issuer's), by a hash of the key and its token, for Delete::held:
  /// a handful at any moment (the holder and its waiters), whatever the history's length.
  struct LiveKey {
    std::uint64_t hash = 0;              // of the lock key
    std::optional<std::int64_t> token;  // its grant's
    bool first = false;                 // no live key of the lock had a lower token (or none) at its grant
  };
  struct LiveKeys {
    std::string lock;
    std::string issuer;  // "" or "issuer N" (a lock event's detail prefix, lock_service.issuers > 1)
    std::vector<LiveKey> keys;
  };
  std::vector<LiveKeys> live;
  /// Who has spoken (black boxes: CheckContext::workers that sent no worker-protocol event) and
  /// when each worker ended (its worker.exit's t_ns), for an expiry no acquire.ok accounts for.
  BlackBoxTracker speakers;
  boost::unordered_flat_map<std::string, std::int64_t> exited_ns;
  unsigned pass = 1;
  bool plain_lines = false;  // FigureStream::begin_second_pass's every_line_plain
  /// The deletes not settled, by history index. A delete that a release.ok's revision explains
  /// (before or after it) is dropped as soon as that is known: whatever comes later, it is not an
  /// expiry (unless the issuer said "expired", then it is kept). In a healthy run what stays is the
  /// expiries and the deletes whose release.ok has not arrived yet.
  boost::unordered_flat_map<std::size_t, Delete> unsettled;
  /// Their indices, ascending (history order).
  [[nodiscard]] std::vector<std::size_t> unsettled_in_order() const {
    std::vector<std::size_t> order;
    order.reserve(unsettled.size());
    for (const auto& [i, d] : unsettled) order.push_back(i);
    std::sort(order.begin(), order.end());
    return order;
  }
  /// The first pass's holdings events, for a second pass without a read of the file.
  HoldingsKeep keep;
  /// What the unsettled deletes hold (bytes_of each), kept as they come and go: state_bytes() runs
  /// every 65,536 events, and walking 104,000 deletes each time was 8 % of a 10^8-event check.
  std::size_t unsettled_bytes = 0;
  static std::size_t bytes_of(const Delete& d) {  // outside its slot in the table
    const auto heap = [](const std::string& x) { return x.capacity() > 15 ? x.capacity() + 1 : 0; };
    return heap(d.lock_key_name) + heap(d.lock_name);
  }
  boost::unordered_flat_map<std::int64_t, std::vector<std::size_t>> unsettled_by_revision;  // revision -> indices
  /// Revisions of release.oks whose delete has not come yet. The first delete with the revision
  /// takes it out: another delete with the same revision then stays unsettled, and the second
  /// pass, which sees every release.ok with a candidate's revision, settles it.
  boost::unordered_flat_set<std::int64_t> open_releases;

  // Second pass: names interned (lock keys, workers, lock names), and per candidate lock key,
  // token and revision what the old single pass kept for every holding.
  detail::StringIds names;
  using KeyToken = std::pair<std::uint32_t, std::int64_t>;
  using KeyTokenHash = boost::hash<KeyToken>;
  boost::unordered_flat_set<std::string_view> candidate_keys;  // views into the unsettled deletes
  boost::unordered_flat_set<std::int64_t> candidate_tokens, candidate_revisions;
  bool every_token = false;  // a candidate without a token: its holder's token is known only later
  /// An acquire.ok, as an expiry needs its holder (kept in `acquires`, referred to by position).
  struct Acquire {
    std::size_t index = 0;
    std::uint32_t worker = 0, lock = 0;
    std::optional<std::int64_t> token, lease_id;
    std::int64_t revision = -1;  // the acquire.ok's revision (the lock service's order), -1 when it has none
  };
  std::vector<Acquire> acquires;
  boost::unordered_flat_map<std::uint32_t, std::uint32_t> latest_acquire, first_acquire;  // per lock key
  boost::unordered_flat_map<KeyToken, std::uint32_t, KeyTokenHash> latest_acquire_token, first_acquire_token;
  boost::unordered_flat_map<std::uint32_t, std::size_t> first_untokened_grant;  // per lock key
  boost::unordered_flat_map<KeyToken, std::size_t, KeyTokenHash> first_grant;   // per (lock key, token)
  boost::unordered_flat_map<KeyToken, std::size_t, KeyTokenHash> first_done;    // per (worker, token)
  boost::unordered_flat_map<std::uint32_t, std::vector<std::size_t>> untokened_done;  // per worker, ascending
  boost::unordered_flat_set<std::int64_t> release_revisions;
  boost::unordered_flat_set<KeyToken, KeyTokenHash> released_keys;
  struct Invoke {
    std::size_t index = 0;
    std::int64_t src_ns = 0;
  };
  boost::unordered_flat_map<KeyToken, Invoke, KeyTokenHash> release_invoked;  // the earliest per (lock key, token)
  State(const ReadBack& rb, const PackedLog& packed, const CheckContext& ctx, bool keep_holdings)
      : readback(rb), context(ctx), counters(rb), log(packed), speakers(ctx.workers), keep(keep_holdings) {
    evidence = context.evidence.value_or(resources::Evidence{});
    has_log = detail::log_is_evidence(context, log);
    marks = detail::RejectionMarks(has_log);
  }

  RejectedWriteCount& rejected_slot(const std::string& key, const std::string& client) {
    RejectedWriteCount& r = rejected[{key, client}];
    r.key = key;
    r.client = client;
    return r;
  }

  void observe(std::size_t i, const Event& e) {
    if (pass == 2) return gather_for_candidates(i, e);
    ttl.observe(e);
    counters.observe(e);
    switch (e.kind) {
      case EventKind::kPause: {
        if (!e.duration_ns) break;
        PauseObservation p{e.source, std::chrono::nanoseconds(*e.duration_ns), e.token, i, e.t_ns};
        auto it = f.longest_pause.find(e.source);
        if (it == f.longest_pause.end() || p.duration > it->second.duration) f.longest_pause[e.source] = p;
        f.pauses.push_back(std::move(p));
        break;
      }
      case EventKind::kWriteFail:
        // Without a high_water it is an invalid request (a 4xx other than the fence's 409, HTTP
        // contract; docs/worker-protocol.md): nothing was written, and nothing was fenced either.
        if (!e.high_water) {
          ++f.invalid_requests_history;
          break;
        }
        ++rejected_slot(e.key, e.source).history;
        ++f.rejected_writes_history;
        rejections.observe(e);
        if (const auto j = marks.observe(i, e); j && j->unjustified) ++f.rejected_writes_unjustified_history;
        break;
      case EventKind::kWriteInfo:
        f.unknown_outcomes.push_back(unknown_outcome(i, e, readback, evidence, has_log, log));
        break;
      case EventKind::kFaultInject: {
        FaultWindow w;
        w.fault = e.fault;
        w.target = e.target;
        if (e.duration_ns) w.planned = std::chrono::nanoseconds(*e.duration_ns);
        w.inject_index = i;
        w.inject_t_ns = e.t_ns;
        open_faults[{e.fault, e.target}].push_back(f.faults.size());
        f.faults.push_back(std::move(w));
        break;
      }
      case EventKind::kFaultHeal: {
        if (const auto it = open_faults.find(std::pair<std::string, std::string>(e.fault, e.target));
            it != open_faults.end() && !it->second.empty()) {
          FaultWindow& w = f.faults[it->second.front()];
          it->second.pop_front();
          w.heal_index = i;
          w.heal_t_ns = e.t_ns;
          w.actual = std::chrono::nanoseconds(e.duration_ns ? *e.duration_ns : e.t_ns - w.inject_t_ns);
        }
        // Progress after heal: only the last heal counts, so each heal starts it again.
        ProgressAfterHeal p;
        p.heal_index = i;
        p.heal_t_ns = e.t_ns;
        f.progress_after_heal = p;
        break;
      }
      default: break;
    }
    if (f.progress_after_heal && i > f.progress_after_heal->heal_index) {
      ProgressAfterHeal& p = *f.progress_after_heal;
      if (e.kind == EventKind::kWriteInvoke || e.kind == EventKind::kAcquireInvoke || e.kind == EventKind::kAcquireFail)
        p.pending = true;
      if (e.kind == EventKind::kWriteOk && !p.first_write_ok) {
        p.first_write_ok = i;
        p.delay = std::chrono::nanoseconds(e.t_ns - p.heal_t_ns);
      }
    }
    switch (e.kind) {  // kSecondPassKinds
      case EventKind::kAcquireOk:
      case EventKind::kLockGrant:
      case EventKind::kJobDone:
      case EventKind::kReleaseOk:
      case EventKind::kReleaseInvoke:
      case EventKind::kLockDelete: keep.take(i, e); break;
      default: break;
    }
    if (!speakers.settled() && (is_worker_event(e.kind) || e.kind == EventKind::kLog)) speakers.observe(e);
    if (e.kind == EventKind::kWorkerExit && !e.target.empty()) exited_ns.try_emplace(e.target, e.t_ns);
    observe_for_expiries(i, e);
  }

  /// The live keys of the lock `e` (a lock.grant or lock.delete) belongs to.
  LiveKeys& live_keys_of(const Event& e) {
    const std::string_view issuer =
        e.detail.rfind("issuer ", 0) == 0 ? std::string_view(e.detail).substr(0, e.detail.find(':')) : std::string_view();
    for (LiveKeys& l : live)
      if (l.lock == e.lock && l.issuer == issuer) return l;
    live.push_back(LiveKeys{e.lock, std::string(issuer), {}});
    return live.back();
  }

  /// Keeps the live keys up to date; for a delete, whether its key was the holder's.
  bool track_live_keys(const Event& e) {
    if (e.kind != EventKind::kLockGrant && e.kind != EventKind::kLockDelete) return false;
    // Only a black box's expiry reads Delete::held: once every worker has spoken there is none.
    if (speakers.settled()) {
      if (!live.empty()) live = {};
      return false;
    }
    if (e.lock_key.empty()) return false;
    LiveKeys& l = live_keys_of(e);
    const std::uint64_t h = std::hash<std::string_view>{}(e.lock_key);
    const auto it = std::find_if(l.keys.begin(), l.keys.end(), [&](const LiveKey& k) { return k.hash == h; });
    // Whether `token` is below every live key's but `self`'s (a key without a token: unknown, no).
    const auto lowest = [&](std::optional<std::int64_t> token, const LiveKey* self) {
      if (!token) return false;
      for (const LiveKey& k : l.keys)
        if (&k != self && (!k.token || *k.token <= *token)) return false;
      return true;
    };
    if (e.kind == EventKind::kLockGrant) {
      if (it == l.keys.end()) {  // a put of a live key changes no token
        const bool first = lowest(e.token, nullptr);
        l.keys.push_back(LiveKey{h, e.token, first});
      }
      return false;
    }
    if (it == l.keys.end()) return false;  // a key this run never saw granted: nobody's holding
    const bool held = it->first && it->token == e.token && lowest(e.token, &*it);
    l.keys.erase(it);
    return held;
  }

  void observe_for_expiries(std::size_t i, const Event& e) {
    const bool held = track_live_keys(e);
    if (e.kind == EventKind::kReleaseOk && e.revision) {
      if (const auto it = unsettled_by_revision.find(*e.revision); it != unsettled_by_revision.end()) {
        for (std::size_t at : it->second) {  // settled: not an expiry, whatever follows
          if (const auto u = unsettled.find(at); u != unsettled.end()) {
            unsettled_bytes -= bytes_of(u->second);
            const std::optional<std::int64_t> token = u->second.token;
            unsettled.erase(u);
            keep.settled(token);
          }
        }
        unsettled_by_revision.erase(it);
      } else {
        open_releases.insert(*e.revision);
      }
      return;
    }
    if (e.kind != EventKind::kLockDelete) return;
    if (e.lock_key.empty()) return keep.closed(e.token);  // never a candidate
    const Word word = e.detail.empty()           ? Word::kNone
                      : e.detail == "expired"    ? Word::kExpired
                      : e.detail == "released"   ? Word::kReleased
                                                 : Word::kOther;
    // Settled now: the issuer said released, or a release.ok already carried its revision.
    if (word == Word::kReleased) return keep.closed(e.token);
    if (word != Word::kExpired && e.revision && open_releases.erase(*e.revision) > 0) return keep.closed(e.token);
    Delete d;
    d.index = i;
    d.token = e.token, d.revision = e.revision, d.lease_id = e.lease_id, d.t_ns = e.t_ns;
    d.lock_key_name = e.lock_key;
    d.lock_name = e.lock;
    d.word = word;
    d.held = held;
    if (word != Word::kExpired && d.revision) unsettled_by_revision[*d.revision].push_back(i);
    if (const auto [u, fresh] = unsettled.emplace(i, std::move(d)); fresh) unsettled_bytes += bytes_of(u->second);
    keep.opened(e.token);
  }

  /// After the first pass: whether a delete is still unsettled (a candidate expiry), so that the
  /// second pass must gather its holder, grant, job.done and releases.
  [[nodiscard]] bool wants_second_pass() const { return pass == 1 && !unsettled.empty(); }

  void begin_second_pass() {
    pass = 2;
    open_releases = {};
    unsettled_by_revision = {};
    for (const std::size_t i : unsettled_in_order()) {
      Delete& d = unsettled.at(i);
      candidate_keys.insert(d.lock_key_name);
      d.lock_key = names.id(d.lock_key_name);
      d.lock = names.id(d.lock_name);
      if (d.token) candidate_tokens.insert(*d.token);
      else every_token = true;
      if (d.revision) candidate_revisions.insert(*d.revision);
    }
  }

  /// The second pass on the events kept on the first, when they hold every one it uses
  /// (HoldingsKeep::usable); `also` sees each. False, having done nothing, when they do not.
  bool second_pass_from_kept(const std::function<void(std::size_t, const Event&)>& also) {
    if (!keep.usable(candidate_keys, candidate_tokens, candidate_revisions, every_token)) {
      keep = HoldingsKeep(false);
      return false;
    }
    keep.replay([&](std::size_t i, const Event& e) {
      gather_for_candidates(i, e);
      // `also` sees what the file's second pass would have parsed of these kinds: the candidates'
      // deletes, acquires and grants (the evidence an expiry cites), not every kept one.
      const bool candidates = e.kind == EventKind::kLockDelete ? unsettled.contains(i)
                              : e.kind == EventKind::kAcquireOk || e.kind == EventKind::kLockGrant
                                  ? !e.lock_key.empty() && candidate_keys.contains(std::string_view(e.lock_key))
                                  : false;
      if (also && candidates) also(i, e);
    });
    keep = HoldingsKeep(false);
    return true;
  }

  /// FigureStream::second_pass_may_want: gather_for_candidates() below, read off the line. Keep
  /// the two in step.
  bool may_want(std::size_t i, std::string_view line) const {
    const LineLook look(line, plain_lines);
    const LineField kind = look.field("kind");
    if (kind.what != LineField::kString) return true;
    const auto key_is_candidate = [&] {
      const LineField key = look.field("lock_key");
      if (key.what == LineField::kAbsent) return false;  // an empty lock_key is never a candidate's
      return key.what != LineField::kString || candidate_keys.contains(key.text);
    };
    // An integer field's value is one of `set` (absent: `if_absent`).
    const auto number_in = [&](std::string_view name, const boost::unordered_flat_set<std::int64_t>& set, bool if_absent) {
      const LineField field = look.field(name);
      if (field.what == LineField::kAbsent) return if_absent;
      if (field.what != LineField::kInteger) return true;
      const std::string_view t = field.text;
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
      return ec != std::errc() || end != t.data() + t.size() || set.contains(v);
    };
    const std::string_view k = kind.text;
    if (k == kind_name(EventKind::kLockDelete)) return unsettled.contains(i);
    if (k == kind_name(EventKind::kAcquireOk) || k == kind_name(EventKind::kLockGrant) ||
        k == kind_name(EventKind::kReleaseInvoke))
      return key_is_candidate();
    if (k == kind_name(EventKind::kReleaseOk)) return key_is_candidate() || number_in("revision", candidate_revisions, false);
    if (k == kind_name(EventKind::kJobDone)) return every_token || number_in("token", candidate_tokens, true);
    return false;  // any other kind: gather_for_candidates() looks at none
  }

  /// The second pass: the old single pass's per-holding records, for the candidates' lock keys,
  /// tokens and revisions only (expiry() looks up nothing else). Only the lines may_want() keeps
  /// reach it from analyze_history_file(), which skips the others unparsed: keep both in step.
  void gather_for_candidates(std::size_t i, const Event& e) {
    switch (e.kind) {
      case EventKind::kAcquireOk: {
        if (!candidate_keys.contains(std::string_view(e.lock_key))) break;
        const std::uint32_t key = names.id(e.lock_key);
        const auto a = static_cast<std::uint32_t>(acquires.size());
        acquires.push_back(Acquire{i, names.id(e.source), names.id(e.lock), e.token, e.lease_id, e.revision.value_or(-1)});
        latest_acquire[key] = a;
        first_acquire.try_emplace(key, a);
        if (e.token) {
          latest_acquire_token[{key, *e.token}] = a;
          first_acquire_token.try_emplace(KeyToken{key, *e.token}, a);
        }
        break;
      }
      case EventKind::kLockGrant: {
        if (!candidate_keys.contains(std::string_view(e.lock_key))) break;
        const std::uint32_t key = names.id(e.lock_key);
        if (e.token) first_grant.try_emplace(KeyToken{key, *e.token}, i);
        else first_untokened_grant.try_emplace(key, i);
        break;
      }
      case EventKind::kJobDone: {
        if (e.token) {
          if (every_token || candidate_tokens.contains(*e.token)) first_done.try_emplace(KeyToken{names.id(e.source), *e.token}, i);
        } else {
          untokened_done[names.id(e.source)].push_back(i);
        }
        break;
      }
      case EventKind::kReleaseOk:
        if (e.revision && candidate_revisions.contains(*e.revision)) release_revisions.insert(*e.revision);
        if (!e.lock_key.empty() && e.token && candidate_keys.contains(std::string_view(e.lock_key)))
          released_keys.insert({names.id(e.lock_key), *e.token});
        break;
      case EventKind::kReleaseInvoke:
        if (!e.lock_key.empty() && e.token && candidate_keys.contains(std::string_view(e.lock_key)))
          release_invoked.try_emplace(KeyToken{names.id(e.lock_key), *e.token}, Invoke{i, e.src_ns});
        break;
      case EventKind::kLockDelete: {
        const auto it = unsettled.find(i);
        if (it == unsettled.end()) break;
        Delete& d = it->second;
        if (d.token) {
          if (const auto a = latest_acquire_token.find(KeyToken{d.lock_key, *d.token}); a != latest_acquire_token.end())
            d.before = a->second;
        } else if (const auto a = latest_acquire.find(d.lock_key); a != latest_acquire.end()) {
          d.before = a->second;
        }
        break;
      }
      default: break;
    }
  }

  /// Whether a release explains delete d (delete_is_expiry's `explained_by_release`).
  bool released(const Delete& d) const {
    if (d.revision) return release_revisions.count(*d.revision) > 0;
    if (!d.token) return false;
    const KeyToken k{d.lock_key, *d.token};
    if (released_keys.count(k) == 0) return false;
    // Without revisions (redis) a release.ok cannot say whether it deleted anything: it explains
    // the delete only when it was asked for before the delete was seen (the sender's own stamp,
    // the same CLOCK_MONOTONIC as the watch's t_ns; history order when it has none).
    const auto r = release_invoked.find(k);
    if (r == release_invoked.end()) return true;  // a worker that reports no release.invoke
    return r->second.src_ns > 0 ? r->second.src_ns <= d.t_ns : r->second.index < d.index;
  }

  /// Delete d as a lease expiry during work, or nullopt (LeaseExpiry's rules).
  std::optional<LeaseExpiry> expiry(const Delete& d) {
    Event word;  // delete_is_expiry reads only the issuer's word
    word.detail = d.word == Word::kExpired ? "expired" : d.word == Word::kReleased ? "released" : "";
    if (!delete_is_expiry(word, released(d))) return std::nullopt;
    // The holder: the latest matching acquire.ok before the delete, else the first after it.
    std::uint32_t at = d.before;
    const bool after = at == kNoAcquire;
    if (at == kNoAcquire && d.token) {
      if (const auto it = first_acquire_token.find(KeyToken{d.lock_key, *d.token}); it != first_acquire_token.end()) at = it->second;
    } else if (at == kNoAcquire) {
      if (const auto it = first_acquire.find(d.lock_key); it != first_acquire.end()) at = it->second;
    }
    const Acquire* a = at == kNoAcquire ? nullptr : &acquires[at];
    if (!a) return black_box_expiry(d);  // no acquire.ok: a black box's, or nobody's
    // An acquire.ok received after the delete is its holder's only when the acquire came first in
    // the lock service's own order (the watch lagged). One whose revision is past the delete's was
    // handed the lock after its key was gone: its lease expired while it waited, before any work
    // (etcd's RWMutex, etcd#16221; etcd 3.4's Lock, etcd#11456): an expiry during work needs work.
    if (after && a->revision >= 0 && d.revision && a->revision > *d.revision) return std::nullopt;
    const std::int64_t token = d.token ? *d.token : a->token.value_or(0);

    // Done when the holder emitted job.done before the delete: for that token, or (a job.done
    // without a token) after its acquire; or it had asked for the release before the delete was seen.
    bool done = false;
    if (const auto it = first_done.find(KeyToken{a->worker, token}); it != first_done.end()) done = it->second < d.index;
    if (!done) {
      if (const auto it = untokened_done.find(a->worker); it != untokened_done.end()) {
        const auto next_done = std::upper_bound(it->second.begin(), it->second.end(), a->index);
        done = next_done != it->second.end() && *next_done < d.index;
      }
    }
    if (const auto r = release_invoked.find(KeyToken{d.lock_key, token}); r != release_invoked.end())
      done = done || (r->second.src_ns > 0 ? r->second.src_ns <= d.t_ns : r->second.index < d.index);
    if (done) return std::nullopt;

    LeaseExpiry x;
    x.worker = names.name(a->worker);
    const std::string& lock = names.name(a->lock);
    x.lock = !lock.empty() ? lock : names.name(d.lock);
    x.lock_key = names.name(d.lock_key);
    x.token = token;
    x.lease_id = a->lease_id ? a->lease_id : d.lease_id;
    x.revision = d.revision;
    x.t_ns = d.t_ns;
    x.evidence.push_back(a->index);
    // The key's first grant without a token or with this one.
    std::optional<std::size_t> grant;
    if (const auto g = first_untokened_grant.find(d.lock_key); g != first_untokened_grant.end()) grant = g->second;
    if (const auto g = first_grant.find(KeyToken{d.lock_key, token}); g != first_grant.end())
      grant = grant ? std::min(*grant, g->second) : g->second;
    if (grant) x.evidence.push_back(*grant);
    x.evidence.push_back(d.index);
    std::sort(x.evidence.begin(), x.evidence.end());
    return x;
  }

  /// A delete no acquire.ok accounts for, as a lease expiry during a black box's holding: the
  /// issuer said "expired", the key held the lock when it went (Delete::held, the lock service's own
  /// order), and a worker that sent no event was still running then. The holder is named when it is
  /// the only such worker, else "" (the lock service does not say which process held the key).
  /// A holding's delete the issuer gave no word for, while a black box ran, is counted in
  /// Figures::expiries_undecided instead (an expiry or a release: nothing here says which).
  std::optional<LeaseExpiry> black_box_expiry(const Delete& d) {
    if (!d.held || !d.token || (d.word != Word::kExpired && d.word != Word::kNone)) return std::nullopt;
    std::vector<std::string> running;
    for (const std::string& w : speakers.silent())
      if (const auto x = exited_ns.find(w); x == exited_ns.end() || x->second > d.t_ns) running.push_back(w);
    if (running.empty()) return std::nullopt;  // every black box had ended: an abandoned lease, not work
    if (d.word == Word::kNone) {
      ++f.expiries_undecided;
      return std::nullopt;
    }
    LeaseExpiry x;
    if (running.size() == 1) x.worker = running.front();
    x.lock = names.name(d.lock);
    x.lock_key = names.name(d.lock_key);
    x.token = *d.token;
    x.lease_id = d.lease_id;
    x.revision = d.revision;
    x.t_ns = d.t_ns;
    if (const auto g = first_grant.find(KeyToken{d.lock_key, *d.token}); g != first_grant.end()) x.evidence.push_back(g->second);
    x.evidence.push_back(d.index);
    std::sort(x.evidence.begin(), x.evidence.end());
    return x;
  }

  Figures finish() {
    keep = HoldingsKeep(false);  // not needed any more (no second pass was wanted, or it is over)
    for (const std::size_t i : unsettled_in_order())  // in history order; decided with the second pass's records
      if (auto x = expiry(unsettled.at(i))) f.expiries_during_work.push_back(std::move(*x));

    for (const RejectedWrite& r : readback.rejections) {
      ++rejected_slot(r.key, r.client).readback;
      ++f.rejected_writes_readback;
      rejections.add(r);
      if (detail::RejectionMarks::judge(r).unjustified) ++f.rejected_writes_unjustified_readback;
    }
    for (const auto& u : marks.resolve(readback, log))
      if (u.judged && u.judged->unjustified) ++f.rejected_writes_unjustified_history;
    for (auto& [id, r] : rejected) f.rejected_writes.push_back(std::move(r));

    f.rejections_per_token = rejections.counts();
    for (const auto& r : f.rejections_per_token) f.max_rejections_per_token = std::max(f.max_rejections_per_token, r.count());
    for (const auto& e : readback.effects)
      if (e.applied) ++f.effects_applied;
    for (const auto& d : detail::effect_duplicates(readback)) {
      f.duplicate_effects += static_cast<std::int64_t>(d.duplicates.size());
      f.duplicate_effects_by_key[d.key] += static_cast<std::int64_t>(d.duplicates.size());
    }
    f.counters = std::move(counters).take();
    // Chunk-less write.oks are counter increments only when the resource keeps counters (or the job
    // is a counter job); otherwise they are not counters at all.
    if (readback.counters.empty() && context.job_kind != JobKind::kCounter) f.counters.clear();
    if (f.progress_after_heal)
      f.progress_after_heal->window = ttl.lease_ttl(context).value_or(std::chrono::nanoseconds(0)) + context.acquire_allowance;
    return std::move(f);
  }

  std::size_t state_bytes() const {
    // Hash-table entries with their slack, the interned names, the kept deletes and the tallies;
    // the figures themselves are output.
    std::size_t n = sizeof(*this) + names.state_bytes() + rejections.state_bytes() + marks.state_bytes() +
                    counters.state_bytes() + keep.state_bytes();
    n += unsettled_bytes + unsettled.bucket_count() * (sizeof(decltype(unsettled)::value_type) + 1);
    n += acquires.capacity() * sizeof(Acquire) + open_releases.size() * 9;
    // Most revisions have one delete: one vector of one (not walked: see unsettled_bytes).
    n += unsettled_by_revision.size() * (40 + sizeof(std::size_t));
    n += (candidate_keys.size() + candidate_tokens.size() + candidate_revisions.size()) * 17;
    n += (latest_acquire.size() + first_acquire.size()) * 12;
    n += (latest_acquire_token.size() + first_acquire_token.size()) * 24;
    n += (first_untokened_grant.size() + first_grant.size() + first_done.size()) * 24;
    n += release_revisions.size() * 8 + released_keys.size() * 16 + release_invoked.size() * 32;
    for (const auto& [w, v] : untokened_done) n += 32 + v.capacity() * sizeof(std::size_t);
    n += rejected.size() * (sizeof(RejectedWriteCount) + 64) + open_faults.size() * 96;
    return n;
  }
};

FigureStream::FigureStream(const ReadBack& readback, const PackedLog& log, const CheckContext& context, bool keep_holdings)
    : s_(std::make_unique<State>(readback, log, context, keep_holdings)) {}
FigureStream::~FigureStream() = default;
void FigureStream::observe(std::size_t index, const Event& e) { s_->observe(index, e); }
bool FigureStream::wants_second_pass() const { return s_->wants_second_pass(); }
bool FigureStream::begin_second_pass(bool every_line_plain, const std::function<void(std::size_t, const Event&)>& also) {
  s_->begin_second_pass();
  s_->plain_lines = every_line_plain;
  return s_->second_pass_from_kept(also);
}
bool FigureStream::second_pass_may_want(std::size_t index, std::string_view line) const {
  return s_->may_want(index, line);
}
Figures FigureStream::finish() { return s_->finish(); }
std::size_t FigureStream::state_bytes() const { return s_->state_bytes(); }

}  // namespace fencecheck::harness
