#include "fencecheck/harness/checkers.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "fencecheck/proto/chunk.h"

namespace fencecheck::harness {

namespace {

/// (source, token, key, segment, chunk): what identifies one write in the history.
using WriteId = std::tuple<std::string, std::int64_t, std::string, std::int64_t, std::int64_t>;

/// History indices of the events of one kind, by the write they are about.
std::map<WriteId, std::vector<std::size_t>> index_writes(const History& h, EventKind kind) {
  std::map<WriteId, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const Event& e = h[i];
    if (e.kind != kind || !e.token) continue;
    out[{e.source, *e.token, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)}].push_back(i);
  }
  return out;
}

void append_matches(const std::map<WriteId, std::vector<std::size_t>>& index, const WriteId& id,
                    std::vector<std::size_t>& out) {
  auto it = index.find(id);
  if (it != index.end()) out.insert(out.end(), it->second.begin(), it->second.end());
}

std::string slot(const std::string& key, std::int64_t segment, std::int64_t chunk) {
  return key + " segment " + std::to_string(segment) + " chunk " + std::to_string(chunk);
}

template <typename T>
std::string join(const std::vector<T>& items, const std::string& sep = ", ") {
  std::ostringstream o;
  for (std::size_t i = 0; i < items.size(); ++i) o << (i ? sep : "") << items[i];
  return o.str();
}

