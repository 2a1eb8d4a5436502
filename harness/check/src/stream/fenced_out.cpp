// fenced-out (checkers.h says what it finds), in one pass. Only the events after the last
// fault.heal count (from the start of the run when there is none): the rule starts over at every
// heal, keeping only what the in-memory checker read from the whole history (each worker's
// holding, the accepted writes, the TTL). Two findings:
//   - self-fencing: a write.fail against a mark equal to its own token, by a worker whose holding
//     (latest acquire.ok) has that token and which had a write.ok of that key and token before:
//     one anomaly per worker, citing each such rejection (a "hit");
//   - a streak: a rejection by the fence (a write.fail with a high_water, whatever the mark: a
//     rejection at or above the token, a broken fence's, fences the holder out all the same) of a
//     worker's fresh token (its holding acquired after the last heal) that is no hit, with no
//     write.ok, of anyone, within lease TTL + acquire allowance of it by t_ns: one
//     anomaly from that rejection to the next write.ok (or the end), citing the acquire.oks and
//     fenced rejections in between; the hits inside a streak count for nothing.
// What is known only at the end changes the decisions, so the rule keeps what each needs and
// decides in finish():
//   - the black boxes: with any, no streak is formed (every hit counts). The hits are kept in a
//     journal in history order, and each stretch from a fresh rejection to the next write.ok (a
//     "gap") keeps its hits, acquire.oks and fenced rejections: finish() replays the journal
//     either way.
//   - a streak's decision needs the next write.ok (look-forward): a gap stays open until it comes.
//     Every fresh rejection of a gap ends at that same write.ok, so the streak starts at the first
//     one whose deadline it misses, and the gap's hits before it count.
//   - the TTL, when the context has none, is the largest ttl_ms of the acquire events of the whole
//     history (HistoryTtl): known at the end only. A larger TTL only makes a deadline later, so a
//     gap with no streak under the largest TTL so far has none under the final one: it is settled
//     at once (only its hits are kept); any other gap is kept whole until the end (when the TTL
//     grows, the kept gaps are tried again). With the context's TTL a gap's streak is final when
//     its write.ok comes, and what is before it, but its hits, is dropped.
// State: each worker's holding (live); every (worker, key, token) with a write.ok (holdings x the
// keys a holding writes: a worker may hold a token again, a re-issued one, and its earlier write
// then makes its rejection self-fencing), as a 64-bit fingerprint of the interned triple, 8 bytes
// each. A rejection whose triple's fingerprint is there is a candidate hit; when there is any, a
// second pass (wants_another_pass) finds each candidate's first write.ok exactly, and a candidate
// without one before it (a fingerprint collision) is no hit. Without candidates, one pass. The
// journal since the last heal: the hits (each is evidence with black boxes: output), the open gap
// (the events since a fresh rejection without a write.ok: live, or evidence of the streak it
// becomes) and the gaps that are streaks under the TTL so far (evidence: output).
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

std::string seconds_text(std::chrono::nanoseconds d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(d.count()) / 1e9);
  return buf;
}

class FencedOutRule final : public StreamRule {
 public:
  std::string_view name() const override { return "fenced-out"; }
  bool reads_log() const override { return false; }

  void begin(const ReadBack&, const PackedLog&, const CheckContext& context) override {
    context_ = &context;
    context_ttl_ = context.lease_ttl.has_value();
    allowance_ = context.acquire_allowance;
  }

  void observe(std::size_t i, const Event& e) override {
    if (pass_ > 1) {  // each candidate hit's first write.ok of its (worker, key, token)
      if (e.kind == EventKind::kWriteOk && e.token)
        if (const auto it = candidates_.find(accepted_key(e)); it != candidates_.end() && it->second == kNone)
          it->second = i;
      return;
    }
    if (ttl_.observe(e) && !context_ttl_) settle_kept();
    switch (e.kind) {
      case EventKind::kFaultHeal: start_over(i); break;
      case EventKind::kAcquireOk:
        holding_[id(e.source)] = Holding{i, e.token};
        if (gap_) {
          Item& x = gap_->items.emplace_back();
          x.index = i;
          x.token = e.token.value_or(0);
          x.has_token = e.token.has_value();
        }
        break;
      case EventKind::kWriteOk:
        if (e.token) accepted_.insert(accepted_mark(accepted_key(e)));
        if (gap_) close_gap(GapEnd{i, e.t_ns}, last_t_);
        break;
      case EventKind::kWriteFail: write_fail(i, e); break;
      default: break;
    }
    last_t_ = e.t_ns;
  }

  /// A second pass when some rejection is a candidate hit: its first write.ok, exactly.
  bool wants_another_pass() override {
    if (pass_ > 1 || candidates_.empty()) return false;
    accepted_ = {};
    return true;
  }
  void begin_pass(unsigned pass) override { pass_ = pass; }

