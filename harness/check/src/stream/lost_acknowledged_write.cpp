// lost-acknowledged-write (checkers.h says what it finds), in one pass. Each write.ok of a chunk
// (token, segment, chunk; not a side effect) is judged against its slot (key, segment, chunk) in
// the read-back: still there, or else
//   - with an accept log: lost when the log has no record of it, when its slot is empty, or when
//     the slot's write is not later in the log (seq) than this write's latest record. All of that
//     is known when the write.ok comes: decided at once.
//   - without a log: lost when its slot is empty (decided at once), or when the slot's occupant
//     (the read-back's last chunk of the slot) has no write.ok after this write's invoke (its
//     worker's latest write.invoke with its token before it, else the write.ok itself) and the
//     occupant's writer is not a black box. That looks forward: per slot the rule keeps the
//     index of the occupant's latest write.ok so far; a write with an occupant write.ok after its
//     invoke is settled at once, any other waits in its slot's pending list, and the next
//     write.ok of the occupant settles the whole list (it comes after each pending write.ok, so
//     after its invoke). What is still pending at the end is lost unless the occupant's writer is
//     a black box (known only then).
// Anomalies are in write.ok order, as the in-memory checker gave them: finish() sorts them.
// State: per slot of the read-back its chunk and the occupant's latest write.ok (the read-back's
// size, which is held in memory anyway); per logged write id the position of its latest-seq log
// entry is PackedLog::find()'s (the log's own index, shared with the other rules); without a log, each worker's latest write.invoke per token (holdings:
// one entry per token a worker wrote with, kept because a write.ok may come long after its invoke
// and the decision needs it); with a log the invoke is only an anomaly's evidence, so none is kept
// and a second pass (only when there is an anomaly) finds each lost write's invoke; the pending
// writes (without a log: the write.oks of a slot since its occupant's latest write.ok, i.e. the
// writes the stored chunk overwrote before its own acknowledgement: a few per slot in a healthy
// run, but a slot rewritten n times before its occupant's write.ok keeps n entries until then);
// the anomalies found.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {

void LatestWriteInvokes::want(std::string_view worker, std::int64_t token) {
  wanted_only_ = true;
  auto w = by_worker_.find(worker);
  if (w == by_worker_.end()) w = by_worker_.emplace(std::string(worker), Tokens{}).first;
  w->second.try_emplace(token, kNone);
}

void LatestWriteInvokes::observe(std::size_t index, const Event& e) {
  if (e.kind != EventKind::kWriteInvoke || !e.token) return;
  auto worker = by_worker_.find(e.source);
  if (wanted_only_) {
    if (worker == by_worker_.end()) return;
    if (const auto it = worker->second.find(*e.token); it != worker->second.end()) it->second = index;
    return;
  }
  if (worker == by_worker_.end()) worker = by_worker_.emplace(e.source, Tokens{}).first;
  worker->second[*e.token] = index;
}

std::optional<std::size_t> LatestWriteInvokes::of(std::string_view worker, std::int64_t token) const {
  const auto w = by_worker_.find(worker);
  if (w == by_worker_.end()) return std::nullopt;
  const auto it = w->second.find(token);
  if (it == w->second.end() || it->second == kNone) return std::nullopt;
  return it->second;
}

std::size_t LatestWriteInvokes::state_bytes() const {
  std::size_t n = sizeof(*this);
  for (const auto& [worker, tokens] : by_worker_)
    n += sizeof(std::string) + worker.capacity() + sizeof(Tokens) + tokens.bucket_count() * (sizeof(std::int64_t) + sizeof(std::size_t));
  return n;
}

namespace {

class LostAcknowledgedWriteRule final : public StreamRule {
 public:
  std::string_view name() const override { return "lost-acknowledged-write"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext&) override {
    slots_.reserve(readback.chunks.size());
    for (const StoredChunk& c : readback.chunks) slots_[{{}, 0, c.key, c.segment, c.chunk}].chunk = &c;  // the last one holds the slot
    log_ = &log;
    has_log_ = !log.empty();
    slot_count_ = readback.chunks.size();
  }

  void observe(std::size_t i, const Event& e) override {
    if (pass_ > 1) return invoke_of_lost(i, e);
    if (!has_log_) invokes_.observe(i, e);
    if (e.kind != EventKind::kWriteOk || !e.token) return;
    Slot* s = slots_.find({{}, 0, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)});
    const StoredChunk* c = s == nullptr ? nullptr : s->chunk;
    const bool occupant = c && c->token == *e.token && c->client == e.source;
    if (occupant) {
      // A write.ok of the slot's occupant: every write of the slot waiting for one was invoked before it.
      s->occupant_ok = i;
      pending_count_ -= s->pending.size();
      s->pending.clear();
    }
    if (!e.segment || !e.chunk || is_effect_key(e.key)) return;
    if (occupant) return;  // still there
    const std::optional<std::size_t> invoke = has_log_ ? std::nullopt : invokes_.of(e);  // with a log: pass 2
    std::optional<std::int64_t> seq;
    if (const auto p = log_->find(e.source, *e.token, e.key, *e.segment, *e.chunk)) seq = (*log_)[p->latest].seq;
    std::string why;
    if (has_log_) {
      if (!seq) why = "the resource's log has no record of it";
      else if (!c) why = "its slot is empty";
      else if (c->seq > *seq) return;  // superseded by a later accepted write
      else why = "its slot holds an earlier write (seq " + std::to_string(c->seq) + ")";
    } else if (!c) {
      why = "its slot is empty";
    } else {
      if (s->occupant_ok && *s->occupant_ok > invoke.value_or(i)) return;  // superseded by a write acknowledged after this one was sent
      s->pending.push_back(Pending{i, invoke, *e.token, e.source});
      ++pending_count_;
      return;
    }
    found_.emplace_back(i, lost(e.key, *e.segment, *e.chunk, e.source, *e.token, i, invoke, seq, c, why));
  }

