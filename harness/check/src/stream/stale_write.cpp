// stale-write-accepted (checkers.h says what it finds), streamed. Three sources, merged per
// (key, client, stale token):
//   1. the read-back's accept log, per key in seq order (begin(); the log is the caller's PackedLog),
//      citing every write.ok of the stale write and of the higher one (collected as events pass);
//   2. the history in real-time order: a write.ok B whose write.invoke happened after a write.ok
//      of the same key with a higher token had completed;
//   3. a write.ok whose own reply carries a high-water mark above its token.
//
// Part 2 compares B's invoke with every write.ok of the key by the time each happened
// (happened_ns), including write.oks the harness received after B (receive order is not real-time
// order: issue 16's 1000-worker run). The rule keeps per key the "staircase" of the key's
// write.oks in real-time order: the points where the highest token so far rises (ties: the
// earliest). A lookup ("the highest-token write.ok completed before this invoke") is the last
// point before the invoke. The staircase has one point per token that raised the key's mark, so
// it would grow with holdings (tokens). It is pruned: a lookup still to come is for a write in
// flight (a write.invoke with no write.ok, write.fail or write.info yet) or for a write not yet
// invoked, which happens after its worker's latest event so far (per worker, events come in
// order). So below the watermark W (the earliest of: each worker's oldest write in flight, else
// its latest event; a worker.exit takes a worker out) only the last point is still needed, and the
// earlier ones are dropped (every kPruneEvery points). That rests on the workers' order, which a
// history need not keep: a lookup that reaches below what was dropped (its invoke at or before the
// key's first kept point) makes the one-pass results unsure, and the rule reads the history twice
// more: once to build the whole staircase again, unpruned, and once to judge every B against it.
// A healthy run keeps its writes in flight and the raises since W.
//
// B is judged when it arrives, against the staircase so far. That is the exact judgement unless
// a write.ok received later becomes a point of the staircase before an invoke already looked up
// (it happened earlier than a write judged before it arrived). The rule notes the latest lookup per
// key (its horizon); a new point before it means one-pass decisions may be wrong, and the rule asks
// for a second pass (wants_another_pass), in which the staircase is complete and every B is judged
// again exactly. Healthy runs with a few workers never need it; runs with hundreds of workers
// whose channels deliver out of order may.
//
// B's invoke is its worker's latest write.invoke when that is the same write (a worker has one
// write in flight), else the last write.invoke of the same write before B. For that fallback each
// worker's latest kRecentInvokes write ids are kept; an id older than those that is needed makes
// the rule read the history again keeping exactly the ids it needs (rare: only a worker with many
// writes in flight at once gets there).
#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

/// How many of a worker's latest write ids the fallback invoke lookup keeps.
constexpr std::size_t kRecentInvokes = 64;
/// How many points are added to the staircases (all keys) between two prunings.
constexpr std::size_t kPruneEvery = 4096;

/// A position in real-time order: (happened_ns, history index).
using When = std::pair<std::int64_t, std::size_t>;

class StaleWriteAcceptedRule final : public StreamRule {
 public:
  std::string_view name() const override { return "stale-write-accepted"; }

  void begin(const ReadBack&, const PackedLog& log, const CheckContext&) override {
    // 1. The store's own log, per key in acceptance order: the log's own order when it is in seq
    // order already (a resource's log is: the check costs one read), else positions sorted by seq
    // (16 bytes an entry while sorting, 4 after, only for as long as this loop).
    std::vector<std::uint32_t> order;
    for (std::size_t p = 1; p < log.size(); ++p)
      if (log[p].seq < log[p - 1].seq) {
        // Each entry's seq decoded once: (seq, position) sorted is the stable sort by seq.
        std::vector<std::pair<std::int64_t, std::uint32_t>> by_seq(log.size());
        for (std::uint32_t q = 0; q < by_seq.size(); ++q) by_seq[q] = {log[q].seq, q};
        std::sort(by_seq.begin(), by_seq.end());
        order.resize(by_seq.size());
        for (std::size_t q = 0; q < by_seq.size(); ++q) order[q] = by_seq[q].second;
        break;
      }
    boost::unordered_flat_map<std::uint32_t, LoggedWrite> max_by_key;  // by the log's key id
    for (std::size_t n = 0; n < log.size(); ++n) {
      const LoggedWrite w = log[order.empty() ? n : order[n]];
      const auto [at, first] = max_by_key.try_emplace(w.key_id, w);
      const LoggedWrite& top = at->second;
      if (!first && w.token < top.token) {
        Group& g = group(std::string(w.key), std::string(w.client), w.token);
        Part& p = g.log;
        p.segments.insert(w.segment);
        p.log_seqs.insert(w.seq);
        p.above.insert(top.token);
        p.tokens.push_back(top.token);
        p.clients.emplace_back(top.client);
        p.seqs.push_back(w.seq);
        p.seqs.push_back(top.seq);
        const std::size_t slot = cited_.size();
        cited_.push_back(&g);
        citations_.want({w.client, w.token, w.key, w.segment, w.chunk}, slot);
        citations_.want({top.client, top.token, top.key, top.segment, top.chunk}, slot);
      }
      if (!first && w.token > top.token) at->second = w;
    }
  }