CheckerResult result_of(std::string_view name, std::vector<Anomaly> anomalies) {
  CheckerResult r;
  r.name = std::string(name);
  for (auto& a : anomalies) normalize(a);
  r.verdict = anomalies.empty() ? Verdict::kValid : Verdict::kInvalid;
  r.anomalies = std::move(anomalies);
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

CheckerResult InterleavedSegmentChecker::check(const History& history, const ReadBack& readback) const {
  auto oks = index_writes(history, EventKind::kWriteOk);

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

  std::vector<Anomaly> anomalies;
  for (const auto& [where, chunks] : segments) {
    std::map<std::int64_t, std::pair<std::set<std::string>, std::vector<std::int64_t>>> by_token;
    for (const auto& p : chunks) {
      by_token[p.token].first.insert(p.client);
      by_token[p.token].second.push_back(p.chunk->chunk);
    }
    if (by_token.size() < 2) continue;
    Anomaly a;
    a.name = "interleaved-segment";
    a.key = where.first;
    a.segment = where.second;
    std::vector<std::string> parts;
    for (const auto& [token, who] : by_token) {
      a.tokens.push_back(token);
      for (const auto& c : who.first) a.clients.push_back(c);
      std::vector<std::string> clients(who.first.begin(), who.first.end());
      parts.push_back("chunk" + std::string(who.second.size() > 1 ? "s " : " ") + join(who.second) + " by " +
                      join(clients) + " (token " + std::to_string(token) + ")");
    }
    std::vector<std::string> notes;
    for (const auto& p : chunks) {
      const StoredChunk& c = *p.chunk;
      a.readback_seqs.push_back(c.seq);
      append_matches(oks, {c.client, c.token, c.key, c.segment, c.chunk}, a.evidence);
      if (p.client != c.client || p.token != c.token)
        append_matches(oks, {p.client, p.token, c.key, c.segment, c.chunk}, a.evidence);
      if (!p.note.empty()) notes.push_back(p.note);
    }
    a.description = where.first + " segment " + std::to_string(where.second) + " holds chunks written under " +
                    std::to_string(by_token.size()) + " fencing tokens: " + join(parts, "; ");
    if (!notes.empty()) a.description += " [" + join(notes, "; ") + "]";
    anomalies.push_back(std::move(a));
  }
  return result_of(name(), std::move(anomalies));
}

// ---------------------------------------------------------------------------------------------

CheckerResult CorruptChunkChecker::check(const History& history, const ReadBack& readback) const {
  auto oks = index_writes(history, EventKind::kWriteOk);
  std::vector<Anomaly> anomalies;
  for (const StoredChunk& c : readback.chunks) {
    ChunkDecode d = decode_chunk(c.data);
    Anomaly a;
    a.name = "corrupt-chunk";
    a.key = c.key;
    a.segment = c.segment;
    a.tokens.push_back(c.token);
    a.clients.push_back(c.client);
    a.readback_seqs.push_back(c.seq);
    append_matches(oks, {c.client, c.token, c.key, c.segment, c.chunk}, a.evidence);
    const std::string where = slot(c.key, c.segment, c.chunk) + " (seq " + std::to_string(c.seq) + ", token " +
                              std::to_string(c.token) + " from " + c.client + " per the store)";
    if (!d.ok) {
      a.description = where + " does not decode: " + d.error;
      anomalies.push_back(std::move(a));
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
    a.tokens.push_back(h.token);
    a.clients.push_back(h.worker);
    append_matches(oks, {h.worker, h.token, h.key, h.segment, h.chunk}, a.evidence);
    a.description = where + " describes itself differently: its bytes say " + join(diffs);
    anomalies.push_back(std::move(a));
  }
  return result_of(name(), std::move(anomalies));
}

// ---------------------------------------------------------------------------------------------

CheckerResult StaleWriteAcceptedChecker::check(const History& history, const ReadBack& readback) const {
  // One group per (key, client, stale token).
  struct Group {
    Anomaly a;
    std::set<std::int64_t> segments;
    std::set<std::int64_t> log_seqs;       // stale entries in the store's log
    std::set<std::size_t> history_oks;     // stale write.ok events
    std::set<std::int64_t> above;          // the higher tokens already accepted
  };
  std::map<std::tuple<std::string, std::string, std::int64_t>, Group> groups;
  auto group = [&](const std::string& key, const std::string& client, std::int64_t token) -> Group& {
    Group& g = groups[{key, client, token}];
    if (g.a.name.empty()) {
      g.a.name = "stale-write-accepted";
      g.a.key = key;
      g.a.tokens.push_back(token);
      g.a.clients.push_back(client);
    }
    return g;
  };
  auto oks = index_writes(history, EventKind::kWriteOk);

  // 1. The store's own log, per key in acceptance order.
  std::vector<AcceptedWrite> log = readback.log;
  std::stable_sort(log.begin(), log.end(), [](const auto& x, const auto& y) { return x.seq < y.seq; });
  std::map<std::string, const AcceptedWrite*> max_by_key;
  for (const AcceptedWrite& w : log) {
    const AcceptedWrite*& top = max_by_key[w.key];
    if (top && w.token < top->token) {
      Group& g = group(w.key, w.client, w.token);
      g.segments.insert(w.segment);
      g.log_seqs.insert(w.seq);
      g.above.insert(top->token);
      g.a.tokens.push_back(top->token);
      g.a.clients.push_back(top->client);
      g.a.readback_seqs.push_back(w.seq);
      g.a.readback_seqs.push_back(top->seq);
      append_matches(oks, {w.client, w.token, w.key, w.segment, w.chunk}, g.a.evidence);
      append_matches(oks, {top->client, top->token, top->key, top->segment, top->chunk}, g.a.evidence);
    }
    if (!top || w.token > top->token) top = &w;
  }

  // 2. The history, in real-time order: B is stale when, before B was even invoked, a write.ok
  //    for the same key with a higher token had already completed.
  auto invokes = index_writes(history, EventKind::kWriteInvoke);
  std::map<std::string, std::vector<std::size_t>> oks_by_key;  // write.ok indices per key, ascending
  for (std::size_t i = 0; i < history.size(); ++i)
    if (history[i].kind == EventKind::kWriteOk && history[i].token) oks_by_key[history[i].key].push_back(i);
  for (const auto& [key, list] : oks_by_key) {
    // prefix[i]: index of the highest-token write.ok among list[0..i].
    std::vector<std::size_t> prefix(list.size());
    for (std::size_t i = 0; i < list.size(); ++i)
      prefix[i] = (i == 0 || *history[list[i]].token > *history[prefix[i - 1]].token) ? list[i] : prefix[i - 1];
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::size_t b = list[i];
      const Event& e = history[b];
      const std::int64_t token = *e.token;
      // The last matching invoke before B.
      std::optional<std::size_t> invoke;
      auto it = invokes.find({e.source, token, e.key, e.segment.value_or(-1), e.chunk.value_or(-1)});
      if (it != invokes.end())
        for (std::size_t idx : it->second)
          if (idx < b) invoke = idx;
      if (invoke) {
        // Write.oks completed before the invoke: list entries with index < *invoke.
        auto end = std::lower_bound(list.begin(), list.end(), *invoke);
        if (end != list.begin()) {
          std::size_t top = prefix[static_cast<std::size_t>(end - list.begin()) - 1];
          const Event& t = history[top];
          if (*t.token > token) {
            Group& g = group(key, e.source, token);
            if (e.segment) g.segments.insert(*e.segment);
            g.history_oks.insert(b);
            g.above.insert(*t.token);
            g.a.tokens.push_back(*t.token);
            g.a.clients.push_back(t.source);
            g.a.evidence.insert(g.a.evidence.end(), {top, *invoke, b});
          }
        }
      }
      // 3. The resource's own reply: accepted, yet its high-water mark was already above the token.
      if (e.high_water && *e.high_water > token) {
        Group& g = group(key, e.source, token);
        if (e.segment) g.segments.insert(*e.segment);
        g.history_oks.insert(b);
        g.above.insert(*e.high_water);
        g.a.tokens.push_back(*e.high_water);
        g.a.evidence.push_back(b);
      }
    }
  }

  std::vector<Anomaly> anomalies;
  for (auto& [id, g] : groups) {
    const auto& [key, client, token] = id;
    if (g.segments.size() == 1) g.a.segment = *g.segments.begin();
    std::vector<std::int64_t> above(g.above.begin(), g.above.end());
    std::ostringstream d;
    d << key << ": the resource accepted token " << token << " from " << client
      << " after it had already accepted a higher token (" << join(above) << ")";
    std::vector<std::string> sources;
    if (!g.log_seqs.empty()) {
      std::vector<std::int64_t> seqs(g.log_seqs.begin(), g.log_seqs.end());
      sources.push_back(std::to_string(seqs.size()) + " write(s) in the store's log (seq " + join(seqs) + ")");
    }
    if (!g.history_oks.empty())
      sources.push_back(std::to_string(g.history_oks.size()) + " write.ok event(s) in the history");
    d << ": " << join(sources, " and ");
    g.a.description = d.str();
    anomalies.push_back(std::move(g.a));
  }
  return result_of(name(), std::move(anomalies));
}

Checkers default_checkers() {
  Checkers out;
  out.push_back(std::make_unique<InterleavedSegmentChecker>());
  out.push_back(std::make_unique<CorruptChunkChecker>());
  out.push_back(std::make_unique<StaleWriteAcceptedChecker>());
  return out;
}

}  // namespace fencecheck::harness