  /// With a log, a second pass when a write was lost: the invoke each lost write answers.
  bool wants_another_pass() override {
    if (pass_ > 1 || !has_log_ || found_.empty()) return false;
    invokes_ = {};
    for (const auto& [index, a] : found_) invokes_.want(a.clients.front(), a.tokens.front());
    return true;
  }
  void begin_pass(unsigned pass) override {
    pass_ = pass;
    next_found_ = 0;
  }
  std::uint64_t kinds() const override {  // pass 1 with the accept log: observe() reads write.oks only
    return pass_ == 1 && has_log_ ? bit(EventKind::kWriteOk) : kAllEventKinds;
  }

  CheckerResult finish(const StreamEnd& end) override {
    // Still pending: no write.ok of the occupant came after the write's invoke. A black box's
    // acknowledgements are not in the history, so its slot may have superseded the write legitimately.
    slots_.for_each([&](const Slot& s) {
      const StoredChunk* c = s.chunk;
      if (s.pending.empty() || std::binary_search(end.black_box.begin(), end.black_box.end(), c->client)) return;
      for (const Pending& p : s.pending)
        found_.emplace_back(p.index, lost(c->key, c->segment, c->chunk, p.source, p.token, p.index, p.invoke, std::nullopt, c,
                                          "its slot holds token " + std::to_string(c->token) + " by " + c->client +
                                              ", which was not acknowledged after this write was sent"));
    });
    std::stable_sort(found_.begin(), found_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Anomaly> anomalies;
    anomalies.reserve(found_.size());
    for (auto& [index, a] : found_) anomalies.push_back(std::move(a));
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + invokes_.state_bytes() + slot_count_ * (sizeof(WriteKey) + sizeof(Slot)) +
                    pending_count_ * sizeof(Pending);
    for (const auto& [index, a] : found_) n += sizeof(index) + sizeof(a) + a.description.capacity();
    return n;
  }

 private:
  /// A write.ok waiting for a later write.ok of its slot's occupant.
  struct Pending {
    std::size_t index = 0;
    std::optional<std::size_t> invoke;
    std::int64_t token = 0;
    std::string source;
  };
  /// A slot of the read-back: its chunk, the occupant's latest write.ok so far, the writes waiting.
  struct Slot {
    const StoredChunk* chunk = nullptr;
    std::optional<std::size_t> occupant_ok;
    std::vector<Pending> pending;
  };

  static Anomaly lost(const std::string& key, std::int64_t segment, std::int64_t chunk, const std::string& source,
                      std::int64_t token, std::size_t index, std::optional<std::size_t> invoke,
                      std::optional<std::int64_t> seq, const StoredChunk* c, const std::string& why) {
    Anomaly a;
    a.name = "lost-acknowledged-write";
    a.key = key;
    a.segment = segment;
    a.tokens.push_back(token);
    a.clients.push_back(source);
    a.evidence.push_back(index);
    if (invoke) a.evidence.push_back(*invoke);
    if (seq) a.readback_seqs.push_back(*seq);
    if (c) {
      a.readback_seqs.push_back(c->seq);
      a.tokens.push_back(c->token);
      a.clients.push_back(c->client);
    }
    a.description = "the resource acknowledged " + slot(key, segment, chunk) + " from " + source + " (token " +
                    std::to_string(token) + ") but no longer shows it and nothing superseded it: " + why;
    return a;
  }

  /// Pass 2 (with a log): the latest write.invoke of each lost write's (worker, token) so far; a
  /// lost write's write.ok (the next of found_, which pass 1 filled in history order) takes it.
  void invoke_of_lost(std::size_t i, const Event& e) {
    invokes_.observe(i, e);
    if (next_found_ >= found_.size() || found_[next_found_].first != i) return;
    Anomaly& a = found_[next_found_++].second;
    if (const auto invoke = invokes_.of(a.clients.front(), a.tokens.front())) a.evidence.push_back(*invoke);
  }

  unsigned pass_ = 1;
  std::size_t next_found_ = 0;
  WriteMap<Slot> slots_;          // (key, segment, chunk) -> the slot (views into the read-back)
  const PackedLog* log_ = nullptr;  // find(): a write's latest-seq entry
  bool has_log_ = false;
  std::size_t slot_count_ = 0, pending_count_ = 0;
  LatestWriteInvokes invokes_;  // without a log: every worker's; with one, pass 2: the lost writes' pairs
  std::vector<std::pair<std::size_t, Anomaly>> found_;  // (write.ok index, anomaly), decided out of order
};

}  // namespace

std::unique_ptr<StreamRule> make_lost_acknowledged_write_rule() { return std::make_unique<LostAcknowledgedWriteRule>(); }

}  // namespace fencecheck::harness::detail
