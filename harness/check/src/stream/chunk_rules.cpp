// interleaved-segment and corrupt-chunk (checkers.h says what each finds): both are decided by the
// read-back's chunks alone, before the history is read; the history only adds the write.ok events
// that wrote the chunks, as evidence.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
  bool reads_log() const override { return false; }

  void begin(const ReadBack& readback, const PackedLog&, const CheckContext&) override {
    struct Provenance {
      const StoredChunk* chunk;
      std::int64_t token;
      std::string client;
      std::string note;  // disagreement between the bytes and the store's metadata, if any
    };
    std::map<std::pair<std::string, std::int64_t>, std::vector<Provenance>> segments;
    for (const StoredChunk& c : readback.chunks) {
      Provenance p{&c, c.token, c.client, {}};
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
    }
  }
};

class CorruptChunkRule final : public ReadBackRule {
 public:
  std::string_view name() const override { return "corrupt-chunk"; }
  bool reads_log() const override { return false; }

  void begin(const ReadBack& readback, const PackedLog&, const CheckContext&) override {
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
};

}  // namespace

std::unique_ptr<StreamRule> make_interleaved_segment_rule() { return std::make_unique<InterleavedSegmentRule>(); }
std::unique_ptr<StreamRule> make_corrupt_chunk_rule() { return std::make_unique<CorruptChunkRule>(); }

}  // namespace fencecheck::harness::detail
