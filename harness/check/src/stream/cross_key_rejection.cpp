// cross-key-rejection (checkers.h says what it finds), in two passes at most. A fenced rejection
// of key X against mark H is cross-key when X (or its side effects "X.effect"; for "X.effect", X:
// one base) had not accepted a token >= H, while another base's key accepted H, else the lowest
// token above it (a tie goes to the first key by name). What X had accepted:
//   - for a write.fail, the base's write.oks before it in the history (a running maximum, final
//     when the write.fail comes), or anything accepted at no history index: an applied side effect
//     (known from the read-back in begin()), or a logged write with no write.ok anywhere in the
//     history (known only at the end: a write.ok may come late);
//   - for a rejection the resource recorded (no index: the read-back's, judged after every
//     write.fail, as the in-memory checker did), anything the base accepted at any time; such a
//     rejection joins the group (X, H) a write.fail made without that test.
// A write.fail is also explained when the base accepted (at any time) the token H itself and the
// base's highest write.invoke token before the write.fail was >= H: a write with H may have been
// accepted before the rejection, its write.ok received after it (replies race). Only H's own
// acceptance explains it (consider()); the invoked maximum stands in for "H was sent before".
// Pass 1 settles at once each write.fail that the base's running maximum or its effects explain
// (the prefix only grows); the others wait until the end of the pass (look-ahead: the logged
// writes without a write.ok, and every key's accepted tokens over the whole run, which the search
// for the other key reads). When the driver asks wants_another_pass() (the end of pass 1), the
// rule decides: the groups (X, H), each with its other key K and token T. A group cites every
// write.ok of K with token T, at any index, and each of its write.fails cites its worker's latest
// write.invoke with its token before it: pass 2 (only when a group was found) collects both.
// The log's and the effects' part of the evidence (K's lowest seq with T, its clients) is read
// from the read-back at the end.
// State:
//   - per key, its distinct accepted tokens (holdings: 8 bytes per token a key accepted, kept
//     because a later rejection's mark may be any of them; never capped), per base three maxima
//     (live);
//   - in pass 2, the latest write.invoke of each (worker, token) a group's write.fail has (output):
//     a worker may go back to an older token, so pass 1 would have had to keep every worker's
//     latest invoke per token (holdings: 24 bytes or more each, most of this rule's state);
//   - per log entry, one bit: whether the history acknowledged its write id (the log's size, an
//     eighth of a byte an entry; the write ids are looked up in the packed log's shared index,
//     PackedLog::find, until the end of pass 1);
//   - the write.fails not explained at once (in a healthy per-key run, only a rejection whose
//     raising write.ok the history received after it, or whose raising write's ack was lost), and
//     the groups found with their evidence (output).
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

using Max = std::optional<std::int64_t>;

void raise(Max& m, std::int64_t token) { m = std::max(m.value_or(token), token); }
bool reaches(const Max& m, std::int64_t mark) { return m && *m >= mark; }

class CrossKeyRejectionRule final : public StreamRule {
 public:
  std::string_view name() const override { return "cross-key-rejection"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext&) override {
    readback_ = &readback;
    log_ = &log;
    acked_.assign(log.size(), false);
    for (const EffectRecord& e : readback.effects) {
      if (!e.applied) continue;
      const std::uint32_t k = key(e.key);
      accept(k, e.token, base_of(k).effects_max);
    }
  }

