// rejection-storm (checkers.h says what it finds), in one pass: the read-back's rejections are
// counted first, per (client, token); each fenced write.fail is counted as the history goes by
// (RejectionTally, which the figures share) and remembered with its worker's latest write.invoke
// of the same token; at the end every (client, token) rejected more than once is a storm.
// State, all of it per holding (grows with the tokens issued, never with the events of a holding):
//   - per (client, token) with a rejection: its counts, and its write.fails with their invokes,
//     keys and high-water marks (a storm's evidence and description: whether a (client, token) is
//     a storm is known only at the end, when its last write.fail has come);
//   - per worker, its latest write.invoke of each token it wrote with: a write.fail cites the
//     latest invoke of its own token, which need not be the worker's latest invoke (a worker may
//     go back to an older token), so none can be forgotten.
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

  void begin(const ReadBack& readback, const CheckContext&) override {
    readback_ = &readback;
    for (const RejectedWrite& r : readback.rejections) tally_.add(r);
  }

  void observe(std::size_t index, const Event& e) override {
    if (e.kind == EventKind::kWriteInvoke) {
      if (!e.token) return;
      auto it = invokes_.find(e.source);
      if (it == invokes_.end()) it = invokes_.emplace(e.source, Invokes{}).first;
      it->second[*e.token] = index;
      return;
    }
    if (!tally_.observe(e)) return;
    Fails& f = fails_[{e.source, *e.token}];
    f.evidence.push_back(index);
    if (const auto w = invokes_.find(e.source); w != invokes_.end())
      if (const auto inv = w->second.find(*e.token); inv != w->second.end()) f.evidence.push_back(inv->second);
    f.keys.push_back(e.key);
    f.marks.push_back(*e.high_water);
  }

  CheckerResult finish(const StreamEnd&) override {
    const std::vector<TokenRejections> counts = std::move(tally_).take();
    // The keys and marks of the storms' rejections in the read-back.
    std::map<std::pair<std::string, std::int64_t>, Fails, std::less<>> storms;
    for (const TokenRejections& r : counts)
      if (r.count() > 1) {
        Fails& s = storms[{r.client, r.token}];
        if (const auto f = fails_.find(std::pair{r.client, r.token}); f != fails_.end()) s = std::move(f->second);
      }
    for (const RejectedWrite& w : readback_->rejections)
      if (const auto s = storms.find(std::pair{w.client, w.token}); s != storms.end()) {
        s->second.keys.push_back(w.key);
        s->second.marks.push_back(w.high_water);
      }
    std::vector<Anomaly> anomalies;
    for (const TokenRejections& r : counts) {
      if (r.count() <= 1) continue;
      Fails& s = storms.at({r.client, r.token});
      Anomaly a;
      a.name = "rejection-storm";
      a.tokens.push_back(r.token);
      a.clients.push_back(r.client);
      a.evidence = std::move(s.evidence);
      const std::set<std::string> keys(s.keys.begin(), s.keys.end());
      const std::set<std::int64_t> marks(s.marks.begin(), s.marks.end());
      if (keys.size() == 1) a.key = *keys.begin();
      std::vector<std::int64_t> m(marks.begin(), marks.end());
      std::vector<std::string> k(keys.begin(), keys.end());
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
    std::size_t n = sizeof(*this) + tally_.state_bytes();
    for (const auto& [worker, tokens] : invokes_)
      n += 32 + sizeof(worker) + worker.capacity() + sizeof(tokens) +
           tokens.bucket_count() * (sizeof(Invokes::value_type) + 1);
    for (const auto& [id, f] : fails_) {
      n += 32 + sizeof(id) + id.first.capacity() + sizeof(f) + f.evidence.capacity() * sizeof(std::size_t) +
           f.keys.capacity() * sizeof(std::string) + f.marks.capacity() * sizeof(std::int64_t);
      for (const auto& k : f.keys) n += k.capacity() > 15 ? k.capacity() : 0;
    }
    return n;
  }

 private:
  /// A worker's latest write.invoke per token.
  using Invokes = boost::unordered_flat_map<std::int64_t, std::size_t>;
  /// One (client, token)'s fenced write.fails: each fail's index and its latest same-token
  /// write.invoke's, and each fail's key and high-water mark.
  struct Fails {
    std::vector<std::size_t> evidence;
    std::vector<std::string> keys;
    std::vector<std::int64_t> marks;
  };

  const ReadBack* readback_ = nullptr;
  RejectionTally tally_;
  std::map<std::string, Invokes, std::less<>> invokes_;
  std::map<std::pair<std::string, std::int64_t>, Fails, std::less<>> fails_;
};

}  // namespace

std::unique_ptr<StreamRule> make_rejection_storm_rule() { return std::make_unique<RejectionStormRule>(); }

}  // namespace fencecheck::harness::detail
