// unaccounted-write (checkers.h says what it finds; issue 31, item 9: the bypass of an admin tool
// or a migration script that writes without ever holding the lock). Every write the resource
// accepted (its accept log, and each chunk slot's latest write in the read-back) must be tied to a
// holding: a (writer, token) such that the writer was granted that token.
//
// One pass collects the holdings, at the end of it the read-back is judged, and only when that
// found something does a second pass collect the events to cite.
//   - The workers' holdings: each acquire.ok's (worker, token), whatever its lock (a token of any
//     lock the worker held accounts for its writes; tokens of different locks are not told apart).
//     A holder whose lease has since expired still accounts for its own token: fencing
//     (stale-write-accepted), not this rule, judges that write.
//   - The lock service's grants: each lock.grant's token. When the history has a grant with a
//     token, a speaking worker's token must also be one the lock service granted (a kazoo worker
//     sending 1 while its znode's czxid was 5 is not the issuer's). A grant reported without a
//     token (a Redis grant whose value the watch could not read, lock-service-redis.md) makes the
//     grants incomplete: a token missing from them is then not held against a writer.
//   - Who wrote: a speaking worker (it sent worker-protocol events) is judged by its own
//     acquire.oks (none: granted nothing). A silent writer (a black-box worker, black_box_workers()
//     in checker.h; a writer that is no worker of the run, an admin tool; any silent writer when
//     the scenario's workers are unknown) says nothing of its own tokens, so it is tied through
//     the grants only: a speaking worker's token is that worker's grant (tokens are unique per
//     grant), so none is left for it; a grant no speaking worker holds accounts for its write
//     (whose grant it was cannot be told: two silent writers sharing one grant's token are not
//     told apart); a token no grant carries, while the grants are complete, was never granted;
//     anything else is unknown, never valid.
//   - Coverage: a finding that rests on something absent from the history (an acquire.ok, a grant)
//     is unknown, not invalid, unless the history is whole (run.start first, run.end seen): a
//     history cut short may hold the holding in the part missing. A silent writer using a speaking
//     worker's token is invalid either way.
// State: per worker (a few hundred) its acquire.oks' tokens, and the grants' tokens, each a Tokens
// set: exact, appended as they come, the rising ones as varint distances (one to three bytes a
// token in a run's history, where a hash set of int64 would take 10-20), merged once when the
// read-back is judged. Bounded by the holdings, never by the events: 10^7 bench events (667,000
// holdings, 200 workers) take 3.2 MiB (bench/bench_stream_check). The read-back's verdicts are
// grouped per (writer, key, token): one anomaly each, output-sized.

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

