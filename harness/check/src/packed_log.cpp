// PackedLog (packed_log.h): an accept log packed by frame of reference, block by block.
#include "fencecheck/harness/packed_log.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

// A write's id as hashed by the index and the repeats scan: the entries' integer fields only (no
// string is touched).
namespace {
std::uint64_t hash_of_key(std::uint32_t client, std::uint32_t key, std::uint64_t token, std::uint64_t segment,
                          std::uint64_t chunk) {
  using detail::mix64;
  std::uint64_t h = mix64((std::uint64_t{client} << 32) | key);
  h = mix64(h ^ token);
  h = mix64(h ^ segment);
  return mix64(h ^ (chunk + 0x9e3779b97f4a7c15ULL));
}
}  // namespace

PackedLog::Key PackedLog::key_at(std::size_t position) const {
  if (position >= packed_) {
    const Words& w = staged_[position - packed_];
    return Key{static_cast<std::uint32_t>(w[kClient]), static_cast<std::uint32_t>(w[kKey]), w[kToken], w[kSegment],
               w[kChunk]};
  }
  // words_at() for the five fields of a write's id only (the index, the repeats and find() read
  // little else).
  const Block& b = blocks_[position / kBlock];
  const std::uint8_t* entry = b.bytes.get() + (position % kBlock) * b.stride;
  const auto field = [&](Field f) {
    std::uint64_t d = 0;
    std::memcpy(&d, entry + b.offset[f], sizeof d);
    return b.base[f] + (d & kLowBytes[b.width[f]]);
  };
  return Key{static_cast<std::uint32_t>(field(kClient)), static_cast<std::uint32_t>(field(kKey)), field(kToken),
             field(kSegment), field(kChunk)};
}

std::uint64_t PackedLog::hash_of(const Key& k) { return hash_of_key(k.client, k.key, k.token, k.segment, k.chunk); }

// The index by write id: a hash set of positions (4 bytes and one byte of metadata per slot),
// hashed and compared by the entries' integer fields. Built on the first find() that the entry
// after the last write found does not answer (Repeats says which entries are a write's first).
class PackedLog::Index {
 public:
  explicit Index(const PackedLog& log) : set_(0, Hash{&log}, Equal{&log}) {
    set_.reserve(log.size());
    for (std::uint32_t p = 0; p < log.size(); ++p) set_.insert(p);  // a repeated id keeps its first position
  }
  /// The position of k's first entry, or nullopt.
  [[nodiscard]] std::optional<std::uint32_t> find(const Key& k) const {
    const auto it = set_.find(k);
    if (it == set_.end()) return std::nullopt;
    return *it;
  }
  [[nodiscard]] std::size_t memory_bytes() const {
    return sizeof(*this) + set_.bucket_count() * (sizeof(std::uint32_t) + 1);
  }

 private:
  struct Hash {
    using is_transparent = void;
    const PackedLog* log;
    std::size_t operator()(std::uint32_t p) const { return hash_of(log->key_at(p)); }
    std::size_t operator()(const Key& k) const { return hash_of(k); }
  };
  struct Equal {
    using is_transparent = void;
    const PackedLog* log;
    bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b || log->key_at(a) == log->key_at(b); }
    bool operator()(std::uint32_t p, const Key& k) const { return log->key_at(p) == k; }
    bool operator()(const Key& k, std::uint32_t p) const { return log->key_at(p) == k; }
  };
  boost::unordered_flat_set<std::uint32_t, Hash, Equal> set_;
};

