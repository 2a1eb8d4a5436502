// unjustified-rejection (checkers.h says what it finds), and RejectionMarks (internal.h), the judge
// it shares with the figures.
//
// Each rejection is judged against its mark (RejectionMarks: the reply's, else the accept log's
// bound, else the resource's record; the read-back's records by their own): unjustified when its
// token is at or above the mark. How it divides the work with fenced-out, whose self-fencing finding
// is a rejection at a mark EQUAL to the token: a rejection at a mark equal to its token is left to
// fenced-out when fenced-out's own test holds for it (the worker's latest acquire.ok before it has
// that token, and the same worker had a write.ok of the same key and token before it: the holder's
// second write under its own mark, a strict comparison) and is this rule's otherwise (the worker
// never had that token accepted on the key: someone else's write, or none, set a mark equal to a
// token the resource had to accept). A record of the read-back at a mark equal to its token is
// left to fenced-out when the accept log shows the same client's write of that key and token (the
// history's self-fencing rejection, seen by the resource). So one rejection is never named by
// both; the figures leave out both kinds (neither is evidence that fencing works).
//
// Coverage: valid needs every rejection's mark known. A write.fail whose mark no source gives (the
// reply did not say it, the log does not bound it, the resource's record does not list it) makes
// the result unknown, naming how many and the first; an anomaly proven from the others stays
// invalid.
//
// State: each worker's latest acquire.ok token (live); the write.fails whose reply did not say the
// mark (RejectionMarks: one entry each, none when every reply says it); the unjustified rejections
// found (output: each is cited); the rejections at a mark equal to their token, until the second
// pass finds whether the worker's write.ok of that key and token came before (one entry each: in a
// healthy run none, with a strict-comparison resource one per holding, each also fenced-out's
// evidence). Only when there is such a candidate is the history read again.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {

std::optional<RejectionMarks::Judged> RejectionMarks::observe(std::size_t index, const Event& e) {
  if (!is_rejection(e)) return std::nullopt;
  if (*e.high_water >= 1) return Judged{*e.high_water, Source::kReply, *e.token >= *e.high_water, std::nullopt};
  Unsaid& u = unsaid_.emplace_back();
  u.index = index;
  u.client = e.source;
  u.key = e.key;
  u.segment = e.segment.value_or(-1);
  u.chunk = e.chunk.value_or(-1);
  u.token = *e.token;
  return std::nullopt;
}

std::vector<RejectionMarks::Unsaid> RejectionMarks::resolve(const ReadBack& readback, const PackedLog& log) {
  std::vector<Unsaid> out = std::move(unsaid_);
  unsaid_ = {};
  if (out.empty()) return out;
  // Source 2: the highest token the log shows for each key a kept write.fail names (one read of
  // the log, only when there is one).
  struct Top {
    std::int64_t token = 0, seq = 0;
  };
  std::map<std::string, std::optional<Top>, std::less<>> top;
  for (const Unsaid& u : out)
    if (!is_effect_key(u.key)) top.emplace(u.key, std::nullopt);
  if (log_is_evidence_ && !top.empty())
    for (const LoggedWrite w : log)
      if (const auto it = top.find(w.key); it != top.end() && (!it->second || w.token > it->second->token))
        it->second = Top{w.token, w.seq};
  // Source 3: the resource's record, by write id.
  std::map<std::tuple<std::string_view, std::string_view, std::int64_t, std::int64_t, std::int64_t>, const RejectedWrite*>
      recorded;
  for (const RejectedWrite& r : readback.rejections)
    recorded.emplace(std::make_tuple(std::string_view(r.client), std::string_view(r.key), r.segment, r.chunk, r.token), &r);
  for (Unsaid& u : out) {
    if (const auto it = top.find(u.key); it != top.end() && it->second && u.token >= it->second->token) {
      u.judged = Judged{it->second->token, Source::kAcceptLog, true, it->second->seq};
      continue;
    }
    if (const auto it = recorded.find(std::make_tuple(std::string_view(u.client), std::string_view(u.key), u.segment,
                                                      u.chunk, u.token));
        it != recorded.end())
      u.judged = judge(*it->second);
  }
  return out;
}

std::size_t RejectionMarks::state_bytes() const {
  std::size_t n = sizeof(*this) + unsaid_.capacity() * sizeof(Unsaid);
  for (const Unsaid& u : unsaid_) n += u.client.capacity() + u.key.capacity();
  return n;
}

namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

class UnjustifiedRejectionRule final : public StreamRule {
 public:
  std::string_view name() const override { return "unjustified-rejection"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) override {
    readback_ = &readback;
    log_ = &log;
    marks_ = RejectionMarks(log_is_evidence(context, log));
  }