/// A set of tokens, appended as they come and compact while they rise: each run of kBlock tokens
/// keeps its first one whole and the others as LEB128 varints of their distance from the one
/// before (a holder's tokens are etcd revisions, czxids or a counter: rising by small steps, one
/// to three bytes each instead of eight). A token not above the last one (out of order) waits in a
/// plain list until seal() merges everything once. Call seal() after the last add() and before
/// any contains() / for_each(). Not thread-safe.
class Tokens {
 public:
  void add(std::int64_t token) {
    if (count_ > 0 && token <= last_) {
      if (token != last_) unsorted_.push_back(token);  // an equal one is a replay: dropped
      return;
    }
    append(token);
  }
  /// Merges the out-of-order tokens (rare: a rebuild, 8 bytes a token while it runs) and drops
  /// repeats.
  void seal() {
    if (unsorted_.empty()) return;
    std::vector<std::int64_t> all = std::move(unsorted_);
    unsorted_ = {};
    for_each([&](std::int64_t t) { all.push_back(t); });
    std::sort(all.begin(), all.end());
    all.erase(std::unique(all.begin(), all.end()), all.end());
    *this = Tokens();
    for (const std::int64_t t : all) append(t);
  }
  [[nodiscard]] bool contains(std::int64_t token) const {
    const auto after = std::upper_bound(firsts_.begin(), firsts_.end(), token);
    if (after == firsts_.begin()) return false;
    const std::size_t block = static_cast<std::size_t>(after - firsts_.begin()) - 1;
    std::int64_t t = firsts_[block];
    const std::uint8_t* at = at_[block];
    for (std::size_t k = block * kBlock + 1; t < token && k < std::min(count_, (block + 1) * kBlock); ++k)
      t += static_cast<std::int64_t>(varint(at));
    return t == token;
  }
  /// Calls fn(token) for each token, ascending (after seal()).
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (std::size_t block = 0; block < firsts_.size(); ++block) {
      std::int64_t t = firsts_[block];
      const std::uint8_t* at = at_[block];
      fn(t);
      for (std::size_t k = block * kBlock + 1; k < std::min(count_, (block + 1) * kBlock); ++k) {
        t += static_cast<std::int64_t>(varint(at));
        fn(t);
      }
    }
  }
  [[nodiscard]] bool empty() const { return count_ == 0 && unsorted_.empty(); }
  [[nodiscard]] std::size_t size() const { return count_ + unsorted_.size(); }
  /// Bytes held: the varint chunks as allocated, the blocks' heads, the out-of-order tokens.
  [[nodiscard]] std::size_t state_bytes() const {
    return sizeof(*this) + chunks_.size() * (kChunk + sizeof(void*)) +
           firsts_.capacity() * (sizeof(std::int64_t) + sizeof(const std::uint8_t*)) +
           unsorted_.capacity() * sizeof(std::int64_t);
  }

 private:
  static constexpr std::size_t kBlock = 32;     // tokens per block (a lookup decodes at most 31)
  static constexpr std::size_t kChunk = 4096;  // bytes per chunk of varints; a block never spans two

  static std::uint64_t varint(const std::uint8_t*& at) {
    std::uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      const std::uint8_t byte = *at++;
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
  }
  void append(std::int64_t token) {
    if (count_ % kBlock == 0) {
      // A new block: its varints (at most kBlock - 1, 10 bytes each) must fit in the chunk.
      if (chunks_.empty() || used_ + (kBlock - 1) * 10 > kChunk) {
        chunks_.push_back(std::make_unique<std::uint8_t[]>(kChunk));
        used_ = 0;
      }
      firsts_.push_back(token);
      at_.push_back(chunks_.back().get() + used_);
    } else {
      auto delta = static_cast<std::uint64_t>(token) - static_cast<std::uint64_t>(last_);
      std::uint8_t* out = chunks_.back().get();
      while (delta >= 0x80) {
        out[used_++] = static_cast<std::uint8_t>(delta | 0x80);
        delta >>= 7;
      }
      out[used_++] = static_cast<std::uint8_t>(delta);
    }
    last_ = token;
    ++count_;
  }

  std::vector<std::unique_ptr<std::uint8_t[]>> chunks_;
  std::size_t used_ = 0;                   // bytes used in the last chunk
  std::vector<std::int64_t> firsts_;       // each block's first token
  std::vector<const std::uint8_t*> at_;    // where each block's varints start
  std::size_t count_ = 0;                  // tokens appended in order
  std::int64_t last_ = 0;
  std::vector<std::int64_t> unsorted_;     // tokens not above the last one when added
};

class UnaccountedWriteRule final : public StreamRule {
 public:
  std::string_view name() const override { return "unaccounted-write"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) override {
    readback_ = &readback;
    log_ = &log;
    context_ = &context;
    tracker_.emplace(context.workers);
  }

  void observe(std::size_t index, const Event& e) override {
    if (pass_ > 1) {
      cite(index, e);
      return;
    }
    tracker_->observe(e);
    if (index == 0 && e.kind == EventKind::kRunStart) started_ = true;
    if (e.kind == EventKind::kRunEnd) ended_ = true;
    if (!e.token) {
      if (e.kind == EventKind::kLockGrant) grant_without_token_ = true;
      return;
    }
    if (e.kind == EventKind::kAcquireOk && is_worker_protocol_event(e)) {
      const std::uint32_t id = ids_.id(e.source);
      if (id >= holdings_.size()) holdings_.resize(id + 1);
      holdings_[id].add(*e.token);
    } else if (e.kind == EventKind::kLockGrant) {
      grants_.add(*e.token);
    }
  }

