// PackedLog (packed_log.h): an accept log packed by frame of reference, block by block.
#include "fencecheck/harness/packed_log.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/unordered/unordered_flat_map.hpp>
#include <boost/unordered/unordered_flat_set.hpp>

#include "internal.h"

namespace fencecheck::harness {

static_assert(std::endian::native == std::endian::little, "PackedLog reads its fields as little-endian words");

namespace {

constexpr std::uint64_t kLowBytes[9] = {0,
                                        0xffULL,
                                        0xffffULL,
                                        0xffffffULL,
                                        0xffffffffULL,
                                        0xffffffffffULL,
                                        0xffffffffffffULL,
                                        0xffffffffffffffULL,
                                        ~0ULL};

// Whole bytes needed for a distance (0 for none).
std::uint8_t bytes_for(std::uint64_t range) {
  return static_cast<std::uint8_t>((std::bit_width(range) + 7) / 8);
}

std::uint64_t word(std::int64_t v) { return static_cast<std::uint64_t>(v); }
std::int64_t value(std::uint64_t w) { return static_cast<std::int64_t>(w); }

}  // namespace

AcceptedWrite LoggedWrite::to_accepted_write() const {
  return AcceptedWrite{seq, std::string(key), segment, chunk, token, std::string(client), kind, value};
}

std::uint32_t PackedLog::Dictionary::id(std::string_view name) {
  if (const auto it = ids.find(name); it != ids.end()) return it->second;
  if (names.size() >= std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("an accept log naming more than 2^32 - 1 distinct keys or clients");
  const auto next = static_cast<std::uint32_t>(names.size());
  ids.emplace(names.emplace_back(name), next);
  return next;
}

std::size_t PackedLog::Dictionary::memory_bytes() const {
  std::size_t n = ids.bucket_count() * (sizeof(std::string_view) + sizeof(std::uint32_t) + 1);
  for (const auto& s : names) n += sizeof(s) + (s.capacity() > 15 ? s.capacity() + 1 : 0);
  return n;
}

// The index by write id: a hash set of positions (4 bytes and one byte of metadata per slot),
// hashed and compared by the entries' integer fields (no string is touched), plus the few writes
// logged more than once whose largest seq is not their first entry's.
class PackedLog::Index {
 public:
  explicit Index(const PackedLog& log) : set_(0, Hash{&log}, Equal{&log}) {
    set_.reserve(log.size());
    for (std::uint32_t p = 0; p < log.size(); ++p) {
      const auto [it, fresh] = set_.insert(p);
      if (fresh) continue;
      const std::uint32_t first = *it;
      later_.insert(p);
      const auto l = latest_.find(first);
      const std::uint32_t latest = l == latest_.end() ? first : l->second;
      if (log[p].seq <= log[latest].seq) continue;  // the first of the largest seqs stays
      if (l == latest_.end()) latest_.emplace(first, p);
      else l->second = p;
    }
  }
  [[nodiscard]] std::optional<Found> find(const Key& k) const {
    const auto it = set_.find(k);
    if (it == set_.end()) return std::nullopt;
    return found(*it);
  }
  /// find(k) when the entry at `p` is k's first: without a probe of the hash table. Nullopt when
  /// it is not (another write, a later entry of a write logged more than once, or past the end).
  [[nodiscard]] std::optional<Found> find_at(const PackedLog& log, std::uint32_t p, const Key& k) const {
    if (p >= log.size() || !(key_at(log, p) == k)) return std::nullopt;
    if (!later_.empty() && later_.contains(p)) return std::nullopt;
    return found(p);
  }
  [[nodiscard]] std::size_t memory_bytes() const {
    return sizeof(*this) + set_.bucket_count() * (sizeof(std::uint32_t) + 1) +
           latest_.bucket_count() * (2 * sizeof(std::uint32_t) + 1) + later_.bucket_count() * (sizeof(std::uint32_t) + 1);
  }

 private:
  static std::size_t hash_of(const Key& k) {
    using detail::mix64;
    std::uint64_t h = mix64((std::uint64_t{k.client} << 32) | k.key);
    h = mix64(h ^ k.token);
    h = mix64(h ^ k.segment);
    return mix64(h ^ (k.chunk + 0x9e3779b97f4a7c15ULL));
  }
  static Key key_at(const PackedLog& log, std::uint32_t p) {
    const Words w = log.words_at(p);
    return Key{static_cast<std::uint32_t>(w[kClient]), static_cast<std::uint32_t>(w[kKey]), w[kToken], w[kSegment],
               w[kChunk]};
  }
  struct Hash {
    using is_transparent = void;
    const PackedLog* log;
    std::size_t operator()(std::uint32_t p) const { return hash_of(key_at(*log, p)); }
    std::size_t operator()(const Key& k) const { return hash_of(k); }
  };
  struct Equal {
    using is_transparent = void;
    const PackedLog* log;
    bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b || key_at(*log, a) == key_at(*log, b); }
    bool operator()(std::uint32_t p, const Key& k) const { return key_at(*log, p) == k; }
    bool operator()(const Key& k, std::uint32_t p) const { return key_at(*log, p) == k; }
  };
  boost::unordered_flat_set<std::uint32_t, Hash, Equal> set_;
  [[nodiscard]] Found found(std::uint32_t first) const {
    if (latest_.empty()) return Found{first, first};
    const auto l = latest_.find(first);
    return Found{first, l == latest_.end() ? first : l->second};
  }
  boost::unordered_flat_map<std::uint32_t, std::uint32_t> latest_;  // first position -> latest, when they differ
  boost::unordered_flat_set<std::uint32_t> later_;  // the positions of a write's second and later entries
};

PackedLog::PackedLog() : index_once_(std::make_unique<std::once_flag>()) { new_generation(); }
PackedLog::PackedLog(const std::vector<AcceptedWrite>& log) : PackedLog() {
  for (const AcceptedWrite& w : log) push_back(w);
}
PackedLog::~PackedLog() = default;
// A move leaves the index behind (its hash functions point at the object it was built for): the
// new owner builds its own on its first find(). The moved-from log is empty and usable.
PackedLog::PackedLog(PackedLog&& o)
    : blocks_(std::move(o.blocks_)),
      packed_(std::exchange(o.packed_, 0)),
      staged_(std::move(o.staged_)),
      keys_(std::move(o.keys_)),
      clients_(std::move(o.clients_)),
      index_once_(std::make_unique<std::once_flag>()) {
  new_generation();
  o.clear();
}

PackedLog& PackedLog::operator=(PackedLog&& o) {
  if (this == &o) return *this;
  drop_index();
  blocks_ = std::move(o.blocks_);
  packed_ = std::exchange(o.packed_, 0);
  staged_ = std::move(o.staged_);
  keys_ = std::move(o.keys_);
  clients_ = std::move(o.clients_);
  o.clear();
  return *this;
}

PackedLog::Words PackedLog::words_of(const AcceptedWrite& w, std::size_t position) {
  Words out{};
  out[kSeq] = word(w.seq) - position;  // modulo 2^64: seq - position, read back exactly
  out[kSegment] = word(w.segment);
  out[kChunk] = word(w.chunk);
  out[kToken] = word(w.token);
  out[kValue] = word(w.value);
  out[kKey] = keys_.id(w.key);
  out[kClient] = clients_.id(w.client);
  out[kKind] = static_cast<std::uint64_t>(w.kind);
  return out;
}

void PackedLog::drop_index() {
  auto fresh = std::make_unique<std::once_flag>();  // first: a failed allocation leaves everything as it was
  index_.reset();
  index_once_ = std::move(fresh);
  new_generation();  // every change of the entries comes here (push_back once indexed, clear, a move)
}

void PackedLog::push_back(const AcceptedWrite& w) {
  if (size() >= std::numeric_limits<std::uint32_t>::max() - 1)
    throw std::length_error("an accept log of more than 2^32 - 2 entries: positions are 4 bytes");
  if (index_) drop_index();
  staged_.push_back(words_of(w, size()));
  if (staged_.size() == kBlock) {
    try {
      pack_staged();
    } catch (...) {
      staged_.pop_back();  // the log is as it was before the call
      throw;
    }
  }
}

void PackedLog::pack_staged() {
  Block b;
  Words high{};
  b.base.fill(std::numeric_limits<std::uint64_t>::max());
  // The frame: each field's minimum and range, compared as the signed values they stand for (the
  // seq's stored form too: seq - position is a signed distance). The distances are unsigned.
  for (std::size_t f = 0; f < kFields; ++f) {
    std::int64_t lo = std::numeric_limits<std::int64_t>::max(), hi = std::numeric_limits<std::int64_t>::min();
    for (const Words& e : staged_) {
      lo = std::min(lo, value(e[f]));
      hi = std::max(hi, value(e[f]));
    }
    b.base[f] = word(lo);
    high[f] = word(hi) - word(lo);
  }
  std::uint8_t at = 0;
  for (std::size_t f = 0; f < kFields; ++f) {
    b.width[f] = bytes_for(high[f]);
    b.offset[f] = at;
    at = static_cast<std::uint8_t>(at + b.width[f]);
  }
  b.stride = at;
  const std::size_t bytes = std::size_t{b.stride} * staged_.size() + 8;  // 8: a full word can be read at the last field
  b.bytes = std::make_unique<std::uint8_t[]>(bytes);
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    std::uint8_t* entry = b.bytes.get() + i * b.stride;
    for (std::size_t f = 0; f < kFields; ++f) {
      const std::uint64_t d = staged_[i][f] - b.base[f];
      std::memcpy(entry + b.offset[f], &d, b.width[f]);
    }
  }
  blocks_.push_back(std::move(b));
  packed_ += staged_.size();
  staged_.clear();
}

