// interleaved-segment and corrupt-chunk (checkers.h says what each finds): both are decided by the
// read-back alone (the chunks; interleaved-segment also the accept log), before the history is
// read; the history only adds the write.ok events that wrote the chunks, as evidence.
// With job.payload opaque (CheckContext::payload) the bytes are the system's own: corrupt-chunk
// says unknown (kOpaquePayloadReason) and interleaved-segment never decodes them, taking each
// chunk's provenance from the resource's token and writer columns.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "../internal.h"
#include "fencecheck/proto/chunk.h"
#include "stream_rules.h"

namespace fencecheck::harness::detail {

void WriteCitations::want(const WriteId& id, std::size_t anomaly) {
  const std::string_view source = strings_.emplace_back(id.source);
  const std::string_view key = strings_.emplace_back(id.key);
  wanted_[WriteId{source, id.token, key, id.segment, id.chunk}].push_back(anomaly);
  ++wants_;
}

std::size_t WriteCitations::state_bytes() const {
  std::size_t n = sizeof(*this) + wants_ * (2 * sizeof(std::string) + sizeof(WriteId) + 2 * sizeof(std::size_t));
  for (const auto& s : strings_) n += s.capacity();
  return n;
}

namespace {

/// A rule decided by the read-back alone: begin() builds the anomalies, the history adds evidence.
class ReadBackRule : public StreamRule {
 public:
  void observe(std::size_t index, const Event& e) override { citations_.observe(index, e, anomalies_); }
  std::uint64_t kinds() const override { return bit(EventKind::kWriteOk); }  // WriteCitations cites write.oks only
  CheckerResult finish(const StreamEnd&) override { return result_of(name(), std::move(anomalies_)); }
  std::size_t state_bytes() const override {
    std::size_t n = sizeof(*this) + citations_.state_bytes();
    for (const auto& a : anomalies_) n += sizeof(a) + a.description.capacity() + a.evidence.capacity() * sizeof(std::size_t);
    return n;
  }

 protected:
  std::vector<Anomaly> anomalies_;
  WriteCitations citations_;
};

class InterleavedSegmentRule final : public ReadBackRule {
 public:
  std::string_view name() const override { return "interleaved-segment"; }

  void begin(const ReadBack& readback, const PackedLog& log, const CheckContext& context) override {
    final_contents(readback, context.payload == PayloadMode::kOpaque);
    alternation_in_log(log);
  }

 private:
  /// A segment's final contents from more than one holding (token, writer). Each chunk's
  /// provenance is what its bytes say when they decode, else the store's columns; `opaque`: the
  /// columns alone (the bytes are the system's own and say nothing about who wrote them).
  void final_contents(const ReadBack& readback, bool opaque) {
    struct Provenance {
      const StoredChunk* chunk;
      std::int64_t token;
      std::string client;
      std::string note;  // disagreement between the bytes and the store's metadata, if any
    };
    std::map<std::pair<std::string, std::int64_t>, std::vector<Provenance>> segments;
    for (const StoredChunk& c : readback.chunks) {
      Provenance p{&c, c.token, c.client, {}};
      if (opaque) {
        segments[{c.key, c.segment}].push_back(std::move(p));
        continue;
      }
      ChunkDecode d = decode_chunk(c.data);
      if (d.ok) {
        p.token = d.header.token;
        p.client = d.header.worker;
        if (d.header.token != c.token || d.header.worker != c.client)
          p.note = "chunk " + std::to_string(c.chunk) + "'s bytes say token " + std::to_string(d.header.token) +
                   " by " + d.header.worker + " but the store recorded token " + std::to_string(c.token) + " by " +
                   c.client;
      } else {
        p.note = "chunk " + std::to_string(c.chunk) + " does not decode (" + d.error + "); using the store's metadata";
      }
      segments[{c.key, c.segment}].push_back(std::move(p));
    }

    for (const auto& [where, chunks] : segments) {
      // One holding = one (token, writer): a segment is whole when one holding wrote all of it. Two
      // writers under one token is two holdings too (a token that is not the issuer's, e.g. a
      // client library that hands out none and a constant sent instead), and the bytes prove it.
      std::map<std::pair<std::int64_t, std::string>, std::vector<std::int64_t>> by_holding;
      std::set<std::int64_t> tokens;
      for (const auto& p : chunks) {
        by_holding[{p.token, p.client}].push_back(p.chunk->chunk);
        tokens.insert(p.token);
      }
      if (by_holding.size() < 2) continue;
      const std::size_t at = anomalies_.size();
      Anomaly& a = anomalies_.emplace_back();
      a.name = "interleaved-segment";
      a.key = where.first;
      a.segment = where.second;
      std::vector<std::string> parts;
      for (const auto& [holding, which] : by_holding) {
        a.tokens.push_back(holding.first);
        a.clients.push_back(holding.second);
        parts.push_back("chunk" + std::string(which.size() > 1 ? "s " : " ") + join(which) + " by " + holding.second +
                        " (token " + std::to_string(holding.first) + ")");
      }
      std::vector<std::string> notes;
      for (const auto& p : chunks) {
        const StoredChunk& c = *p.chunk;
        a.readback_seqs.push_back(c.seq);
        citations_.want({c.client, c.token, c.key, c.segment, c.chunk}, at);
        if (p.client != c.client || p.token != c.token) citations_.want({p.client, p.token, c.key, c.segment, c.chunk}, at);
        if (!p.note.empty()) notes.push_back(p.note);
      }
      a.description = where.first + " segment " + std::to_string(where.second) + " holds chunks written under " +
                      (tokens.size() > 1 ? std::to_string(tokens.size()) + " fencing tokens: "
                                         : "one fencing token by " + std::to_string(by_holding.size()) +
                                               " writers (two holders presented the same token): ") +
                      join(parts, "; ");
      if (!notes.empty()) a.description += " [" + join(notes, "; ") + "]";
      flagged_.insert({where.first, where.second});
    }
  }