  void observe(std::size_t index, const Event& e) override {
    if (pass_ == 2) {
      if (e.kind == EventKind::kWriteOk && e.token && !e.key.empty()) cite(index, e);
      else if (e.kind == EventKind::kWriteInvoke) {
        invokes_.observe(index, e);
      } else if (next_cite_ < fail_cites_.size() && fail_cites_[next_cite_].index == index) {
        const FailCite& f = fail_cites_[next_cite_++];
        if (const auto invoke = invokes_.of(clients_.name(f.client), f.token)) f.group->a.evidence.push_back(*invoke);
      }
      return;
    }
    if (e.kind == EventKind::kWriteInvoke && e.token && !e.key.empty()) {
      raise(base_of(key(e.key)).invoked_max, *e.token);
      return;
    }
    if (e.kind == EventKind::kWriteOk && e.token) {
      if (const auto p = log_->find(e.source, *e.token, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)))
        acked_[p->first] = true;
      if (!e.key.empty()) {
        const std::uint32_t k = key(e.key);
        accept(k, *e.token, base_of(k).history_max);
      }
      return;
    }
    if (!is_fenced_rejection(e)) return;
    const std::uint32_t k = key(e.key);
    const Base& b = base_of(k);
    // Explained by the key's own base now: its write.oks so far, or an effect applied at any time.
    if (reaches(b.history_max, *e.high_water) || reaches(b.effects_max, *e.high_water)) return;
    waiting_.push_back(Fail{index, *e.token, *e.high_water, clients_.id(e.source), k, b.invoked_max});
  }

  bool wants_another_pass() override {
    // The end of pass 1 (the driver asks once per pass): the decisions are taken here.
    if (pass_ != 1) return false;
    decide();
    return !groups_.empty();
  }

  void begin_pass(unsigned pass) override {
    pass_ = pass;
    waiting_ = {};
  }

  CheckerResult finish(const StreamEnd&) override {
    decide();
    // The other key's lowest seq with its token, from the log and the applied effects, and the
    // clients of the logged writes at that seq.
    for (auto& [id, g] : groups_) {
      const std::string& other = keys_.name(g.other);
      for (const LoggedWrite w : *log_)
        if (w.key == other && w.token == g.best && (!g.other_seq || w.seq < *g.other_seq)) g.other_seq = w.seq;
      for (const EffectRecord& e : readback_->effects)
        if (e.applied && e.key == other && e.token == g.best && (!g.other_seq || e.seq < *g.other_seq))
          g.other_seq = e.seq;
      if (!g.other_seq) continue;
      for (const LoggedWrite w : *log_)
        if (w.key == other && w.token == g.best && w.seq == *g.other_seq) g.a.clients.emplace_back(w.client);
      g.a.readback_seqs.push_back(*g.other_seq);
    }
    std::vector<Anomaly> anomalies;
    for (auto& [id, g] : groups_) {
      const auto& [key, mark] = id;
      std::vector<std::int64_t> tokens(g.rejected_tokens.begin(), g.rejected_tokens.end());
      std::ostringstream d;
      d << "writes to " << key << " (token" << (tokens.size() > 1 ? "s " : " ") << join(tokens)
        << ") were rejected against the high-water mark " << mark << ", which only key " << keys_.name(g.other)
        << " reached";
      if (g.other_seq) d << " (seq " << *g.other_seq << ")";
      d << "; " << key << " had not accepted a token >= " << mark << ": one mark fences several keys ("
        << g.history << " write.fail event(s), " << g.resource << " rejection(s) recorded by the resource)";
      g.a.description = d.str();
      anomalies.push_back(std::move(g.a));
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + keys_.state_bytes() + clients_.state_bytes() + bases_.state_bytes() +
                    invokes_.state_bytes() + fail_cites_.capacity() * sizeof(FailCite) +
                    keyed_.capacity() * sizeof(Key) + based_.capacity() * sizeof(Base) +
                    acked_.capacity() / 8 + waiting_.capacity() * sizeof(Fail) +
                    cited_.bucket_count() * (sizeof(decltype(cited_)::value_type) + 1);
    for (const Key& k : keyed_) n += k.tokens.capacity() * sizeof(std::int64_t);
    for (const auto& [id, g] : groups_)
      n += 64 + sizeof(g) + id.first.capacity() + g.rejected_tokens.size() * 40 +
           (g.a.tokens.capacity() + g.a.evidence.capacity() + g.a.readback_seqs.capacity()) * 8 +
           g.a.clients.capacity() * sizeof(std::string);
    return n;
  }

 private:
  /// A key: its distinct accepted tokens, ascending, and its base.
  struct Key {
    std::vector<std::int64_t> tokens;
    std::uint32_t base = 0;
  };
  /// A base: the highest token accepted by its keys' write.oks so far, by applied effects, and by
  /// logged writes the history never acknowledged (known at the end).
  struct Base {
    Max history_max, effects_max, log_max;
    Max invoked_max;  ///< the highest token of a write.invoke to its keys so far
  };
  /// A write.fail not explained at once.
  struct Fail {
    std::size_t index = 0;
    std::int64_t token = 0, mark = 0;
    std::uint32_t client = 0, key = 0;
    /// The base's invoked_max when the write.fail came: the own writes that may have reached the
    /// resource before this rejection did.
    Max invoked;
  };
  /// The anomaly of rejections of key X against mark H.
  struct Group {
    Anomaly a;
    std::set<std::int64_t> rejected_tokens;
    std::int64_t history = 0, resource = 0;
    std::uint32_t other = 0;  // the key that reached the mark (keys_), with token best
    std::int64_t best = 0;
    std::optional<std::int64_t> other_seq;
  };
  /// A group's write.fail, whose invoke pass 2 finds.
  struct FailCite {
    std::size_t index = 0;
    std::int64_t token = 0;
    std::uint32_t client = 0;
    Group* group = nullptr;
  };

  std::uint32_t key(std::string_view name) {
    const std::uint32_t k = keys_.id(name);
    if (k == keyed_.size()) {
      const std::uint32_t b = bases_.id(effect_base(name));
      if (b == based_.size()) based_.emplace_back();
      keyed_.push_back(Key{{}, b});
    }
    return k;
  }
  Base& base_of(std::uint32_t k) { return based_[keyed_[k].base]; }

  /// Key k accepted `token`; `max` is the base's maximum it raises.
  void accept(std::uint32_t k, std::int64_t token, Max& max) {
    raise(max, token);
    auto& t = keyed_[k].tokens;
    if (t.empty() || t.back() < token) {
      t.push_back(token);
      return;
    }
    const auto at = std::lower_bound(t.begin(), t.end(), token);
    if (*at != token) t.insert(at, token);
  }

  /// Pass 2: a write.ok of a group's other key with its token is evidence.
  void cite(std::size_t index, const Event& e) {
    const auto it = cited_.find({keys_.id(e.key), *e.token});
    if (it == cited_.end()) return;
    for (Group* g : it->second) {
      g->a.evidence.push_back(index);
      g->a.clients.push_back(e.source);
    }
  }

  /// At the end of pass 1: the logged writes the history never acknowledged, then every waiting
  /// write.fail in history order, then the read-back's rejections (in the in-memory checker's order).
  void decide() {
    if (decided_) return;
    decided_ = true;
    // A write logged more than once counts as acknowledged when its first entry's id was. Only
    // first entries are ever marked, so a marked entry needs no lookup (in a clean run: all but a
    // few).
    for (auto it = log_->begin(); it != log_->end(); ++it) {
      if (acked_[it.position()]) continue;
      const LoggedWrite w = *it;
      if (const auto p = log_->find(w.client, w.token, w.key, w.segment, w.chunk); p && !acked_[p->first]) {
        const std::uint32_t k = key(w.key);
        accept(k, w.token, base_of(k).log_max);
      }
    }
    acked_ = {};
    for (const Fail& f : waiting_)
      consider(f.key, f.token, f.mark, clients_.name(f.client), &f);
    for (const RejectedWrite& r : readback_->rejections) consider(key(r.key), r.token, r.high_water, r.client, nullptr);
    for (auto& [id, g] : groups_) cited_[{g.other, g.best}].push_back(&g);
  }

  void consider(std::uint32_t k, std::int64_t token, std::int64_t mark, const std::string& client, const Fail* fail) {
    if (mark <= token) return;
    const std::string& name = keys_.name(k);
    if (!fail) {
      if (const auto it = groups_.find({name, mark}); it != groups_.end()) {
        // The resource's record of a rejection the history already showed: count it there.
        Group& g = it->second;
        ++g.resource;
        g.a.tokens.push_back(token);
        g.a.clients.push_back(client);
        g.rejected_tokens.insert(token);
        return;
      }
    }
    // The key's own mark explains the rejection: a write.fail was tested against its prefix and
    // effects in observe(), so only the logged writes without a write.ok are left; a rejection
    // known only from the resource is tested against everything the base accepted.
    const Base& b = base_of(k);
    if (reaches(b.log_max, mark)) return;
    if (!fail && (reaches(b.history_max, mark) || reaches(b.effects_max, mark))) return;
    const std::uint32_t own = keyed_[k].base;
    // A write.fail whose own base was sent token H itself before it, and accepted H at some time:
    // that write may have been accepted before this rejection, its reply received after (the
    // resource's order, not the order replies reach the harness; issue 31 item 6). The mark is then
    // the key's own, not proof of another key's. Exactly H: a higher own token accepted before
    // the rejection would have made the mark at least that token, so it explains nothing.
    if (fail && reaches(fail->invoked, mark))
      for (std::uint32_t i = 0; i < keyed_.size(); ++i)
        if (keyed_[i].base == own && std::binary_search(keyed_[i].tokens.begin(), keyed_[i].tokens.end(), mark)) return;
    if (ordered_.size() != keyed_.size()) {
      ordered_.clear();
      for (std::uint32_t i = 0; i < keyed_.size(); ++i) ordered_.emplace(keys_.name(i), i);
    }
    // The other key that reached the mark: exactly H if any, else the lowest token above it (a tie
    // goes to the first key by name: only a lower token wins).
    std::optional<std::uint32_t> other;
    std::int64_t best = std::numeric_limits<std::int64_t>::max();
    for (const auto& [n, i] : ordered_) {
      if (keyed_[i].base == own) continue;
      const auto& tokens = keyed_[i].tokens;
      const auto at = std::lower_bound(tokens.begin(), tokens.end(), mark);
      if (at != tokens.end() && *at < best) best = *at, other = i;
    }
    if (!other || keys_.name(*other).empty()) return;  // nobody reached it: cannot attribute the mark to another key
    Group& g = groups_[{name, mark}];
    if (g.a.name.empty()) {
      g.a.name = "cross-key-rejection";
      g.a.key = name;
      g.other = *other;
      g.best = best;
      g.a.tokens.push_back(best);
    }
    g.a.tokens.push_back(token);
    g.a.tokens.push_back(mark);
    g.a.clients.push_back(client);
    g.rejected_tokens.insert(token);
    if (fail) {
      ++g.history;
      g.a.evidence.push_back(fail->index);
      fail_cites_.push_back(FailCite{fail->index, fail->token, fail->client, &g});
      invokes_.want(client, fail->token);
    } else {
      ++g.resource;
    }
  }

  const ReadBack* readback_ = nullptr;
  unsigned pass_ = 1;
  StringIds keys_, clients_, bases_;
  std::vector<Key> keyed_;   // by key id
  std::vector<Base> based_;  // by base id
  const PackedLog* log_ = nullptr;
  std::vector<bool> acked_;  // per log position (the first entry of its write id): a write.ok of its id was seen
  std::vector<Fail> waiting_;
  std::vector<FailCite> fail_cites_;  // the groups' write.fails, in history order (pass 2)
  std::size_t next_cite_ = 0;
  /// Pass 2: each group write.fail's (worker, token) -> its latest write.invoke so far.
  LatestWriteInvokes invokes_;
  bool decided_ = false;
  std::map<std::string_view, std::uint32_t> ordered_;  // key name -> id, for the search in key order
  std::map<std::pair<std::string, std::int64_t>, Group> groups_;  // (key X, mark H)
  /// (other key, token) -> the groups citing its write.oks (pass 2).
  boost::unordered_flat_map<std::pair<std::uint32_t, std::int64_t>, std::vector<Group*>,
                            boost::hash<std::pair<std::uint32_t, std::int64_t>>>
      cited_;
};

}  // namespace

std::unique_ptr<StreamRule> make_cross_key_rejection_rule() { return std::make_unique<CrossKeyRejectionRule>(); }

}  // namespace fencecheck::harness::detail
