// counter-drift (checkers.h says what it finds), in one pass: the read-back's counters are read
// first; each increment (a write.ok or write.info without a chunk, CounterTally, which the figures
// share) is counted as the history goes by; at the end each key's counter is judged against its
// acknowledged and unknown increments, and an anomalous key cites its write.oks that wrote the same
// new value ("-> N") twice, else every write.ok of the key.
// State: per key its counts (live), and per key a compact log of its write.oks: which key drifts
// is known only at the end (the final counts, the black-box workers), and then its evidence may be
// any of its write.oks, so none can be forgotten. The log holds, per write.ok, its index and the
// value it wrote as deltas from the previous one's (varints: about 2 bytes per increment in a
// steady run, never more than 20), and (client, token) only when they change (24 bytes, about
// once per holding that incremented the key). That log is this rule's remaining growth: a few
// bytes per acknowledged increment and per holding (tests/check/stream_check_test.cpp,
// StreamCounterDrift).
#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "../internal.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {
namespace {

/// The new value a counter write.ok reports: the number after its detail's last "-> ".
std::optional<std::int64_t> written_value(const Event& e) {
  const auto arrow = e.detail.rfind("-> ");
  std::int64_t value = 0;
  if (arrow == std::string::npos) return std::nullopt;
  const char* first = e.detail.data() + arrow + 3;
  const char* last = e.detail.data() + e.detail.size();
  if (std::from_chars(first, last, value).ec != std::errc()) return std::nullopt;
  return value;
}

/// One key's write.oks (without a chunk), compactly: see the header comment.
class IncrementLog {
 public:
  struct Entry {
    std::size_t index = 0;
    std::optional<std::int64_t> value;
    std::size_t holder = 0;  ///< position in holders()
  };
  struct Holder {
    std::uint64_t from = 0;    ///< the first entry written by this (client, token)
    std::int64_t token = 0;
    std::uint32_t client = 0;  ///< in the rule's client names
    bool has_token = false;
  };

  /// e's write.ok, its client being client names[`client`].
  void add(std::size_t index, const Event& e, std::uint32_t client) {
    const std::int64_t token = e.token.value_or(0);
    if (holders_.empty() || holders_.back().client != client || holders_.back().has_token != e.token.has_value() ||
        holders_.back().token != token)
      holders_.push_back(Holder{count_, token, client, e.token.has_value()});
    const std::optional<std::int64_t> value = written_value(e);
    put((static_cast<std::uint64_t>(index - last_index_) << 1) | (value ? 1u : 0u));
    if (value) {
      // The difference modulo 2^64, zigzagged so that a small step either way is a short varint.
      const std::uint64_t d = static_cast<std::uint64_t>(*value) - last_value_;
      put((d << 1) ^ (0 - (d >> 63)));
      last_value_ = static_cast<std::uint64_t>(*value);
    }
    last_index_ = index;
    ++count_;
  }

  /// Every entry, in history order.
  [[nodiscard]] std::vector<Entry> entries() const {
    std::vector<Entry> out;
    out.reserve(count_);
    std::size_t at = 0, index = 0, holder = 0;
    std::uint64_t value = 0;
    for (std::size_t k = 0; k < count_; ++k) {
      const std::uint64_t head = get(at);
      index += static_cast<std::size_t>(head >> 1);
      Entry entry{index, std::nullopt, 0};
      if (head & 1u) {
        const std::uint64_t z = get(at);
        value += (z >> 1) ^ (0 - (z & 1u));
        entry.value = static_cast<std::int64_t>(value);
      }
      while (holder + 1 < holders_.size() && holders_[holder + 1].from <= k) ++holder;
      entry.holder = holder;
      out.push_back(entry);
    }
    return out;
  }
  [[nodiscard]] const std::vector<Holder>& holders() const { return holders_; }

  [[nodiscard]] std::size_t state_bytes() const {
    return sizeof(*this) + bytes_.capacity() + holders_.capacity() * sizeof(Holder);
  }

 private:
  void put(std::uint64_t v) {
    while (v >= 0x80) {
      bytes_.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    bytes_.push_back(static_cast<char>(v));
  }
  [[nodiscard]] std::uint64_t get(std::size_t& at) const {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<unsigned char>(bytes_[at++]);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  }

  std::string bytes_;
  std::size_t count_ = 0;
  std::size_t last_index_ = 0;
  std::uint64_t last_value_ = 0;
  std::vector<Holder> holders_;
};

class CounterDriftRule final : public StreamRule {
 public:
  std::string_view name() const override { return "counter-drift"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) override {
    readback_ = &readback;
    log_ = &log;
    job_kind_ = context.job_kind;
    tally_.emplace(readback);
  }

  std::uint64_t kinds() const override {  // observe(): nothing without counters; CounterTally's two kinds
    if (readback_->counters.empty() && job_kind_ != JobKind::kCounter) return 0;
    return bit(EventKind::kWriteOk) | bit(EventKind::kWriteInfo);
  }