  /// A holding (token, writer id) in the accept log, and a segment (key id, segment).
  using Holding = std::pair<std::int64_t, std::uint32_t>;
  using Segment = std::pair<std::uint32_t, std::int64_t>;
  static std::uint64_t fingerprint(const Segment& s, const Holding& h) {
    return mix64(mix64((std::uint64_t{s.first} << 32) ^ std::uint64_t{h.second}) ^
                 mix64(static_cast<std::uint64_t>(s.second) * 0x9e3779b97f4a7c15ULL) ^ static_cast<std::uint64_t>(h.first));
  }

  /// Issue 31 item 5: the final contents show only the last writers; the accept log shows the
  /// order. A segment whose chunk writes, in acceptance order, go to holding A, then to another
  /// holding B, then to A again (A-B-A) had two holders writing it at once, whatever is left at the
  /// end: a correct handover is A...A B...B (a fenced resource rejects A once B has written). Two
  /// writers under one token are two holdings (a token that is not the issuer's). Segments the
  /// final contents already flag are not reported twice.
  /// Two reads of the in-memory log: the first keeps each segment's latest holding and a 64-bit
  /// fingerprint of each holding a segment moved away from (one per handover); a holding coming
  /// back whose fingerprint is there makes its segment a suspect. The second read replays only the
  /// suspects exactly (a fingerprint collision is never reported). Memory: segments + handovers,
  /// freed before the history is read.
  void alternation_in_log(const PackedLog& log) {
    boost::unordered_flat_set<Segment, boost::hash<Segment>> suspects;
    {
      boost::unordered_flat_map<Segment, Holding, boost::hash<Segment>> latest;
      boost::unordered_flat_set<std::uint64_t> left;
      for (const LoggedWrite w : log) {
        if (w.kind != WriteKind::kChunk) continue;
        const Segment s{w.key_id, w.segment};
        const Holding h{w.token, w.client_id};
        auto [it, fresh] = latest.try_emplace(s, h);
        if (fresh || it->second == h) continue;
        left.insert(fingerprint(s, it->second));
        if (left.contains(fingerprint(s, h))) suspects.insert(s);
        it->second = h;
      }
    }
    if (suspects.empty()) return;
    struct Exact {
      Holding latest{};
      std::size_t latest_first = 0, latest_last = 0;  // the latest holding's run: its first and last entries
      std::map<Holding, std::size_t> left;            // holding -> its last entry before the segment moved on
      bool found = false;
    };
    std::map<Segment, Exact> exact;
    for (std::size_t i = 0; i < log.size(); ++i) {
      const LoggedWrite w = log[i];
      if (w.kind != WriteKind::kChunk) continue;
      const Segment s{w.key_id, w.segment};
      if (!suspects.contains(s)) continue;
      const Holding h{w.token, w.client_id};
      auto [it, fresh] = exact.try_emplace(s);
      Exact& x = it->second;
      if (fresh || x.latest == h) {
        if (fresh) {
          x.latest = h;
          x.latest_first = i;
        }
        x.latest_last = i;
        continue;
      }
      x.left[x.latest] = x.latest_last;
      const std::size_t between_first = x.latest_first;
      x.latest = h;
      x.latest_first = x.latest_last = i;
      const auto back = x.left.find(h);
      if (x.found || back == x.left.end()) continue;
      x.found = true;  // one anomaly per segment, at its first return
      if (flagged_.count({std::string(w.key), w.segment})) continue;
      report(s, log[back->second], log[between_first], w);
    }
  }

