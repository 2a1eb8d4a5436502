// rejection-storm (checkers.h says what it finds), in one pass and, only when there is a storm, a
// second: the read-back's rejections are counted first, per (client, token); each fenced
// write.fail is counted as the history goes by (RejectionTally, which the figures share) and
// remembered; at the end every (client, token) rejected more than once is a storm. A storm's
// evidence also cites, for each of its write.fails, its worker's latest write.invoke of the same
// token before it: the second pass finds those, for the storms' (client, token)s alone.
// State, all of it per holding (grows with the tokens issued, not with a correct holding's events)
// or a storm's own evidence:
//   - per (client, token) with a rejection, its counts (RejectionTally), and each fenced
//     write.fail's index, latest same-token invoke, key and mark (40 bytes): whether a (client,
//     token) storms is known only at the end, when its last write.fail has come, and then all its
//     fails are the storm's evidence and description (a correct holder has at most one);
//   - in the second pass, per storm (client, token), its latest write.invoke (output-sized).
// A write.fail cites the latest invoke of its own token, which need not be the worker's latest
// invoke (a worker may go back to an older token); kept for every (worker, token), that was 24
// bytes per holding, the most of this rule's state. Keys are interned (live).
// StreamRejectionStorm measures it.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

class RejectionStormRule final : public StreamRule {
 public:
  std::string_view name() const override { return "rejection-storm"; }
  bool reads_log() const override { return false; }

  void begin(const ReadBack& readback, const PackedLog&, const CheckContext&) override {
    readback_ = &readback;
    for (const RejectedWrite& r : readback.rejections) tally_.add(r);
  }

  void observe(std::size_t index, const Event& e) override {
    if (pass_ > 1) return invoke_of_storm(index, e);
    if (!tally_.observe(e)) return;
    Fail f{index, kNone, *e.token, *e.high_water, tally_.client_id(e.source), 0};
    auto key = key_ids_.find(e.key);
    if (key == key_ids_.end()) {
      key = key_ids_.emplace(e.key, static_cast<std::uint32_t>(keys_.size())).first;
      keys_.push_back(e.key);
    }
    f.key = key->second;
    fails_.push_back(f);
  }

  /// A second pass when some (client, token) with a write.fail storms: its fails' invokes.
  bool wants_another_pass() override {
    if (pass_ > 1) return false;
    for (const TokenRejections& r : tally_.counts())
      if (r.count() > 1 && r.history > 0) invokes_.want(r.client, r.token);
    return invokes_.wants_some();
  }
  void begin_pass(unsigned pass) override {
    pass_ = pass;
    next_fail_ = 0;
  }
  std::uint64_t kinds() const override {  // pass 1: RejectionTally counts write.fails only
    return pass_ == 1 ? bit(EventKind::kWriteFail) : kAllEventKinds;
  }

  CheckerResult finish(const StreamEnd&) override {
    const std::vector<TokenRejections> counts = tally_.counts();
    // The storms, in (client, token) order, and what their description lists.
    struct Storm {
      const TokenRejections* counts;
      std::vector<std::size_t> evidence;
      std::set<std::string> keys;
      std::set<std::int64_t> marks;
    };
    std::map<std::pair<std::string_view, std::int64_t>, Storm> storms;
    for (const TokenRejections& r : counts)
      if (r.count() > 1) storms.emplace(std::pair<std::string_view, std::int64_t>{r.client, r.token}, Storm{&r, {}, {}, {}});
    for (const Fail& f : fails_) {
      const auto s = storms.find({tally_.client_name(f.client), f.token});
      if (s == storms.end()) continue;
      s->second.evidence.push_back(f.index);
      if (f.invoke != kNone) s->second.evidence.push_back(f.invoke);
      s->second.keys.insert(keys_[f.key]);
      s->second.marks.insert(f.mark);
    }
    for (const RejectedWrite& w : readback_->rejections)
      if (const auto s = storms.find({w.client, w.token}); s != storms.end()) {
        s->second.keys.insert(w.key);
        s->second.marks.insert(w.high_water);
      }
    std::vector<Anomaly> anomalies;
    for (auto& [id, s] : storms) {
      const TokenRejections& r = *s.counts;
      Anomaly a;
      a.name = "rejection-storm";
      a.tokens.push_back(r.token);
      a.clients.push_back(r.client);
      a.evidence = std::move(s.evidence);
      if (s.keys.size() == 1) a.key = *s.keys.begin();
      std::vector<std::int64_t> m(s.marks.begin(), s.marks.end());
      std::vector<std::string> k(s.keys.begin(), s.keys.end());
      a.description = r.client + " had " + std::to_string(r.count()) + " writes rejected with the same token " +
                      std::to_string(r.token) + " (" + std::to_string(r.history) + " write.fail event(s), " +
                      std::to_string(r.readback) + " rejection(s) recorded by the resource; key " + join(k) +
                      ", high-water " + join(m) +
                      "): after a rejection a holder must stop and re-acquire, never retry the same token";
      anomalies.push_back(std::move(a));
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + tally_.state_bytes() + fails_.capacity() * sizeof(Fail) +
                    invokes_.state_bytes() +
                    keys_.capacity() * sizeof(std::string);
    for (const auto& k : keys_) n += 48 + sizeof(k) + 4 + 2 * k.capacity();
    return n;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  /// A fenced write.fail: its index, its worker's latest invoke of its token (kNone: none), its
  /// token, mark, client (RejectionTally's id) and key (in keys_).
  struct Fail {
    std::size_t index = 0;
    std::size_t invoke = kNone;
    std::int64_t token = 0;
    std::int64_t mark = 0;
    std::uint32_t client = 0;
    std::uint32_t key = 0;
  };

  /// Pass 2: a storm's write.invoke is its latest so far; a storm's write.fail (the next of fails_)
  /// takes it.
  void invoke_of_storm(std::size_t index, const Event& e) {
    invokes_.observe(index, e);
    if (next_fail_ >= fails_.size() || fails_[next_fail_].index != index) return;
    Fail& f = fails_[next_fail_++];
    if (const auto invoke = invokes_.of(e.source, f.token)) f.invoke = *invoke;
  }

  const ReadBack* readback_ = nullptr;
  RejectionTally tally_;
  unsigned pass_ = 1;
  std::size_t next_fail_ = 0;  // pass 2: the next of fails_
  /// Pass 2: each storm's (client, token) with a write.fail -> its latest write.invoke so far.
  LatestWriteInvokes invokes_;
  std::vector<Fail> fails_;
  std::vector<std::string> keys_;
  std::map<std::string, std::uint32_t, std::less<>> key_ids_;
};

}  // namespace

std::unique_ptr<StreamRule> make_rejection_storm_rule() { return std::make_unique<RejectionStormRule>(); }

}  // namespace fencecheck::harness::detail