  void observe(std::size_t i, const Event& e) override {
    if (pass_ > 1) {  // each candidate's first write.ok of its (worker, key, token)
      if (e.kind == EventKind::kWriteOk && e.token)
        if (const auto it = first_ok_.find(Triple{names_.id(e.source), names_.id(e.key), *e.token});
            it != first_ok_.end() && it->second == kNone)
          it->second = i;
      return;
    }
    if (e.kind == EventKind::kAcquireOk) {
      holding_[names_.id(e.source)] = e.token;
      return;
    }
    const auto j = marks_.observe(i, e);
    if (!j && RejectionMarks::is_rejection(e)) unsaid_held_.push_back(holds(e.source, *e.token));  // kept by marks_
    if (!j || !j->unjustified) return;
    found(Item{i, names_.id(e.source), names_.id(e.key), *e.token, *j}, holds(e.source, *e.token));
  }

  /// At the end of pass 1: the write.fails without a said mark and the read-back's records are
  /// judged; a second pass when some rejection at a mark equal to its token needs its worker's
  /// first write.ok of that key and token.
  bool wants_another_pass() override {
    if (pass_ != 1) return false;
    decide();
    return !first_ok_.empty();
  }
  void begin_pass(unsigned pass) override { pass_ = pass; }
  std::uint64_t kinds() const override {  // observe(): pass 1 holdings and rejections; later, write.oks
    return pass_ == 1 ? bit(EventKind::kAcquireOk) | bit(EventKind::kWriteFail) : bit(EventKind::kWriteOk);
  }