  /// At the end of the first pass the read-back is judged; a second pass only when some write is
  /// unaccounted (to cite its events).
  bool wants_another_pass() override {
    if (pass_ > 1) return false;
    judge();
    return !found_.empty();
  }
  void begin_pass(unsigned pass) override {
    pass_ = pass;
    for (auto& [id, f] : found_) by_token_.emplace(f.token, &f);
  }

  CheckerResult finish(const StreamEnd& end) override {
    (void)end;
    if (!judged_) judge();
    if (!no_view_.empty()) return unknown_result(name(), no_view_);
    std::vector<Anomaly> anomalies;
    for (auto& [id, f] : found_) anomalies.push_back(std::move(f.anomaly));
    if (anomalies.empty() && !unknown_.empty()) {
      std::string why;
      for (const auto& [writer, reason] : unknown_) why += (why.empty() ? "" : "; ") + reason;
      return unknown_result(name(), why + ": unknown, never valid");
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + ids_.state_bytes() + grants_.state_bytes();
    for (const auto& h : holdings_) n += h.state_bytes();
    for (const auto& [id, f] : found_)
      n += sizeof(id) + sizeof(f) + f.anomaly.description.capacity() + f.anomaly.readback_seqs.capacity() * 8;
    return n + by_token_.size() * 48;
  }

 private:
  /// What a writer is, for this rule.
  enum class Writer { kHolder, kGrantedNothing, kOutsider, kNeverStarted, kBlackBox, kUnknownSilent };

  /// One unaccounted (writer, key, token): its anomaly, filled as the read-back and the second pass go.
  struct Found {
    Anomaly anomaly;
    std::string writer;
    std::int64_t token = 0;
  };

  /// The verdict of one write: accounted, unaccounted (with why), or not decidable.
  enum class Tie { kAccounted, kUnaccounted, kUnknown };

  [[nodiscard]] bool grants_known() const { return !grants_.empty(); }
  /// Every grant carried a token: a token missing from them was never granted.
  [[nodiscard]] bool grants_complete() const { return !grants_.empty() && !grant_without_token_; }

  [[nodiscard]] Writer kind_of(const std::string& writer) const {
    const std::vector<std::string>& silent = black_box_.has_value() ? *black_box_ : tracker_->silent();
    if (std::binary_search(silent.begin(), silent.end(), writer)) return Writer::kBlackBox;
    if (held_id(writer)) return Writer::kHolder;
    const auto& workers = context_->workers;
    const auto& spoke = tracker_->spoken();
    if (!workers.empty() && std::find(workers.begin(), workers.end(), writer) == workers.end() && !spoke.contains(writer))
      return Writer::kOutsider;
    if (spoke.contains(writer)) return Writer::kGrantedNothing;
    // A scenario worker that never started (not a black box: black_box_workers()), yet its name
    // wrote; or, with the workers unknown, a silent writer.
    return workers.empty() ? Writer::kUnknownSilent : Writer::kNeverStarted;
  }

  /// The writer's id among the holders (a worker with an acquire.ok), when it is one.
  [[nodiscard]] std::optional<std::uint32_t> held_id(std::string_view writer) const {
    const auto it = holder_ids_.find(writer);
    if (it == holder_ids_.end()) return std::nullopt;
    return it->second;
  }

  /// The verdict of (writer, token), and why it is not accounted (unaccounted or unknown).
  std::pair<Tie, std::string> tie(const std::string& writer, Writer kind, std::int64_t token) const {
    const std::string t = std::to_string(token);
    const bool granted = grants_.contains(token);
    // A finding that rests on something missing from the history (an acquire.ok, a grant) proves
    // nothing when the history is not whole: the holding may be in the part cut off.
    const auto missing = [&](std::string why) -> std::pair<Tie, std::string> {
      if (whole()) return {Tie::kUnaccounted, std::move(why)};
      return {Tie::kUnknown, why + ", but the history is not whole (" + (started_ ? "no run.end" : "no run.start first") +
                                 "): the holding may be in the part missing"};
    };
    switch (kind) {
      case Writer::kHolder: {
        const Tokens& mine = holdings_[*held_id(writer)];
        if (!mine.contains(token))
          return missing(writer + " was never granted token " + t + " (its acquire.oks hold " + held_list(mine) + ")" +
                         granted_to(token));
        if (grants_complete() && !granted)
          return missing(writer + "'s acquire.ok says token " + t + ", but the lock service never granted " + t +
                         " (its grants carry other tokens): the worker's token is not the issuer's");
        return {Tie::kAccounted, {}};
      }
      case Writer::kGrantedNothing:
        return missing(writer + " sent worker events but no acquire.ok: it was granted nothing" + granted_to(token));
      case Writer::kOutsider:
      case Writer::kNeverStarted:
      case Writer::kBlackBox:
      case Writer::kUnknownSilent: {
        // A writer that says nothing of its own tokens is tied through the lock service's grants
        // only. A speaking worker's holding of the token is that grant: tokens are unique per
        // grant (a revision, a czxid, a counter; an issuer that granted one twice is
        // token-regression's), so none is left for this writer, whatever part of the history
        // is missing.
        const std::string who =
            kind == Writer::kOutsider       ? writer + " is no worker of the run and sent no events"
            : kind == Writer::kNeverStarted ? writer + " never started (the harness logged it) and sent no events"
            : kind == Writer::kBlackBox     ? writer + " sent no worker-protocol events (a black box)"
                                            : writer + " sent no events (the scenario's workers are unknown)";
        if (const std::string held = holders_of(token); !held.empty())
          return {Tie::kUnaccounted, who + ", and token " + t + " was " + held +
                                         "'s holding (its acquire.ok): no grant of it is left to account for " +
                                         writer + "'s write"};
        if (granted) return {Tie::kAccounted, {}};  // a grant no speaking worker holds
        if (grants_complete())
          return missing(who + ", and no lock.grant carries token " + t + ": the lock service never granted it");
        return {Tie::kUnknown, who + ", so its writes can be tied only through the lock service's grants, and " +
                                   (grants_known() ? "some lock.grant carried no token: token " + t +
                                                         " may have been granted unseen"
                                                   : std::string("the history has no lock.grant with a token"))};
      }
    }
    return {Tie::kUnknown, {}};
  }

  /// The history began with run.start and has run.end: nothing was cut off either end.
  [[nodiscard]] bool whole() const { return started_ && ended_; }

  /// " (token t was granted to w3)" naming the speaking workers whose acquire.ok has it, or
  /// " (the lock service granted t to another holder)", or "".
  std::string granted_to(std::int64_t token) const {
    if (const std::string held = holders_of(token); !held.empty())
      return "; token " + std::to_string(token) + " was " + held + "'s holding";
    if (grants_.contains(token)) return "; the lock service granted token " + std::to_string(token) + " to another holder";
    if (grants_complete()) return "; the lock service never granted token " + std::to_string(token);
    return {};
  }

  /// Whether some speaking worker's acquire.ok holds `token`: every holder's tokens merged, built on
  /// the first ask (only a run with a black-box writer asks; 8 bytes per holding then).
  bool held_by_speaker(std::int64_t token) {
    if (!all_held_) {
      all_held_.emplace();
      for (const Tokens& h : holdings_) h.for_each([&](std::int64_t t) { all_held_->add(t); });
      all_held_->seal();
    }
    return all_held_->contains(token);
  }

  /// The speaking workers whose acquire.oks hold `token` ("w2", "w1 and w2"), "" when none.
  std::string holders_of(std::int64_t token) const {
    std::vector<std::string> holders;
    for (std::uint32_t id = 0; id < holdings_.size(); ++id)
      if (holdings_[id].contains(token)) holders.push_back(ids_.name(id));
    return and_list(holders);
  }

  /// "33, 35 and 12 more": the first 8 of a writer's tokens (sorted).
  static std::string held_list(const Tokens& mine) {
    std::string out;
    std::size_t shown = 0;
    mine.for_each([&](std::int64_t t) {
      if (shown < 8) out += (shown++ ? ", " : "") + std::to_string(t);
    });
    if (mine.size() > shown) out += " and " + std::to_string(mine.size() - shown) + " more";
    return out;
  }

  /// Judges the read-back's writes (accept log, chunks) against the holdings and grants.
  void judge() {
    judged_ = true;
    if (context_->black_box) black_box_ = *context_->black_box;
    grants_.seal();
    for (auto& h : holdings_) h.seal();
    for (std::uint32_t id = 0; id < ids_.size(); ++id)
      holder_ids_.emplace(ids_.name(id), id);  // views of ids_'s own strings (stable)
    const bool has_log = !log_->empty();
    const bool has_chunks = !readback_->chunks.empty();
    if (context_->evidence && !context_->evidence->accept_log && !context_->evidence->chunks) {
      no_view_ = "resource kind " + (context_->resource_kind.empty() ? std::string("?") : context_->resource_kind) +
                 " gives neither an accept log nor its chunks as configured: no accepted write can be tied to a "
                 "holding";
      return;
    }
    // Each (writer, token) is judged once (a holding's writes come in runs: the memo answers them).
    std::map<std::pair<std::string, std::int64_t>, std::pair<Tie, std::string>> memo;
    auto judge_write = [&](const std::string& writer, const std::string& key, std::int64_t token, std::int64_t seq) {
      auto it = memo.find({writer, token});
      if (it == memo.end()) it = memo.emplace(std::pair{writer, token}, tie(writer, kind_of(writer), token)).first;
      const auto& [verdict, why] = it->second;
      if (verdict == Tie::kAccounted) return;
      if (verdict == Tie::kUnknown) {
        unknown_.try_emplace(writer, why);
        return;
      }
      auto [f, fresh] = found_.try_emplace(std::tuple{writer, key, token});
      if (fresh) {
        f->second.writer = writer;
        f->second.token = token;
        Anomaly& a = f->second.anomaly;
        a.name = "unaccounted-write";
        a.key = key;
        a.tokens = {token};
        a.clients = {writer};
        a.description = why;
      }
      f->second.anomaly.readback_seqs.push_back(seq);
    };
    // The fast path of a write that a holding accounts for: no string, one or two set lookups.
    auto accounted = [&](Writer kind, const Tokens* mine, std::int64_t token) {
      if (kind == Writer::kHolder) return mine->contains(token) && (!grants_complete() || grants_.contains(token));
      // A silent writer's token: granted, and no speaking worker's (the slow path says why not).
      return kind != Writer::kGrantedNothing && grants_.contains(token) && !held_by_speaker(token);
    };
    if (has_log) {
      // Each log client (the log's dictionary ids: a few hundred) is looked at once.
      std::vector<std::optional<std::pair<Writer, const Tokens*>>> clients;
      std::optional<std::pair<std::uint32_t, std::int64_t>> last_accounted;
      for (const LoggedWrite w : *log_) {
        if (last_accounted && last_accounted->first == w.client_id && last_accounted->second == w.token) continue;
        if (w.client_id >= clients.size()) clients.resize(w.client_id + 1);
        auto& c = clients[w.client_id];
        if (!c) {
          const std::string writer(w.client);
          const auto id = held_id(writer);
          c.emplace(kind_of(writer), id ? &holdings_[*id] : nullptr);
        }
        if (accounted(c->first, c->second, w.token)) {
          last_accounted.emplace(w.client_id, w.token);
          continue;
        }
        last_accounted.reset();
        judge_write(std::string(w.client), std::string(w.key), w.token, w.seq);
      }
    }
    if (has_chunks)
      for (const StoredChunk& c : readback_->chunks) {
        const auto id = held_id(c.client);
        if (!accounted(kind_of(c.client), id ? &holdings_[*id] : nullptr, c.token))
          judge_write(c.client, c.key, c.token, c.seq);
      }
    for (auto& [id, f] : found_) {
      Anomaly& a = f.anomaly;
      std::sort(a.readback_seqs.begin(), a.readback_seqs.end());
      a.readback_seqs.erase(std::unique(a.readback_seqs.begin(), a.readback_seqs.end()), a.readback_seqs.end());
      const std::size_t n = a.readback_seqs.size();
      a.description = "the resource accepted " + std::to_string(n) + (n == 1 ? " write" : " writes") + " to " + a.key +
                      " by " + f.writer + " with token " + std::to_string(f.token) + " that no holding accounts for: " +
                      a.description + " (a bypass of the lock: an admin tool, a migration script)";
    }
  }

  /// Pass 2: the events about an unaccounted (writer, token): the writer's write events with it,
  /// and the grants and acquire.oks of that token (whose holding the writer used).
  void cite(std::size_t index, const Event& e) {
    if (!e.token || (e.kind != EventKind::kWriteOk && e.kind != EventKind::kWriteInvoke &&
                     e.kind != EventKind::kLockGrant && e.kind != EventKind::kAcquireOk))
      return;
    const auto [from, to] = by_token_.equal_range(*e.token);
    for (auto it = from; it != to; ++it) {
      Found& f = *it->second;
      const bool own_write = (e.kind == EventKind::kWriteOk || e.kind == EventKind::kWriteInvoke) &&
                             e.source == f.writer && e.key == f.anomaly.key;
      if (own_write || e.kind == EventKind::kLockGrant || e.kind == EventKind::kAcquireOk)
        f.anomaly.evidence.push_back(index);
    }
  }

  /// The speaking workers as BlackBoxTracker sees them, plus which sources spoke at all.
  class Tracker : public BlackBoxTracker {
   public:
    explicit Tracker(const std::vector<std::string>& workers) : BlackBoxTracker(workers) {}
    void observe(const Event& e) {
      BlackBoxTracker::observe(e);
      if (is_worker_protocol_event(e) && (last_.empty() || last_ != e.source)) {
        last_ = e.source;
        spoken_.insert(e.source);
      }
    }
    [[nodiscard]] const boost::unordered_flat_set<std::string>& spoken() const { return spoken_; }

   private:
    std::string last_;
    boost::unordered_flat_set<std::string> spoken_;
  };

  const ReadBack* readback_ = nullptr;
  const PackedLog* log_ = nullptr;
  const CheckContext* context_ = nullptr;
  std::optional<Tracker> tracker_;
  std::optional<std::vector<std::string>> black_box_;
  unsigned pass_ = 1;
  bool judged_ = false;
  StringIds ids_;                  // the workers with an acquire.ok
  std::vector<Tokens> holdings_;   // by ids_ id: the tokens of its acquire.oks
  Tokens grants_;                  // the lock service's granted tokens
  std::optional<Tokens> all_held_;  // at the judging, with a black-box writer: every holder's tokens
  bool grant_without_token_ = false;
  bool started_ = false, ended_ = false;  // run.start first, run.end seen: whole()
  ViewMap<std::uint32_t> holder_ids_;  // at the judging: each holder's name -> its ids_ id
  std::map<std::tuple<std::string, std::string, std::int64_t>, Found> found_;  // (writer, key, token)
  std::multimap<std::int64_t, Found*> by_token_;  // pass 2: found_ by token
  std::map<std::string, std::string> unknown_;  // writer -> why its writes cannot be tied
  std::string no_view_;  // why nothing can be judged
};

}  // namespace

std::unique_ptr<StreamRule> make_unaccounted_write_rule() { return std::make_unique<UnaccountedWriteRule>(); }

}  // namespace fencecheck::harness::detail