  void observe(std::size_t index, const Event& e) override {
    // Without counters in the read-back, a job that is not a counter job has none to judge.
    if (readback_->counters.empty() && job_kind_ != JobKind::kCounter) return;
    tally_->observe(e);
    if (e.kind != EventKind::kWriteOk || e.chunk) return;
    // The write.oks an anomaly about e.key would cite: those of every key that can have a figure.
    if ((e.key.empty() || is_effect_key(e.key)) && !readback_->counters.contains(e.key)) return;
    auto it = logs_.find(e.key);
    if (it == logs_.end()) it = logs_.emplace(e.key, IncrementLog{}).first;
    auto client = client_ids_.find(e.source);
    if (client == client_ids_.end()) {
      client = client_ids_.emplace(e.source, static_cast<std::uint32_t>(clients_.size())).first;
      clients_.push_back(e.source);
    }
    it->second.add(index, e, client->second);
  }

  CheckerResult finish(const StreamEnd& end) override {
    const ReadBack& readback = *readback_;
    const std::vector<CounterFigure> figures = std::move(*tally_).take();
    if (job_kind_ == JobKind::kCounter && readback.counters.empty()) {
      const bool acknowledged =
          std::any_of(figures.begin(), figures.end(), [](const CounterFigure& c) { return c.acknowledged > 0; });
      if (acknowledged)
        return unknown_result(name(), "increments were acknowledged but the resource's read-back lists no counters");
    }
    if (readback.counters.empty() && job_kind_ != JobKind::kCounter) return result_of(name(), {});
    // A black-box worker's increments are applied but never acknowledged in the history: a counter
    // above the acknowledged count proves nothing then (only one below it does: a silent worker's
    // increments can only add). run_checkers() makes a valid result unknown, naming them.
    const bool silent = !end.black_box.empty();
    std::vector<Anomaly> anomalies;
    for (const CounterFigure& c : figures) {
      const std::int64_t actual = c.actual.value_or(0);
      if (actual >= c.acknowledged && (silent || actual <= c.acknowledged + c.unknown)) continue;
      Anomaly a;
      a.name = "counter-drift";
      a.key = c.key;
      // Lost updates: two acknowledged increments that wrote the same new value.
      std::vector<IncrementLog::Entry> all;
      const IncrementLog* log = nullptr;
      if (const auto it = logs_.find(c.key); it != logs_.end()) {
        log = &it->second;
        all = log->entries();
      }
      auto cite = [&](const IncrementLog::Entry& entry) {
        const IncrementLog::Holder& h = log->holders()[entry.holder];
        a.evidence.push_back(entry.index);
        a.clients.push_back(clients_[h.client]);
        if (h.has_token) a.tokens.push_back(h.token);
      };
      std::map<std::int64_t, std::vector<const IncrementLog::Entry*>> by_value;
      for (const auto& entry : all)
        if (entry.value) by_value[*entry.value].push_back(&entry);
      std::vector<std::int64_t> twice;
      for (const auto& [value, list] : by_value)
        if (list.size() > 1) {
          twice.push_back(value);
          for (const auto* entry : list) cite(*entry);
          for (const LoggedWrite w : *log_)
            if (w.key == c.key && w.kind == WriteKind::kCounter && w.value == value) a.readback_seqs.push_back(w.seq);
        }
      if (a.evidence.empty())
        for (const auto& entry : all) cite(entry);
      std::ostringstream d;
      d << "counter " << c.key << " is " << (c.actual ? std::to_string(actual) : std::string("absent (0)")) << " but "
        << c.acknowledged << " increment(s) were acknowledged";
      if (c.unknown > 0) d << " (and " << c.unknown << " had an unknown outcome)";
      if (actual < c.acknowledged) d << ": " << (c.acknowledged - actual) << " acknowledged increment(s) lost";
      else d << ": " << (actual - c.acknowledged - c.unknown) << " increment(s) more than were sent";
      if (!twice.empty()) d << "; holders wrote the same new value twice (" << join(twice) << "): read-modify-write races";
      a.description = d.str();
      anomalies.push_back(std::move(a));
    }
    return result_of(name(), std::move(anomalies));
  }

  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + (tally_ ? tally_->state_bytes() : 0);
    for (const auto& [key, log] : logs_) n += 32 + sizeof(key) + key.capacity() + log.state_bytes();
    n += clients_.capacity() * sizeof(std::string);
    for (const auto& c : clients_) n += 32 + sizeof(c) + sizeof(std::uint32_t) + 2 * c.capacity();
    return n;
  }

 private:
  const ReadBack* readback_ = nullptr;
  const PackedLog* log_ = nullptr;
  std::optional<JobKind> job_kind_;
  std::optional<CounterTally> tally_;
  std::map<std::string, IncrementLog, std::less<>> logs_;
  std::vector<std::string> clients_;  ///< the write.oks' clients (workers: live)
  std::map<std::string, std::uint32_t, std::less<>> client_ids_;
};

}  // namespace

std::unique_ptr<StreamRule> make_counter_drift_rule() { return std::make_unique<CounterDriftRule>(); }

}  // namespace fencecheck::harness::detail