  void observe(std::size_t index, const Event& e) override {
    if (pass_ == 1) citations_.observe(index, e, [&](std::size_t slot, std::size_t at) { cited_[slot]->log.evidence.push_back(at); });
    if (rebuilding_) {  // the whole staircase again, nothing judged
      if (e.kind == EventKind::kWriteOk && e.token && !is_effect_key(e.key)) {
        const std::uint32_t key = strings_.id(e.key);
        if (staircase_.size() <= key) staircase_.resize(key + 1);
        add_point(staircase_[key], When{std::numeric_limits<std::int64_t>::min(), 0},
                  Point{When{happened_ns(e), index}, *e.token, strings_.id(e.source)});
      }
      return;
    }
    const bool write = e.kind == EventKind::kWriteInvoke || e.kind == EventKind::kWriteOk ||
                       e.kind == EventKind::kWriteFail || e.kind == EventKind::kWriteInfo;
    if (!write) {
      if (pass_ == 1 && e.kind == EventKind::kWorkerExit) exited(e);
      return;
    }
    // The writer's and the key's ids, looked up once for the three uses below (in the order
    // they were interned before: source, then the key of an invoke or of a write with a token).
    const std::uint32_t source = strings_.id(e.source);
    const std::uint32_t key = e.kind == EventKind::kWriteInvoke || e.token ? strings_.id(e.key) : 0;
    if (e.kind == EventKind::kWriteInvoke) {
      invoked(index, e, source, key);
    } else if (e.kind == EventKind::kWriteOk && e.token && !is_effect_key(e.key)) {
      acknowledged(index, e, source, key);
    }
    if (pass_ == 1) in_flight(e, source, key);  // after B's own lookup: its write is in flight until then
  }

  /// Another pass when a one-pass judgement may be wrong; two (rebuild, then judge) when the
  /// staircase was pruned.
  bool wants_another_pass() override {
    if (pass_ == 1) {
      if (!again_) return false;
      rebuild_next_ = pruned_;
      return true;
    }
    return rebuilding_;  // after the rebuild, the judging pass
  }

  void begin_pass(unsigned pass) override {
    if (rebuild_next_) {
      rebuild_next_ = false;
      rebuilding_ = true;
      pass_ = pass;
      staircase_.clear();
      writers_.clear();
      return;
    }
    rebuilding_ = false;
    pass_ = pass;
    // The history's part is judged again from scratch; the log's part stays.
    for (auto it = groups_.begin(); it != groups_.end();) {
      it->second.history = Part{};
      it = it->second.log.log_seqs.empty() ? groups_.erase(it) : std::next(it);
    }
    latest_invoke_.clear();
    recent_.clear();
  }