  CheckerResult finish(const StreamEnd& end) override {
    if (pass_ == 1 && !candidates_.empty())
      throw std::logic_error("fenced-out: finish() before the pass that finds the candidate hits' write.oks");
    if (gap_) close_gap(std::nullopt, last_t_);
    const bool silent = !end.black_box.empty();
    const std::optional<std::chrono::nanoseconds> ttl = lease_ttl();
    if (!silent && !ttl && gaps_ > 0) {
      CheckerResult r;
      r.name = std::string(name());
      r.verdict = Verdict::kUnknown;
      r.error = "no lease TTL known (none in the context, no ttl_ms in the history)";
      return r;
    }
    Replay out{*this, {}, {}};
    for (const Entry& entry : journal_) {
      if (const auto* hit = std::get_if<Item>(&entry)) {
        out.apply(*hit);
        continue;
      }
      const Gap& g = std::get<Gap>(entry);
      const std::size_t start = silent ? g.items.size() : streak_start(g, *ttl + allowance_);
      for (std::size_t k = 0; k < start; ++k)
        if (g.items[k].kind == Item::kHit) out.apply(g.items[k]);
      if (start < g.items.size()) out.streak(g, start, *ttl);
    }
    return result_of(name(), std::move(out.anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + holding_.size() * (sizeof(std::uint32_t) + sizeof(Holding) + 1) +
                    accepted_.size() * (sizeof(std::uint64_t) + 1) +
                    candidates_.size() * (sizeof(Triple) + sizeof(std::size_t) + 1) +
                    journal_.capacity() * sizeof(Entry);
    n += names_.state_bytes();
    for (const Entry& entry : journal_)
      if (const auto* g = std::get_if<Gap>(&entry)) n += g->items.capacity() * sizeof(Item);
    if (gap_) n += gap_->items.capacity() * sizeof(Item);
    return n;
  }

 private:
  struct Holding {
    std::size_t index = 0;
    std::optional<std::int64_t> token;
  };
  /// An event the rule keeps: an acquire.ok or a fenced rejection (a fresh one starts a streak) of
  /// a gap, or a hit (a self-fencing rejection: write.fail `index` of (worker, key) with `token`
  /// equal to its mark, after that worker's write.ok of the key with the same token: a candidate
  /// until the second pass finds that write.ok).
  struct Item {
    enum Kind : std::uint8_t { kAcquire, kRejection, kHit };
    Kind kind = kAcquire;
    std::size_t index = 0;
    std::int64_t token = 0;     // acquire: its token (when has_token); rejection, hit: the token presented
    bool has_token = false;
    std::int64_t mark = 0;      // rejection: the high-water mark
    std::int64_t t_ns = 0;      // rejection: when it was received
    std::uint32_t worker = 0, key = 0;  // rejection, hit
    std::optional<std::size_t> fresh;   // a fresh rejection: its worker's holding (acquire.ok)
  };
  /// (worker, key, token), the strings interned.
  struct Triple {
    std::uint32_t worker = 0, key = 0;
    std::int64_t token = 0;
    bool operator==(const Triple&) const = default;
  };
  struct TripleHash {
    std::size_t operator()(const Triple& t) const noexcept { return accepted_mark(t); }
  };
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  /// A triple's 64-bit fingerprint (mark_of), as accepted_ keeps it.
  static std::uint64_t accepted_mark(const Triple& t) {
    return mark_of(mix64(std::uint64_t{t.worker} << 32 | t.key), t.token);
  }
  /// The write.ok that ended a gap.
  struct GapEnd {
    std::size_t index = 0;
    std::int64_t t_ns = 0;
  };
  /// From a fresh rejection to the next write.ok (none: the history ended first).
  struct Gap {
    std::vector<Item> items;  // items[0] is the fresh rejection that opened it
    std::optional<GapEnd> end;
    std::int64_t last_t = 0;  // t_ns of the event before `end` (or the history's last)
  };
  using Entry = std::variant<Item, Gap>;  // a hit outside gaps, or a gap

  /// The anomalies built from the journal, as the in-memory walk built them.
  struct Replay {
    const FencedOutRule& rule;
    std::vector<Anomaly> anomalies;
    std::map<std::uint32_t, std::size_t> self_fenced;  // worker -> its anomaly

    void apply(const Item& h) {
      // The worker's first write.ok of the key with that token, found by the second pass; none
      // before the rejection: its fingerprint collided, and it is no hit.
      const auto c = rule.candidates_.find(Triple{h.worker, h.key, h.token});
      if (c == rule.candidates_.end() || c->second == kNone || c->second > h.index) return;
      const std::size_t own = c->second;
      auto [it, first] = self_fenced.emplace(h.worker, anomalies.size());
      if (!first) {
        Anomaly& a = anomalies[it->second];
        a.evidence.push_back(h.index);
        a.tokens.push_back(h.token);
        return;
      }
      const std::string& source = rule.names_.name(h.worker);
      const std::string& key = rule.names_.name(h.key);
      Anomaly& a = anomalies.emplace_back();
      a.name = "fenced-out";
      a.key = key;
      a.evidence = {own, h.index};
      a.tokens = {h.token};
      a.clients = {source};
      a.description = source + "'s write to " + key + " with token " + std::to_string(h.token) +
                      " was rejected against the high-water mark " + std::to_string(h.token) +
                      " that its own accepted write with the same token had set: the resource rejects a holder's "
                      "second write under its token (a strict comparison where \"not below the mark\" is the rule), "
                      "so no holder can finish a job of more than one write";
    }

    void streak(const Gap& g, std::size_t start, std::chrono::nanoseconds ttl) {
      const Item& e = g.items[start];
      const std::chrono::nanoseconds window = ttl + rule.allowance_;
      Anomaly a;
      a.name = "fenced-out";
      if (rule.heal_) a.evidence.push_back(*rule.heal_);
      std::set<std::string> keys;
      std::set<std::int64_t> marks;
      std::int64_t rejections = 0;
      for (std::size_t k = start; k < g.items.size(); ++k) {
        const Item& x = g.items[k];
        if (x.kind == Item::kAcquire) {
          a.evidence.push_back(x.index);
          if (x.has_token) a.tokens.push_back(x.token);
        }
        if (x.kind != Item::kRejection) continue;
        ++rejections;
        a.evidence.push_back(x.index);
        a.tokens.push_back(x.token);
        a.clients.push_back(rule.names_.name(x.worker));
        keys.insert(rule.names_.name(x.key));
        if (x.mark >= 1) marks.insert(x.mark);  // 0: the reply did not say it
      }
      a.evidence.push_back(*e.fresh);  // the fresh token's acquire.ok
      if (g.end) a.evidence.push_back(g.end->index);
      if (keys.size() == 1) a.key = *keys.begin();
      std::vector<std::int64_t> m(marks.begin(), marks.end());
      std::ostringstream d;
      d << (rule.heal_ ? "after the last heal" : "from the start of the run") << ", " << rule.names_.name(e.worker)
        << "'s write with the freshly acquired token " << e.token << " was rejected "
        << (m.empty() ? std::string("(its reply gave no high-water mark)") : "against the high-water mark " + join(m))
        << ", and no write was accepted within " << seconds_text(window) << " (lease TTL "
        << seconds_text(ttl) << " + " << seconds_text(rule.allowance_) << " to acquire): " << rejections
        << " rejection(s) over " << seconds_text(std::chrono::nanoseconds(g.last_t - e.t_ns));
      if (g.end)
        d << ", until a write was accepted " << seconds_text(std::chrono::nanoseconds(g.end->t_ns - e.t_ns)) << " later";
      else
        d << ", and none was accepted before the run ended";
      d << ": the holders are fenced out with healthy services";
      a.description = d.str();
      anomalies.push_back(std::move(a));
    }
  };

  /// (worker, key, token) of e, strings interned (no segment, no chunk).
  Triple accepted_key(const Event& e) { return Triple{id(e.source), id(e.key), *e.token}; }


  std::uint32_t id(std::string_view s) { return names_.id(s); }

  /// The context's TTL, else the history's so far (HistoryTtl; final only at the end).
  std::optional<std::chrono::nanoseconds> lease_ttl() const { return ttl_.lease_ttl(*context_); }

  /// A heal: what came before it no longer counts (the holdings and accepted writes still do).
  void start_over(std::size_t heal) {
    heal_ = heal;
    journal_.clear();
    gap_.reset();
    gaps_ = 0;
    kept_ = 0;
  }

  void write_fail(std::size_t i, const Event& e) {
    if (!RejectionMarks::is_rejection(e)) return;
    if (self_fencing_candidate(e)) {
      const Triple t = accepted_key(e);
      candidates_.try_emplace(t, kNone);
      Item hit;
      hit.kind = Item::kHit;
      hit.index = i;
      hit.token = *e.token;
      hit.worker = t.worker;
      hit.key = t.key;
      if (gap_) gap_->items.push_back(hit);
      else journal_.emplace_back(hit);
      return;
    }
    // Any rejection by the fence, whatever its mark: one at or above the token is a broken fence's
    // (unjustified-rejection names it), and the holder it refuses is fenced out all the same.
    Item r;
    r.kind = Item::kRejection;
    r.index = i;
    r.token = *e.token;
    r.has_token = true;
    r.mark = *e.high_water;
    r.t_ns = e.t_ns;
    r.worker = id(e.source);
    r.key = id(e.key);
    // Fresh: the worker's holding has this token and was acquired after the last heal.
    if (const auto h = holding_.find(id(e.source));
        h != holding_.end() && (!heal_ || h->second.index > *heal_) && h->second.token == e.token)
      r.fresh = h->second.index;
    if (gap_) gap_->items.push_back(r);
    else if (r.fresh) {
      gap_ = Gap{};  // not emplace(): clang 14 cannot default-construct a nested class with member initializers here
      gap_->items.push_back(r);
    }
  }

  /// Whether rejection e may be a hit: against a mark equal to its token, by a worker whose
  /// holding has that token and which had (by fingerprint) a write.ok of the key with it before.
  bool self_fencing_candidate(const Event& e) {
    if (*e.high_water != *e.token) return false;
    const auto h = holding_.find(id(e.source));
    if (h == holding_.end() || h->second.token != e.token) return false;
    return accepted_.contains(accepted_mark(accepted_key(e)));
  }

  /// Where g's streak starts under `window` (g.items.size(): no streak): at the first fresh
  /// rejection whose deadline the write.ok that ended the gap missed (any, when none ended it).
  static std::size_t streak_start(const Gap& g, std::chrono::nanoseconds window) {
    for (std::size_t k = 0; k < g.items.size(); ++k) {
      const Item& x = g.items[k];
      if (x.kind != Item::kRejection || !x.fresh) continue;
      if (!g.end || g.end->t_ns > x.t_ns + window.count()) return k;
    }
    return g.items.size();
  }

  /// Adds closed gap g to the journal, keeping what the final decision can still need: with no
  /// streak under the TTL so far, only its hits (no larger TTL makes one); with the context's TTL,
  /// the streak and the hits before it; else (a streak unless the TTL grows, or no TTL yet) all.
  void keep(Gap&& g) {
    const auto ttl = lease_ttl();
    const std::size_t start = ttl ? streak_start(g, *ttl + allowance_) : 0;
    if (ttl && start == g.items.size()) {
      for (const Item& x : g.items)
        if (x.kind == Item::kHit) journal_.emplace_back(x);
      return;
    }
    if (ttl && context_ttl_) {
      std::vector<Item> kept;
      for (std::size_t k = 0; k < g.items.size(); ++k)
        if (k >= start || g.items[k].kind == Item::kHit) kept.push_back(g.items[k]);
      g.items = std::move(kept);
    }
    journal_.emplace_back(std::move(g));
    ++kept_;
  }

  void close_gap(std::optional<GapEnd> end, std::int64_t last_t) {
    gap_->end = end;
    gap_->last_t = last_t;
    ++gaps_;
    keep(std::move(*gap_));
    gap_.reset();
  }

  /// The history's TTL grew: tries the kept gaps again.
  void settle_kept() {
    if (kept_ == 0) return;
    std::vector<Entry> journal = std::move(journal_);
    journal_.clear();
    kept_ = 0;
    for (Entry& entry : journal) {
      if (auto* g = std::get_if<Gap>(&entry)) keep(std::move(*g));
      else journal_.push_back(std::move(entry));
    }
  }

  const CheckContext* context_ = nullptr;
  bool context_ttl_ = false;  // the context has the TTL: a gap's decision is final when it closes
  std::chrono::nanoseconds allowance_{0};
  HistoryTtl ttl_;
  std::optional<std::size_t> heal_;  // the latest fault.heal so far
  boost::unordered_flat_map<std::uint32_t, Holding> holding_;  // worker (id) -> its latest acquire.ok
  unsigned pass_ = 1;
  boost::unordered_flat_set<std::uint64_t> accepted_;  // pass 1: accepted_mark() of each (worker, key, token) with a write.ok
  boost::unordered_flat_map<Triple, std::size_t, TripleHash> candidates_;  // a candidate hit's triple -> its first write.ok (pass 2)
  detail::StringIds names_;  // interned workers and keys
  std::vector<Entry> journal_;   // since the last heal: hits outside gaps, and closed gaps
  std::optional<Gap> gap_;       // open: a fresh rejection and no write.ok since
  std::size_t gaps_ = 0;         // gaps since the last heal
  std::size_t kept_ = 0;         // gaps in the journal
  std::int64_t last_t_ = 0;      // t_ns of the previous event
};

}  // namespace

std::unique_ptr<StreamRule> make_fenced_out_rule() { return std::make_unique<FencedOutRule>(); }

}  // namespace fencecheck::harness::detail
