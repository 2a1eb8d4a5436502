// fencecheck — maps keyed by one write's identity (source, token, key, segment, chunk), shared by
// the streamed rules (stream/stream_rules.h). Private to the library.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "internal.h"

namespace fencecheck::harness::detail {

/// (source, token, key, segment, chunk): what identifies one write in the history. The strings
/// are views into the history or the read-back, which outlive every index built from them.
struct WriteId {
  std::string_view source;
  std::int64_t token = 0;
  std::string_view key;
  std::int64_t segment = -1;
  std::int64_t chunk = -1;
};

/// Small dense ids for the strings of a history (worker names, keys): a few hundred distinct
/// values, so the table stays in cache while a pass hashes each event's strings once.
class Interner {
 public:
  std::uint32_t id(std::string_view s) {
    return ids_.try_emplace(s, static_cast<std::uint32_t>(ids_.size())).first->second;
  }
  [[nodiscard]] std::optional<std::uint32_t> find(std::string_view s) const {
    const auto it = ids_.find(s);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

 private:
  detail::ViewMap<std::uint32_t> ids_;
};

/// A WriteId with its strings interned: 32 bytes of integers, compared and hashed without
/// touching the events (whose strings would be a cache miss each on a large history).
struct WriteKey {
  std::uint32_t source = 0;
  std::uint32_t key = 0;
  std::int64_t token = 0;
  std::int64_t segment = -1;
  std::int64_t chunk = -1;
  friend bool operator==(const WriteKey&, const WriteKey&) = default;
};

struct WriteKeyHash {
  std::size_t operator()(const WriteKey& w) const noexcept {
    std::size_t h = 0;
    boost::hash_combine(h, (static_cast<std::uint64_t>(w.source) << 32) | w.key);
    boost::hash_combine(h, w.token);
    boost::hash_combine(h, w.segment);
    boost::hash_combine(h, w.chunk);
    return h;
  }
};

/// A map from writes (WriteId) to values, keyed by interned ids (boost::unordered_flat_map: open
/// addressing, one probe into a flat array per lookup). Not thread-safe.
template <typename V>
class WriteMap {
 public:
  void reserve(std::size_t n) { map_.reserve(n); }
  /// The value for id, default-constructed on first use.
  V& operator[](const WriteId& id) { return map_[key_of(id)]; }
  /// Inserts {id, value} unless present; returns the value stored and whether it was inserted.
  std::pair<V*, bool> try_emplace(const WriteId& id, V value) {
    auto [it, fresh] = map_.try_emplace(key_of(id), std::move(value));
    return {&it->second, fresh};
  }
  /// The value for id, or nullptr (a string never interned cannot be in the map).
  [[nodiscard]] const V* find(const WriteId& id) const {
    const auto source = strings_.find(id.source);
    const auto key = strings_.find(id.key);
    if (!source || !key) return nullptr;
    const auto it = map_.find(WriteKey{*source, *key, id.token, id.segment, id.chunk});
    return it == map_.end() ? nullptr : &it->second;
  }
  [[nodiscard]] V* find(const WriteId& id) { return const_cast<V*>(std::as_const(*this).find(id)); }
  /// Calls f(value) for each value, in no particular order.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& [key, value] : map_) f(value);
  }

 private:
  WriteKey key_of(const WriteId& id) { return {strings_.id(id.source), strings_.id(id.key), id.token, id.segment, id.chunk}; }
  Interner strings_;
  boost::unordered_flat_map<WriteKey, V, WriteKeyHash> map_;
};

/// Positions into a resource's accept log (ReadBack::log), at most one per write id (client,
/// token, key, segment, chunk), found by write id without copying or interning the log's strings:
/// an open-addressing table of 4-byte positions (boost::unordered_flat_set whose hash and equality
/// look through to the log's entries), where a WriteMap of the same ids costs 40 bytes an entry
/// (measured at 10^8 events: 26.7 M log entries, 1.2 GiB for each rule that indexed the log so).
/// Every lookup reads the log entries its probe meets, so the log must outlive the index and not
/// change. Throws std::length_error for a log of 2^32 entries or more. Not thread-safe.
class LogPositions {
 public:
  /// Which entry stands for a write id logged more than once.
  enum class Keep {
    kFirst,      ///< the first in log order
    kLatestSeq,  ///< the one with the largest seq (the first of those)
  };
  LogPositions(const std::vector<AcceptedWrite>& log, Keep keep) : log_(&log), set_(0, Hash{&log}, Equal{&log}) {
    if (log.size() >= std::numeric_limits<std::uint32_t>::max())
      throw std::length_error("an accept log of " + std::to_string(log.size()) + " entries: at most 2^32 - 2 are indexed");
    set_.reserve(log.size());
    for (std::uint32_t p = 0; p < log.size(); ++p) {
      const auto [it, fresh] = set_.insert(p);
      if (!fresh && keep == Keep::kLatestSeq && log[p].seq > log[*it].seq) {
        set_.erase(it);
        set_.insert(p);
      }
    }
  }
  /// The position standing for `id`, or nullopt when the log has no entry of it.
  [[nodiscard]] std::optional<std::uint32_t> find(const WriteId& id) const {
    const auto it = set_.find(id);
    if (it == set_.end()) return std::nullopt;
    return *it;
  }
  /// The log entry at a position find() gave.
  [[nodiscard]] const AcceptedWrite& at(std::uint32_t p) const { return (*log_)[p]; }
  /// Positions held (distinct write ids).
  [[nodiscard]] std::size_t size() const { return set_.size(); }
  /// Bytes held: the table's slots (4 bytes each, plus one byte of metadata per slot).
  [[nodiscard]] std::size_t state_bytes() const { return sizeof(*this) + set_.bucket_count() * (sizeof(std::uint32_t) + 1); }

 private:
  static std::size_t hash_of(std::string_view client, std::int64_t token, std::string_view key, std::int64_t segment,
                             std::int64_t chunk) {
    std::size_t h = boost::hash_value(client);
    boost::hash_combine(h, token);
    boost::hash_combine(h, boost::hash_value(key));
    boost::hash_combine(h, segment);
    boost::hash_combine(h, chunk);
    return h;
  }
  static bool same(const AcceptedWrite& w, const WriteId& id) {
    return w.token == id.token && w.segment == id.segment && w.chunk == id.chunk && w.client == id.source && w.key == id.key;
  }
  static WriteId id_of(const AcceptedWrite& w) { return {w.client, w.token, w.key, w.segment, w.chunk}; }
  struct Hash {
    using is_transparent = void;
    const std::vector<AcceptedWrite>* log;
    std::size_t operator()(std::uint32_t p) const { return (*this)(id_of((*log)[p])); }
    std::size_t operator()(const WriteId& id) const { return hash_of(id.source, id.token, id.key, id.segment, id.chunk); }
  };
  struct Equal {
    using is_transparent = void;
    const std::vector<AcceptedWrite>* log;
    bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b || same((*log)[a], id_of((*log)[b])); }
    bool operator()(std::uint32_t p, const WriteId& id) const { return same((*log)[p], id); }
    bool operator()(const WriteId& id, std::uint32_t p) const { return same((*log)[p], id); }
  };
  const std::vector<AcceptedWrite>* log_;
  boost::unordered_flat_set<std::uint32_t, Hash, Equal> set_;
};

}  // namespace fencecheck::harness::detail