  /// One anomaly: `first` (A's last write before the segment moved on), `other` (the first write
  /// of the holding just before A came back), `again` (A's return).
  void report(const Segment& s, const LoggedWrite& first, const LoggedWrite& other, const LoggedWrite& again) {
    const std::size_t at = anomalies_.size();
    Anomaly& a = anomalies_.emplace_back();
    a.name = "interleaved-segment";
    a.key = std::string(first.key);
    a.segment = s.second;
    for (const LoggedWrite* w : {&first, &other, &again}) {
      a.tokens.push_back(w->token);
      a.clients.emplace_back(w->client);
      a.readback_seqs.push_back(w->seq);
      citations_.want({w->client, w->token, w->key, w->segment, w->chunk}, at);
    }
    auto holding = [](const LoggedWrite& w) {
      return std::string(w.client) + " (token " + std::to_string(w.token) + ")";
    };
    auto entry = [](const LoggedWrite& w) {
      return "chunk " + std::to_string(w.chunk) + " at seq " + std::to_string(w.seq);
    };
    a.description = a.key + " segment " + std::to_string(s.second) +
                    ": the accept log shows two holdings writing it by turns: " + holding(first) + " wrote " +
                    entry(first) + ", then " + holding(other) + " " + entry(other) + ", then " + holding(again) +
                    " again " + entry(again) +
                    (first.token == other.token ? " (two writers under one token: two holders presented the same token)"
                                                : "") +
                    ", whatever the segment's final contents show";
  }

  std::set<std::pair<std::string, std::int64_t>> flagged_;  // segments the final contents flag
};

class CorruptChunkRule final : public ReadBackRule {
 public:
  std::string_view name() const override { return "corrupt-chunk"; }
  bool reads_log() const override { return false; }

  CheckerResult finish(const StreamEnd& end) override {
    if (opaque_) return unknown_result(name(), std::string(kOpaquePayloadReason));
    return ReadBackRule::finish(end);
  }

  void begin(const ReadBack& readback, const PackedLog&, const CheckContext& context) override {
    // The bytes are the system's own: no chunk format to hold them to (run_checkers() does not run
    // this rule then; a caller that does gets the same answer).
    opaque_ = context.payload == PayloadMode::kOpaque;
    if (opaque_) return;
    for (const StoredChunk& c : readback.chunks) {
      ChunkDecode d = decode_chunk(c.data);
      Anomaly a;
      a.name = "corrupt-chunk";
      a.key = c.key;
      a.segment = c.segment;
      a.tokens.push_back(c.token);
      a.clients.push_back(c.client);
      a.readback_seqs.push_back(c.seq);
      const std::size_t at = anomalies_.size();
      const std::string where = slot(c.key, c.segment, c.chunk) + " (seq " + std::to_string(c.seq) + ", token " +
                                std::to_string(c.token) + " from " + c.client + " per the store)";
      if (!d.ok) {
        citations_.want({c.client, c.token, c.key, c.segment, c.chunk}, at);
        a.description = where + " does not decode: " + d.error;
        anomalies_.push_back(std::move(a));
        continue;
      }
      const ChunkHeader& h = d.header;
      std::vector<std::string> diffs;
      if (h.worker != c.client) diffs.push_back("worker " + h.worker + " (store: " + c.client + ")");
      if (h.token != c.token) diffs.push_back("token " + std::to_string(h.token) + " (store: " + std::to_string(c.token) + ")");
      if (h.key != c.key) diffs.push_back("key " + h.key + " (store: " + c.key + ")");
      if (h.segment != c.segment)
        diffs.push_back("segment " + std::to_string(h.segment) + " (store: " + std::to_string(c.segment) + ")");
      if (h.chunk != c.chunk) diffs.push_back("chunk " + std::to_string(h.chunk) + " (store: " + std::to_string(c.chunk) + ")");
      if (diffs.empty()) continue;
      citations_.want({c.client, c.token, c.key, c.segment, c.chunk}, at);
      a.tokens.push_back(h.token);
      a.clients.push_back(h.worker);
      citations_.want({h.worker, h.token, h.key, h.segment, h.chunk}, at);
      a.description = where + " describes itself differently: its bytes say " + join(diffs);
      anomalies_.push_back(std::move(a));
    }
  }

 private:
  bool opaque_ = false;
};

}  // namespace

std::unique_ptr<StreamRule> make_interleaved_segment_rule() { return std::make_unique<InterleavedSegmentRule>(); }
std::unique_ptr<StreamRule> make_corrupt_chunk_rule() { return std::make_unique<CorruptChunkRule>(); }

}  // namespace fencecheck::harness::detail
