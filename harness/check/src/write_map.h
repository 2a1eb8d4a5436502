// fencecheck — maps keyed by one write's identity (source, token, key, segment, chunk), shared by
// the streamed rules (stream/stream_rules.h). Private to the library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <optional>
#include <string_view>
#include <utility>

#include <boost/container_hash/hash.hpp>
#include <boost/unordered/unordered_flat_map.hpp>

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
/// values, so the table stays in cache while a pass hashes each event's strings once. Not
/// thread-safe, find() included (it updates the memo of the last two strings, RecentIds).
class Interner {
 public:
  std::uint32_t id(std::string_view s) {
    if (const auto known = recent_.find(s)) return *known;
    const auto it = ids_.try_emplace(s, static_cast<std::uint32_t>(ids_.size())).first;
    recent_.remember(it->first, it->second);
    return it->second;
  }
  [[nodiscard]] std::optional<std::uint32_t> find(std::string_view s) const {
    if (const auto known = recent_.find(s)) return known;
    const auto it = ids_.find(s);
    if (it == ids_.end()) return std::nullopt;
    recent_.remember(it->first, it->second);
    return it->second;
  }

 private:
  detail::ViewMap<std::uint32_t> ids_;
  mutable RecentIds recent_;  // views of ids_'s keys (the caller's strings, which outlive it)
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

}  // namespace fencecheck::harness::detail