  CheckerResult finish(const StreamEnd&) override {
    std::vector<Anomaly> anomalies;
    for (auto& [id, g] : groups_) {
      const auto& [key, client, token] = id;
      Anomaly a;
      a.name = "stale-write-accepted";
      a.key = key;
      a.tokens.push_back(token);
      a.clients.push_back(client);
      std::set<std::int64_t> segments, above;
      for (Part* p : {&g.log, &g.history}) {
        segments.insert(p->segments.begin(), p->segments.end());
        above.insert(p->above.begin(), p->above.end());
        a.tokens.insert(a.tokens.end(), p->tokens.begin(), p->tokens.end());
        a.clients.insert(a.clients.end(), p->clients.begin(), p->clients.end());
        a.evidence.insert(a.evidence.end(), p->evidence.begin(), p->evidence.end());
        a.readback_seqs.insert(a.readback_seqs.end(), p->seqs.begin(), p->seqs.end());
      }
      if (segments.size() == 1) a.segment = *segments.begin();
      std::ostringstream d;
      d << key << ": the resource accepted token " << token << " from " << client
        << " after it had already accepted a higher token (" << join(std::vector<std::int64_t>(above.begin(), above.end()))
        << ")";
      std::vector<std::string> sources;
      if (!g.log.log_seqs.empty()) {
        std::vector<std::int64_t> seqs(g.log.log_seqs.begin(), g.log.log_seqs.end());
        sources.push_back(std::to_string(seqs.size()) + " write(s) in the resource's accept log (seq " + join(seqs) + ")");
      }
      if (!g.history.history_oks.empty())
        sources.push_back(std::to_string(g.history.history_oks.size()) + " write.ok event(s) in the history");
      d << ": " << join(sources, " and ");
      a.description = d.str();
      anomalies.push_back(std::move(a));
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + strings_.state_bytes() + citations_.state_bytes() +
                    latest_invoke_.size() * sizeof(Invoke) + horizon_.size() * sizeof(When) +
                    exact_ids_.size() * sizeof(WriteKey) + exact_.size() * (sizeof(WriteKey) + sizeof(When));
    for (const auto& s : staircase_) n += sizeof(s) + s.capacity() * sizeof(Point);
    n += floor_.capacity() * sizeof(When);
    for (const auto& w : writers_) n += sizeof(w) + w.open.capacity() * sizeof(w.open[0]);
    for (const auto& r : recent_) n += sizeof(r) + r.order.size() * sizeof(WriteKey) + r.last.size() * (sizeof(WriteKey) + sizeof(When));
    for (const auto& [id, g] : groups_)
      n += 256 + (g.log.evidence.size() + g.history.evidence.size() + g.history.history_oks.size() * 4) * sizeof(std::size_t);
    return n;
  }

 private:
  /// What one source (the log, or the history) says of one (key, client, token).
  struct Part {
    std::set<std::int64_t> segments, log_seqs, above;
    std::set<std::size_t> history_oks;
    std::vector<std::int64_t> tokens, seqs;
    std::vector<std::string> clients;
    std::vector<std::size_t> evidence;
  };
  struct Group {
    Part log, history;
  };
  /// A write.invoke: its identity and when it happened.
  struct Invoke {
    std::size_t index = 0;
    bool valid = false;
    std::optional<std::int64_t> token;
    std::uint32_t key = 0;
    std::int64_t segment = -1, chunk = -1;
    std::int64_t happened = 0;
  };
  /// A worker's latest write ids and the last invoke of each (oldest first in `order`).
  struct Recent {
    std::deque<WriteKey> order;
    boost::unordered_flat_map<WriteKey, When, WriteKeyHash> last;
    bool forgot = false;  // some id was dropped to keep kRecentInvokes
  };
  /// A worker's writes in flight (id, when invoked) and the time of its latest write event.
  struct Writer {
    std::vector<std::pair<WriteKey, std::int64_t>> open;
    std::int64_t last = std::numeric_limits<std::int64_t>::min();
    bool gone = false;  // a worker.exit came
    bool seen = false;  // a writer (an entry of writers_ may be a key's id)
  };
  /// A point of a key's staircase: a write.ok whose token is above every earlier one's.
  struct Point {
    When when;
    std::int64_t token = 0;
    std::uint32_t source = 0;
  };

  Group& group(const std::string& key, const std::string& client, std::int64_t token) {
    return groups_[{key, client, token}];
  }

  /// A write.invoke of writer `source` on `key` (string ids).
  void invoked(std::size_t index, const Event& e, std::uint32_t source, std::uint32_t key) {
    if (latest_invoke_.size() <= source) latest_invoke_.resize(source + 1);
    Invoke& inv = latest_invoke_[source];
    inv = Invoke{index, true, e.token, key, e.segment.value_or(-1), e.chunk.value_or(-1), happened_ns(e)};
    if (!e.token) return;
    const WriteKey id{source, inv.key, *e.token, inv.segment, inv.chunk};
    const When when{inv.happened, index};
    if (pass_ > 1 && exact_ids_.contains(id)) exact_[id] = when;
    if (recent_.size() <= source) recent_.resize(source + 1);
    Recent& r = recent_[source];
    if (auto [it, fresh] = r.last.try_emplace(id, when); !fresh) {
      it->second = when;
      return;
    }
    r.order.push_back(id);
    if (r.order.size() > kRecentInvokes) {
      r.last.erase(r.order.front());
      r.order.pop_front();
      r.forgot = true;
    }
  }

  /// The history index and time of B's invoke, if any (see the file's comment).
  std::optional<When> invoke_of(std::uint32_t source, std::uint32_t key, const Event& b) {
    if (source < latest_invoke_.size()) {
      const Invoke& l = latest_invoke_[source];
      if (l.valid && l.token && l.token == b.token && l.key == key && l.segment == b.segment.value_or(-1) &&
          l.chunk == b.chunk.value_or(-1))
        return When{l.happened, l.index};
    }
    const WriteKey id{source, key, *b.token, b.segment.value_or(-1), b.chunk.value_or(-1)};
    std::optional<When> at;
    if (source < recent_.size()) {
      const Recent& r = recent_[source];
      if (const auto it = r.last.find(id); it != r.last.end()) {
        at = it->second;
      } else if (r.forgot) {
        // Maybe among the ids dropped: read again, keeping this one exactly.
        if (pass_ == 1) {
          exact_ids_.insert(id);
          again_ = true;
          return std::nullopt;
        }
        if (const auto x = exact_.find(id); x != exact_.end()) at = x->second;
      }
    }
    return at;
  }

  /// A write.ok with a token of writer `source` on `key` (string ids), not an effect's.
  void acknowledged(std::size_t b, const Event& e, std::uint32_t source, std::uint32_t key) {
    const std::int64_t token = *e.token;
    if (staircase_.size() <= key) {
      staircase_.resize(key + 1);
      horizon_.resize(key + 1, When{std::numeric_limits<std::int64_t>::min(), 0});
    }
    std::vector<Point>& stairs = staircase_[key];
    if (pass_ == 1) add_point(stairs, horizon_[key], Point{When{happened_ns(e), b}, token, source});
    // 2. B's invoke against the highest-token write.ok of the key completed before it.
    if (const auto invoke = invoke_of(source, key, e)) {
      if (pass_ == 1) {
        horizon_[key] = std::max(horizon_[key], *invoke);
        if (key < floor_.size() && !(floor_[key] < *invoke)) again_ = true;  // it needs a dropped point
      }
      const auto after = std::lower_bound(stairs.begin(), stairs.end(), *invoke,
                                          [](const Point& p, const When& w) { return p.when < w; });
      if (after != stairs.begin() && std::prev(after)->token > token) {
        const Point& t = *std::prev(after);
        Part& p = group(e.key, e.source, token).history;
        if (e.segment) p.segments.insert(*e.segment);
        p.history_oks.insert(b);
        p.above.insert(t.token);
        p.tokens.push_back(t.token);
        p.clients.push_back(strings_.name(t.source));
        p.evidence.insert(p.evidence.end(), {t.when.second, invoke->second, b});
      }
    }
    // 3. The resource's own reply: accepted, yet its high-water mark was already above the token.
    if (e.high_water && *e.high_water > token) {
      Part& p = group(e.key, e.source, token).history;
      if (e.segment) p.segments.insert(*e.segment);
      p.history_oks.insert(b);
      p.above.insert(*e.high_water);
      p.tokens.push_back(*e.high_water);
      p.evidence.push_back(b);
    }
  }

  /// Adds a write.ok to its key's staircase; one that becomes a point before the key's horizon
  /// (an invoke already looked up) makes the rule read the history again.
  void add_point(std::vector<Point>& stairs, const When& horizon, const Point& c) {
    auto at = std::lower_bound(stairs.begin(), stairs.end(), c.when, [](const Point& p, const When& w) { return p.when < w; });
    if (at != stairs.begin() && std::prev(at)->token >= c.token) return;  // not a rise: changes no lookup
    if (c.when < horizon) again_ = true;
    at = stairs.insert(at, c);
    auto end = std::next(at);
    while (end != stairs.end() && end->token <= c.token) ++end;
    stairs.erase(std::next(at), end);
    if (pass_ == 1 && ++added_ % kPruneEvery == 0) prune();
  }

  /// Pass 1: a worker.exit takes its writer out of the watermark.
  void exited(const Event& e) {
    if (const std::uint32_t id = strings_.id(e.target); id < writers_.size() && writers_[id].seen) writers_[id].gone = true;
  }

  /// Pass 1: each worker's writes in flight and its latest write event (the watermark's inputs);
  /// `e` is a write event of writer `source` on `key` (string ids; `key` is set when e has a token).
  void in_flight(const Event& e, std::uint32_t source, std::uint32_t key) {
    if (writers_.size() <= source) writers_.resize(source + 1);
    Writer& w = writers_[source];
    w.seen = true;
    w.last = std::max(w.last, happened_ns(e));
    if (!e.token) return;
    const WriteKey id{source, key, *e.token, e.segment.value_or(-1), e.chunk.value_or(-1)};
    if (e.kind == EventKind::kWriteInvoke) {
      w.open.emplace_back(id, happened_ns(e));
      return;
    }
    for (std::size_t k = 0; k < w.open.size(); ++k)
      if (w.open[k].first == id) {
        w.open[k] = w.open.back();
        w.open.pop_back();
        break;
      }
  }

  /// Drops, per key, the points below the watermark but the last (see the file's comment).
  void prune() {
    std::int64_t water = std::numeric_limits<std::int64_t>::max();
    for (const Writer& w : writers_) {
      if (w.gone || !w.seen) continue;  // (writers_ is by string id: keys have entries too)
      std::int64_t at = w.last;
      for (const auto& [id, when] : w.open) at = std::min(at, when);
      water = std::min(water, at);
    }
    if (water == std::numeric_limits<std::int64_t>::max()) return;
    const When below{water, 0};
    if (floor_.size() < staircase_.size()) floor_.resize(staircase_.size(), When{std::numeric_limits<std::int64_t>::min(), 0});
    for (std::size_t k = 0; k < staircase_.size(); ++k) {
      std::vector<Point>& stairs = staircase_[k];
      const auto first_above = std::lower_bound(stairs.begin(), stairs.end(), below,
                                                [](const Point& p, const When& w) { return p.when < w; });
      if (first_above - stairs.begin() < 2) continue;  // at most one point below: nothing to drop
      stairs.erase(stairs.begin(), std::prev(first_above));
      floor_[k] = stairs.front().when;
      pruned_ = true;
      if (stairs.capacity() > 4 * stairs.size() + 16) stairs.shrink_to_fit();
    }
  }

  unsigned pass_ = 1;
  bool again_ = false;
  StringIds strings_;
  std::map<std::tuple<std::string, std::string, std::int64_t>, Group> groups_;
  std::vector<Group*> cited_;  // the log's groups, by citation slot
  WriteCitations citations_;
  std::vector<Invoke> latest_invoke_;       // by source id
  std::vector<Recent> recent_;              // by source id
  std::vector<std::vector<Point>> staircase_;  // by key id
  std::vector<When> horizon_;               // by key id: the latest invoke looked up in pass 1
  std::vector<When> floor_;                 // by key id: its first point kept after a pruning
  std::vector<Writer> writers_;             // by source id (pass 1)
  std::size_t added_ = 0;                   // points added in pass 1
  bool pruned_ = false, rebuild_next_ = false, rebuilding_ = false;
  boost::unordered_flat_set<WriteKey, WriteKeyHash> exact_ids_;  // ids pass 2 keeps exactly
  boost::unordered_flat_map<WriteKey, When, WriteKeyHash> exact_;
};

}  // namespace

std::unique_ptr<StreamRule> make_stale_write_accepted_rule() { return std::make_unique<StaleWriteAcceptedRule>(); }

}  // namespace fencecheck::harness::detail