PackedLog::Words PackedLog::words_at(std::size_t position) const {
  if (position >= packed_) return staged_[position - packed_];
  const Block& b = blocks_[position / kBlock];
  const std::uint8_t* entry = b.bytes.get() + (position % kBlock) * b.stride;
  Words out;
  for (std::size_t f = 0; f < kFields; ++f) {
    std::uint64_t d = 0;
    std::memcpy(&d, entry + b.offset[f], sizeof d);
    out[f] = b.base[f] + (d & kLowBytes[b.width[f]]);
  }
  return out;
}

LoggedWrite PackedLog::operator[](std::size_t position) const {
  const Words w = words_at(position);
  LoggedWrite out;
  out.seq = value(w[kSeq] + position);
  out.segment = value(w[kSegment]);
  out.chunk = value(w[kChunk]);
  out.token = value(w[kToken]);
  out.value = value(w[kValue]);
  out.key_id = static_cast<std::uint32_t>(w[kKey]);
  out.client_id = static_cast<std::uint32_t>(w[kClient]);
  out.key = keys_.names[out.key_id];
  out.client = clients_.names[out.client_id];
  out.kind = static_cast<WriteKind>(w[kKind]);
  return out;
}

ReadBackLogSink PackedLog::sink() {
  return ReadBackLogSink{[this](AcceptedWrite&& w) { push_back(w); }, [this] { clear(); }};
}