// The writes logged more than once: which positions are a write's second or later entries, and
// for a first entry the first of its largest seqs when that is another. Found without a hash table
// of every entry: one read of the log through a blocked Bloom filter (Putze, Sanders, Singler:
// "Cache-, hash- and space-efficient Bloom filters", 2007: each entry's bits in one 64-byte block,
// so one cache miss an entry, and the block of the entry eight ahead is prefetched), 16 bits an
// entry, freed at the end of the build. An entry whose bits were all set already may repeat an
// earlier one (every repeat does: the filter has no false negatives; others, about 1 in 1,000, by
// chance); only those hashes are looked at again, exactly, in a second read. A log without repeats
// (a fenced resource's, where retries are refused or carry a new id) keeps nothing.
class PackedLog::Repeats {
 public:
  explicit Repeats(const PackedLog& log) {
    const std::size_t n = log.size();
    if (n < 2) return;
    // Blocks of 512 bits, a power of two of them, at least 16 bits an entry.
    std::size_t blocks = 1;
    while (blocks * 512 < n * 16) blocks *= 2;
    const unsigned shift = 64 - static_cast<unsigned>(std::countr_zero(blocks));
    std::vector<std::array<std::uint64_t, 8>> filter(blocks);
    const auto block_of = [&](std::uint64_t h) -> std::size_t { return blocks == 1 ? 0 : h >> shift; };
    constexpr std::size_t kAhead = 8;
    std::array<std::uint64_t, kAhead> ahead{};
    for (std::size_t p = 0; p < std::min(n, kAhead); ++p) {
      ahead[p] = hash_of(log.key_at(p));
      __builtin_prefetch(&filter[block_of(ahead[p])]);
    }
    std::vector<std::uint64_t> maybe;  // hashes of entries that may repeat an earlier one
    for (std::size_t p = 0; p < n; ++p) {
      const std::uint64_t h = ahead[p % kAhead];
      if (p + kAhead < n) {
        const std::uint64_t next = hash_of(log.key_at(p + kAhead));
        ahead[p % kAhead] = next;
        __builtin_prefetch(&filter[block_of(next)]);
      }
      auto& block = filter[block_of(h)];
      // Eight bits in the block, one in each of its words, from the hash's other bits.
      std::uint64_t bits = detail::mix64(h);
      bool all = true;
      for (std::size_t w = 0; w < 8; ++w, bits >>= 6) {
        const std::uint64_t bit = std::uint64_t{1} << (bits & 63);
        all = all && (block[w] & bit) != 0;
        block[w] |= bit;
      }
      if (all) maybe.push_back(h);
    }
    filter = {};
    if (maybe.empty()) return;
    const boost::unordered_flat_set<std::uint64_t> suspects(maybe.begin(), maybe.end());
    maybe = {};
    // Every entry with a suspect hash (the first of a repeated write too), grouped by hash, in log order.
    boost::unordered_flat_map<std::uint64_t, std::vector<std::uint32_t>> groups;
    for (std::uint32_t p = 0; p < n; ++p)
      if (const std::uint64_t h = hash_of(log.key_at(p)); suspects.contains(h)) groups[h].push_back(p);
    for (auto& [h, positions] : groups) {
      // Within a hash, each entry against the earlier entries of the group: the same id or not.
      for (std::size_t i = 0; i < positions.size(); ++i) {
        const std::uint32_t p = positions[i];
        const Key k = log.key_at(p);
        for (std::size_t j = 0; j < i; ++j) {
          const std::uint32_t first = positions[j];
          if (later_.contains(first) || !(log.key_at(first) == k)) continue;
          later_.insert(p);  // p repeats `first`, the id's first entry
          const auto l = latest_.find(first);
          const std::uint32_t latest = l == latest_.end() ? first : l->second;
          if (log[p].seq > log[latest].seq) latest_[first] = p;  // the first of the largest seqs stays
          break;
        }
      }
    }
  }
  /// Whether the entry at `p` repeats an earlier one (the same write id).
  [[nodiscard]] bool later(std::uint32_t p) const { return !later_.empty() && later_.contains(p); }
  /// The Found of a write whose first entry is at `first`.
  [[nodiscard]] Found found(std::uint32_t first) const {
    if (latest_.empty()) return Found{first, first};
    const auto l = latest_.find(first);
    return Found{first, l == latest_.end() ? first : l->second};
  }
  [[nodiscard]] std::size_t memory_bytes() const {
    return sizeof(*this) + latest_.bucket_count() * (2 * sizeof(std::uint32_t) + 1) +
           later_.bucket_count() * (sizeof(std::uint32_t) + 1);
  }

 private:
  boost::unordered_flat_map<std::uint32_t, std::uint32_t> latest_;  // first position -> latest, when they differ
  boost::unordered_flat_set<std::uint32_t> later_;  // the positions of a write's second and later entries
};

PackedLog::PackedLog()
    : index_once_(std::make_unique<std::once_flag>()), repeats_once_(std::make_unique<std::once_flag>()) {
  new_generation();
}
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
      index_once_(std::make_unique<std::once_flag>()),
      repeats_once_(std::make_unique<std::once_flag>()) {
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
  auto fresh_repeats = std::make_unique<std::once_flag>();
  index_.reset();
  index_once_ = std::move(fresh);
  repeats_.reset();
  repeats_once_ = std::move(fresh_repeats);
  new_generation();  // every change of the entries comes here (push_back once indexed, clear, a move)
}

void PackedLog::push_back(const AcceptedWrite& w) {
  if (size() >= std::numeric_limits<std::uint32_t>::max() - 1)
    throw std::length_error("an accept log of more than 2^32 - 2 entries: positions are 4 bytes");
  if (index_ || repeats_) drop_index();
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

const PackedLog::Repeats& PackedLog::repeats() const {
  std::call_once(*repeats_once_, [this] { repeats_ = std::make_unique<Repeats>(*this); });
  return *repeats_;
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
/// points at, to compare). When every write is found there, the index is never built: at 10^8
/// events that saves its 150 MiB and the 4 % of the check that building it took.
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
  const Repeats& repeats = this->repeats();
  std::optional<Found> found;
  // The entry after the last write found (the log's first before any), when it is this write's
  // first: no index needed, and its names compared as they are, without the dictionaries' hashes.
  if (const std::size_t next = m.next_generation == generation_ ? m.next : 0; next < size()) {
    const Key w = key_at(next);
    if (w.token == word(token) && w.segment == word(segment) && w.chunk == word(chunk) &&
        clients_.names[w.client] == client && keys_.names[w.key] == key &&
        !repeats.later(static_cast<std::uint32_t>(next)))
      found = repeats.found(static_cast<std::uint32_t>(next));
  }
  if (!found) {
    const auto c = client_id(client);
    const auto k = key_id(key);
    // A name the log does not know: not found (and not remembered: nothing to look after it).
    if (!c || !k) return std::nullopt;
    if (const auto first = index().find(Key{*c, *k, word(token), word(segment), word(chunk)}))
      found = repeats.found(*first);
  }
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
  if (repeats_) n += repeats_->memory_bytes();
  return n;
}

}  // namespace fencecheck::harness