  CheckerResult finish(const StreamEnd&) override {
    if (pass_ == 1 && !first_ok_.empty())
      throw std::logic_error("unjustified-rejection: finish() before the pass that finds the candidates' write.oks");
    decide();
    // A candidate is fenced-out's (self-fencing) when its worker held the token and had a write.ok
    // of the key with it before the rejection; else it is this rule's.
    for (const Candidate& c : candidates_) {
      const auto it = first_ok_.find(Triple{c.item.client, c.item.key, c.item.token});
      const bool own_write_first = it != first_ok_.end() && it->second != kNone && it->second < c.item.index;
      if (!(c.held && own_write_first)) items_.push_back(c.item);
    }
    std::vector<Anomaly> anomalies = build();
    if (anomalies.empty() && unknown_ > 0) {
      const Item& u = first_unknown_;
      return unknown_result(
          name(), std::to_string(unknown_) + " rejection(s) with no known mark (the first: " + names_.name(u.client) +
                      "'s write to " + names_.name(u.key) + " with token " + std::to_string(u.token) + ", event #" +
                      std::to_string(u.index) +
                      "): the reply did not say the high-water mark, the accept log does not show the key's "
                      "highest token at or below it, and the resource's record of its rejections does not list "
                      "it, so whether the fence had to refuse it is not known");
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    return sizeof(*this) + names_.state_bytes() + marks_.state_bytes() +
           holding_.bucket_count() * (sizeof(std::uint32_t) + sizeof(std::optional<std::int64_t>) + 1) +
           items_.capacity() * sizeof(Item) + candidates_.capacity() * sizeof(Candidate) + unsaid_held_.capacity() / 8 +
           first_ok_.bucket_count() * (sizeof(Triple) + sizeof(std::size_t) + 1);
  }

 private:
  /// An unjustified rejection: a write.fail (`index`), or a record of the read-back (index kNone).
  struct Item {
    std::size_t index = kNone;
    std::uint32_t client = 0, key = 0;
    std::int64_t token = 0;
    RejectionMarks::Judged judged;
  };
  /// A rejection at a mark equal to its token: fenced-out's when `held` and its worker's write.ok
  /// of the key and token came first.
  struct Candidate {
    Item item;
    bool held = false;
  };
  struct Triple {
    std::uint32_t worker = 0, key = 0;
    std::int64_t token = 0;
    bool operator==(const Triple&) const = default;
  };
  struct TripleHash {
    std::size_t operator()(const Triple& t) const noexcept {
      return mark_of(mix64(std::uint64_t{t.worker} << 32 | t.key), t.token);
    }
  };

  /// Whether `worker`'s latest acquire.ok so far has `token`.
  bool holds(std::string_view worker, std::int64_t token) {
    const auto it = holding_.find(names_.id(worker));
    return it != holding_.end() && it->second == token;
  }

  /// A write.fail found unjustified: a candidate when its token equals the mark.
  void found(const Item& item, bool held) {
    if (item.token == item.judged.mark) {
      candidates_.push_back(Candidate{item, held});
      first_ok_.try_emplace(Triple{item.client, item.key, item.token}, kNone);
    } else {
      items_.push_back(item);
    }
  }

  /// The write.fails without a said mark, then the read-back's records; once.
  void decide() {
    if (decided_) return;
    decided_ = true;
    const std::vector<RejectionMarks::Unsaid> unsaid = marks_.resolve(*readback_, *log_);
    for (std::size_t k = 0; k < unsaid.size(); ++k) {
      const RejectionMarks::Unsaid& u = unsaid[k];
      const Item item{u.index, names_.id(u.client), names_.id(u.key), u.token, u.judged.value_or(RejectionMarks::Judged{})};
      if (!u.judged) {
        if (unknown_++ == 0) first_unknown_ = item;
        continue;
      }
      // A bound from the log equal to the token (the mark was at most the token) is a candidate too.
      if (u.judged->unjustified) found(item, unsaid_held_[k]);
    }
    unsaid_held_ = {};
    // The records at a mark equal to their token: fenced-out's when the log shows that client's
    // write of the key with the token (one read of the log, only when there is such a record).
    std::set<std::tuple<std::string_view, std::string_view, std::int64_t>> equal;
    for (const RejectedWrite& r : readback_->rejections)
      if (r.token == r.high_water) equal.emplace(r.client, r.key, r.token);
    std::set<std::tuple<std::string_view, std::string_view, std::int64_t>> own;
    if (!equal.empty())
      for (const LoggedWrite w : *log_)
        if (equal.count({w.client, w.key, w.token})) own.emplace(w.client, w.key, w.token);
    for (const RejectedWrite& r : readback_->rejections) {
      const RejectionMarks::Judged j = RejectionMarks::judge(r);
      if (!j.unjustified || own.count({r.client, r.key, r.token})) continue;
      items_.push_back(Item{kNone, names_.id(r.client), names_.id(r.key), r.token, j});
    }
  }

  /// One anomaly per key, in key order.
  std::vector<Anomaly> build() const {
    std::map<std::string, std::vector<const Item*>> by_key;
    for (const Item& x : items_) by_key[names_.name(x.key)].push_back(&x);
    std::vector<Anomaly> out;
    for (auto& [key, items] : by_key) {
      std::stable_sort(items.begin(), items.end(), [](const Item* a, const Item* b) {
        return (a->index == kNone ? 1 : 0) < (b->index == kNone ? 1 : 0) ||
               ((a->index == kNone) == (b->index == kNone) && a->index < b->index);
      });
      Anomaly a;
      a.name = "unjustified-rejection";
      a.key = key;
      std::size_t history = 0, records = 0;
      std::ostringstream listed;
      std::size_t shown = 0;
      // A write.fail and the resource's record of it are one rejection: listed once, as the history has it.
      std::set<std::tuple<std::uint32_t, std::int64_t, std::int64_t>> seen;  // (client, token, mark)
      for (const Item* x : items) {
        a.tokens.push_back(x->token);
        a.clients.push_back(names_.name(x->client));
        if (x->index == kNone) ++records;
        else {
          ++history;
          a.evidence.push_back(x->index);
        }
        if (x->judged.seq) a.readback_seqs.push_back(*x->judged.seq);
        if (!seen.emplace(x->client, x->token, x->judged.mark).second) continue;
        if (shown == kShown) continue;
        listed << (shown++ > 0 ? "; " : "") << names_.name(x->client) << "'s token " << x->token;
        switch (x->judged.source) {
          case RejectionMarks::Source::kReply: listed << " against the mark " << x->judged.mark << " its reply gave"; break;
          case RejectionMarks::Source::kRecord:
            listed << " against the mark " << x->judged.mark << " the resource recorded";
            break;
          case RejectionMarks::Source::kAcceptLog:
            listed << " (its reply gave no mark), at or above " << x->judged.mark << ", the highest token the accept log "
                   << "shows for " << key << " (seq " << x->judged.seq.value_or(0) << ")";
            break;
        }
      }
      if (seen.size() > kShown) listed << "; and " << seen.size() - kShown << " more";
      std::ostringstream d;
      d << "writes to " << key << " were rejected although their tokens were at or above the key's high-water mark: "
        << listed.str() << " (" << history << " write.fail event(s), " << records
        << " rejection(s) recorded by the resource). A token equal to or above the mark must be accepted (the fencing "
           "rule: only a token below it is refused), so the resource refused writes it had to accept, and these "
           "rejections are no evidence that fencing works";
      a.description = d.str();
      out.push_back(std::move(a));
    }
    return out;
  }

  static constexpr std::size_t kShown = 8;  // distinct rejections spelled out in a description

  const ReadBack* readback_ = nullptr;
  const PackedLog* log_ = nullptr;
  unsigned pass_ = 1;
  bool decided_ = false;
  RejectionMarks marks_;
  StringIds names_;  // workers and keys
  boost::unordered_flat_map<std::uint32_t, std::optional<std::int64_t>> holding_;  // worker -> its latest acquire.ok's token
  std::vector<Item> items_;            // the unjustified rejections (output)
  std::vector<Candidate> candidates_;  // write.fails at a mark equal to their token
  boost::unordered_flat_map<Triple, std::size_t, TripleHash> first_ok_;  // a candidate's triple -> its first write.ok (pass 2)
  std::vector<bool> unsaid_held_;      // per write.fail kept by marks_ (in order): its worker held the token
  std::size_t unknown_ = 0;            // rejections with no known mark
  Item first_unknown_;
};

}  // namespace

std::unique_ptr<StreamRule> make_unjustified_rejection_rule() { return std::make_unique<UnjustifiedRejectionRule>(); }

}  // namespace fencecheck::harness::detail