void PackedLog::clear() {
  drop_index();
  blocks_.clear();
  packed_ = 0;
  staged_.clear();
}

std::optional<std::uint32_t> PackedLog::key_id(std::string_view key) const {
  const auto it = keys_.ids.find(key);
  if (it == keys_.ids.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint32_t> PackedLog::client_id(std::string_view client) const {
  const auto it = clients_.ids.find(client);
  if (it == clients_.ids.end()) return std::nullopt;
  return it->second;
}

const PackedLog::Index& PackedLog::index() const {
  std::call_once(*index_once_, [this] { index_ = std::make_unique<Index>(*this); });
  return *index_;
}

namespace {
/// Every PackedLog state a find() may have answered for has its own number (generation_).
std::atomic<std::uint64_t> next_generation{1};

/// This thread's last find(): the rules that look a write.ok up (cross-key-rejection,
/// lost-acknowledged-write) ask for the same write one after the other, so the second asks are
/// answered here, without the two dictionary lookups and the index's probe.
///
/// It also keeps where to look first for the next write: the position after the last one found.
/// A history acknowledges writes in about the order the resource logged them (the synthetic
/// history of bench_stream_check exactly so), and an entry next to the last one is in the cache,
/// where a probe of the index's table misses it twice at 10^8 events (the table, then the entry it
/// points at, to compare).
struct FindMemo {
  std::uint64_t generation = 0;  // 0: empty
  std::int64_t token = 0, segment = 0, chunk = 0;
  std::string client, key;
  std::optional<PackedLog::Found> found;
  std::uint64_t next_generation = 0;  // `next` is valid for this generation only (0: none)
  std::uint32_t next = 0;             // the position after the last write found
};
thread_local FindMemo find_memo;
}  // namespace

void PackedLog::new_generation() { generation_ = next_generation.fetch_add(1, std::memory_order_relaxed); }

std::optional<PackedLog::Found> PackedLog::find(std::string_view client, std::int64_t token, std::string_view key,
                                                std::int64_t segment, std::int64_t chunk) const {
  if (empty()) return std::nullopt;
  FindMemo& m = find_memo;
  if (m.generation == generation_ && m.token == token && m.segment == segment && m.chunk == chunk && m.client == client &&
      m.key == key)
    return m.found;
  const auto c = client_id(client);
  const auto k = key_id(key);
  // Not remembered: a push_back before the index exists does not start a new generation.
  if (!c || !k) return std::nullopt;
  const Key key_words{*c, *k, word(token), word(segment), word(chunk)};
  const Index& ix = index();
  std::optional<Found> found;
  if (m.next_generation == generation_) found = ix.find_at(*this, m.next, key_words);
  if (!found) found = ix.find(key_words);
  if (found) {
    m.next_generation = generation_;
    m.next = found->first + 1;
  }
  m.generation = 0;  // while it is being filled (an assignment may throw)
  m.token = token, m.segment = segment, m.chunk = chunk;
  m.client = client;
  m.key = key;
  m.found = found;
  m.generation = generation_;
  return found;
}

std::size_t PackedLog::memory_bytes() const {
  std::size_t n = sizeof(*this) + blocks_.capacity() * sizeof(Block) + staged_.capacity() * sizeof(Words) +
                  keys_.memory_bytes() + clients_.memory_bytes();
  for (const Block& b : blocks_) n += std::size_t{b.stride} * kBlock + 8;
  if (index_) n += index_->memory_bytes();
  return n;
}

}  // namespace fencecheck::harness
